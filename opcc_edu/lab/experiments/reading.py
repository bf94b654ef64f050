"""Finding and reading results: the results root, committed grids, runs, values and queries.

:func:`load_results` reads a results directory (every finished run, each once);
:func:`load_run_values` and :func:`load_run_queries` read back one run's member values and the
queries they answer; :func:`rescore_on_shared_queries` scores two grids on the queries they share.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ...baselines.estimate import profile_query_indices
from ...io import load_npz
from ...names import METRICS, TIE_FAIR_METRICS
from ...scoring import MemberValues
from .grid import RunSpec
from .records import RESULT_COLUMNS, RUN_COLUMNS
from .store import ResultsStore

if TYPE_CHECKING:
    import pandas as pd

    from ...queries import QuerySet

__all__ = [
    "find_results_root",
    "sibling_results_root",
    "load_run_queries",
    "run_query_indices",
    "results_recipe",
    "load_runs",
    "read_meta",
    "grid_compute",
    "grid_compute_text",
    "load_results",
    "load_run_values",
]


def has_results(directory: str | os.PathLike) -> bool:
    """Whether ``directory`` holds a results table (run records or ``runs.csv``)."""
    directory = Path(directory)
    return (directory / "runs.csv").exists() or any((directory / "records").glob("*.json"))


def find_results_root(start: str | os.PathLike | None = None) -> Path | None:
    """The repository's committed ``results/ablations`` directory, or ``None``.

    ``$OPCC_EDU_RESULTS`` wins when set. Otherwise searched from ``start`` (default: the
    working directory, e.g. ``book/`` when a chapter runs) upwards, then next to the package's
    source tree (an editable install). A package installed from a wheel ships no results.
    """
    if start is None and os.environ.get("OPCC_EDU_RESULTS"):
        forced = Path(os.environ["OPCC_EDU_RESULTS"])
        return forced if forced.is_dir() else None
    here = Path(start if start is not None else Path.cwd()).resolve()
    for folder in (here, *here.parents, Path(__file__).resolve().parents[3]):
        candidate = folder / "results" / "ablations"
        if candidate.is_dir():
            return candidate
    return None


def sibling_results_root(name: str, start: str | os.PathLike | None = None) -> Path | None:
    """A results root beside the repository's ``results/ablations`` (``results/<name>``), or ``None``.

    The repository keeps grids of one profile at other sizes under their own root, e.g.
    ``results/ablations-classroom`` (the classroom profile's own data and queries), next to
    :func:`find_results_root`; a chapter names such a root by its folder name.

    Raises:
        ValueError: when ``name`` is not a folder name of the form ``ablations-*``.
    """
    if not (isinstance(name, str) and name.startswith("ablations-") and "/" not in name and "\\" not in name):
        raise ValueError(
            f"name must be a results root's folder name beside results/ablations ('ablations-*'), got {name!r}"
        )
    base = find_results_root(start)
    if base is None:
        return None
    candidate = base.parent / name
    return candidate if candidate.is_dir() else None


def results_recipe(directory: str | os.PathLike) -> str:
    """The query-set recipe of a results directory (``meta.json``'s ``queries``; ``hard`` for
    a directory written before recipes had names)."""
    recipe = ResultsStore(directory).queries_recipe()
    return "hard" if recipe is None else recipe


def results_sizes(directory: str | os.PathLike) -> dict[str, int] | None:
    """The sizes a results directory's runs read their data and queries at (``meta.json``'s
    ``sizes``: ``dataset_size``, ``queries_per_env``, ``mc_runs``), or None where none is
    recorded. They can differ from the sizes of the profile the directory is named after: the
    ``paper/classroom`` grid's runs read the ``tiny`` profile's data and queries."""
    return ResultsStore(directory).sizes()


def load_runs(directory: str | os.PathLike) -> pd.DataFrame:
    """The finished runs of a results directory (the rows of ``runs.csv``: one per run, with
    its wall time in seconds) as a DataFrame."""
    import pandas as pd

    records = ResultsStore(directory).records()
    frame = pd.DataFrame([record.run for record in records], columns=list(RUN_COLUMNS))
    for column in ("seed", "n_queries", "ensemble_size"):
        frame[column] = frame[column].astype(np.int64)
    frame["seconds"] = frame["seconds"].astype(np.float64)
    return frame


def read_meta(directory: str | os.PathLike) -> dict[str, Any]:
    """``meta.json`` of a results directory: one session per invocation (command, machine,
    profile, start time, wall seconds, CPU seconds where recorded, runs completed) and the
    totals ``total_wall_seconds`` and ``total_cpu_seconds``."""
    path = Path(directory) / "meta.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def grid_compute(meta: Mapping[str, Any] | str | os.PathLike) -> dict[str, float | int]:
    """A grid's compute time, summed over its invocations (the sessions of ``meta.json``).

    Each session records its wall time and, since CPU time is recorded, ``cpu_seconds``: user
    + system time of the invoking process and its child processes
    (:func:`~opcc_edu.lab.experiments.runner.process_cpu_seconds`). Sessions written before that
    have no CPU time; they are counted apart, never as zero.

    Args:
        meta: a :func:`read_meta` mapping, or a results directory.

    Returns:
        ``wall_seconds`` (every session), ``cpu_seconds`` (the sessions that record it),
        ``sessions`` and ``sessions_with_cpu``.
    """
    if not isinstance(meta, Mapping):
        meta = read_meta(meta)
    sessions = [s for s in meta.get("sessions", []) if isinstance(s, Mapping)]
    timed = [s for s in sessions if s.get("cpu_seconds") is not None]
    return {
        "wall_seconds": round(sum(float(s.get("wall_seconds", 0.0)) for s in sessions), 1),
        "cpu_seconds": round(sum(float(s["cpu_seconds"]) for s in timed), 1),
        "sessions": len(sessions),
        "sessions_with_cpu": len(timed),
    }


def grid_compute_text(meta: Mapping[str, Any] | str | os.PathLike) -> str:
    """:func:`grid_compute` in words, e.g. ``"wall time 1200 s, CPU time 2300 s"``; a grid with
    sessions that recorded no CPU time says over how many invocations the CPU time is summed."""
    found = grid_compute(meta)
    text = f"wall time {found['wall_seconds']:.0f} s"
    if found["sessions_with_cpu"] == 0:
        return text + ", CPU time not recorded"
    text += f", CPU time {found['cpu_seconds']:.0f} s"
    if found["sessions_with_cpu"] < found["sessions"]:
        text += f" (recorded by {found['sessions_with_cpu']} of {found['sessions']} invocations; the others predate it)"
    return text


def load_results(directory: str | os.PathLike) -> pd.DataFrame:
    """The results table of a directory as a pandas DataFrame: the rows of every finished run,
    each run once, in the order of ``results.csv``. Reads only; a damaged run record is skipped
    with a :class:`~opcc_edu.lab.experiments.records.StoreWarning` (the next run on the directory
    sets it aside and restores the run from the exported tables where they hold it).

    The tie-fair columns (:data:`opcc_edu.names.TIE_FAIR_METRICS`) are ``nan`` where they were
    not computed: runs recorded before them and not yet upgraded (a StoreWarning says so and
    names the upgrade), or upgraded without their member values."""
    import pandas as pd

    records = ResultsStore(directory).records()
    frame = pd.DataFrame([row for record in records for row in record.rows], columns=list(RESULT_COLUMNS))
    for column in ("seed", "ensemble_count", "ensemble_size", "n"):
        frame[column] = frame[column].astype(np.int64)
    for column in METRICS:
        frame[column] = frame[column].astype(np.float64)
    for column in TIE_FAIR_METRICS:
        frame[column] = frame[column].replace("", "nan").astype(np.float64)
    return frame


def load_run_values(directory: str | os.PathLike, run: RunSpec | str) -> MemberValues:
    """The saved (N, M) member values of one run (by :class:`RunSpec` or file slug).

    Raises:
        ValueError: the run's baseline has no members (the no-model heuristic keeps its answers,
            not member values).
    """
    slug = run.slug if isinstance(run, RunSpec) else str(run)
    arrays, metadata = load_npz(Path(directory) / "values" / f"{slug}.npz")
    info = dict(metadata.get("info", {}))
    if "values_a" not in arrays or info.get("baseline") == "heuristic":
        raise ValueError(f"run {slug!r} has no member values: its baseline ({info.get('baseline')}) has no members")
    return MemberValues(arrays["values_a"], arrays["values_b"], arrays["target"], arrays["horizon"], info=info)


def load_run_queries(directory: str | os.PathLike, run: RunSpec | str) -> QuerySet:
    """The queries one saved run answered, in the order of its member values.

    A run answers its profile's subset of the shipped query set of its environment and recipe
    (:func:`opcc_edu.baselines.select_profile_queries` of
    :func:`opcc_edu.queries.load_queries`), as many queries as its values hold. Query ``i`` of
    the returned set is row ``i`` of :func:`load_run_values`, so per-query facts (true
    returns, value gaps, policies, start states) can be set beside the members' estimates
    without re-running anything.

    Args:
        directory: a results directory (``results/ablations/<recipe>/<profile>``).
        run: a :class:`RunSpec` or a run's file slug (``hopper__medium__seed0__default``).

    Raises:
        ValueError: the selected queries' targets or horizons differ from the saved ones (the
            shipped query set changed since the run).
    """
    queries, indices = _run_queries(directory, run)
    return queries.select(indices) if len(indices) < len(queries) else queries


def run_query_indices(directory: str | os.PathLike, run: RunSpec | str) -> np.ndarray:
    """The rows of the shipped query set (its environment's, its directory's recipe) that one
    saved run answered, ascending: row ``i`` of :func:`load_run_values` is query
    ``run_query_indices(...)[i]``. Two runs at different query counts share the queries in
    ``np.intersect1d`` of theirs.

    Raises:
        ValueError: as :func:`load_run_queries`.
    """
    return _run_queries(directory, run)[1]


def _run_queries(directory: str | os.PathLike, run: RunSpec | str) -> tuple[QuerySet, np.ndarray]:
    """The shipped query set of a run and the indices of the queries it answered (checked)."""
    from ...queries import load_queries

    slug = run.slug if isinstance(run, RunSpec) else str(run)
    environment = run.environment if isinstance(run, RunSpec) else slug.split("__", 1)[0]
    values = load_run_values(directory, run)
    recipe = results_recipe(directory)
    queries = load_queries(environment, recipe)
    indices = profile_query_indices(queries, n=len(values.target))
    same = np.array_equal(np.asarray(queries.target)[indices], np.asarray(values.target)) and np.array_equal(
        np.asarray(queries.horizon)[indices], np.asarray(values.horizon)
    )
    if not same:
        raise ValueError(
            f"the {recipe!r} query set of {environment} no longer matches run {slug} in {directory}: "
            "targets or horizons differ (the shipped query set changed since the run)"
        )
    return queries, indices
