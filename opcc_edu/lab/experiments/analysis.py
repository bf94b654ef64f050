"""Aggregating results: mean +- interval per level, level risk-coverage curves, differences.

Reading a directory is :mod:`opcc_edu.lab.experiments.reading`; here the committed grids are
found and compared (:func:`committed_results`, :func:`rescore_on_shared_queries`).
:func:`aggregate` reduces the rows of one ablation to mean +- half-width of the two-sided 95%
Student-t interval of the mean over the n = seeds x datasets runs of each (environment, level):
``half = t_{0.975, n-1} * s / sqrt(n)`` with ``s`` the sample standard deviation
(:func:`opcc_edu.metrics.mean_confidence_interval`); with one run the half-width is ``nan``.
:func:`level_risk_coverage` averages risk-coverage curves over the horizons of each run, then
over runs, on a common coverage grid. :func:`level_differences` applies the paper's reading of
significance (disjoint intervals) to any such table.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ...confidence import compute_confidence
from ...metrics import mean_confidence_interval, risk_coverage_curve
from ...names import ALL_HORIZONS, METRICS, QUERY_RECIPES, TABLE_METRICS
from ...scoring import MemberValues
from ...utils import check_choice
from .grid import GridSpec, RunSpec, default_datasets
from .reading import find_results_root, has_results, load_results, load_run_values, results_recipe, run_query_indices
from .records import ROW_KEY
from .registry import Ablation, configuration_label, get_ablation, parse_configuration

if TYPE_CHECKING:
    import pandas as pd


__all__ = [
    "committed_results",
    "committed_profiles",
    "rescore_on_shared_queries",
    "dataset_order",
    "ablation_rows",
    "level_order",
    "aggregate",
    "level_risk_coverage",
    "level_differences",
]


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
            subset = MemberValues(
                values.values_a[keep], values.values_b[keep], values.target[keep], values.horizon[keep]
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
    ablation = get_ablation(ablation)
    results = load_results(directory) if results is None else results
    coverage = np.linspace(0.0, 1.0, int(grid_points))
    out: dict[str, dict[str, np.ndarray]] = {}
    cache: dict[str, MemberValues] = {}
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
