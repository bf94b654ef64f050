"""Verdicts: does a table of ours reproduce the paper's finding? One function per kind of finding.

Every verdict function returns a :class:`Verdict`: a list of lines (printed, and compared in
tests, like any list of strings) that also carries the machine-readable outcome -- per
environment, one of :data:`VERDICTS`:

* ``"reproduced"`` -- our intervals show what the paper found: a difference in the paper's
  direction with disjoint 95% intervals, or, for a finding of no difference, a difference whose
  95% interval lies inside the metric's equivalence margin (:data:`EQUIVALENCE_MARGINS`);
* ``"reversed"`` -- our intervals contradict it: a separated difference the other way, or,
  where the paper found none, a difference whose interval lies wholly beyond the margin;
* ``"inconclusive"`` -- neither: the intervals overlap where the paper found a difference, a
  difference of unknown size where the paper found none (overlapping intervals wider than the
  margin), a finding with several parts comes out mixed, or the table lacks what it needs.

A finding of no difference (claim ``"same"``; ``"not lower"`` / ``"not higher"``: none that
way) claims an absence, which overlapping intervals cannot show (a small experiment overlaps
everywhere): it is reproduced only when ``difference +- half-width`` lies inside ``+-margin``
(one-sided for ``"not ..."``), an equivalence test at the 95% level of each side. The
**half-width** is ``sqrt(a_ci**2 + b_ci**2)`` from the two levels' intervals
(:func:`difference_half_width`): exact for independent means, conservative for our levels,
whose shared seeds and datasets make the paired interval narrower; no interval, no absence.

**The margins** (:data:`EQUIVALENCE_MARGINS`, once per metric) are differences too small to
change a conclusion of the paper, checked on its own level differences (five-dataset locomotion
means, mazes' ``1m`` cells; :func:`opcc_edu.lab.findings.glance.paper_margin_agreement`):
AURCC and loss ``0.01`` (both are fractions of answered queries that are wrong, AURCC averaged
over coverage: one point; inside it 41 of the paper's 46 non-significant AURCC differences and
41 of 50 loss ones, outside 29 of 46 significant AURCC and 36 of 42 loss ones: its many runs
make some sub-point differences significant); RPP ``0.005`` (half a percent of the pairs;
inside 47 of 55, outside 35 of 37); CR_K ``0.05`` (inside 41 of 44, outside all 48). Tie-fair
metrics: tie-fair AURCC and selective gain ``0.01``, tie-fair RPP and AUGRC ``0.005``, AUROC ``0.02``.

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

#: The outcomes of a verdict, per environment.
VERDICTS: tuple[str, ...] = ("reproduced", "reversed", "inconclusive")

#: Equivalence margin of each metric: the largest difference (either way) that still counts as "no
#: difference" when a finding of absence is judged (see the module's docstring for the reasons).
EQUIVALENCE_MARGINS: dict[str, float] = {
    "aurcc": 0.01,
    "rpp": 0.005,
    "cr_k": 0.05,
    "loss": 0.01,
    "expected_aurcc": 0.01,
    "expected_rpp": 0.005,
    "selective_gain": 0.01,
    "augrc": 0.005,
    "auroc": 0.02,
}


def equivalence_margin(metric: str) -> float:
    """:data:`EQUIVALENCE_MARGINS` of ``metric`` (one of :data:`opcc_edu.names.TABLE_METRICS`)."""
    check_choice(metric, TABLE_METRICS, "metric")
    return EQUIVALENCE_MARGINS[metric]


def difference_half_width(a_ci: float, b_ci: float) -> float:
    """95% half-width of a difference of two means from their own: ``sqrt(a^2 + b^2)`` (``nan``
    when either is missing; conservative for our correlated levels, see the module's docstring)."""
    a_ci, b_ci = float(a_ci), float(b_ci)
    if not (np.isfinite(a_ci) and np.isfinite(b_ci)):
        return float("nan")
    return float(np.hypot(a_ci, b_ci))


#: What the paper found about a level against its reference, as :func:`judge_difference` reads it:
#: ``"lower"`` / ``"higher"`` (a significant difference that way), ``"same"`` (no significant
#: difference), ``"not lower"`` / ``"not higher"`` (no significant difference that way: a
#: separated difference the other way does not contradict it).
PAPER_CLAIMS: tuple[str, ...] = ("lower", "higher", "same", "not lower", "not higher")


class Verdict(list):
    """The lines of a verdict (a ``list`` of strings) with its outcome per environment.

    Attributes:
        outcomes: environment (or ``"all environments"`` for a finding about all of them) ->
            one of :data:`VERDICTS`; environments the finding says nothing about are absent.
    """

    def __init__(self, lines: Sequence[str] = (), outcomes: Mapping[str, str] | None = None) -> None:
        super().__init__(lines)
        self.outcomes: dict[str, str] = {}
        for key, outcome in (outcomes or {}).items():
            self.outcomes[str(key)] = check_choice(outcome, VERDICTS, "verdict")

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
        ``"inconclusive (no majority: 1 reproduced, 1 reversed)"``; ``"not judged"`` without any."""
        overall, counts = self.overall, self.counts()
        if overall is None or len(self.outcomes) == 1:
            return overall or "not judged"
        rest = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n and kind != overall)
        if 2 * counts[overall] <= len(self.outcomes):  # inconclusive for want of a majority
            return f"inconclusive (no majority: {', '.join(f'{n} {k}' for k, n in counts.items() if n)})"
        return f"{overall} ({counts[overall]} of {len(self.outcomes)}" + (f"; {rest})" if rest else ")")

    def __add__(self, other: object) -> Verdict:  # type: ignore[override]
        """The lines of both, and the outcomes of both (``other``'s win for an environment in both)."""
        if not isinstance(other, list):
            return NotImplemented
        return Verdict(list(self) + list(other), {**self.outcomes, **getattr(other, "outcomes", {})})

    def __iadd__(self, other: object) -> Verdict:  # type: ignore[override]
        """``v += w``: ``w``'s lines appended and its outcomes merged, as :meth:`__add__`."""
        if not isinstance(other, list):
            return NotImplemented
        self.extend(other)
        self.outcomes.update(getattr(other, "outcomes", {}))
        return self


def _separated(a_mean: float, a_ci: float, b_mean: float, b_ci: float) -> bool:
    """Disjoint 95% intervals (touching or missing intervals are not), as
    :func:`opcc_edu.lab.experiments.level_differences` reads them."""
    return bool(np.isfinite(a_ci) and np.isfinite(b_ci) and abs(b_mean - a_mean) > a_ci + b_ci + 1e-9)


def judge_difference(
    difference: float,
    separated: bool,
    claim: str,
    half_width: float = float("nan"),
    margin: float = float("nan"),
) -> str:
    """One outcome of :data:`VERDICTS` for a level against its reference.

    Args:
        difference: ours, level minus reference.
        separated: whether our two 95% intervals are disjoint.
        claim: what the paper found, one of :data:`PAPER_CLAIMS`.
        half_width: the 95% half-width of ``difference`` (:func:`difference_half_width`); read
            for a claim of absence only (``nan``: unknown, so no absence is shown).
        margin: the metric's equivalence margin (:func:`equivalence_margin`); read for a claim of
            absence only.

    A claim of a difference is reproduced by a separated difference that way, reversed by one the
    other way, else inconclusive. A claim of absence is reproduced when the difference's interval
    lies inside the margin (``"not lower"``: above ``-margin``; ``"not higher"``: below it),
    reversed when it is separated and lies wholly beyond the margin against the claim, else
    inconclusive (the equivalence test and its dual: an interval across the margin decides nothing).
    """
    check_choice(claim, PAPER_CLAIMS, "claim")
    way = "lower" if difference < 0 else "higher"
    if claim in ("lower", "higher"):
        if not separated:
            return "inconclusive"
        return "reproduced" if way == claim else "reversed"
    low, high = difference - half_width, difference + half_width
    # against it: separated, and the whole interval beyond the margin (nan compares False)
    above, below = bool(low > margin + 1e-12), bool(high < -margin - 1e-12)
    if claim == "same":
        inside = bool(np.isfinite(margin) and -margin - 1e-12 <= low and high <= margin + 1e-12)
        against = separated and (above or below)
    elif claim == "not lower":
        inside = bool(np.isfinite(margin) and low >= -margin - 1e-12)
        against = separated and below
    else:  # "not higher"
        inside = bool(np.isfinite(margin) and high <= margin + 1e-12)
        against = separated and above
    if inside:
        return "reproduced"
    return "reversed" if against else "inconclusive"


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
    """

    metric: str
    direction: str
    holds: str | None = None
    fails: str | None = None
    digits: int = 3
    claim: str | None = None

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


def trend_verdict(table: pd.DataFrame, metric: str = "aurcc", level_prefix: str = "", claim: str = "higher") -> Verdict:
    """Does ``metric`` grow from the smallest to the largest (numeric) level, per environment?

    "separated" means the two 95% intervals are disjoint.

    Args:
        table: tidy table (environment, level, metric, mean, ci), e.g. an aggregate.
        metric: the metric followed, of :data:`opcc_edu.names.TABLE_METRICS` (the table must
            hold it: a tie-fair one needs ``aggregate(..., metrics=TABLE_METRICS)``).
        level_prefix: printed before each level (``"h="`` for horizons).
        claim: what the paper found for the largest level against the smallest
            (:data:`PAPER_CLAIMS`; default ``"higher"``: the metric grows).

    Returns:
        One line per environment; the outcome per environment (:func:`judge_difference`).
    """
    check_choice(metric, TABLE_METRICS, "metric")
    lines, outcomes = [], {}
    for env, part in table[table["metric"] == metric].groupby("environment", sort=False):
        part = part.set_index("level")
        first, last = min(part.index, key=int), max(part.index, key=int)
        a, b = part.loc[first], part.loc[last]
        separated = _separated(a["mean"], a["ci"], b["mean"], b["ci"])
        trend = "grows" if b["mean"] > a["mean"] else "does not grow"
        status = "separated" if separated else "intervals overlap"
        lines.append(
            f"{env}: {_metric_label(metric)} {level_prefix}{first} {a['mean']:.3f} -> "
            f"{level_prefix}{last} {b['mean']:.3f}: {trend} ({status})"
        )
        half = difference_half_width(a["ci"], b["ci"])
        outcome = judge_difference(b["mean"] - a["mean"], separated, claim, half, equivalence_margin(metric))
        outcomes[env] = outcome if first != last else "inconclusive"
    return Verdict(lines, outcomes)


def contrast_verdict(table: pd.DataFrame, level: str, reference: str, expectations: Sequence[Expectation]) -> Verdict:
    """One level against a reference level, one judged metric after another, per environment.

    Example line: ``"hopper: AURCC PCI 0.120 vs EV 0.150 (lower); CR_K PCI 0.20 vs EV 0.90 (lower)"``.

    Args:
        table: tidy table (environment, level, metric, mean, and ci for the outcome: without a
            ``ci`` column no difference counts as separated).
        level: the level the paper's finding is about (printed upper-case).
        reference: the level it is compared with.
        expectations: what the paper found, one :class:`Expectation` per metric.

    Returns:
        One line per environment; the outcome per environment combines the expectations'
        (:func:`combine_outcomes`; an environment missing a level or metric is inconclusive).
    """
    wide = table.pivot_table(index=["environment", "metric"], columns="level", values="mean")
    if "ci" in table.columns:
        half = table.pivot_table(index=["environment", "metric"], columns="level", values="ci", dropna=False)
    else:
        half = wide * np.nan
    lines, outcomes = [], {}
    for env in dict.fromkeys(table["environment"]):
        parts, judged = [], []
        for e in expectations:
            if (env, e.metric) not in wide.index or level not in wide.columns or reference not in wide.columns:
                judged.append("inconclusive")
                continue
            row = wide.loc[(env, e.metric)]
            ours, theirs = row[level], row[reference]
            if not (np.isfinite(ours) and np.isfinite(theirs)):
                judged.append("inconclusive")
                continue
            ci = half.loc[(env, e.metric)] if (env, e.metric) in half.index else {}
            a_ci, b_ci = ci.get(reference, np.nan), ci.get(level, np.nan)
            separated = _separated(theirs, a_ci, ours, b_ci)
            width = difference_half_width(a_ci, b_ci)
            judged.append(
                judge_difference(ours - theirs, separated, e.paper_claim, width, equivalence_margin(e.metric))
            )
            parts.append(
                f"{_metric_label(e.metric)} {level.upper()} {ours:.{e.digits}f} vs {reference.upper()} "
                f"{theirs:.{e.digits}f} ({e.judge(ours, theirs)})"
            )
        lines.append(f"{env}: " + "; ".join(parts))
        outcomes[env] = combine_outcomes(judged)
    return Verdict(lines, outcomes)


def ensemble_size_verdict(table: pd.DataFrame) -> Verdict:
    """From the smallest to the full ensemble: the change of AURCC, and whether CR_K grows.

    The paper's finding has two parts: AURCC barely changes (no significant difference: judged
    against AURCC's equivalence margin) and CR_K grows (a significant increase); the outcome
    combines them (:func:`combine_outcomes`).

    Returns:
        One line per environment; the outcome per environment.
    """
    lines, outcomes = [], {}
    for env, part in table.groupby("environment", sort=False):
        small, full = min(part["level"], key=int), max(part["level"], key=int)
        cell = part.set_index(["level", "metric"])["mean"]
        half = part.set_index(["level", "metric"])["ci"] if "ci" in part.columns else cell * np.nan
        a, b = cell[(small, "aurcc")], cell[(full, "aurcc")]
        c, d = cell[(small, "cr_k")], cell[(full, "cr_k")]
        lines.append(
            f"{env}: {small} -> {full} members: AURCC {a:.3f} -> {b:.3f} (change {b - a:+.3f}); "
            f"CR_K {c:.2f} -> {d:.2f} ({'grows' if d > c else 'does not grow'})"
        )
        a_ci, b_ci = half[(small, "aurcc")], half[(full, "aurcc")]
        aurcc = judge_difference(
            b - a, _separated(a, a_ci, b, b_ci), "same", difference_half_width(a_ci, b_ci), equivalence_margin("aurcc")
        )
        cr_k = judge_difference(d - c, _separated(c, half[(small, "cr_k")], d, half[(full, "cr_k")]), "higher")
        outcomes[env] = combine_outcomes([aurcc, cr_k]) if small != full else "inconclusive"
    return Verdict(lines, outcomes)


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
) -> Verdict:
    """``metric`` of every level against the reference level, per environment.

    Uses :func:`opcc_edu.lab.experiments.level_differences` (reference: the ablation's first level).

    Args:
        table: tidy table (environment, level, metric, mean, ci).
        ablation: registry key or :class:`~opcc_edu.lab.experiments.Ablation`.
        metric: the metric compared, of :data:`opcc_edu.names.TABLE_METRICS`.
        claims: what the paper found for each level against the reference
            (:data:`PAPER_CLAIMS`): one claim for every environment, or one per environment
            (environments without one are not judged). ``None``: read from the paper's own
            table (:func:`paper_claims`); environments the paper did not report are not judged.

    Returns:
        One line per (environment, level); the outcome per judged environment combines its
        levels' (:func:`combine_outcomes`).
    """
    check_choice(metric, TABLE_METRICS, "metric")
    titles = level_titles(ablation)
    d = ex.level_differences(table, ablation)
    half = _half_widths(table, metric)
    margin = equivalence_margin(metric)
    if claims is None:
        claims = paper_claims(ablation, metric)
    lines, judged = [], {}
    for _, row in d[d["metric"] == metric].iterrows():
        change = "lower" if row["difference"] < 0 else "higher"
        status = "separated" if row["separated"] else "intervals overlap"
        lines.append(
            f"{row['environment']}: {_metric_label(metric)} {change} with {titles.get(row['level'], row['level'])} "
            f"than with {titles.get(row['reference'], row['reference'])} by {abs(row['difference']):.3f} ({status})"
        )
        claim = claims if isinstance(claims, str) else claims.get(row["environment"])
        if isinstance(claim, Mapping):  # per level: {level: claim}
            claim = claim.get(row["level"])
        if claim is not None:
            width = difference_half_width(
                half.get((row["environment"], row["reference"]), np.nan),
                half.get((row["environment"], row["level"]), np.nan),
            )
            outcome = judge_difference(row["difference"], bool(row["separated"]), claim, width, margin)
            judged.setdefault(row["environment"], []).append(outcome)
    return Verdict(lines, {env: combine_outcomes(found) for env, found in judged.items()})


def _half_widths(table: pd.DataFrame, metric: str) -> dict[tuple[str, str], float]:
    """(environment, level) -> 95% half-width of ``metric`` (a level's first row, as
    :func:`opcc_edu.lab.experiments.level_differences` reads it); empty without ``ci``."""
    part = table[table["metric"] == metric]
    if "ci" not in part.columns:
        return {}
    part = part.assign(level=part["level"].astype(str)).drop_duplicates(["environment", "level"])
    return {(env, lv): float(ci) for env, lv, ci in zip(part["environment"], part["level"], part["ci"], strict=True)}


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
        :func:`opcc_edu.lab.experiments.level_differences` of ours and of the paper's table side by
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
    if known.empty:  # e.g. clipping, termination, mixture, reward: the paper has no table for them
        return [
            "the paper reports no numbers for these levels, so no difference has a counterpart to agree with;",
            f"separated (disjoint 95% intervals): ours {int(found['separated_ours'].sum())} of {len(found)}",
        ]
    same = int(known["same_direction"].astype(bool).sum())
    return [
        f"{same} of {len(known)} level differences with a paper counterpart point the same way;",
        f"separated (disjoint 95% intervals): ours {int(found['separated_ours'].sum())} of {len(found)}, "
        f"paper {int(known['separated_paper'].astype(bool).sum())} of {len(known)}",
    ]
