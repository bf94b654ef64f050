"""The runner: compute every unfinished run of a grid into a results directory.

:func:`run_grid` asks an answer function for each run's member values, scores them
(:func:`~opcc_edu.lab.experiments.answers.score_run`) and saves the run as one record of the
:class:`~opcc_edu.lab.experiments.store.ResultsStore` (atomic per run, safe under concurrent
writers); an interrupted grid resumes where it stopped, and runs shared by several ablations
are computed once. :func:`run_ablation` plans, runs and aggregates one ablation.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as _dt
import os
import shlex
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ...config import Profile, get_profile
from ...io import save_npz
from ...names import BASELINES, DEFAULT_QUERY_RECIPE, QUERY_RECIPES
from ...provenance import machine_description
from ...utils import check_choice
from .answers import (
    AnswerFunction,
    baseline_answer_function,
    fqe_answer_function,
    heuristic_answer_function,
)
from .executors import (
    Executor,
    RunFailure,
    RunFailureWarning,
    RunOutcome,
    RunsFailedError,
    RunTask,
    make_executor,
)
from .grid import GridSpec, RunSpec, plan_ablation
from .records import new_record
from .registry import Ablation, get_ablation
from .store import ResultsStore

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["results_dir", "machine_description", "process_cpu_seconds", "grid_status", "run_grid", "run_ablation"]


def process_cpu_seconds() -> float:
    """CPU time of this process so far, in seconds: user + system time of the process and of
    its child processes that have ended and been waited for (:func:`os.times`).

    A grid's session records the difference between its end and its start (``cpu_seconds`` in
    ``meta.json``); worker processes of a local executor count once they have exited (the
    session's last entry is written after they are joined). Ray tasks run in processes that
    are not children of this one and are not counted.
    """
    times = os.times()
    return float(times.user + times.system + times.children_user + times.children_system)


class _Clock:
    """Wall and CPU time since a session started; :meth:`stamp` writes both into the session."""

    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = process_cpu_seconds()

    def stamp(self, session: dict[str, Any]) -> None:
        session["wall_seconds"] = round(time.perf_counter() - self.wall, 1)
        session["cpu_seconds"] = round(process_cpu_seconds() - self.cpu, 1)


def results_dir(
    out: str | os.PathLike | None = None,
    profile: Profile | str | None = None,
    queries: str = DEFAULT_QUERY_RECIPE,
    baseline: str = "ensemble",
) -> Path:
    """Directory of one profile's results on one recipe's query sets.

    ``<out>/<queries>/<profile>`` for the ensemble baseline and
    ``<out>/<queries>/<profile>-heuristic`` for the no-model heuristic, ``<profile>-fqe`` for
    fitted Q evaluation (``out`` default ``results/ablations``).

    Raises:
        ValueError: unknown recipe or baseline (lists the valid ones).
    """
    check_choice(queries, QUERY_RECIPES, "queries")
    check_choice(baseline, BASELINES, "baseline")
    name = get_profile(profile).name + ("" if baseline == "ensemble" else f"-{baseline}")
    return Path(out if out is not None else "results/ablations") / queries / name


def profile_sizes(profile: Profile | str | None = None) -> dict[str, int]:
    """The sizes a profile's runs read data and queries at, as ``meta.json`` records them:
    ``dataset_size`` (capped by each recipe), ``queries_per_env`` and ``mc_runs``."""
    profile = get_profile(profile)
    return {
        "dataset_size": int(profile.dataset_size),
        "queries_per_env": int(profile.queries_per_env),
        "mc_runs": int(profile.mc_runs),
    }


def _check_max_runs(max_runs: int | None) -> int | None:
    if max_runs is None:
        return None
    if isinstance(max_runs, bool) or not isinstance(max_runs, (int, np.integer)) or max_runs < 0:
        raise ValueError(f"max_runs must be None or an integer >= 0, got {max_runs!r}")
    return int(max_runs)


def grid_status(grid: GridSpec, out_dir: str | os.PathLike) -> pd.DataFrame:
    """Which runs of ``grid`` are finished in ``out_dir`` (read only; nothing is written).

    Returns:
        DataFrame with run_id, environment, dataset, seed, configuration and done (bool), in
        the grid's order.
    """
    import pandas as pd

    directory = Path(out_dir)
    done = {record.run_id for record in ResultsStore(directory).records()} if directory.is_dir() else set()
    rows = [
        {
            "run_id": run.run_id,
            "environment": run.environment,
            "dataset": run.dataset,
            "seed": run.seed,
            "configuration": run.configuration,
            "done": run.run_id in done,
        }
        for run in grid.runs()
    ]
    return pd.DataFrame(rows, columns=["run_id", "environment", "dataset", "seed", "configuration", "done"])


def _save_outcome(store: ResultsStore, run: RunSpec, outcome: RunOutcome) -> None:
    """Write a returned run: its member values, then its record (the caller holds its claim)."""
    if outcome.arrays is not None:
        save_npz(store.directory / "values" / f"{run.slug}.npz", outcome.arrays, outcome.metadata)
    store.commit(new_record(outcome.summary, outcome.rows))


def _check_retries(retries: int) -> int:
    if isinstance(retries, bool) or not isinstance(retries, (int, np.integer)) or retries < 0:
        raise ValueError(f"retries must be an integer >= 0, got {retries!r}")
    return int(retries)


def _drive(
    store: ResultsStore,
    pending: list[RunSpec],
    executor: Executor,
    answer_fn: AnswerFunction,
    profile: Profile,
    progress: bool,
    save_values: bool,
    max_runs: int | None,
    retries: int,
    session: dict[str, Any],
    clock: _Clock,
    bar: Any,
    failed: list[RunFailure],
) -> None:
    """Submit the pending runs, save each as it returns, retry failures (the driver's loop).

    A run is claimed in the store before it is submitted and released once it is saved or has
    failed on every attempt, so another process on the same directory skips it meanwhile.
    """
    queue = collections.deque(pending)
    in_flight: dict[str, tuple[RunSpec, contextlib.ExitStack, int]] = {}
    try:
        while True:
            while queue and len(in_flight) < executor.capacity():
                if max_runs is not None and session["runs_completed"] + len(in_flight) >= max_runs:
                    break
                run = queue.popleft()
                claim = contextlib.ExitStack()
                if not claim.enter_context(store.claim(run.slug)) or store.has_record(run.slug):
                    claim.close()  # being computed elsewhere, or just finished
                    continue
                try:
                    executor.submit(
                        run.slug, RunTask(run, answer_fn, profile, progress and executor.in_process, save_values)
                    )
                except BaseException:
                    claim.close()
                    raise
                in_flight[run.slug] = (run, claim, 1)
                if bar is not None and executor.in_process:
                    bar.set_postfix_str(run.run_id)
            if not in_flight:
                return
            finished = executor.wait()
            slug, error = finished.key, finished.error
            run, claim, attempt = in_flight.pop(slug)
            with claim:
                if finished.outcome is not None:
                    _save_outcome(store, run, finished.outcome)
                    session["runs_completed"] += 1
                    clock.stamp(session)
                    store.update_meta(session)
                    if bar is not None:
                        bar.update(1)
                    continue
                failure = RunFailure(run.run_id, attempt, error, finished.details, finished.exception)
                again = attempt <= retries
                attempt_record = {"run_id": run.run_id, "attempt": attempt, "error": error[:500]}
                if finished.details:
                    attempt_record["traceback"] = finished.details[-4000:]
                session.setdefault("failed_attempts", []).append(attempt_record)
                warnings.warn(
                    f"run {run.run_id} failed (attempt {attempt} of {retries + 1}): {error}"
                    + ("; submitting it again" if again else "; giving up on it, the other runs go on"),
                    RunFailureWarning,
                    stacklevel=3,
                )
                if again:
                    executor.submit(
                        slug, RunTask(run, answer_fn, profile, progress and executor.in_process, save_values)
                    )
                    in_flight[slug] = (run, claim.pop_all(), attempt + 1)
                else:
                    failed.append(failure)
                    session["runs_failed"] = len(failed)
    finally:
        for _, claim, _ in in_flight.values():
            claim.close()


def run_grid(
    grid: GridSpec,
    out_dir: str | os.PathLike,
    answer_fn: AnswerFunction | None = None,
    profile: Profile | str | None = None,
    progress: bool = True,
    save_values: bool = True,
    max_runs: int | None = None,
    label: str = "",
    command: str | None = None,
    queries: str = DEFAULT_QUERY_RECIPE,
    baseline: str = "ensemble",
    executor: Executor | str | None = None,
    retries: int = 2,
) -> pd.DataFrame:
    """Run every unfinished run of ``grid`` and save each one to ``out_dir`` as it finishes.

    This process is the driver: it claims each run before submitting it to the ``executor``
    (so several processes may share ``out_dir``: a run being computed by another process is
    skipped here) and alone writes a run's values and record when the run returns. Workers
    write nothing here, so a worker lost mid-run leaves no trace and its run is submitted
    again. A run that fails is reported (a :class:`~opcc_edu.lab.experiments.executors.RunFailureWarning`)
    and retried up to ``retries`` times while the other runs go on. Every executor gives the
    same rows: a run's seed is its own. See :mod:`opcc_edu.lab.experiments.store` for what is
    guaranteed on disk, and :mod:`opcc_edu.lab.experiments.executors` for the executors.

    Args:
        grid: the :class:`~opcc_edu.lab.experiments.grid.GridSpec`.
        out_dir: directory of the run records, ``results.csv``, ``runs.csv``, ``meta.json``
            and ``values/``.
        answer_fn: the :data:`~opcc_edu.lab.experiments.answers.AnswerFunction`;
            :func:`~opcc_edu.lab.experiments.answers.baseline_answer_function` when ``None``.
        profile: profile recorded with the rows; the active one when ``None``.
        progress: show a progress bar over runs, with the current run id (and pass the flag
            to ``answer_fn``).
        save_values: keep each run's (N, M) member values as ``values/<run>.npz`` (needed by
            :func:`~opcc_edu.lab.experiments.analysis.level_risk_coverage`).
        max_runs: stop after this many new runs (``None``: all).
        label: name recorded in ``meta.json`` (the ablation).
        command: command line recorded in ``meta.json`` (default: this process's argv).
        queries: the recipe of the query sets answered (:data:`opcc_edu.names.QUERY_RECIPES`);
            one results directory holds runs of one recipe (:meth:`ResultsStore.check_queries`).
        baseline: ``"ensemble"`` (the paper's baseline), ``"heuristic"`` (the no-model rule,
            :func:`~opcc_edu.lab.experiments.answers.heuristic_answer_function`) or ``"fqe"``
            (model-free, :func:`~opcc_edu.lab.experiments.answers.fqe_answer_function`, on the same
            data, seeds and queries); selects the default ``answer_fn`` and is recorded in
            ``meta.json``.
        executor: an :class:`~opcc_edu.lab.experiments.executors.Executor`, or a name of
            :data:`~opcc_edu.lab.experiments.executors.EXECUTORS` with default settings
            (:func:`~opcc_edu.lab.experiments.executors.make_executor`); ``None``: one run after
            another in this process.
        retries: attempts after the first for a run that fails (its worker raised or died).

    Returns:
        The whole results table (:func:`~opcc_edu.lab.experiments.reading.load_results` of
        ``out_dir``) as a DataFrame.

    Raises:
        ValueError: for a negative ``max_runs`` or ``retries``, an unknown recipe, baseline or
            executor, or a directory that holds runs on another recipe's query sets.
        ResultsStoreError: when ``out_dir`` cannot be written (before any run) or a run
            cannot be saved (no space left, ...); finished runs stay intact.
        RunsFailedError: after every other run was computed and saved, when some runs failed
            on every attempt (chained to the first failure's exception for in-process runs).
    """
    from .reading import load_results

    max_runs = _check_max_runs(max_runs)
    retries = _check_retries(retries)
    profile = get_profile(profile)
    check_choice(queries, QUERY_RECIPES, "queries")
    check_choice(baseline, BASELINES, "baseline")
    executor = executor if isinstance(executor, Executor) else make_executor(executor or "local")
    reads_data = answer_fn is None and baseline != "heuristic"
    if answer_fn is None:
        answer_functions = {
            "ensemble": baseline_answer_function,
            "heuristic": heuristic_answer_function,
            "fqe": fqe_answer_function,
        }
        answer_fn = answer_functions[baseline](profile, queries=queries)
    store = ResultsStore(out_dir)
    store.prepare()
    store.check_queries(queries)
    if reads_data:  # the data size and query count the runs read (answers.run_sizes)
        store.check_sizes(profile_sizes(profile))
    done = store.finished_ids()
    pending = [run for run in grid.runs() if run.run_id not in done]
    started, clock = _dt.datetime.now(_dt.timezone.utc), _Clock()
    argv = " ".join(shlex.quote(a) for a in [Path(sys.argv[0]).name, *sys.argv[1:]])
    session = {
        "id": f"{started.isoformat(timespec='microseconds')}/{os.getpid()}",
        "label": label,
        "command": command if command is not None else argv,
        "machine": machine_description(),
        "profile": profile.name,
        "queries": queries,
        "baseline": baseline,
        "started": started.isoformat(timespec="seconds"),
        "wall_seconds": 0.0,
        "cpu_seconds": 0.0,
        "runs_completed": 0,
        "runs_in_grid": len(grid.runs()),
    }
    session["executor"] = executor.description()
    total = len(pending) if max_runs is None else min(len(pending), max_runs)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc=label or "grid", unit="run")
    failed: list[RunFailure] = []
    try:
        with executor:
            _drive(
                store,
                pending,
                executor,
                answer_fn,
                profile,
                progress,
                save_values,
                max_runs,
                retries,
                session,
                clock,
                bar,
                failed,
            )
    finally:
        if bar is not None:
            bar.close()
        if session["runs_completed"] or failed:
            clock.stamp(session)
            store.update_meta(session)
    if failed:
        raise RunsFailedError(failed, retries + 1, store.meta_json) from failed[0].exception
    return load_results(out_dir)


def run_ablation(
    name: str | Ablation,
    out: str | os.PathLike | None = None,
    profile: Profile | str | None = None,
    answer_fn: AnswerFunction | None = None,
    environments: Sequence[str] | None = None,
    datasets: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    seeds: int | Sequence[int] | None = None,
    progress: bool = True,
    max_runs: int | None = None,
    command: str | None = None,
    dry_run: bool = False,
    queries: str = DEFAULT_QUERY_RECIPE,
    baseline: str = "ensemble",
    executor: Executor | str | None = None,
    retries: int = 2,
) -> pd.DataFrame:
    """Plan and run one ablation, then aggregate it.

    Results go to :func:`results_dir` ``(out, profile, queries, baseline)``, shared by every
    ablation of the profile, so runs common to several ablations are computed once.

    Args:
        name: registry key or :class:`~opcc_edu.lab.experiments.registry.Ablation`.
        out: results root (default ``results/ablations``).
        profile: profile (object or name); the active one when ``None``.
        answer_fn: see :func:`run_grid`.
        environments, datasets, seeds: see :func:`~opcc_edu.lab.experiments.grid.plan_ablation`.
        progress: show a progress bar with the current run.
        max_runs: stop after this many new runs (``None``: all).
        command: command line recorded in ``meta.json``.
        dry_run: run nothing and write nothing; return :func:`grid_status` of the plan.
        queries: the query sets' recipe, ``"paper"`` (default) or ``"hard"``.
        baseline: ``"ensemble"`` (default), ``"heuristic"`` (the no-model rule) or ``"fqe"``.
        executor, retries: see :func:`run_grid`.

    Returns:
        :func:`~opcc_edu.lab.experiments.analysis.aggregate` of the ablation; with ``dry_run``,
        the plan's runs with a ``done`` column.

    Raises:
        ValueError: for an unknown ablation, environment or dataset (naming the valid ones),
            or a negative ``max_runs`` -- also in a dry run.
    """
    from .analysis import aggregate

    _check_max_runs(max_runs)
    _check_retries(retries)
    ablation = get_ablation(name)
    profile = get_profile(profile)
    grid = plan_ablation(ablation, profile, environments=environments, datasets=datasets, seeds=seeds)
    directory = results_dir(out, profile, queries, baseline)
    if dry_run:
        return grid_status(grid, directory)
    results = run_grid(
        grid,
        directory,
        answer_fn=answer_fn,
        profile=profile,
        progress=progress,
        max_runs=max_runs,
        label=ablation.name,
        command=command,
        queries=queries,
        baseline=baseline,
        executor=executor,
        retries=retries,
    )
    return aggregate(results, ablation, grid=grid)
