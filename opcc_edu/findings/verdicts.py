"""Verdicts: does a table of ours reproduce the paper's finding? One function per kind of finding.

Verdicts return their lines (a list of strings) so that they can be tested and printed alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import experiments as ex
from ..names import METRICS, TABLE_METRICS
from ..utils import check_choice


def level_titles(ablation: str | ex.Ablation) -> dict[str, str]:
    """Display name of every level of an ablation, by level label."""
    return {level.label: level.display for level in ex.get_ablation(ablation).levels}


@dataclass(frozen=True)
class Expectation:
    """What the paper found for one metric: ``level``'s mean is ``direction`` than the reference's.

    Attributes:
        metric: one of :data:`opcc_edu.names.METRICS` (the paper's), or of the tie-fair metrics
            (:data:`opcc_edu.names.TABLE_METRICS` holds both) for a table that aggregates them.
        direction: ``"lower"`` or ``"higher"``.
        holds: the word printed when the finding holds (default: ``direction``).
        fails: the word printed when it does not (default: ``"not " + direction``).
        digits: decimals of the printed means.
    """

    metric: str
    direction: str
    holds: str | None = None
    fails: str | None = None
    digits: int = 3

    def __post_init__(self) -> None:
        check_choice(self.metric, TABLE_METRICS, "metric")
        check_choice(self.direction, ("lower", "higher"), "direction")

    def judge(self, value: float, reference: float) -> str:
        """The word for ``value`` against ``reference``."""
        held = value < reference if self.direction == "lower" else value > reference
        return (self.holds or self.direction) if held else (self.fails or f"not {self.direction}")


#: Short labels of the tie-fair metrics in verdict lines (the paper's print upper-case).
_TIE_FAIR_LABELS = {
    "expected_aurcc": "E[AURCC]",
    "expected_rpp": "E[RPP]",
    "selective_gain": "gain",
    "augrc": "AUGRC",
    "auroc": "AUROC",
}


def _metric_label(metric: str) -> str:
    return metric.upper() if metric in METRICS else _TIE_FAIR_LABELS.get(metric, metric)


def trend_verdict(table: pd.DataFrame, metric: str = "aurcc", level_prefix: str = "") -> list[str]:
    """Does ``metric`` grow from the smallest to the largest (numeric) level, per environment?

    "separated" means the two 95% intervals are disjoint.

    Args:
        table: tidy table (environment, level, metric, mean, ci), e.g. an aggregate.
        metric: the metric followed, of :data:`opcc_edu.names.TABLE_METRICS` (the table must
            hold it: a tie-fair one needs ``aggregate(..., metrics=TABLE_METRICS)``).
        level_prefix: printed before each level (``"h="`` for horizons).

    Returns:
        One line per environment.
    """
    check_choice(metric, TABLE_METRICS, "metric")
    lines = []
    for env, part in table[table["metric"] == metric].groupby("environment", sort=False):
        part = part.set_index("level")
        first, last = min(part.index, key=int), max(part.index, key=int)
        a, b = part.loc[first], part.loc[last]
        separated = abs(b["mean"] - a["mean"]) > a["ci"] + b["ci"]
        trend = "grows" if b["mean"] > a["mean"] else "does not grow"
        status = "separated" if separated else "intervals overlap"
        lines.append(
            f"{env}: {_metric_label(metric)} {level_prefix}{first} {a['mean']:.3f} -> "
            f"{level_prefix}{last} {b['mean']:.3f}: {trend} ({status})"
        )
    return lines


def contrast_verdict(table: pd.DataFrame, level: str, reference: str, expectations: Sequence[Expectation]) -> list[str]:
    """One level against a reference level, one judged metric after another, per environment.

    Example line: ``"hopper: AURCC PCI 0.120 vs EV 0.150 (lower); CR_K PCI 0.20 vs EV 0.90 (lower)"``.

    Args:
        table: tidy table (environment, level, metric, mean, ...).
        level: the level the paper's finding is about (printed upper-case).
        reference: the level it is compared with.
        expectations: what the paper found, one :class:`Expectation` per metric.

    Returns:
        One line per environment.
    """
    wide = table.pivot_table(index=["environment", "metric"], columns="level", values="mean")
    lines = []
    for env in dict.fromkeys(table["environment"]):
        parts = []
        for e in expectations:
            row = wide.loc[(env, e.metric)]
            ours, theirs = row[level], row[reference]
            parts.append(
                f"{_metric_label(e.metric)} {level.upper()} {ours:.{e.digits}f} vs {reference.upper()} "
                f"{theirs:.{e.digits}f} ({e.judge(ours, theirs)})"
            )
        lines.append(f"{env}: " + "; ".join(parts))
    return lines


def ensemble_size_verdict(table: pd.DataFrame) -> list[str]:
    """From the smallest to the full ensemble: the change of AURCC, and whether CR_K grows.

    Returns:
        One line per environment.
    """
    lines = []
    for env, part in table.groupby("environment", sort=False):
        small, full = min(part["level"], key=int), max(part["level"], key=int)
        cell = part.set_index(["level", "metric"])["mean"]
        a, b = cell[(small, "aurcc")], cell[(full, "aurcc")]
        c, d = cell[(small, "cr_k")], cell[(full, "cr_k")]
        lines.append(
            f"{env}: {small} -> {full} members: AURCC {a:.3f} -> {b:.3f} (change {b - a:+.3f}); "
            f"CR_K {c:.2f} -> {d:.2f} ({'grows' if d > c else 'does not grow'})"
        )
    return lines


def dataset_spread_verdict(table: pd.DataFrame, metric: str = "aurcc") -> list[str]:
    """Do environments differ more than the datasets within one environment?

    Compares the largest spread (max - min) of ``metric`` across the levels of one environment
    with the spread of the environments' means.

    Returns:
        Three lines: the largest spread within, the spread across, the verdict.
    """
    check_choice(metric, TABLE_METRICS, "metric")
    part = table[table["metric"] == metric]
    within = part.groupby("environment")["mean"].agg(lambda m: m.max() - m.min())
    means = part.groupby("environment")["mean"].mean()
    across = means.max() - means.min()
    name = _metric_label(metric)
    return [
        f"largest {name} spread across datasets within one environment: {within.max():.3f} ({within.idxmax()})",
        f"spread of the environments' mean {name}: {across:.3f}",
        "environments matter more than dataset types: " + ("reproduced" if within.max() < across else "not reproduced"),
    ]


def level_difference_verdict(table: pd.DataFrame, ablation: str | ex.Ablation, metric: str = "aurcc") -> list[str]:
    """``metric`` of every level against the reference level, per environment.

    Uses :func:`opcc_edu.experiments.level_differences` (reference: the ablation's first level).

    Returns:
        One line per (environment, level).
    """
    check_choice(metric, TABLE_METRICS, "metric")
    titles = level_titles(ablation)
    d = ex.level_differences(table, ablation)
    lines = []
    for _, row in d[d["metric"] == metric].iterrows():
        change = "lower" if row["difference"] < 0 else "higher"
        status = "separated" if row["separated"] else "intervals overlap"
        lines.append(
            f"{row['environment']}: {_metric_label(metric)} {change} with {titles.get(row['level'], row['level'])} "
            f"than with {titles.get(row['reference'], row['reference'])} by {abs(row['difference']):.3f} ({status})"
        )
    return lines


# --------------------------------------------------------------------------------------------
# Every level difference, ours beside the paper's
# --------------------------------------------------------------------------------------------
def level_findings(table: pd.DataFrame, ablation: str | ex.Ablation) -> pd.DataFrame:
    """Each level against a reference level shared with the paper, per environment and metric.

    The reference is the first level of ours that the paper reports too (else our first level).
    For the ensemble-count ablation our prefix sizes stand for the paper's 10..100 members and
    are compared on the paper's labels (:func:`opcc_edu.experiments.ensemble_count_levels`).

    Returns:
        :func:`opcc_edu.experiments.level_differences` of ours and of the paper's table side by
        side (suffixes ``_ours`` and ``_paper``) and ``same_direction`` (``None`` where the paper
        has no counterpart).
    """
    ablation = ex.get_ablation(ablation)
    paper = ex.paper_results(ablation)
    if ablation.factor == "ensemble_count":
        rename: dict[str, str] = {}
        for count, p in ex.ensemble_count_levels(int(max(int(v) for v in table["level"]))):
            rename.setdefault(str(count), str(p))
        table = table[table["level"].isin(rename)].assign(level=lambda f: f["level"].map(rename))
    parts = []
    for env in dict.fromkeys(table["environment"]):
        mine = table[table["environment"] == env]
        theirs = paper[paper["environment"] == env]
        common = [lv for lv in dict.fromkeys(mine["level"]) if lv in set(theirs["level"])]
        reference = common[0] if common else mine["level"].iloc[0]
        d_ours = ex.level_differences(mine, ablation, reference=reference)
        d_paper = ex.level_differences(theirs, ablation, reference=reference) if common else d_ours.iloc[0:0]
        keys = ["environment", "metric", "reference", "level"]
        parts.append(d_ours.merge(d_paper, on=keys, how="left", suffixes=("_ours", "_paper")))
    merged = pd.concat(parts, ignore_index=True)
    merged["difference_paper"] = pd.to_numeric(merged["difference_paper"], errors="coerce")
    same = np.sign(merged["difference_ours"]) == np.sign(merged["difference_paper"])
    merged["same_direction"] = same.where(merged["difference_paper"].notna(), other=None)
    return merged


def agreement_summary(found: pd.DataFrame) -> list[str]:
    """Two lines: how many level differences point the paper's way, how many are separated.

    Args:
        found: :func:`level_findings` output.
    """
    known = found.dropna(subset=["difference_paper"])
    same = int(known["same_direction"].astype(bool).sum())
    return [
        f"{same} of {len(known)} level differences with a paper counterpart point the same way;",
        f"separated (disjoint 95% intervals): ours {int(found['separated_ours'].sum())} of {len(found)}, "
        f"paper {int(known['separated_paper'].astype(bool).sum())} of {len(known)}",
    ]
