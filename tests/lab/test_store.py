"""The results store under faults: nothing finished is ever lost, nothing is counted twice.

Every fault of a results directory -- a missing or torn table, duplicated or foreign rows, a
damaged run record, a process killed mid-write, two processes on one directory, a full disk, a
read-only directory -- is applied to small synthetic grids and to a copy of the committed
``tiny`` results (10,935 rows, 405 runs). The answer function is synthetic, so nothing trains.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from opcc_edu import io as safe_io
from opcc_edu.lab import experiments as ex

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "results" / "ablations" / "hard" / "tiny"
ANSWER = ex.synthetic_answer_function(n_queries=50, ensemble_size=4)
NEW_RUN = ex.GridSpec(("maze2d-umaze",), {"maze2d-umaze": ("1m",)}, (99,))


def small_grid(seeds: int = 3) -> ex.GridSpec:
    return ex.plan_ablation("prior-scale", "tiny", datasets=["1m"], seeds=seeds)


def run(grid: ex.GridSpec, directory: Path, answer=ANSWER, **kwargs):
    # the committed results answered the hard query sets; a directory holds one recipe
    kwargs.setdefault("queries", "hard")
    return ex.run_grid(grid, directory, answer_fn=answer, profile="tiny", progress=False, save_values=False, **kwargs)


def test_a_directory_holds_one_recipe(committed, tmp_path):
    assert ex.results_recipe(committed) == "hard"
    with pytest.raises(ValueError, match="holds runs on the 'hard' query sets, not 'paper'"):
        run(small_grid(1), committed, queries="paper")
    fresh = tmp_path / "fresh"
    run(small_grid(1), fresh, queries="paper")
    assert json.loads((fresh / "meta.json").read_text())["queries"] == "paper"
    assert ex.results_recipe(fresh) == "paper"
    with pytest.raises(ValueError, match="not 'hard'"):
        run(small_grid(1), fresh, queries="hard")
    with pytest.raises(ValueError, match="queries"):
        run(small_grid(1), fresh, queries="easy")


class Counting:
    """The synthetic answer function, counting its calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, spec: ex.RunSpec, progress: bool = True) -> ex.MemberValues:
        self.calls.append(spec.run_id)
        return ANSWER(spec, progress)


@pytest.fixture(scope="module")
def committed_template(tmp_path_factory) -> Path:
    if not (COMMITTED / "records").is_dir():
        pytest.skip("no committed results in this checkout")
    target = tmp_path_factory.mktemp("committed") / "tiny"
    shutil.copytree(COMMITTED, target, ignore=shutil.ignore_patterns("values", ".locks"))
    return target


@pytest.fixture
def committed(committed_template, tmp_path) -> Path:
    """A fresh copy of the committed tiny results (without the member values)."""
    target = tmp_path / "tiny"
    shutil.copytree(committed_template, target)
    return target


def table_bytes(directory: Path) -> tuple[bytes, bytes]:
    return (directory / "results.csv").read_bytes(), (directory / "runs.csv").read_bytes()


def assert_complete(directory: Path, original: tuple[bytes, bytes]) -> None:
    """Every original row is in the table, each once, with the one new run appended."""
    results, runs = table_bytes(directory)
    assert results.startswith(original[0]) and runs.startswith(original[1])
    frame = ex.load_results(directory)
    assert frame.duplicated(["run_id", "horizon", "confidence", "ensemble_count"]).sum() == 0
    assert frame["run_id"].nunique() == 406 and len(frame) == len(results.splitlines()) - 1 > 10935


def temporaries(directory: Path) -> list[Path]:
    return [p for p in directory.rglob(".*.tmp")]


# --------------------------------------------------------------------------------------------
# Damaged tables and records, on the committed results
# --------------------------------------------------------------------------------------------
def test_committed_results_load_unchanged_from_their_records(committed):
    frame = ex.load_results(committed)
    assert len(frame) == 10935 and frame["run_id"].nunique() == 405 == len(ex.load_runs(committed))
    before = table_bytes(committed)
    assert ex.migrate_results(committed) == {"temporaries": 0, "quarantined": 0, "converted": 0, "upgraded": 0}
    assert table_bytes(committed) == before, "the exports are byte for byte the committed tables"


def test_missing_runs_csv_is_regenerated(committed):
    original = table_bytes(committed)
    (committed / "runs.csv").unlink()
    assert len(ex.load_results(committed)) == 10935
    counting = Counting()
    run(NEW_RUN, committed, counting)
    assert counting.calls == ["maze2d-umaze/1m/seed99/default"]
    assert_complete(committed, original)


def test_a_torn_line_is_quarantined_and_the_table_rebuilt(committed):
    original = table_bytes(committed)
    with open(committed / "results.csv", "ab") as handle:
        handle.write(b"hopper,random,0,default,all,ev,2,10,0.13")
    with pytest.warns(ex.StoreWarning, match="results.quarantine.csv"):
        run(NEW_RUN, committed)
    assert_complete(committed, original)
    quarantined = (committed / "results.quarantine.csv").read_text().splitlines()
    assert quarantined == [",".join(ex.RESULT_COLUMNS), "hopper,random,0,default,all,ev,2,10,0.13"]


def test_a_truncated_table_is_rebuilt_and_the_damaged_one_backed_up(committed):
    original = table_bytes(committed)
    damaged = original[0][: len(original[0]) // 2]
    (committed / "results.csv").write_bytes(damaged)
    with pytest.warns(ex.StoreWarning, match="results.quarantine.csv"):
        run(NEW_RUN, committed)
    assert_complete(committed, original)
    (torn,) = (committed / "results.quarantine.csv").read_text().splitlines()[1:]
    assert damaged.decode().endswith(torn) and torn not in original[0].decode().splitlines()
    assert list(committed.glob("results.csv.*.bak")) == [], "the table grew: nothing to back up"


def test_duplicated_and_foreign_rows_are_quarantined_never_dropped(committed):
    original = table_bytes(committed)
    lines = original[0].decode().splitlines(keepends=True)
    foreign = lines[1].replace("seed0/default", "seed7/default").replace(",0,default", ",7,default")
    (committed / "results.csv").write_text("".join(lines + lines[1:4] + [foreign]))
    with open(committed / "runs.csv", "a") as handle:
        handle.write(original[1].decode().splitlines(keepends=True)[1])
    with pytest.warns(ex.StoreWarning) as caught:
        run(NEW_RUN, committed)
    assert_complete(committed, original)
    message = " ".join(str(w.message) for w in caught)
    for name in ("results.quarantine.csv", "runs.quarantine.csv", "results.csv.", "runs.csv."):
        assert name in message
    quarantined = (committed / "results.quarantine.csv").read_text().splitlines()[1:]
    assert quarantined == [line.rstrip("\n") for line in lines[1:4] + [foreign]]
    (backup,) = committed.glob("results.csv.*.bak")
    assert backup.read_text() == "".join(lines + lines[1:4] + [foreign])


def test_a_torn_run_record_is_set_aside_and_restored_from_the_tables(committed):
    original = table_bytes(committed)
    record = committed / "records" / "maze2d-open__1m__seed0__default.json"
    data = record.read_bytes()
    record.write_bytes(data[: len(data) // 2])
    with pytest.warns(ex.StoreWarning, match="corrupt run record"):
        assert len(ex.load_results(committed)) == 10935  # read from the exported tables meanwhile
    counting = Counting()
    with pytest.warns(ex.StoreWarning, match="quarantine"):
        run(NEW_RUN, committed, counting)
    assert counting.calls == ["maze2d-umaze/1m/seed99/default"], "the damaged run is restored, not rerun"
    assert record.read_bytes() == data
    (set_aside,) = (committed / "quarantine").iterdir()
    assert set_aside.read_bytes() == data[: len(data) // 2]
    assert_complete(committed, original)


def test_a_foreign_record_is_set_aside(tmp_path):
    run(small_grid(1), tmp_path)
    records = sorted((tmp_path / "records").glob("*.json"))
    shutil.copy(records[0], tmp_path / "records" / "maze2d-umaze__1m__seed5__default.json")
    with pytest.warns(ex.StoreWarning, match="foreign record"):
        ex.ResultsStore(tmp_path).prepare()
    assert len(list((tmp_path / "quarantine").iterdir())) == 1
    assert ex.load_results(tmp_path)["run_id"].nunique() == 2


def test_a_legacy_table_without_runs_csv_is_kept_in_a_backup(tmp_path):
    shutil.copy(COMMITTED / "results.csv", tmp_path / "results.csv")
    with pytest.warns(ex.StoreWarning) as caught:
        run(NEW_RUN, tmp_path)
    (backup,) = tmp_path.glob("results.csv.*.bak")
    assert backup.read_bytes() == (COMMITTED / "results.csv").read_bytes()
    assert str(backup) in " ".join(str(w.message) for w in caught)
    assert len((tmp_path / "results.quarantine.csv").read_text().splitlines()) == 10936


def test_a_legacy_directory_is_read_and_converted_with_duplicates_removed(tmp_path):
    lines = (COMMITTED / "results.csv").read_text().splitlines(keepends=True)
    (tmp_path / "results.csv").write_text("".join(lines + lines[1:28]))  # one run's rows twice
    shutil.copy(COMMITTED / "runs.csv", tmp_path / "runs.csv")
    frame = ex.load_results(tmp_path)
    assert len(frame) == 10935 and frame["run_id"].nunique() == 405
    table = ex.aggregate(frame, "horizon")
    doubled = ex.aggregate(pd.concat([frame, frame.iloc[:27]], ignore_index=True), "horizon")
    assert table.equals(doubled), "aggregation counts each run once"
    with pytest.warns(ex.StoreWarning, match="results.quarantine.csv"):
        converted = ex.migrate_results(tmp_path)
    assert converted["converted"] == 405
    assert (tmp_path / "results.csv").read_bytes() == (COMMITTED / "results.csv").read_bytes()


# --------------------------------------------------------------------------------------------
# Killed and concurrent processes
# --------------------------------------------------------------------------------------------
_CHILD = """
import os, signal, sys, time
from opcc_edu.lab import experiments as ex
from opcc_edu import io as safe_io
directory, mode, log, sync = sys.argv[1:5]
grid = ex.plan_ablation("prior-scale", "tiny", datasets=["1m"], seeds=4)
synthetic = ex.synthetic_answer_function(n_queries=50, ensemble_size=4)
if mode == "kill":
    written, original = [], safe_io.write_all
    def write_all(fd, data):
        if data.startswith(b'{"format"'):
            written.append(1)
            if len(written) == 3:  # the third record: half of it, then the process dies
                os.write(fd, data[: len(data) // 2])
                os.kill(os.getpid(), signal.SIGKILL)
        original(fd, data)
    safe_io.write_all = write_all
def answer(run, progress=True):
    with open(log, "a") as handle:
        handle.write(run.run_id + "\\n")
    if mode == "race":
        time.sleep(0.2)
    return synthetic(run, progress)
if mode == "race":  # start together: announce, then wait for the signal
    open(os.path.join(sync, f"ready{os.getpid()}"), "w").close()
    while not os.path.exists(os.path.join(sync, "go")):
        time.sleep(0.02)
ex.run_grid(grid, directory, answer_fn=answer, profile="tiny", progress=False, save_values=False, queries="hard")
"""


def _child(directory: Path, mode: str, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-c", _CHILD, str(directory), mode, str(log), str(log.parent)]
    return subprocess.Popen(args, env=env)


def test_a_process_killed_mid_write_leaves_no_partial_run_and_resume_finishes(tmp_path):
    out, log = tmp_path / "out", tmp_path / "log"
    child = _child(out, "kill", log)
    assert child.wait(timeout=60) == -9
    assert len(list((out / "records").glob("*.json"))) == 2
    assert temporaries(out), "the killed write left its temporary file"
    assert ex.load_results(out)["run_id"].nunique() == 2
    counting = Counting()
    results = run(small_grid(4), out, counting)
    assert temporaries(out) == []
    assert len(counting.calls) == 6 and set(counting.calls).isdisjoint(log.read_text().split()[:2])
    assert results["run_id"].nunique() == 8
    assert not results.duplicated(["run_id", "horizon", "confidence", "ensemble_count"]).any()
    assert len((out / "runs.csv").read_text().splitlines()) == 9


def test_two_processes_on_one_directory_run_each_run_exactly_once(tmp_path):
    out = tmp_path / "out"
    children = [_child(out, "race", tmp_path / f"log{i}") for i in range(2)]
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("ready*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    (tmp_path / "go").touch()
    assert [child.wait(timeout=90) for child in children] == [0, 0]
    done = [(tmp_path / f"log{i}").read_text().split() for i in range(2)]
    assert sorted(done[0] + done[1]) == sorted(r.run_id for r in small_grid(4).runs())
    assert done[0] and done[1], "both processes took part"
    results = ex.load_results(out)
    assert results["run_id"].nunique() == 8
    assert not results.duplicated(["run_id", "horizon", "confidence", "ensemble_count"]).any()
    assert len((out / "results.csv").read_text().splitlines()) == len(results) + 1
    meta = json.loads((out / "meta.json").read_text())
    assert sum(s["runs_completed"] for s in meta["sessions"]) == 8


# --------------------------------------------------------------------------------------------
# Full disk, read-only directory, file modes
# --------------------------------------------------------------------------------------------
def test_no_space_left_gives_a_clear_error_and_leaves_the_table_intact(committed, monkeypatch):
    ex.ResultsStore(committed).prepare()  # the directory is ready; the disk fills up later
    original = table_bytes(committed)

    def full(fd: int, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(safe_io, "write_all", full)
    with pytest.raises(ex.ResultsStoreError, match="no space left") as error:
        run(NEW_RUN, committed)
    assert error.value.errno == errno.ENOSPC and "maze2d-umaze/1m/seed99/default" in str(error.value)
    assert table_bytes(committed) == original and temporaries(committed) == []
    monkeypatch.undo()
    run(NEW_RUN, committed)
    assert_complete(committed, original)


def test_a_read_only_directory_fails_before_any_run(tmp_path, monkeypatch):
    out = tmp_path / "read-only"
    out.mkdir()
    out.chmod(0o555)
    if os.geteuid() == 0:  # root ignores permission bits: honour them for this directory
        real_open, real_mkdir = os.open, os.mkdir

        def denied(path) -> bool:
            return Path(path).resolve().is_relative_to(out.resolve())

        def open_(path, flags, mode=0o777, **kwargs):
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and denied(path) and not Path(path).exists():
                raise PermissionError(errno.EACCES, "Permission denied", str(path))
            return real_open(path, flags, mode, **kwargs)

        def mkdir_(path, mode=0o777, **kwargs):
            if denied(path):
                raise PermissionError(errno.EACCES, "Permission denied", str(path))
            return real_mkdir(path, mode, **kwargs)

        monkeypatch.setattr(os, "open", open_)
        monkeypatch.setattr(os, "mkdir", mkdir_)
    counting = Counting()
    try:
        with pytest.raises(ex.ResultsStoreError, match="not writable.*no run was started"):
            run(small_grid(1), out, counting)
    finally:
        out.chmod(0o755)
    assert counting.calls == [] and list(out.iterdir()) == []


def test_new_files_follow_the_umask(tmp_path):
    previous = os.umask(0o022)
    try:
        run(small_grid(1), tmp_path)
        with pytest.warns(ex.StoreWarning):
            (tmp_path / "results.csv").write_text((tmp_path / "results.csv").read_text() + "torn")
            run(small_grid(2), tmp_path)
    finally:
        os.umask(previous)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"results.csv", "runs.csv", "meta.json", "results.quarantine.csv"}
    assert len(list((tmp_path / "records").glob("*.json"))) == 4
    modes = {str(p.relative_to(tmp_path)): stat.S_IMODE(p.stat().st_mode) for p in files}
    assert set(modes.values()) == {0o644}, modes


def test_guarantees_are_documented():
    doc = textwrap.dedent(ex.store.__doc__ or "")
    for words in ("Atomic per run", "Safe under concurrent writers", "Never deleting silently"):
        assert words in doc
    readme = (ROOT / "results" / "ablations" / "README.md").read_text()
    assert "never" in readme.lower() and "records/" in readme
