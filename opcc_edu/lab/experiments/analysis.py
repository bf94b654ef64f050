"""Reading results: loaders, the committed results, aggregation and risk-coverage curves.

:func:`load_results` reads a results directory (every finished run, each once);
:func:`aggregate` reduces the rows of one ablation to mean +- half-width of the two-sided 95%
Student-t interval of the mean over the n = seeds x datasets runs of each (environment, level):
``half = t_{0.975, n-1} * s / sqrt(n)`` with ``s`` the sample standard deviation
(:func:`opcc_edu.metrics.mean_confidence_interval`); with one run the half-width is ``nan``.
:func:`level_risk_coverage` averages risk-coverage curves over the horizons of each run, then
over runs, on a common coverage grid. :func:`level_differences` applies the paper's reading of
significance (disjoint intervals) to any such table.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ...names import ALL_HORIZONS, METRICS, QUERY_RECIPES, TABLE_METRICS, TIE_FAIR_METRICS
from ...utils import check_choice
from .answers import RunValues
from .grid import GridSpec, RunSpec, default_datasets
from .records import RESULT_COLUMNS, ROW_KEY, RUN_COLUMNS
from .registry import Ablation, configuration_label, get_ablation, parse_configuration
from .store import ResultsStore

if TYPE_CHECKING:
    import pandas as pd

    from ...queries import QuerySet

__all__ = [
    "find_results_root",
    "sibling_results_root",
    "load_run_queries",
    "committed_results",
    "committed_profiles",
    "rescore_on_shared_queries",
    "run_query_indices",
    "results_recipe",
    "load_runs",
    "read_meta",
    "grid_compute",
    "grid_compute_text",
    "dataset_order",
    "load_results",
    "load_run_values",
    "ablation_rows",
    "level_order",
    "aggregate",
    "level_risk_coverage",
    "level_differences",
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


def committed_results(
    root: str | os.PathLike | None = None,
    prefer: Sequence[str] = ("paper", "classroom", "tiny"),
    ablation: str | Ablation | None = None,
    queries: str | Sequence[str] = QUERY_RECIPES,
) -> Path | None:
    """The results directory of the largest profile with finished runs under ``root``.

    Results live in ``<root>/<recipe>/<profile>`` (:func:`~opcc_edu.lab.experiments.results_dir`);
    recipes are searched in the order given, then profiles.

    Args:
        root: results root (default :func:`find_results_root`).
        prefer: profiles in order of preference.
        ablation: only profiles holding this ablation count (every level of a configuration
            ablation, since the default level alone is shared by all ablations).
        queries: the query-set recipe(s) to look in, in order of preference (default: every
            recipe, ``paper`` first).

    Returns:
        ``<root>/<recipe>/<profile>`` or ``None`` when nothing was committed.
    """
    root_path = Path(root) if root is not None else find_results_root()
    if root_path is None:
        return None
    recipes = (queries,) if isinstance(queries, str) else tuple(queries)
    for recipe in recipes:
        check_choice(recipe, QUERY_RECIPES, "queries")
    for directory in (root_path / recipe / name for recipe in recipes for name in prefer):
        if not has_results(directory):
            continue
        if ablation is None:
            return directory
        found = aggregate(load_results(directory), ablation)
        # a configuration ablation counts only with every level (the default alone is shared)
        needed = len(get_ablation(ablation).levels) if not get_ablation(ablation).is_selection else 1
        if found["level"].nunique() >= needed:
            return directory
    return None


def committed_profiles(
    root: str | os.PathLike | None = None,
    prefer: Sequence[str] = ("paper", "classroom", "tiny"),
    ablation: str | Ablation | None = None,
    queries: str | Sequence[str] = QUERY_RECIPES,
) -> list[Path]:
    """Every results directory under ``root`` that holds ``ablation`` (all levels of a
    configuration ablation): recipe by recipe (``paper`` first), largest profile first; see
    :func:`committed_results`."""
    root_path = Path(root) if root is not None else find_results_root()
    if root_path is None:
        return []
    recipes = (queries,) if isinstance(queries, str) else tuple(queries)
    out = []
    for recipe in recipes:
        for name in prefer:
            found = committed_results(root_path, prefer=(name,), ablation=ablation, queries=recipe)
            if found is not None:
                out.append(found)
    return out


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


def load_run_values(directory: str | os.PathLike, run: RunSpec | str) -> RunValues:
    """The saved (N, M) member values of one run (by :class:`RunSpec` or file slug)."""
    from ...io import load_npz

    slug = run.slug if isinstance(run, RunSpec) else str(run)
    arrays, metadata = load_npz(Path(directory) / "values" / f"{slug}.npz")
    return RunValues(
        arrays["values_a"], arrays["values_b"], arrays["target"], arrays["horizon"], info=dict(metadata.get("info", {}))
    )


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
    from ...baselines.estimate import profile_query_indices
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


def rescore_on_shared_queries(
    directories: Sequence[str | os.PathLike],
    ablation: str | Ablation,
    environments: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Re-score an ablation's runs that several results directories all hold, each on the
    queries that all of them answered.

    Two grids at different sizes (say 300 and 1,500 queries per environment) answer different
    draws from one shipped query set, so their tables differ by the queries as well as by what
    the grids set out to vary. Scored on the shared queries alone, the same run in two
    directories differs only by what produced its member values.

    Args:
        directories: results directories on one query recipe.
        ablation: the registry key or :class:`Ablation` whose runs and rows to re-score.
        environments: only these environments (default: every one the directories share).

    Returns:
        Rows in the form of :func:`load_results` (one per run and scored subset, the
        ablation's confidence function; every confidence for the confidence ablation and every
        prefix for the ensemble-count ablation) with a ``directory`` column and ``n`` the shared
        queries; :func:`aggregate` of the rows of one directory gives its table on them.

    Raises:
        ValueError: directories on different recipes, or no run that all of them hold.
    """
    import pandas as pd

    from .answers import score_run
    from .grid import run_slug
    from .registry import ensemble_count_levels

    ablation = get_ablation(ablation)
    paths = [Path(d) for d in directories]
    recipes = {results_recipe(path) for path in paths}
    if len(recipes) != 1:
        raise ValueError(f"directories must share one query recipe, got {sorted(recipes)}")
    rows = {path: ablation_rows(load_results(path), ablation) for path in paths}
    shared_runs = set.intersection(*(set(frame["run_id"]) for frame in rows.values()))
    if environments is not None:
        shared_runs = {run for run in shared_runs if run.split("/", 1)[0] in set(environments)}
    if not shared_runs:
        raise ValueError(f"no run of the {ablation.name!r} ablation is held by every one of {list(map(str, paths))}")
    confidences = (
        tuple(level.label for level in ablation.levels) if ablation.factor == "confidence" else (ablation.confidence,)
    )
    keys = ["environment", "dataset", "seed", "configuration", "profile", "run_id"]
    out = []
    for run_id in sorted(shared_runs):
        first = rows[paths[0]].loc[rows[paths[0]]["run_id"] == run_id].iloc[0]
        slug = run_slug(first["environment"], first["dataset"], int(first["seed"]), first["configuration"])
        indices = {path: run_query_indices(path, slug) for path in paths}
        shared = indices[paths[0]]
        for path in paths[1:]:
            shared = np.intersect1d(shared, indices[path])
        for path in paths:
            values = load_run_values(path, slug)
            keep = np.searchsorted(indices[path], shared)
            subset = RunValues(
                values.values_a[keep], values.values_b[keep], values.target[keep], values.horizon[keep], info={}
            )
            counts = (
                [count for count, _ in ensemble_count_levels(values.ensemble_size)]
                if ablation.factor == "ensemble_count"
                else []
            )
            meta = rows[path].loc[rows[path]["run_id"] == run_id].iloc[0]
            for score in score_run(subset, confidences, counts):
                out.append({**{key: meta[key] for key in keys}, **score, "directory": str(path)})
    return pd.DataFrame(out)


# --------------------------------------------------------------------------------------------
# Aggregation
# --------------------------------------------------------------------------------------------
def ablation_rows(results: pd.DataFrame, ablation: str | Ablation, grid: GridSpec | None = None) -> pd.DataFrame:
    """The rows of ``results`` that an ablation's table is made of, with a ``level`` column:
    one confidence function, all queries (or one horizon), the full ensemble (or a prefix),
    and the configurations of its levels (the default one for selection factors).

    Args:
        results: the results DataFrame (:func:`load_results`).
        ablation: registry key or :class:`Ablation`.
        grid: restrict to the runs of this grid.
    """
    return _select(results, get_ablation(ablation), grid)


def _select(results: pd.DataFrame, ablation: Ablation, grid: GridSpec | None = None) -> pd.DataFrame:
    """Rows of ``results`` that belong to ``ablation``, with a ``level`` column added."""
    frame = results.drop_duplicates(subset=list(ROW_KEY))  # each run once, even in concatenated tables
    if grid is not None:
        wanted = {run.run_id for run in grid.runs()}
        frame = frame[frame["run_id"].isin(wanted)]
    factor = ablation.factor
    if factor != "horizon":
        frame = frame[frame["horizon"] == ALL_HORIZONS]
    else:
        frame = frame[frame["horizon"] != ALL_HORIZONS]
    if factor != "confidence":
        frame = frame[frame["confidence"] == ablation.confidence]
    else:
        frame = frame[frame["confidence"].isin([level.label for level in ablation.levels])]
    if factor != "ensemble_count":
        frame = frame[frame["ensemble_count"] == frame["ensemble_size"]]
    if factor != "dataset" and grid is None and len(frame):
        frame = frame[_paper_datasets_mask(frame)]
    if ablation.is_selection:
        frame = frame[frame["configuration"] == "default"]
        frame = frame.assign(level=frame[factor].astype(str))
    else:
        labels = {configuration_label(level.overrides): level.label for level in ablation.levels}
        frame = frame[frame["configuration"].isin(labels)]
        frame = frame.assign(level=frame["configuration"].map(labels))
        if grid is None and len(frame):
            frame = frame[_complete_environments_mask(frame) & _shared_datasets_mask(frame)]
    return frame


def _complete_environments_mask(frame: pd.DataFrame) -> np.ndarray:
    """Rows of the environments that have every level present in ``frame`` (configuration factors).

    A results directory also holds default-configuration runs of environments that a
    configuration ablation never ran (the dataset-type grid trains the default model on every
    environment); such an environment has one level, which compares with nothing, so it is left
    out. A frame with a single level everywhere keeps every environment.
    """
    environments = frame["environment"].to_numpy()
    levels = frame["level"].to_numpy()
    present = set(levels)
    complete = [env for env in np.unique(environments) if set(levels[environments == env]) == present]
    return np.isin(environments, complete)


def _shared_datasets_mask(frame: pd.DataFrame) -> np.ndarray:
    """Rows on the datasets that every level of their environment has (configuration factors).

    The default configuration also runs every dataset type for the dataset-type ablation, while
    the other levels of a configuration ablation train on the default dataset only; averaging
    the default level over five datasets and the other level over one would compare levels on
    different data. Each environment keeps the datasets that all its levels present in
    ``frame`` were run on (all of them when only one level is present).
    """
    environments = frame["environment"].to_numpy()
    datasets = frame["dataset"].to_numpy()
    levels = frame["level"].to_numpy()
    keep = np.zeros(len(frame), dtype=bool)
    for env in np.unique(environments):
        in_env = environments == env
        per_level = [set(datasets[in_env & (levels == lv)]) for lv in np.unique(levels[in_env])]
        keep |= in_env & np.isin(datasets, list(set.intersection(*per_level)))
    return keep


def _paper_datasets_mask(frame: pd.DataFrame) -> np.ndarray:
    """Rows on the datasets the paper's non-dataset tables used, where an environment has any.

    The paper averaged every other ablation over the ``1m`` maze data and all five locomotion
    datasets. Extra maze prefixes (1k, 10k, 100k) exist in a results table only because the
    dataset-type ablation ran them, with the default configuration alone; mixing them into
    the default level of another ablation would compare levels on different data. An
    environment without any of the paper's datasets keeps all its rows.
    """
    keep = np.zeros(len(frame), dtype=bool)
    environments = frame["environment"].to_numpy()
    datasets = frame["dataset"].to_numpy()
    for env in np.unique(environments):
        in_env = environments == env
        try:
            wanted = set(default_datasets(str(env), "paper"))
        except (KeyError, ValueError):
            wanted = set()
        on_paper_data = in_env & np.isin(datasets, list(wanted))
        keep |= on_paper_data if on_paper_data.any() else in_env
    return keep


def level_order(ablation: Ablation, levels: Iterable[str]) -> list[str]:
    """``levels`` (distinct) in the ablation's order: its registry order, numeric for horizons
    and ensemble counts, the paper's order of dataset types."""
    levels = list(dict.fromkeys(levels))
    if ablation.levels:
        order = [level.label for level in ablation.levels]
        return [lv for lv in order if lv in levels] + [lv for lv in levels if lv not in order]
    if ablation.factor in ("horizon", "ensemble_count"):
        return sorted(levels, key=lambda v: int(v))
    if ablation.factor == "dataset":
        return dataset_order(levels)
    return levels


#: The paper's order of dataset names (Tables 1 and 2), locomotion types then maze sizes.
_DATASET_ORDER = ("random", "medium-replay", "medium", "medium-expert", "expert", "1k", "10k", "100k", "1m")


def dataset_order(datasets: Iterable[str]) -> list[str]:
    """Distinct dataset names in the paper's order (unknown names last, alphabetically)."""
    names = dict.fromkeys(str(d) for d in datasets)
    known = list(_DATASET_ORDER)
    return sorted(names, key=lambda v: (known.index(v) if v in known else len(known), v))


def aggregate(
    results: pd.DataFrame,
    ablation: str | Ablation,
    metrics: Sequence[str] = METRICS,
    level: float = 0.95,
    grid: GridSpec | None = None,
) -> pd.DataFrame:
    """Mean +- 95% t-interval half-width of each metric per (environment, level).

    The samples of a cell are the runs of that environment and level: seeds x datasets (seeds
    only for the dataset-type ablation, whose level is the dataset). Without a ``grid``, the
    other ablations use the datasets of the paper's tables where an environment has them
    (``1m`` for the mazes, the five locomotion datasets), so the extra maze prefixes of the
    dataset-type ablation do not enter another ablation's default level. The interval is the
    two-sided Student-t interval of the mean, ``t_{(1+level)/2, n-1} s / sqrt(n)``; with one
    run it is ``nan``. A tie-fair metric that was not computed for some run of a cell (``nan``
    in :func:`load_results`) gives that cell a ``nan`` mean and interval, never a mean over
    the other runs.

    Args:
        results: the results DataFrame (:func:`load_results`).
        ablation: registry key or :class:`Ablation`.
        metrics: metric columns to aggregate, of :data:`opcc_edu.names.TABLE_METRICS` (the
            paper's four by default; the tie-fair ones too).
        level: confidence level of the interval.
        grid: restrict to the runs of this grid (``None``: every matching row).

    Returns:
        A tidy DataFrame with columns environment, factor, level, metric, mean, ci, n_samples,
        datasets (the datasets of the cell's runs, comma-separated in the paper's order) and
        profile (of its runs), in the ablation's level order.
    """
    import pandas as pd

    from ...metrics import mean_confidence_interval

    ablation = get_ablation(ablation)
    for metric in metrics:
        check_choice(metric, TABLE_METRICS, "metric")
    frame = _select(results, ablation, grid)
    records = []
    for env in dict.fromkeys(frame["environment"]):
        env_rows = frame[frame["environment"] == env]
        for lv in level_order(ablation, env_rows["level"]):
            cell = env_rows[env_rows["level"] == lv]
            for metric in metrics:
                samples = cell[metric].to_numpy(dtype=np.float64)
                if len(samples) and np.all(np.isfinite(samples)):
                    mean, half = mean_confidence_interval(samples, level=level)
                else:  # a tie-fair metric not computed for some run: no mean over the others
                    mean, half = math.nan, math.nan
                records.append(
                    {
                        "environment": env,
                        "factor": ablation.factor,
                        "level": lv,
                        "metric": metric,
                        "mean": mean,
                        "ci": half,
                        "n_samples": int(len(cell)),
                        "datasets": ", ".join(dataset_order(cell["dataset"])),
                        "profile": ", ".join(dict.fromkeys(cell["profile"].astype(str))),
                    }
                )
    columns = ["environment", "factor", "level", "metric", "mean", "ci", "n_samples", "datasets", "profile"]
    return pd.DataFrame(records, columns=columns)


def _runs_of(
    results: pd.DataFrame, ablation: Ablation, environment: str
) -> dict[str, list[tuple[str, str | None, int]]]:
    """level -> [(values file slug, horizon filter, members)] for :func:`level_risk_coverage`."""
    frame = _select(results, ablation)
    frame = frame[frame["environment"] == environment]
    out: dict[str, list[tuple[str, str | None, int]]] = {}
    for lv in level_order(ablation, frame["level"]):
        cell = frame[frame["level"] == lv].drop_duplicates("run_id")
        entries = []
        for _, row in cell.iterrows():
            run = RunSpec(
                row["environment"], row["dataset"], int(row["seed"]), parse_configuration(row["configuration"])
            )
            horizon = row["horizon"] if ablation.factor == "horizon" else None
            entries.append((run.slug, horizon, int(row["ensemble_count"])))
        out[lv] = entries
    return out


def level_risk_coverage(
    directory: str | os.PathLike,
    ablation: str | Ablation,
    environment: str,
    grid_points: int = 101,
    results: pd.DataFrame | None = None,
) -> dict[str, dict[str, np.ndarray]]:
    """Risk-coverage curves per level, averaged over horizons and then over runs.

    For every run of a level, the exact RCC of each horizon's queries is interpolated
    (piecewise linearly, as the curve is defined) on a common coverage grid and the horizon
    curves are averaged; the horizon ablation uses its own horizon only. The run curves are
    then averaged, with a 95% t-interval per grid point.

    Args:
        directory: a results directory with saved ``values/``.
        ablation: registry key or :class:`Ablation`.
        environment: environment name.
        grid_points: coverage grid size on [0, 1].
        results: the results DataFrame (read from ``directory`` when ``None``).

    Returns:
        ``{level: {"coverage": (G,), "risk": (G,), "ci": (G,), "n_runs": ()}}``.
    """
    from ...confidence import compute_confidence
    from ...metrics import risk_coverage_curve

    ablation = get_ablation(ablation)
    results = load_results(directory) if results is None else results
    coverage = np.linspace(0.0, 1.0, int(grid_points))
    out: dict[str, dict[str, np.ndarray]] = {}
    cache: dict[str, RunValues] = {}
    for lv, entries in _runs_of(results, ablation, environment).items():
        curves = []
        for slug, horizon, members in entries:
            if slug not in cache:
                cache[slug] = load_run_values(directory, slug)
            values = cache[slug]
            name = lv if ablation.factor == "confidence" else ablation.confidence
            prediction, confidence = compute_confidence(
                name, values.values_a[:, :members], values.values_b[:, :members]
            )
            horizons = [int(horizon)] if horizon is not None else np.unique(values.horizon).tolist()
            per_h = []
            for h in horizons:
                mask = values.horizon == h
                cov, risk, _ = risk_coverage_curve(prediction[mask], values.target[mask], confidence[mask])
                per_h.append(np.interp(coverage, cov, risk))
            curves.append(np.mean(per_h, axis=0))
        stack = np.asarray(curves)
        mean = stack.mean(axis=0)
        if len(curves) > 1:
            from scipy import stats

            half = stats.t.ppf(0.975, len(curves) - 1) * stack.std(axis=0, ddof=1) / math.sqrt(len(curves))
        else:
            half = np.full_like(mean, np.nan)
        out[lv] = {"coverage": coverage, "risk": mean, "ci": half, "n_runs": np.asarray(len(curves))}
    return out


def level_differences(table: pd.DataFrame, ablation: str | Ablation, reference: str | None = None) -> pd.DataFrame:
    """Each level against a reference level, per environment and metric.

    The paper calls a difference significant when the two 95% intervals do not intersect
    (Section 7); this applies the same reading to any tidy table with columns environment,
    level, metric, mean and ci -- :func:`aggregate`'s output or :func:`paper_results`.

    Args:
        table: tidy table of means and half-widths.
        ablation: registry key or :class:`Ablation` (for the level order).
        reference: the level compared against (default: the ablation's first level present).

    Returns:
        DataFrame with environment, metric, reference, level, difference (level - reference),
        separated (intervals disjoint; touching intervals and missing intervals count as not
        separated).
    """
    import pandas as pd

    ablation = get_ablation(ablation)
    records = []
    for env in dict.fromkeys(table["environment"]):
        part = table[table["environment"] == env]
        order = level_order(ablation, part["level"].astype(str))
        ref = reference if reference is not None else (order[0] if order else None)
        if ref is None or ref not in order:
            continue
        for metric in dict.fromkeys(part["metric"]):
            rows = (
                part[part["metric"] == metric]
                .assign(level=lambda f: f["level"].astype(str))
                .drop_duplicates("level")
                .set_index("level")
            )
            if ref not in rows.index:
                continue
            base = rows.loc[ref]
            for lv in order:
                if lv == ref or lv not in rows.index:
                    continue
                other = rows.loc[lv]
                # touching intervals (equal up to rounding of the printed tables) intersect
                separated = bool(
                    np.isfinite(base["ci"])
                    and np.isfinite(other["ci"])
                    and abs(other["mean"] - base["mean"]) > base["ci"] + other["ci"] + 1e-9
                )
                records.append(
                    {
                        "environment": env,
                        "metric": metric,
                        "reference": ref,
                        "level": lv,
                        "difference": float(other["mean"] - base["mean"]),
                        "separated": separated,
                    }
                )
    return pd.DataFrame(records, columns=["environment", "metric", "reference", "level", "difference", "separated"])
