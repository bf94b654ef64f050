"""The ablation runner's executors: in-process, local worker processes and a Ray cluster.

Every executor must give the same rows as the in-process runner, the driver alone writes the
results, a worker killed mid-run costs one retry and never a duplicated or partial run, a
failing run never stops the others, and a finished sweep submits nothing.

The Ray tests start a local Ray cluster of 2 CPUs (the ``cluster`` extra; CI installs it and
sets OPCC_EDU_REQUIRE_CLUSTER=1 so that they cannot be skipped there).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from opcc_edu.cli import main
from opcc_edu.config import get_profile
from opcc_edu.lab import experiments as ex
from opcc_edu.lab.experiments import executors

KEY = ["run_id", "horizon", "confidence", "ensemble_count"]
SYNTHETIC = ex.synthetic_answer_function(n_queries=50, ensemble_size=4)


def small_grid(seeds: int = 2) -> ex.GridSpec:
    """prior-scale on maze2d-umaze: 2 configurations x ``seeds`` seeds."""
    return ex.plan_ablation("prior-scale", "tiny", datasets=["1m"], seeds=seeds)


@pytest.fixture
def ray(monkeypatch):
    """Ray, with this module's answer functions sent by value: Ray's workers do not see tests/."""
    if os.environ.get("OPCC_EDU_REQUIRE_CLUSTER"):
        import ray
    else:
        ray = pytest.importorskip("ray", reason="the Ray executor needs the 'cluster' extra")
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield ray
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    if ray.is_initialized():  # a failed test must not leave a cluster on the machine
        ray.shutdown()


def run(grid, out, answer=SYNTHETIC, **kwargs):
    return ex.run_grid(grid, out, answer_fn=answer, profile="tiny", progress=False, **kwargs)


def table(directory: Path) -> pd.DataFrame:
    """The results table in key order (the file is in finishing order, which executors change)."""
    return ex.load_results(directory).sort_values(KEY).reset_index(drop=True)


def assert_same_runs(directory: Path, reference: Path, grid: ex.GridSpec) -> None:
    """Row for row, cell for cell: the same table, each run exactly once, the same values."""
    ours, theirs = table(directory), table(reference)
    pd.testing.assert_frame_equal(ours, theirs, check_exact=True)
    assert not ours.duplicated(KEY).any() and ours["run_id"].nunique() == len(grid)
    text = (directory / "results.csv").read_text().splitlines()
    assert len(text) == len(ours) + 1 and len(set(text)) == len(text)
    runs = pd.read_csv(directory / "runs.csv")
    assert sorted(runs["run_id"]) == sorted(r.run_id for r in grid.runs())
    for spec in grid.runs():
        mine, reference_values = ex.load_run_values(directory, spec), ex.load_run_values(reference, spec)
        np.testing.assert_array_equal(mine.values_a, reference_values.values_a)
        np.testing.assert_array_equal(mine.values_b, reference_values.values_b)


class KilledOnce:
    """The synthetic answer, except that the first attempt of ``victim`` announces its process id
    and waits to be killed (a worker lost mid-run); later attempts compute normally."""

    def __init__(self, marks: Path, victim: str) -> None:
        self.marks, self.victim = marks, victim

    def __call__(self, run: ex.RunSpec, progress: bool = True) -> ex.MemberValues:
        if run.run_id == self.victim:
            attempt = len(list(self.marks.glob("attempt*"))) + 1
            (self.marks / f"attempt{attempt}").write_text(str(os.getpid()))
            if attempt == 1:
                (self.marks / "pid").write_text(str(os.getpid()))
                time.sleep(120)
                raise RuntimeError("the worker was not killed")
        return SYNTHETIC(run, progress)


def kill_when_announced(marks: Path, deadline: float = 90.0) -> threading.Thread:
    def killer() -> None:
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            pid_file = marks / "pid"
            if pid_file.exists() and pid_file.read_text():
                time.sleep(0.2)  # mid-run: the worker is inside the answer function
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    return thread


class Flaky:
    """The synthetic answer; ``transient`` fails on its first attempt, ``broken`` always."""

    def __init__(self, transient: str | None = None, broken: str | None = None) -> None:
        self.transient, self.broken = transient, broken
        self.calls: list[str] = []

    def __call__(self, run: ex.RunSpec, progress: bool = True) -> ex.MemberValues:
        self.calls.append(run.run_id)
        if run.run_id == self.broken:
            raise ValueError(f"no data for {run.run_id}")
        if run.run_id == self.transient and self.calls.count(run.run_id) == 1:
            raise OSError("connection reset")
        return SYNTHETIC(run, progress)


# --------------------------------------------------------------------------------------------
# The driver: failures, retries, resumption (in-process: fast)
# --------------------------------------------------------------------------------------------
def test_a_failing_run_is_retried_and_never_stops_the_others(tmp_path):
    grid = small_grid()
    transient, broken = grid.runs()[0].run_id, grid.runs()[1].run_id
    flaky = Flaky(transient=transient, broken=broken)
    with pytest.warns(ex.RunFailureWarning) as warned, pytest.raises(ex.RunsFailedError) as error:
        run(grid, tmp_path, flaky, retries=1)
    messages = [str(w.message) for w in warned if issubclass(w.category, ex.RunFailureWarning)]
    assert messages == [
        f"run {transient} failed (attempt 1 of 2): OSError: connection reset; submitting it again",
        f"run {broken} failed (attempt 1 of 2): ValueError: no data for {broken}; submitting it again",
        f"run {broken} failed (attempt 2 of 2): ValueError: no data for {broken}; "
        "giving up on it, the other runs go on",
    ]
    assert [f.run_id for f in error.value.failures] == [broken]
    assert f"{broken}: ValueError: no data for {broken}" in str(error.value)
    assert isinstance(error.value.__cause__, ValueError)  # the in-process traceback is kept
    done = ex.load_results(tmp_path)["run_id"].unique()
    assert sorted(done) == sorted(r.run_id for r in grid.runs() if r.run_id != broken)
    session = json.loads((tmp_path / "meta.json").read_text())["sessions"][-1]
    assert session["runs_completed"] == 3 and session["runs_failed"] == 1
    assert [(f["run_id"], f["attempt"]) for f in session["failed_attempts"]] == [
        (transient, 1),
        (broken, 1),
        (broken, 2),
    ]
    assert f"ValueError: no data for {broken}" in session["failed_attempts"][-1]["traceback"]
    assert f"their tracebacks are in {tmp_path / 'meta.json'}" in str(error.value)
    # the next call runs only what is missing, and the table equals an uninterrupted run
    executor = executors.SerialExecutor()
    run(grid, tmp_path, executor=executor)
    assert executor.submitted == [grid.runs()[1].slug]
    run(grid, tmp_path / "reference")
    assert_same_runs(tmp_path, tmp_path / "reference", grid)


def test_the_command_reports_failed_runs_in_one_line_and_exits_with_1(tmp_path, monkeypatch, capsys):
    from opcc_edu.lab.experiments import runner

    grid = small_grid(1)
    broken = grid.runs()[1].run_id
    monkeypatch.setattr(runner, "baseline_answer_function", lambda *args, **kwargs: Flaky(broken=broken))
    with pytest.warns(ex.RunFailureWarning):
        code = main(["ablation", "prior-scale", "--seeds", "1", "--out", str(tmp_path), "--retries", "0"])
    err = capsys.readouterr().err.splitlines()
    assert code == 1
    assert err[-1].startswith("opcc-edu ablation: error: 1 run(s) failed on all 1 attempt(s)")
    assert err[-1].endswith(f"{broken}: ValueError: no data for {broken}")
    assert ex.load_results(tmp_path / "paper" / "tiny")["run_id"].unique().tolist() == [grid.runs()[0].run_id]


def test_bad_executor_arguments_name_the_argument_and_the_choices(tmp_path):
    with pytest.raises(ValueError, match="unknown executor 'slurm'; valid choices: local, ray"):
        run(small_grid(), tmp_path, executor="slurm")
    with pytest.raises(ValueError, match="retries must be an integer >= 0, got -1"):
        run(small_grid(), tmp_path, retries=-1)
    assert not tmp_path.joinpath("records").exists()  # refused before anything was written
    with pytest.raises(ValueError, match="jobs must be an integer >= 1, got 0"):
        ex.make_executor("local", jobs=0)
    with pytest.raises(ValueError, match="address is an option of the ray executor"):
        ex.make_executor("local", address="auto")
    with pytest.raises(ValueError, match="gpus_per_run must be a number >= 0, got -1"):
        executors.RayExecutor(gpus_per_run=-1)
    with pytest.raises(ValueError, match="cpus_per_run must be a number > 0, got 0"):
        executors.RayExecutor(cpus_per_run=0)


def test_without_ray_the_ray_executor_is_one_line_naming_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(ImportError, match=r'needs the \'cluster\' extra: pip install "opcc_edu\[cluster\]"'):
        ex.make_executor("ray")
    code = main(["ablation", "prior-scale", "--seeds", "1", "--out", str(tmp_path), "--executor", "ray"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert (
        err == "opcc-edu ablation: error: this command needs the 'cluster' extra: pip install \"opcc_edu[cluster]\"\n"
    )
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--jobs", "2", "--executor", "ray"], "--jobs is an option of --executor local"),
        (["--address", "auto"], "--address is an option of --executor ray"),
        (["--gpus-per-run", "1"], "--gpus-per-run is an option of --executor ray"),
        (["--cpus-per-run", "2"], "--cpus-per-run sets the threads of worker processes: add --jobs N"),
        (["--executor", "slurm"], "valid choices: local, ray"),
        (["--cpus-per-run", "0", "--jobs", "2"], "must be a number > 0"),
    ],
)
def test_executor_flags_are_checked_before_anything_runs(tmp_path, capsys, flags, message):
    try:
        code = main(["ablation", "prior-scale", "--seeds", "1", "--out", str(tmp_path), *flags])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1
    assert not any(tmp_path.iterdir())


# --------------------------------------------------------------------------------------------
# Local worker processes
# --------------------------------------------------------------------------------------------
def test_local_processes_survive_a_killed_worker_and_match_the_in_process_rows(tmp_path):
    grid = small_grid()
    victim = grid.runs()[1]
    marks = tmp_path / "marks"
    marks.mkdir()
    killer = kill_when_announced(marks)
    executor = ex.make_executor("local", jobs=2, cpus_per_run=1)
    with pytest.warns(
        ex.RunFailureWarning, match=rf"run {victim.run_id} failed \(attempt 1 of 3\): .*killed \(SIGKILL\)"
    ):
        run(grid, tmp_path / "out", KilledOnce(marks, victim.run_id), executor=executor)
    killer.join(timeout=5)
    assert sorted(p.name for p in marks.glob("attempt*")) == ["attempt1", "attempt2"]
    assert sorted(executor.submitted) == sorted([r.slug for r in grid.runs()] + [victim.slug])
    run(grid, tmp_path / "reference")
    assert_same_runs(tmp_path / "out", tmp_path / "reference", grid)
    again = ex.make_executor("local", jobs=2)
    run(grid, tmp_path / "out", executor=again)
    assert again.submitted == [] and again._workers == []  # nothing submitted, no process started


def test_local_processes_start_from_a_driver_read_from_standard_input(tmp_path):
    """``python - <<EOF`` (how results/ablations/run_committed.sh drives a grid) names its main
    script ``<stdin>``; spawned workers must not try to re-run it."""
    import subprocess

    script = f"""
from opcc_edu.lab import experiments as ex

grid = ex.plan_ablation("prior-scale", "tiny", datasets=["1m"], seeds=2)
answer = ex.synthetic_answer_function(n_queries=50, ensemble_size=4)
ex.run_grid(grid, {str(tmp_path / "out")!r}, answer_fn=answer, profile="tiny", progress=False,
            executor=ex.make_executor("local", jobs=2), retries=0)
"""
    done = subprocess.run(
        [sys.executable, "-"], input=script, text=True, capture_output=True, cwd=tmp_path, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    grid = small_grid()
    run(grid, tmp_path / "reference")
    assert_same_runs(tmp_path / "out", tmp_path / "reference", grid)


# --------------------------------------------------------------------------------------------
# Ray: a local cluster of 2 CPUs
# --------------------------------------------------------------------------------------------
def test_the_cluster_tests_run_first_while_the_process_is_small(request):
    """conftest.py moves them to the front of the session: Ray forks its processes from this one,
    and a fork of the process the whole suite has grown may be refused for want of memory."""
    marked = [item.get_closest_marker("cluster") is not None for item in request.session.items]
    assert marked == sorted(marked, reverse=True), "a test marked cluster runs after an unmarked one"


@pytest.mark.cluster
def test_a_local_ray_cluster_gives_the_rows_of_the_local_executor(tmp_path, ray):
    """Four real runs (tiny ensembles trained without the cache) on Ray and in this process."""
    grid = small_grid()
    # the tiny profile's ensembles, trained for 60 steps instead of 300 to keep the test short
    short = dataclasses.replace(get_profile("tiny"), dynamics_train_steps=60)
    answer = ex.baseline_answer_function(short, queries="paper", cache=False)
    run(grid, tmp_path / "local", answer)
    executor = executors.RayExecutor(num_cpus=2)
    try:
        run(grid, tmp_path / "ray", answer, executor=executor)
    finally:
        executor.close()
    assert not ray.is_initialized()  # the cluster it started is shut down
    assert len(executor.submitted) == 4
    assert_same_runs(tmp_path / "ray", tmp_path / "local", grid)
    session = json.loads((tmp_path / "ray" / "meta.json").read_text())["sessions"][-1]
    assert session["executor"] == "ray (local cluster; 1 CPU and 0 GPU per run)"
    assert session["runs_completed"] == 4 and "failed_attempts" not in session


@pytest.mark.cluster
def test_a_ray_worker_killed_mid_run_is_retried_and_a_finished_sweep_submits_nothing(tmp_path, ray):
    grid = small_grid()
    victim = grid.runs()[2]
    marks = tmp_path / "marks"
    marks.mkdir()
    killer = kill_when_announced(marks)
    executor = executors.RayExecutor(num_cpus=2)
    try:
        with pytest.warns(
            ex.RunFailureWarning, match=rf"run {victim.run_id} failed \(attempt 1 of 3\): the Ray worker was lost"
        ):
            run(grid, tmp_path / "out", KilledOnce(marks, victim.run_id), executor=executor)
    finally:
        executor.close()
    killer.join(timeout=5)
    assert sorted(p.name for p in marks.glob("attempt*")) == ["attempt1", "attempt2"]
    assert sorted(executor.submitted) == sorted([r.slug for r in grid.runs()] + [victim.slug])
    run(grid, tmp_path / "reference")
    assert_same_runs(tmp_path / "out", tmp_path / "reference", grid)
    session = json.loads((tmp_path / "out" / "meta.json").read_text())["sessions"][-1]
    assert [(f["run_id"], f["attempt"]) for f in session["failed_attempts"]] == [(victim.run_id, 1)]
    # the sweep is complete: a rerun submits nothing and starts no cluster
    before = (tmp_path / "out" / "results.csv").read_bytes()
    again = executors.RayExecutor(num_cpus=2)
    run(grid, tmp_path / "out", executor=again)
    assert again.submitted == [] and not ray.is_initialized()
    assert (tmp_path / "out" / "results.csv").read_bytes() == before
    # a run that asks for more than the cluster has is refused, and its cluster shut down
    greedy = executors.RayExecutor(num_cpus=2, gpus_per_run=1)
    with pytest.raises(ValueError, match=r"a run asks for 1 CPU and 1 GPU .* the Ray cluster has 2 CPU and 0 GPU"):
        run(small_grid(1), tmp_path / "greedy", executor=greedy)
    assert not ray.is_initialized() and not list((tmp_path / "greedy" / "records").iterdir())
