"""Verdicts: does a table of ours reproduce the paper's finding? One function per kind of finding.

Every verdict function returns a :class:`Verdict`: a list of lines (printed, and compared in
tests, like any list of strings) that also carries the machine-readable outcome -- per
environment, one of :data:`VERDICTS`: ``"reproduced"`` (our interval shows what the paper
found), ``"reversed"`` (it contradicts it) or ``"inconclusive"`` (neither; also a finding of
several parts that comes out mixed, or a table that lacks what it needs).

Each difference is judged by the one rule of :mod:`opcc_edu.lab.findings.rule`, stated there
once: a 95% interval paired by seed where the levels' twin runs are known (a table carries them
after :func:`~opcc_edu.lab.findings.rule.with_runs`, or a verdict is given ``runs=``), with a
floor on its half-width, judged for direction against zero and for absence against a margin
scaled to the metric's size; where ours and the paper's difference share a direction but part
in size by more than 3x, :attr:`Verdict.sizes` says so and :meth:`Verdict.summary` states it.

:meth:`Verdict.overall` is the outcome of a majority of the judged environments
(``"inconclusive"`` without one); :meth:`Verdict.summary` says it in a few words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...names import METRICS, TABLE_METRICS
from ...utils import check_choice
from .. import experiments as ex
from .rule import (
    EQUIVALENCE_MARGINS,
    PAPER_CLAIMS,
    DifferenceInterval,
    difference_half_width,
    equivalence_margin,
    judge_difference,
    level_differences,
    level_interval,
    paper_difference,
    runs_of,
    size_ratio,
)

__all__ = [
    "DATASET_TYPES",
    "EQUIVALENCE_MARGINS",
    "PAPER_CLAIMS",
    "VERDICTS",
    "DifferenceInterval",
    "Expectation",
    "Verdict",
    "agreement_summary",
    "combine_outcomes",
    "contrast_verdict",
    "dataset_spread_scopes",
    "dataset_spread_verdict",
    "difference_half_width",
    "ensemble_size_verdict",
    "equivalence_margin",
    "judge_difference",
    "level_difference_verdict",
    "level_findings",
    "level_titles",
    "paper_claims",
    "trend_verdict",
]

#: The outcomes of a verdict, per environment.
VERDICTS: tuple[str, ...] = ("reproduced", "reversed", "inconclusive")


class Verdict(list):
    """The lines of a verdict (a ``list`` of strings) with its outcome per environment.

    Attributes:
        outcomes: environment (or ``"all environments"`` for a finding about all of them) ->
            one of :data:`VERDICTS`; environments the finding says nothing about are absent.
        sizes: environment -> :func:`~opcc_edu.lab.findings.rule.size_ratio` (``"13×"``, ``"1/4
            of"``, prefixed by the metric where a finding has several), where a reproduced
            difference points the paper's way at another size.
    """

    def __init__(
        self,
        lines: Sequence[str] = (),
        outcomes: Mapping[str, str] | None = None,
        sizes: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(lines)
        self.outcomes: dict[str, str] = {}
        for key, outcome in (outcomes or {}).items():
            self.outcomes[str(key)] = check_choice(outcome, VERDICTS, "verdict")
        self.sizes: dict[str, str] = {str(k): str(v) for k, v in (sizes or {}).items()}

    def counts(self) -> dict[str, int]:
        """How many environments have each outcome (every outcome of :data:`VERDICTS` present)."""
        return {kind: sum(1 for o in self.outcomes.values() if o == kind) for kind in VERDICTS}

    @property
    def overall(self) -> str | None:
        """The outcome of more than half of the judged environments, else ``"inconclusive"``;
        ``None`` when no environment was judged."""
        if not self.outcomes:
            return None
        for kind, n in self.counts().items():
            if 2 * n > len(self.outcomes):
                return kind
        return "inconclusive"

    def summary(self) -> str:
        """The overall outcome and the count behind it, e.g. ``"reversed (3 of 4; 1 reproduced)"``,
        ``"inconclusive (no majority: 1 reproduced, 1 reversed)"``; ``"not judged"`` without any.
        A reproduced difference at another size than the paper's is stated (:attr:`sizes`), e.g.
        ``"reproduced (same direction, 13× the paper's difference)"`` (one environment) or
        ``"reproduced (3 of 4; 1 inconclusive; same direction as the paper's difference, another
        size: hopper 13×, walker2d 1/4)"``."""
        overall, counts = self.overall, self.counts()
        if overall is None:
            return "not judged"
        if len(self.outcomes) == 1:
            sizes = ", ".join(self.sizes.values())
            parts = [f"same direction, {sizes} the paper's difference"] if sizes else []
        elif 2 * counts[overall] <= len(self.outcomes):  # inconclusive for want of a majority
            parts = ["no majority: " + ", ".join(f"{n} {k}" for k, n in counts.items() if n)]
        else:
            parts = [f"{counts[overall]} of {len(self.outcomes)}"]
            parts += [", ".join(f"{n} {kind}" for kind, n in counts.items() if n and kind != overall)]
        if len(self.outcomes) > 1 and self.sizes:
            each = ", ".join(f"{env} {ratio.removesuffix(' of')}" for env, ratio in self.sizes.items())
            parts.append(f"same direction as the paper's difference, another size: {each}")
        parts = [p for p in parts if p]
        return f"{overall} ({'; '.join(parts)})" if parts else overall

    def __add__(self, other: object) -> Verdict:  # type: ignore[override]
        """The lines of both, and the outcomes of both (``other``'s win for an environment in both)."""
        if not isinstance(other, list):
            return NotImplemented
        sizes = {**self.sizes, **getattr(other, "sizes", {})}
        return Verdict(list(self) + list(other), {**self.outcomes, **getattr(other, "outcomes", {})}, sizes)

    def __iadd__(self, other: object) -> Verdict:  # type: ignore[override]
        """``v += w``: ``w``'s lines appended and its outcomes merged, as :meth:`__add__`."""
        if not isinstance(other, list):
            return NotImplemented
        self.extend(other)
        self.outcomes.update(getattr(other, "outcomes", {}))
        self.sizes.update(getattr(other, "sizes", {}))
        return self


def combine_outcomes(outcomes: Sequence[str]) -> str:
    """One outcome for a finding of several parts: reproduced when every part is, reversed when
    at least one part is and none is reproduced, otherwise inconclusive."""
    outcomes = list(outcomes)
    if outcomes and all(o == "reproduced" for o in outcomes):
        return "reproduced"
    if "reversed" in outcomes and "reproduced" not in outcomes:
        return "reversed"
    return "inconclusive"


def level_titles(ablation: str | ex.Ablation) -> dict[str, str]:
    """Display name of every level of an ablation, by level label."""
    return {level.label: level.display for level in ex.get_ablation(ablation).levels}


@dataclass(frozen=True)
class Expectation:
    """What the paper found for one metric: ``level``'s mean is ``direction`` than the reference's.

    The printed word compares the means (``direction`` or not); the outcome
    (:func:`judge_difference`) reads the intervals against ``claim``, what the paper found.

    Attributes:
        metric: one of :data:`opcc_edu.names.METRICS` (the paper's), or of the tie-fair metrics
            (:data:`opcc_edu.names.TABLE_METRICS` holds both) for a table that aggregates them.
        direction: ``"lower"`` or ``"higher"``.
        holds: the word printed when the finding holds (default: ``direction``).
        fails: the word printed when it does not (default: ``"not " + direction``).
        digits: decimals of the printed means.
        claim: what the paper found, of :data:`PAPER_CLAIMS` (default: ``direction``, a
            significant difference that way). ``"not lower"`` reads "no significant gain" when
            lower is better; ``"same"`` reads "no significant difference".
        paper_difference: the paper's level minus reference, for the size statement
            (:func:`~opcc_edu.lab.findings.rule.size_statement`; ``None``: not stated).
    """

    metric: str
    direction: str
    holds: str | None = None
    fails: str | None = None
    digits: int = 3
    claim: str | None = None
    paper_difference: float | None = None

    def __post_init__(self) -> None:
        check_choice(self.metric, TABLE_METRICS, "metric")
        check_choice(self.direction, ("lower", "higher"), "direction")
        if self.claim is not None:
            check_choice(self.claim, PAPER_CLAIMS, "claim")

    @property
    def paper_claim(self) -> str:
        """:attr:`claim`, or ``direction`` when unset."""
        return self.claim or self.direction

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


def _status(interval: DifferenceInterval | None) -> str:
    """How a verdict line names a difference's interval: ``"separated"`` (it excludes zero) or
    ``"not separated"``, with ``", paired"`` where twins gave it."""
    word = "separated" if interval is not None and interval.separated else "not separated"
    return word + (", paired" if interval is not None and interval.paired else "")


def _size(interval: DifferenceInterval | None, claim: str | None, paper: float | None) -> str | None:
    """:func:`~opcc_edu.lab.findings.rule.size_ratio` of a reproduced claimed difference, else ``None``."""
    judged = interval is not None and claim in ("lower", "higher") and paper is not None
    return size_ratio(interval.difference, paper) if judged and interval.judge(claim) == "reproduced" else None


def trend_verdict(
    table: pd.DataFrame,
    metric: str = "aurcc",
    level_prefix: str = "",
    claim: str = "higher",
    runs: pd.DataFrame | None = None,
    paper: Mapping[str, float] | None = None,
) -> Verdict:
    """Does ``metric`` grow from the smallest to the largest (numeric) level, per environment?

    "separated" means the difference's 95% interval excludes zero (the rule of
    :mod:`opcc_edu.lab.findings.rule`).

    Args:
        table: tidy table (environment, level, metric, mean, ci), e.g. an aggregate.
        metric: the metric followed, of :data:`opcc_edu.names.TABLE_METRICS` (the table must
            hold it: a tie-fair one needs ``aggregate(..., metrics=TABLE_METRICS)``).
        level_prefix: printed before each level (``"h="`` for horizons).
        claim: what the paper found for the largest level against the smallest
            (:data:`PAPER_CLAIMS`; default ``"higher"``: the metric grows).
        runs: the runs to pair (default: those the table carries,
            :func:`~opcc_edu.lab.findings.rule.runs_of`).
        paper: environment -> the paper's difference, largest level minus smallest (for the size).

    Returns:
        One line per environment; the outcome per environment (:func:`judge_difference`).
    """
    check_choice(metric, TABLE_METRICS, "metric")
    runs = runs_of(table, runs)
    lines, outcomes, sizes = [], {}, {}
    for env, part in table[table["metric"] == metric].groupby("environment", sort=False):
        part = part.assign(level=part["level"].astype(str)).set_index("level")
        first, last = min(part.index, key=int), max(part.index, key=int)
        a, b = part.loc[first], part.loc[last]
        interval = level_interval(table, runs, env, metric, first, last) if first != last else None
        trend = "grows" if b["mean"] > a["mean"] else "does not grow"
        lines.append(
            f"{env}: {_metric_label(metric)} {level_prefix}{first} {a['mean']:.3f} -> "
            f"{level_prefix}{last} {b['mean']:.3f}: {trend} ({_status(interval)})"
        )
        outcomes[env] = interval.judge(claim) if interval is not None else "inconclusive"
        size = _size(interval, claim, (paper or {}).get(env))
        if size:
            sizes[env] = f"{_metric_label(metric)} {size}"
    return Verdict(lines, outcomes, sizes)


def contrast_verdict(
    table: pd.DataFrame,
    level: str,
    reference: str,
    expectations: Sequence[Expectation],
    runs: pd.DataFrame | None = None,
) -> Verdict:
    """One level against a reference level, one judged metric after another, per environment.

    Example line: ``"hopper: AURCC PCI 0.120 vs EV 0.150 (lower); CR_K PCI 0.20 vs EV 0.90 (lower)"``.

    Args:
        table: tidy table (environment, level, metric, mean, and ci for the outcome: without a
            ``ci`` column or runs no difference counts as separated).
        level: the level the paper's finding is about (printed upper-case).
        reference: the level it is compared with.
        expectations: what the paper found, one :class:`Expectation` per metric.
        runs: the runs to pair (default: those the table carries).

    Returns:
        One line per environment; the outcome per environment combines the expectations'
        (:func:`combine_outcomes`; an environment missing a level or metric is inconclusive).
    """
    runs = runs_of(table, runs)
    lines, outcomes, sizes = [], {}, {}
    for env in dict.fromkeys(table["environment"]):
        parts, judged, notes = [], [], []
        for e in expectations:
            interval = level_interval(table, runs, env, e.metric, reference, level)
            if interval is None:
                judged.append("inconclusive")
                continue
            cells = table[(table["environment"] == env) & (table["metric"] == e.metric)]
            means = dict(zip(cells["level"].astype(str), cells["mean"], strict=True))
            ours, theirs = means[str(level)], means[str(reference)]
            judged.append(interval.judge(e.paper_claim))
            parts.append(
                f"{_metric_label(e.metric)} {level.upper()} {ours:.{e.digits}f} vs {reference.upper()} "
                f"{theirs:.{e.digits}f} ({e.judge(ours, theirs)})"
            )
            size = _size(interval, e.paper_claim, e.paper_difference)
            if size:
                notes.append(f"{_metric_label(e.metric)} {size}")
        lines.append(f"{env}: " + "; ".join(parts))
        outcomes[env] = combine_outcomes(judged)
        if notes:
            sizes[env] = ", ".join(notes)
    return Verdict(lines, outcomes, sizes)


def ensemble_size_verdict(
    table: pd.DataFrame, runs: pd.DataFrame | None = None, paper: Mapping[str, float] | None = None
) -> Verdict:
    """From the smallest to the full ensemble: the change of AURCC, and whether CR_K grows.

    The paper's finding has two parts, combined (:func:`combine_outcomes`): AURCC barely changes
    (no difference, within AURCC's equivalence margin) and CR_K grows (a significant increase),
    by how much beside the paper's growth where the sizes part (:attr:`Verdict.sizes`).

    Args:
        table: tidy table (environment, level, metric, mean, ci).
        runs: the runs to pair (default: those the table carries).
        paper: environment -> the paper's CR_K growth, smallest to full ensemble (for the size).

    Returns:
        One line per environment; the outcome per environment.
    """
    runs, (lines, outcomes, sizes) = runs_of(table, runs), ([], {}, {})
    for env, part in table.groupby("environment", sort=False):
        levels = part["level"].astype(str)
        small, full = min(levels, key=int), max(levels, key=int)
        cell = part.assign(level=levels).set_index(["level", "metric"])["mean"]
        a, b = cell[(small, "aurcc")], cell[(full, "aurcc")]
        c, d = cell[(small, "cr_k")], cell[(full, "cr_k")]
        lines.append(
            f"{env}: {small} -> {full} members: AURCC {a:.3f} -> {b:.3f} (change {b - a:+.3f}); "
            f"CR_K {c:.2f} -> {d:.2f} ({'grows' if d > c else 'does not grow'})"
        )
        if small == full:
            outcomes[env] = "inconclusive"
            continue
        aurcc = level_interval(table, runs, env, "aurcc", small, full)
        cr_k = level_interval(table, runs, env, "cr_k", small, full)
        pairs = ((aurcc, "same"), (cr_k, "higher"))
        judged = [i.judge(claim) if i is not None else "inconclusive" for i, claim in pairs]
        outcomes[env] = combine_outcomes(judged)
        size = _size(cr_k, "higher", (paper or {}).get(env))
        if size:
            sizes[env] = f"CR_K {size}"
    return Verdict(lines, outcomes, sizes)


def dataset_spread_verdict(table: pd.DataFrame, metric: str = "aurcc") -> Verdict:
    """Do environments differ more than the datasets within one environment?

    Compares the largest spread (max - min) of ``metric`` across the levels of one environment
    with the spread of the environments' means.

    Returns:
        Three lines: the largest spread within, the spread across, the verdict; one outcome
        under ``"all environments"``: reproduced when the spread within is the smaller,
        reversed when it is not, inconclusive when no environment has two datasets or fewer
        than two environments are present (nothing to compare; the lines say so).
    """
    check_choice(metric, TABLE_METRICS, "metric")
    part = table[table["metric"] == metric]
    within = part.groupby("environment")["mean"].agg(lambda m: m.max() - m.min())
    means = part.groupby("environment")["mean"].mean()
    across = means.max() - means.min()
    name = _metric_label(metric)
    several = int(part.groupby("environment")["level"].nunique().max()) > 1 if len(part) else False
    if not several or len(means) < 2:
        what = "two datasets in one environment" if not several else "two environments"
        lines = [
            f"{name} of {len(means)} environment(s) with at most one dataset each"
            if not several
            else f"{name} of one environment",
            f"the finding needs at least {what}",
            "environments matter more than dataset types: inconclusive",
        ]
        return Verdict(lines, {"all environments": "inconclusive"})
    held = within.max() < across
    return Verdict(
        [
            f"largest {name} spread across datasets within one environment: {within.max():.3f} ({within.idxmax()})",
            f"spread of the environments' mean {name}: {across:.3f}",
            "environments matter more than dataset types: " + ("reproduced" if held else "not reproduced"),
        ],
        {"all environments": "reproduced" if held else "reversed"},
    )


#: The dataset types of each kind of environment that a complete dataset-type grid holds.
DATASET_TYPES: dict[str, frozenset[str]] = {
    "maze": frozenset({"1k", "10k", "100k", "1m"}),
    "locomotion": frozenset({"random", "medium-replay", "medium", "medium-expert", "expert"}),
}


def dataset_spread_scopes(table: pd.DataFrame, metric: str = "aurcc") -> dict[str, pd.DataFrame]:
    """A dataset-type table cut three ways for :func:`dataset_spread_verdict`.

    Only environments that hold every dataset type of their kind (:data:`DATASET_TYPES`: the
    four maze sizes, the five D4RL locomotion types) are kept, so that a spread is never read
    from a partial row.

    Returns:
        ``"every complete environment"``, ``"the paper's scope (mazes on 1m)"`` (the paper's
        Tables 1 and 2: locomotion's five types, each maze's ``1m`` data only) and
        ``"locomotion alone"`` -> the rows of ``metric``; a scope without rows is left out.
    """
    check_choice(metric, TABLE_METRICS, "metric")
    part = table[table["metric"] == metric]
    maze = part["environment"].str.startswith("maze2d")
    present = part.groupby("environment")["level"].apply(set)
    complete = [
        env
        for env, levels in present.items()
        if levels == DATASET_TYPES["maze" if env.startswith("maze2d") else "locomotion"]
    ]
    keep = part["environment"].isin(complete)
    scopes = {
        "every complete environment": part[keep],
        "the paper's scope (mazes on 1m)": part[keep & (~maze | (part["level"] == "1m"))],
        "locomotion alone": part[keep & ~maze],
    }
    return {name: rows for name, rows in scopes.items() if not rows.empty}


def level_difference_verdict(
    table: pd.DataFrame,
    ablation: str | ex.Ablation,
    metric: str = "aurcc",
    claims: str | Mapping[str, str] | None = None,
    runs: pd.DataFrame | None = None,
) -> Verdict:
    """``metric`` of every level against the reference level, per environment.

    Uses :func:`opcc_edu.lab.experiments.level_differences` for the pairs of levels (reference: the
    ablation's first level) and the rule of :mod:`opcc_edu.lab.findings.rule` for each difference.

    Args:
        table: tidy table (environment, level, metric, mean, ci).
        ablation: registry key or :class:`~opcc_edu.lab.experiments.Ablation`.
        metric: the metric compared, of :data:`opcc_edu.names.TABLE_METRICS`.
        claims: what the paper found for each level against the reference
            (:data:`PAPER_CLAIMS`): one claim for every environment, or one per environment
            (environments without one are not judged). ``None``: read from the paper's own
            table (:func:`paper_claims`); environments the paper did not report are not judged.
        runs: the runs to pair (default: those the table carries).

    Returns:
        One line per (environment, level); the outcome per judged environment combines its
        levels' (:func:`combine_outcomes`); where the paper's table has the difference, its size
        against ours (:attr:`Verdict.sizes`).
    """
    check_choice(metric, TABLE_METRICS, "metric")
    titles = level_titles(ablation)
    runs = runs_of(table, runs)
    d = ex.level_differences(table, ablation)
    if claims is None:
        claims = paper_claims(ablation, metric)
    lines, judged, sizes = [], {}, {}
    several = d[d["metric"] == metric].groupby("environment")["level"].nunique().to_dict()
    for _, row in d[d["metric"] == metric].iterrows():
        env, reference, level = row["environment"], str(row["reference"]), str(row["level"])
        interval = level_interval(table, runs, env, metric, reference, level)
        change = "lower" if row["difference"] < 0 else "higher"
        # a name holding a comma is quoted, to read as one name ("data's box, reaching the ...")
        named, against = (f'"{t}"' if "," in t else t for t in (titles.get(lv, lv) for lv in (level, reference)))
        by = f"by {abs(row['difference']):.3f} ({_status(interval)})"
        lines.append(f"{env}: {_metric_label(metric)} {change} with {named} than with {against} {by}")
        claim = claims if isinstance(claims, str) else claims.get(env)
        if isinstance(claim, Mapping):  # per level: {level: claim}
            claim = claim.get(level)
        if claim is None:
            continue
        judged.setdefault(env, []).append(interval.judge(claim) if interval is not None else "inconclusive")
        paper = paper_difference(ablation, env, metric, reference, level)
        size = _size(interval, claim, paper if np.isfinite(paper) else None)
        if size:
            size = f"{_metric_label(metric)} {size}"
            size = f"{titles.get(level, level)}: {size}" if several.get(env, 1) > 1 else size
            sizes[env] = f"{sizes[env]}, {size}" if env in sizes else size
    return Verdict(lines, {env: combine_outcomes(found) for env, found in judged.items()}, sizes)


def paper_claims(ablation: str | ex.Ablation, metric: str = "aurcc") -> dict[str, dict[str, str]]:
    """What the paper's table found for every level against the reference level, per environment.

    A level whose 95% interval is disjoint from the reference's is ``"lower"`` or ``"higher"``;
    one whose intervals overlap is ``"same"`` (the paper's reading, Section 7). Read from
    :func:`opcc_edu.lab.experiments.paper_results` (the locomotion tables' five-dataset means, the
    mazes' 1m cells); the ensemble-count ablation is labelled by the paper's member counts.

    Returns:
        ``{environment: {level: claim}}``; empty for an ablation without a paper table.
    """
    check_choice(metric, TABLE_METRICS, "metric")
    paper = ex.paper_results(ablation)
    paper = paper[(paper["metric"] == metric) & (paper["dataset"].isin(["all", "1m"]))]
    out: dict[str, dict[str, str]] = {}
    for _, row in ex.level_differences(paper, ablation).iterrows():
        claim = ("lower" if row["difference"] < 0 else "higher") if row["separated"] else "same"
        out.setdefault(row["environment"], {})[row["level"]] = claim
    return out


# --------------------------------------------------------------------------------------------
# Every level difference, ours beside the paper's
# --------------------------------------------------------------------------------------------
def level_findings(table: pd.DataFrame, ablation: str | ex.Ablation) -> pd.DataFrame:
    """Each level against a reference level shared with the paper, per environment and metric.

    The reference is the first level of ours that the paper reports too (else our first level).
    For the ensemble-count ablation our prefix sizes stand for the paper's 10..100 members and
    are compared on the paper's labels (:func:`opcc_edu.lab.experiments.ensemble_count_levels`).

    Returns:
        Ours judged by the rule (:func:`~opcc_edu.lab.findings.rule.level_differences`: paired by
        seed where the table carries its runs) beside the paper's read as the paper reads them
        (:func:`opcc_edu.lab.experiments.level_differences`: disjoint intervals), suffixes ``_ours``
        and ``_paper`` (``half_width`` and ``paired`` are ours alone), and ``same_direction``
        (``None`` where the paper has no counterpart).
    """
    ablation = ex.get_ablation(ablation)
    paper = ex.paper_results(ablation)
    runs = runs_of(table)
    if ablation.factor == "ensemble_count":
        rename: dict[str, str] = {}
        for count, p in ex.ensemble_count_levels(int(max(int(v) for v in table["level"]))):
            rename.setdefault(str(count), str(p))
        table = table[table["level"].isin(rename)].assign(level=lambda f: f["level"].map(rename))
        if runs is not None:
            runs = runs.assign(level=runs["level"].astype(str)).loc[lambda f: f["level"].isin(rename)]
            runs = runs.assign(level=runs["level"].map(rename))
    parts = []
    for env in dict.fromkeys(table["environment"]):
        mine = table[table["environment"] == env]
        theirs = paper[paper["environment"] == env]
        common = [lv for lv in dict.fromkeys(mine["level"]) if lv in set(theirs["level"])]
        reference = common[0] if common else mine["level"].iloc[0]
        d_ours = level_differences(mine, ablation, reference=reference, runs=runs)
        d_paper = ex.level_differences(theirs, ablation, reference=reference) if common else None
        if d_paper is None:
            d_paper = pd.DataFrame(columns=["environment", "metric", "reference", "level", "difference", "separated"])
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
    if known.empty:  # e.g. clipping, termination, mixture, reward: the paper has no table for them
        return [
            "the paper reports no numbers for these levels, so no difference has a counterpart to agree with;",
            f"separated (95% interval excludes zero): ours {int(found['separated_ours'].sum())} of {len(found)}",
        ]
    same = int(known["same_direction"].astype(bool).sum())
    return [
        f"{same} of {len(known)} level differences with a paper counterpart point the same way;",
        f"separated (95% interval excludes zero): ours {int(found['separated_ours'].sum())} of {len(found)}, "
        f"paper (disjoint 95% intervals) {int(known['separated_paper'].astype(bool).sum())} of {len(known)}",
    ]
