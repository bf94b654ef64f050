"""The paper's ablation numbers and the comparison of ours with them.

:func:`paper_results` loads ``opcc_edu/assets/paper_results.csv``, one row per cell of the
paper's ablation tables. Its columns: ``table``, ``ablation``, ``environment`` (this package's
names), ``dataset`` (``"all"`` = averaged over the five locomotion datasets), ``factor``,
``level`` (this package's label), ``paper_level`` (the label printed in the paper),
``metric``, ``mean``, ``ci`` (half-width of the 95% interval), ``ci_is_bound`` (true where the
paper printed ``(<0.001)``: ``ci`` then holds the bound 0.001) and ``source``.
:func:`compare_with_paper` puts them next to an :func:`~opcc_edu.experiments.analysis.aggregate`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .registry import Ablation, ensemble_count_levels, get_ablation

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["paper_results", "compare_with_paper"]

_ASSET_CSV = Path(__file__).resolve().parents[1] / "assets" / "paper_results.csv"


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


def compare_with_paper(ours: pd.DataFrame, ablation: str | Ablation, ensemble_size: int | None = None) -> pd.DataFrame:
    """Our aggregate next to the paper's numbers, one row per (environment, level, metric).

    Levels are matched by label; for the ensemble-count ablation our prefix of
    ``round(M p / 100)`` members is matched with the paper's ``p`` members
    (:func:`ensemble_count_levels`, M = ``ensemble_size``, read from the largest level when
    ``None``). Environments or levels missing on one side get ``nan``.

    Returns:
        DataFrame with environment, level, paper_level, metric, ours_mean, ours_ci,
        n_samples, paper_mean, paper_ci, paper_ci_is_bound (the paper printed ``(<0.001)``),
        paper_table, overlap (whether the two intervals intersect; ``nan`` when a side is
        missing or has no interval).
    """
    import pandas as pd

    ablation = get_ablation(ablation)
    paper = paper_results(ablation)
    ours = ours.copy()
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
    paper = paper.rename(
        columns={
            "mean": "paper_mean",
            "ci": "paper_ci",
            "ci_is_bound": "paper_ci_is_bound",
            "table": "paper_table",
            "level": "paper_level_label",
        }
    )
    paper = paper[
        ["environment", "paper_level_label", "metric", "paper_mean", "paper_ci", "paper_ci_is_bound", "paper_table"]
    ]
    merged = ours.rename(columns={"mean": "ours_mean", "ci": "ours_ci"}).merge(
        paper,
        how="left",
        left_on=["environment", "paper_level", "metric"],
        right_on=["environment", "paper_level_label", "metric"],
    )
    merged = merged.drop(columns=["paper_level_label"])
    low_a, high_a = merged["ours_mean"] - merged["ours_ci"], merged["ours_mean"] + merged["ours_ci"]
    low_b, high_b = merged["paper_mean"] - merged["paper_ci"], merged["paper_mean"] + merged["paper_ci"]
    overlap = (low_a <= high_b) & (low_b <= high_a)
    defined = merged[["ours_ci", "paper_mean"]].notna().all(axis=1)
    merged["overlap"] = overlap.where(defined, other=np.nan)
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
    ]
    return merged[columns]
