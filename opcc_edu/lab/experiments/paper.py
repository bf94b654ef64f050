"""The paper's ablation numbers and the comparison of ours with them.

:func:`paper_results` loads ``opcc_edu/assets/paper_results.csv``, one row per cell of the
paper's ablation tables. Its columns: ``table``, ``ablation``, ``environment`` (this package's
names), ``dataset`` (``"all"`` = averaged over the five locomotion datasets), ``factor``,
``level`` (this package's label), ``paper_level`` (the label printed in the paper),
``metric``, ``mean``, ``ci`` (half-width of the 95% interval), ``ci_is_bound`` (true where the
paper printed ``(<0.001)``: ``ci`` then holds the bound 0.001) and ``source``.
:func:`compare_with_paper` puts them next to an :func:`~opcc_edu.lab.experiments.analysis.aggregate`,
like with like: :func:`paper_counterpart` decides which cell of the paper, if any, a cell of
ours may be compared with.

The rule. The paper's ablation tables average each locomotion cell over its five datasets
(``dataset`` ``"all"``) and use the ``1m`` data for the mazes; Table 1 (locomotion) and Table 2
(mazes, ``1m`` only) report the default model per dataset. A locomotion cell of ours is
compared with the five-dataset mean only when all five dataset types are behind it; otherwise,
when one dataset is behind it and the cell's level is the paper's default model (EV, 100
members -- our full ensemble --, every horizon, the default configuration), with Table 1's cell
for that dataset; otherwise it is not comparable. A maze cell is compared when it is on the
``1m`` recipe (whatever the number of transitions the profile keeps of it, which the
comparison names). Cells on another recipe's query sets than the paper's are not comparable.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ...config import PROFILES
from .registry import Ablation, configuration_label, ensemble_count_levels, get_ablation

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "paper_results",
    "compare_with_paper",
    "paper_counterpart",
    "PaperCounterpart",
    "is_default_level",
    "dataset_transitions",
    "describe_data",
]

_ASSET_CSV = Path(__file__).resolve().parents[2] / "assets" / "paper_results.csv"


def paper_results(ablation: str | Ablation | None = None, path: str | os.PathLike | None = None) -> pd.DataFrame:
    """The paper's ablation tables as a tidy DataFrame (columns: see the module docstring).

    Args:
        ablation: keep one ablation's rows (``None``: all).
        path: CSV path (default: the shipped ``opcc_edu/assets/paper_results.csv``).
    """
    import pandas as pd

    frame = pd.read_csv(path or _ASSET_CSV, dtype={"level": str, "paper_level": str, "dataset": str})
    if ablation is not None:
        frame = frame[frame["ablation"] == get_ablation(ablation).name].reset_index(drop=True)
    return frame


#: The five locomotion dataset types that the paper's locomotion tables average over.
LOCOMOTION_DATASETS: tuple[str, ...] = ("random", "medium-replay", "medium", "medium-expert", "expert")

#: The maze datasets (sizes of one navigation stream); the paper's tables use ``1m``.
MAZE_DATASETS: tuple[str, ...] = ("1k", "10k", "100k", "1m")


@dataclasses.dataclass(frozen=True)
class PaperCounterpart:
    """The paper's cell that one cell of ours is compared with, or why there is none.

    Attributes:
        comparable: whether the cell has a like-for-like counterpart in the paper.
        ablation: the ablation whose paper table holds it (``"dataset-type"`` for Tables 1
            and 2), ``None`` when not comparable.
        dataset: the paper's ``dataset`` column of that cell (``"all"``: the five-dataset mean).
        level: the paper's level label of that cell.
        note: in words: the paper's cell (``"mean of 5 datasets"``, ``"1m"``, ``"medium
            (default model)"`` for a Table 1 cell) or the reason there is none.
    """

    comparable: bool
    ablation: str | None
    dataset: str | None
    level: str | None
    note: str


def is_default_level(ablation: str | Ablation, level: str, paper_level: str | None = None) -> bool:
    """Whether ``level`` of ``ablation`` is the paper's default model (the model of Tables 1
    and 2: EV, the full ensemble, every horizon, the default configuration).

    Args:
        ablation: registry key or :class:`Ablation`.
        level: our level label.
        paper_level: the paper's label of the level (the ensemble-count ablation labels our
            prefixes with the paper's 10..100 members; default: ``level``).
    """
    ablation = get_ablation(ablation)
    paper_level = level if paper_level is None else paper_level
    if ablation.factor == "dataset":
        return True
    if ablation.factor == "horizon":
        return False
    if ablation.factor == "confidence":
        return level == "ev"
    if ablation.factor == "ensemble_count":
        return str(paper_level) == "100"
    labels = {lv.label: configuration_label(lv.overrides) for lv in ablation.levels}
    return labels.get(level) == "default"


def paper_counterpart(
    ablation: str | Ablation,
    level: str,
    datasets: Sequence[str],
    paper_level: str | None = None,
    recipe: str | None = None,
) -> PaperCounterpart:
    """The paper's cell that a cell of ours is compared with, by the rule of this module.

    Whether the paper's table holds that cell is not checked here (:func:`compare_with_paper`
    does: a cell the paper did not report is not comparable either).

    Args:
        ablation: registry key or :class:`Ablation`.
        level: our level label.
        datasets: the datasets of the cell's runs (:func:`~opcc_edu.lab.experiments.aggregate`'s
            ``datasets`` column, split at commas).
        paper_level: the paper's label of the level (default: ``level``).
        recipe: the query sets' recipe of the runs (``None``: not known, not judged).

    Returns:
        A :class:`PaperCounterpart`.
    """
    ablation = get_ablation(ablation)
    paper_level = level if paper_level is None else str(paper_level)
    found = [d for d in dict.fromkeys(str(d).strip() for d in datasets) if d]
    if recipe is not None and recipe != "paper":
        return PaperCounterpart(False, None, None, None, f"{recipe} query sets, not the paper's")
    if not found:
        return PaperCounterpart(False, None, None, None, "datasets unknown")
    locomotion = all(d in LOCOMOTION_DATASETS for d in found)
    maze = all(d in MAZE_DATASETS for d in found)
    if ablation.factor == "dataset":
        if len(found) == 1 and (locomotion or found == ["1m"]):
            return PaperCounterpart(True, "dataset-type", found[0], found[0], found[0])
        return PaperCounterpart(False, None, None, None, "no paper cell for this dataset (Table 2 has 1m only)")
    if maze:
        if found == ["1m"]:
            return PaperCounterpart(True, ablation.name, "1m", paper_level, "1m")
        return PaperCounterpart(False, None, None, None, "the paper's maze tables use 1m only")
    if not locomotion:
        return PaperCounterpart(False, None, None, None, "datasets of two kinds")
    if set(found) == set(LOCOMOTION_DATASETS):
        return PaperCounterpart(True, ablation.name, "all", paper_level, "mean of 5 datasets")
    if len(found) == 1 and is_default_level(ablation, level, paper_level):
        return PaperCounterpart(True, "dataset-type", found[0], found[0], f"{found[0]} (default model)")
    why = "the paper's mean is over 5" if len(found) > 1 else "Table 1 has the default model only"
    return PaperCounterpart(False, None, None, None, f"{len(found)} of 5 datasets; {why}")


def dataset_transitions(
    environment: str, dataset: str, profile: str | None, dataset_size: int | None = None
) -> tuple[int, int] | None:
    """Transitions of a dataset in a profile, and of the full recipe: ``(used, full)``.

    A profile's ``dataset_size`` caps every recipe (:func:`opcc_edu.datasets.recipes.resolve_size`):
    the ``1m`` maze data of the ``tiny`` profile is its first 20,000 transitions. A results
    directory that records the size its runs read (``meta.json``'s ``sizes``,
    :func:`~opcc_edu.lab.experiments.results_sizes`) passes it as ``dataset_size``, which then
    replaces the profile's. ``None`` when the environment, dataset or profile is not known here.
    """
    from ...datasets.recipes import get_recipe, max_size

    try:
        full = int(max_size(get_recipe(environment, dataset)))
        size = int(PROFILES[profile].dataset_size) if dataset_size is None else int(dataset_size)
        return min(size, full), full
    except (KeyError, ValueError, FileNotFoundError, OSError):
        return None


def describe_data(
    environment: str,
    datasets: Sequence[str],
    profile: str | None,
    recipe: str | None = None,
    dataset_size: int | None = None,
) -> str:
    """The data behind a cell in words: profile, query recipe, datasets and their transitions,
    e.g. ``"tiny, paper queries; 1m: 20,000 of 1,000,000 transitions"`` (``dataset_size``: the
    size the runs read, when it is recorded; see :func:`dataset_transitions`)."""
    names = [d for d in datasets if d]
    sizes = [dataset_transitions(environment, d, profile, dataset_size) if profile else None for d in names]
    if len(names) == 1 and sizes[0] is not None:
        used, full = sizes[0]
        data = f"{names[0]}: {used:,} transitions" + (f" of {full:,}" if used < full else "")
    elif names and all(s is not None for s in sizes) and len({s[0] for s in sizes}) == 1:
        data = f"{len(names)} datasets ({', '.join(names)}): {sizes[0][0]:,} transitions each"
    elif names and all(s is not None for s in sizes):  # a dataset smaller than the cut: name each size
        data = (
            f"{len(names)} datasets: "
            + ", ".join(f"{n} {s[0]:,}" for n, s in zip(names, sizes, strict=True))
            + " transitions"
        )
    else:
        data = ", ".join(names) or "datasets unknown"
    head = ", ".join(p for p in (profile, f"{recipe} queries" if recipe else None) if p)
    return f"{head}; {data}" if head else data


def compare_with_paper(
    ours: pd.DataFrame,
    ablation: str | Ablation,
    ensemble_size: int | None = None,
    recipe: str | None = None,
    dataset_size: int | None = None,
) -> pd.DataFrame:
    """Our aggregate next to the paper's numbers, one row per (environment, level, metric).

    Levels are matched by label; for the ensemble-count ablation our prefix of
    ``round(M p / 100)`` members is matched with the paper's ``p`` members
    (:func:`ensemble_count_levels`, M = ``ensemble_size``, read from the largest level when
    ``None``). When ``ours`` names the datasets of each cell (``aggregate``'s ``datasets``
    column), the paper's cell is chosen like with like (:func:`paper_counterpart`): the
    five-dataset mean, a Table 1 cell, or none (``nan``). Without that column every cell is
    matched with the ablation's own table, and ``comparable`` is ``None``. Environments or
    levels the paper did not report get ``nan``.

    Args:
        ours: :func:`~opcc_edu.lab.experiments.aggregate` output (or any tidy table with
            environment, level, metric, mean, ci, n_samples).
        ablation: registry key or :class:`Ablation`.
        ensemble_size: see above.
        recipe: the query sets' recipe of the runs (:func:`~opcc_edu.lab.experiments.results_recipe`);
            cells on another recipe than ``"paper"`` are not comparable. ``None``: not judged.

    Returns:
        DataFrame with environment, level, paper_level, metric, ours_mean, ours_ci,
        n_samples, paper_mean, paper_ci, paper_ci_is_bound (the paper printed ``(<0.001)``),
        paper_table, overlap (whether the two intervals intersect; ``nan`` when a side is
        missing or has no interval), and the columns of the comparison: datasets and profile
        (from ``ours``, empty when it has none), data (:func:`describe_data`), comparable
        (bool, ``None`` when the datasets are not known) and paper_cell (the paper's table
        and cell, or why there is none).
    """
    import pandas as pd

    ablation = get_ablation(ablation)
    ours = ours.copy()
    for column in ("datasets", "profile"):
        if column not in ours.columns:
            ours[column] = ""
    judged = bool((ours["datasets"].astype(str) != "").any())
    ours["paper_level"] = ours["level"]
    if ablation.factor == "ensemble_count" and len(ours):
        m = ensemble_size if ensemble_size is not None else int(max(int(v) for v in ours["level"]))
        mapping = ensemble_count_levels(m)
        expanded = []
        for count, p in mapping:
            part = ours[ours["level"] == str(count)].copy()
            part["paper_level"] = str(p)
            expanded.append(part)
        ours = pd.concat(expanded, ignore_index=True)
    paper = paper_results()
    lookup = {
        (r.ablation, r.environment, str(r.dataset), str(r.level), r.metric): r for r in paper.itertuples(index=False)
    }
    own = {
        (r.environment, str(r.level), r.metric): r
        for r in paper[paper["ablation"] == ablation.name].itertuples(index=False)
    }
    records = []
    for row in ours.itertuples(index=False):
        datasets = [d.strip() for d in str(row.datasets).split(",") if d.strip()]
        profile = str(row.profile).split(",")[0].strip() or None
        if judged:
            counterpart = paper_counterpart(ablation, str(row.level), datasets, str(row.paper_level), recipe)
            cell = (
                lookup.get(
                    (
                        counterpart.ablation,
                        row.environment,
                        counterpart.dataset,
                        counterpart.level,
                        row.metric,
                    )
                )
                if counterpart.comparable
                else None
            )
            comparable = cell is not None
            if comparable:
                paper_cell = f"Table {int(cell.table)}: {counterpart.note}"
            elif counterpart.comparable:
                paper_cell = "not reported by the paper"
            else:
                paper_cell = f"not comparable: {counterpart.note}"
        else:
            cell = own.get((row.environment, str(row.paper_level), row.metric))
            comparable, paper_cell = None, "" if cell is None else f"Table {int(cell.table)}"
        records.append(
            {
                "environment": row.environment,
                "level": row.level,
                "paper_level": row.paper_level,
                "metric": row.metric,
                "ours_mean": row.mean,
                "ours_ci": row.ci,
                "n_samples": row.n_samples,
                "paper_mean": np.nan if cell is None else float(cell.mean),
                "paper_ci": np.nan if cell is None else float(cell.ci),
                "paper_ci_is_bound": np.nan if cell is None else bool(cell.ci_is_bound),
                "paper_table": np.nan if cell is None else int(cell.table),
                "datasets": str(row.datasets),
                "profile": str(row.profile),
                "data": describe_data(row.environment, datasets, profile, recipe, dataset_size) if judged else "",
                "comparable": comparable,
                "paper_cell": paper_cell,
            }
        )
    columns = [
        "environment",
        "level",
        "paper_level",
        "metric",
        "ours_mean",
        "ours_ci",
        "n_samples",
        "paper_mean",
        "paper_ci",
        "paper_ci_is_bound",
        "paper_table",
        "overlap",
        "datasets",
        "profile",
        "data",
        "comparable",
        "paper_cell",
    ]
    merged = pd.DataFrame(records, columns=[c for c in columns if c != "overlap"])
    low_a, high_a = merged["ours_mean"] - merged["ours_ci"], merged["ours_mean"] + merged["ours_ci"]
    low_b, high_b = merged["paper_mean"] - merged["paper_ci"], merged["paper_mean"] + merged["paper_ci"]
    overlap = (low_a <= high_b) & (low_b <= high_a)
    defined = merged[["ours_ci", "paper_mean"]].notna().all(axis=1)
    merged["overlap"] = overlap.where(defined, other=np.nan)
    merged["comparable"] = merged["comparable"].astype(object)
    return merged[columns]
