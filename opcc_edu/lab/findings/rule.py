"""The verdict rule: one 95% interval per difference, paired by seed, judged for direction and size.

Every verdict of :mod:`opcc_edu.lab.findings.verdicts` judges a level against a reference level
the same way, stated here once (the book's *What we learned*, section "How a verdict is read",
says it in words):

1. **The difference and its interval.** The levels of an ablation share their seeds and datasets:
   each run of one level has a *twin* in the other (same environment, dataset and seed;
   :func:`twin_runs`). Where two twins or more exist, the difference is the mean of the per-run
   differences (level minus reference) and its interval the Student-t 95% interval of that mean
   (:func:`opcc_edu.metrics.mean_confidence_interval` on the :func:`paired_differences`): the twins'
   shared training noise cancels, and the interval is as wide as the differences really spread.
   Only where runs cannot be paired -- a table without its runs, such as the paper's or one made by
   hand, or levels without two twins -- the interval falls back to the two levels' own,
   ``sqrt(a_ci**2 + b_ci**2)`` (:func:`difference_half_width`; exact for independent means).
2. **A floor on the half-width** (:func:`half_width_floor`, applied in :func:`difference_interval`
   and nowhere else). A metric moves in steps (:func:`metric_step`): CR_K in steps of ``1/K = 0.1``
   (one coverage bin more or less), the loss in steps of ``1/|Q|`` (one query's answer), AURCC and
   RPP by about as much when one answer flips. Three twins whose CR_K agree exactly give a
   zero-width interval, which would make any difference "separated" or any equality "equivalent"
   by accident of the step. The floor reads such a sample as no surer than the least spread the
   metric can show: ``n`` twins of which one differs by one step, whose t half-width is
   ``t_{0.975, n-1} * step / n`` (for CR_K: 0.64 with two twins, 0.14 with three, 0.056 with five,
   0.004 with fifty; with 300 queries a step of 0.0033 gives AURCC 0.021, 0.0048, 0.0019). With
   the queries unknown the step of AURCC, loss, RPP and the tie-fair metrics is 0.001, the last
   digit of the paper's tables; with the number of runs unknown (the paper's tables: 50-run means)
   no floor is set.
3. **Direction.** The difference is *separated* when its interval excludes zero. A finding of a
   difference (claim ``"lower"`` / ``"higher"``) is reproduced by a separated difference that way,
   reversed by one the other way, otherwise inconclusive.
4. **Absence** (claim ``"same"``; ``"not lower"`` / ``"not higher"``: none that way). An absence
   cannot be shown by an interval that includes zero (a small experiment includes it everywhere):
   it is reproduced only when the whole interval lies inside ``+-margin`` (one-sided for
   ``"not ..."``), an equivalence test at the 95% level of each side; reversed when the difference
   is separated and the whole interval lies beyond the margin against the claim; otherwise
   inconclusive (:func:`judge_difference`).
5. **The margin** (:func:`equivalence_margin`): an absolute margin per metric
   (:data:`EQUIVALENCE_MARGINS`), scaled down where the metric itself is small, ``min(absolute,
   max(SMALLEST_MARGIN, RELATIVE_MARGIN * larger |level mean|))``, i.e. ``min(absolute, max(0.001,
   0.5 * m))``. The absolute margins are differences too small to change a conclusion of the paper:
   AURCC and loss 0.01 (one point of the fraction of answered queries that are wrong), RPP 0.005
   (half a percent of the pairs), CR_K 0.05 (half a coverage bin); tie-fair AURCC and selective
   gain 0.01, tie-fair RPP and AUGRC 0.005, AUROC 0.02. They lie well above the paper's own
   precision -- its median 95% half-widths (:func:`paper_half_widths`) are about 0.002 (AURCC),
   0.004 (loss), 0.001 (RPP) and 0.014 (CR_K) -- so its 50-run cells could show an absence, and
   below the differences it calls significant (:func:`opcc_edu.lab.findings.glance.paper_margin_agreement`
   counts how they sort the paper's own level differences). The maze AURCCs are tiny (the paper's
   medium maze 0.001, U-maze 0.008): an absolute 0.01 would exceed the metric itself and call a
   doubling "no difference". Where the larger level's mean is below twice the absolute margin, the
   margin is half of it -- a difference of half the metric is a change -- and never below 0.001,
   the paper's printed resolution (the smallest difference its tables show). On the paper's own
   level differences the scaled margin keeps the absolute one's reading of the non-significant AURCC
   differences (41 of 46 inside) and sorts more of the significant ones outside (33 of 46 against
   29: the U-maze's and the open maze's significant 0.004-0.005 normalization differences among
   them); for RPP it costs two non-significant ones (45 of 55 inside against 47).
6. **Size** (:func:`size_statement`). Where a claimed difference is reproduced -- ours points the
   paper's way -- but the magnitudes part by more than :data:`SIZE_FACTOR` (3x) either way, the
   verdict says so, e.g. ``"reproduced (same direction, 13× the paper's difference)"``: a direction
   reproduced is not a size reproduced. (An inconclusive or reversed difference has no size to
   compare: its interval does not exclude zero, or points the other way.)
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...metrics import mean_confidence_interval
from ...names import TABLE_METRICS
from ...utils import check_choice
from .. import experiments as ex

__all__ = [
    "EQUIVALENCE_MARGINS",
    "PAPER_CLAIMS",
    "PRINTED_STEP",
    "RELATIVE_MARGIN",
    "SIZE_FACTOR",
    "SMALLEST_MARGIN",
    "DifferenceInterval",
    "attach_runs",
    "concat_tables",
    "difference_half_width",
    "difference_interval",
    "equivalence_margin",
    "half_width_floor",
    "judge_difference",
    "level_differences",
    "metric_step",
    "paired_differences",
    "paper_half_widths",
    "runs_of",
    "size_ratio",
    "size_statement",
    "twin_runs",
    "with_runs",
]

#: Absolute equivalence margin of each metric: the largest difference (either way) that still
#: counts as "no difference" where the metric is not small (:func:`equivalence_margin` scales it).
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

#: The margin where a metric is small: this fraction of the larger level's |mean| ...
RELATIVE_MARGIN = 0.5
#: ... but never below the paper's printed resolution.
SMALLEST_MARGIN = 0.001
#: The step of a metric whose queries are unknown: the last digit of the paper's tables.
PRINTED_STEP = 0.001
#: The coverage bins of CR_K (the paper's K): CR_K moves in steps of 1/K.
CR_K_BINS = 10
#: Magnitudes parting by more than this factor (either way) are stated in the verdict.
SIZE_FACTOR = 3.0

#: What the paper found about a level against its reference, as :func:`judge_difference` reads it:
#: ``"lower"`` / ``"higher"`` (a significant difference that way), ``"same"`` (no significant
#: difference), ``"not lower"`` / ``"not higher"`` (no significant difference that way: a
#: separated difference the other way does not contradict it).
PAPER_CLAIMS: tuple[str, ...] = ("lower", "higher", "same", "not lower", "not higher")


def equivalence_margin(metric: str, a_mean: float = float("nan"), b_mean: float = float("nan")) -> float:
    """The equivalence margin of ``metric`` for two levels of means ``a_mean`` and ``b_mean``:
    ``min(absolute, max(SMALLEST_MARGIN, RELATIVE_MARGIN * max(|a|, |b|)))`` (the absolute margin
    of :data:`EQUIVALENCE_MARGINS` when the means are not given; see the module's docstring)."""
    check_choice(metric, TABLE_METRICS, "metric")
    absolute = EQUIVALENCE_MARGINS[metric]
    sizes = [abs(float(m)) for m in (a_mean, b_mean) if np.isfinite(m)]
    if not sizes:
        return absolute
    return float(min(absolute, max(SMALLEST_MARGIN, RELATIVE_MARGIN * max(sizes))))


def metric_step(metric: str, queries: int | None = None) -> float:
    """The smallest change of one run's ``metric``: ``1/K`` for CR_K, ``1/queries`` for the others
    (one query's answer), :data:`PRINTED_STEP` when the queries are unknown."""
    check_choice(metric, TABLE_METRICS, "metric")
    if metric == "cr_k":
        return 1.0 / CR_K_BINS
    return 1.0 / int(queries) if queries else PRINTED_STEP


def half_width_floor(metric: str, n: int | None, queries: int | None = None) -> float:
    """The least 95% half-width of a mean of ``n`` runs (or paired differences) of ``metric``: that
    of ``n`` values of which one differs from the others by :func:`metric_step`, i.e.
    ``t_{0.975, n-1} * step / n`` (0 when ``n`` is unknown or below 2)."""
    if n is None or not np.isfinite(n) or int(n) < 2:
        return 0.0
    values = np.zeros(int(n))
    values[-1] = metric_step(metric, queries)
    return float(mean_confidence_interval(values)[1])


def difference_half_width(a_ci: float, b_ci: float) -> float:
    """95% half-width of a difference of two means from their own: ``sqrt(a^2 + b^2)`` (``nan``
    when either is missing). The fallback of :func:`difference_interval` where runs cannot be paired."""
    a_ci, b_ci = float(a_ci), float(b_ci)
    if not (np.isfinite(a_ci) and np.isfinite(b_ci)):
        return float("nan")
    return float(np.hypot(a_ci, b_ci))


# --------------------------------------------------------------------------------------------
# Twin runs
# --------------------------------------------------------------------------------------------
_RUNS = "opcc_edu.runs"


class _Runs:
    """The runs behind a table, carried in ``DataFrame.attrs`` (compared by identity and never
    copied, so that pandas keeps them through filters and concatenations of one table)."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame

    def __deepcopy__(self, memo: dict) -> _Runs:
        return self


def with_runs(
    table: pd.DataFrame, results: pd.DataFrame, ablation: str | ex.Ablation, grid: ex.GridSpec | None = None
) -> pd.DataFrame:
    """``table`` (an aggregate of ``results``) carrying its runs, so that every verdict read from it
    pairs twins (:func:`runs_of`). A copy; ``table`` itself is left as it is.

    Args:
        table: :func:`opcc_edu.lab.experiments.aggregate` of ``results``.
        results: the results DataFrame its cells aggregate.
        ablation: registry key or :class:`~opcc_edu.lab.experiments.Ablation`.
        grid: the grid ``table`` was restricted to, if any (as for the aggregate).
    """
    return attach_runs(table, ex.ablation_rows(results, ablation, grid))


def attach_runs(table: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``table`` carrying ``runs`` (environment, level, dataset, seed, the metrics and
    ``n``, the queries per run), read back by :func:`runs_of`."""
    out = table.copy()
    out.attrs[_RUNS] = _Runs(runs)
    return out


def concat_tables(tables: list[pd.DataFrame] | tuple[pd.DataFrame, ...]) -> pd.DataFrame:
    """The rows of several tables in one, carrying the runs of all of them (:func:`runs_of`).

    ``pd.concat`` keeps a table's runs only when every piece carries the very same runs (pandas
    keeps ``attrs`` that compare equal), so joining the aggregates of two grids or two ablations
    would leave a table whose verdicts are no longer paired. This joins the runs too.

    Raises:
        ValueError: some but not all of the tables carry runs (the joined table would pair some
            environments and not others); ``tables`` is empty.
    """
    tables = list(tables)
    if not tables:
        raise ValueError("tables must hold at least one table")
    held = [runs_of(table) for table in tables]
    joined = pd.concat(tables, ignore_index=True)
    joined.attrs.pop(_RUNS, None)
    if all(runs is None for runs in held):
        return joined
    if any(runs is None for runs in held):
        missing = [i for i, runs in enumerate(held) if runs is None]
        raise ValueError(f"tables {missing} carry no runs while the others do; attach them first (with_runs)")
    runs = pd.concat(list({id(r): r for r in held}.values()), ignore_index=True).drop_duplicates(ignore_index=True)
    return attach_runs(joined, runs)


def runs_of(table: pd.DataFrame, runs: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """The runs a verdict pairs: ``runs`` when given (:func:`opcc_edu.lab.experiments.ablation_rows`
    of the results), else those :func:`with_runs` attached to ``table``, else ``None`` (no pairing)."""
    if runs is not None:
        return runs
    held = table.attrs.get(_RUNS)
    return held.frame if isinstance(held, _Runs) else None


def twin_runs(runs: pd.DataFrame, environment: str, metric: str) -> pd.DataFrame:
    """``metric`` of one environment's runs, one row per (dataset, seed), one column per level (as
    a string): twins share a row. Repeated rows of one cell are averaged.

    Args:
        runs: rows with environment, level, dataset, seed and ``metric``
            (:func:`opcc_edu.lab.experiments.ablation_rows`).
    """
    check_choice(metric, TABLE_METRICS, "metric")
    part = runs[runs["environment"] == environment].assign(level=lambda f: f["level"].astype(str))
    return part.pivot_table(index=["dataset", "seed"], columns="level", values=metric, aggfunc="mean")


def paired_differences(runs: pd.DataFrame, environment: str, reference: str, level: str, metric: str) -> np.ndarray:
    """Level minus reference, twin by twin (:func:`twin_runs`); runs without a twin are left out."""
    twins = twin_runs(runs, environment, metric)
    reference, level = str(reference), str(level)
    if reference not in twins.columns or level not in twins.columns:
        return np.zeros(0)
    return (twins[level] - twins[reference]).dropna().to_numpy(dtype=float)


def _queries(runs: pd.DataFrame | None, environment: str) -> int | None:
    if runs is None or "n" not in runs.columns:
        return None
    n = pd.to_numeric(runs.loc[runs["environment"] == environment, "n"], errors="coerce").dropna()
    return int(n.min()) if len(n) else None


# --------------------------------------------------------------------------------------------
# One difference, judged
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DifferenceInterval:
    """A level minus its reference, with the 95% interval the verdict judges.

    Attributes:
        metric: of :data:`opcc_edu.names.TABLE_METRICS`.
        difference: level minus reference (the paired mean where twins exist).
        half_width: the judged 95% half-width (floored; ``nan``: unknown).
        raw_half_width: the t half-width before the floor.
        floor: :func:`half_width_floor` (0: none).
        paired: whether the interval is the twins' (else the levels' combined one).
        n: paired differences (paired) or the smaller level's runs (combined; ``None``: unknown).
        margin: :func:`equivalence_margin` of the two levels.
    """

    metric: str
    difference: float
    half_width: float
    raw_half_width: float
    floor: float
    paired: bool
    n: int | None
    margin: float

    @property
    def low(self) -> float:
        return self.difference - self.half_width

    @property
    def high(self) -> float:
        return self.difference + self.half_width

    def rounded(self, digits: int = 3) -> tuple[float, float]:
        """``(difference, half_width)`` rounded to ``digits`` decimals, as a page prints them."""
        return round(self.difference, digits), round(self.half_width, digits)

    @property
    def separated(self) -> bool:
        """The interval excludes zero (touching or unknown intervals do not)."""
        return bool(np.isfinite(self.half_width) and abs(self.difference) > self.half_width + 1e-12)

    @property
    def floored(self) -> bool:
        """The floor, not the runs' spread, set the half-width."""
        return bool(self.floor > 0 and not (self.raw_half_width >= self.floor))

    def judge(self, claim: str) -> str:
        """:func:`judge_difference` of this interval against ``claim`` (:data:`PAPER_CLAIMS`)."""
        return judge_difference(self.difference, self.separated, claim, self.half_width, self.margin)


def difference_interval(
    metric: str,
    reference_mean: float,
    reference_ci: float,
    level_mean: float,
    level_ci: float,
    twins: np.ndarray | None = None,
    n: int | None = None,
    queries: int | None = None,
) -> DifferenceInterval:
    """The interval of one difference, as the module's docstring states the rule.

    Args:
        metric: of :data:`opcc_edu.names.TABLE_METRICS`.
        reference_mean, reference_ci: the reference level's mean and 95% half-width.
        level_mean, level_ci: the level's.
        twins: the :func:`paired_differences` (two or more: the interval is theirs).
        n: runs per level, for the floor of the combined interval (``None``: unknown, no floor).
        queries: queries per run (:func:`metric_step`).
    """
    margin = equivalence_margin(metric, reference_mean, level_mean)
    if twins is not None and len(twins) >= 2:
        difference, raw = mean_confidence_interval(np.asarray(twins, dtype=float))
        paired, count = True, len(twins)
    else:
        difference = float(level_mean) - float(reference_mean)
        raw = difference_half_width(reference_ci, level_ci)
        paired, count = False, (int(n) if n is not None and np.isfinite(n) else None)
    floor = half_width_floor(metric, count, queries)
    half = max(raw, floor) if np.isfinite(raw) else raw
    return DifferenceInterval(metric, float(difference), float(half), float(raw), floor, paired, count, margin)


def judge_difference(
    difference: float,
    separated: bool,
    claim: str,
    half_width: float = float("nan"),
    margin: float = float("nan"),
) -> str:
    """One outcome (``"reproduced"``, ``"reversed"``, ``"inconclusive"``) for a level against its
    reference: steps 3 and 4 of the module's docstring.

    Args:
        difference: ours, level minus reference.
        separated: whether the difference's interval excludes zero
            (:attr:`DifferenceInterval.separated`).
        claim: what the paper found, one of :data:`PAPER_CLAIMS`.
        half_width: the 95% half-width of ``difference``; read for a claim of absence only
            (``nan``: unknown, so no absence is shown).
        margin: the equivalence margin (:func:`equivalence_margin`); read for a claim of absence only.
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


def level_interval(
    table: pd.DataFrame, runs: pd.DataFrame | None, environment: str, metric: str, reference: str, level: str
) -> DifferenceInterval | None:
    """:func:`difference_interval` of ``level`` against ``reference`` in one environment of an
    aggregate (its first row per cell), paired with ``runs`` where they hold twins; ``None`` when a
    cell is missing."""
    part = table[(table["environment"] == environment) & (table["metric"] == metric)]
    part = part.assign(level=part["level"].astype(str)).drop_duplicates("level").set_index("level")
    reference, level = str(reference), str(level)
    if reference not in part.index or level not in part.index:
        return None
    a, b = part.loc[reference], part.loc[level]
    if not (np.isfinite(a["mean"]) and np.isfinite(b["mean"])):
        return None
    twins = paired_differences(runs, environment, reference, level, metric) if runs is not None else None
    n = None
    if "n_samples" in part.columns:
        counts = pd.to_numeric(pd.Series([a["n_samples"], b["n_samples"]]), errors="coerce")
        n = int(counts.min()) if counts.notna().all() else None
    return difference_interval(
        metric,
        a["mean"],
        a.get("ci", np.nan),
        b["mean"],
        b.get("ci", np.nan),
        twins=twins,
        n=n,
        queries=_queries(runs, environment),
    )


def level_differences(
    table: pd.DataFrame, ablation: str | ex.Ablation, reference: str | None = None, runs: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Each level against a reference level, per environment and metric, judged by this rule.

    :func:`opcc_edu.lab.experiments.level_differences` reads a difference as the paper reads its
    tables (two disjoint intervals); this reads it as every verdict does: :func:`level_interval`,
    paired by seed where the table carries its runs (or ``runs`` are given), floored.

    Returns:
        DataFrame with environment, metric, reference, level, difference (level - reference; the
        paired mean where twins exist), half_width (the judged 95% half-width), paired and
        separated (the interval excludes zero).
    """
    runs = runs_of(table, runs)
    d = ex.level_differences(table, ablation, reference=reference)
    judged = [
        level_interval(table, runs, row.environment, row.metric, row.reference, row.level)
        for row in d.itertuples(index=False)
    ]
    return d.drop(columns="separated").assign(
        difference=[d["difference"].iloc[i] if j is None else j.difference for i, j in enumerate(judged)],
        half_width=[np.nan if j is None else j.half_width for j in judged],
        paired=[j is not None and j.paired for j in judged],
        separated=[j is not None and j.separated for j in judged],
    )


def size_ratio(ours: float, paper: float, factor: float = SIZE_FACTOR) -> str | None:
    """How far ours is from the paper's difference in size, where both point the same way and
    their magnitudes part by more than ``factor``: ``"13×"`` (ours the larger) or ``"1/4 of"``
    (ours the smaller); ``None`` otherwise, or without a direction to share."""
    ours, paper = float(ours), float(paper)
    if not (np.isfinite(ours) and np.isfinite(paper)) or ours == 0 or paper == 0:
        return None
    if math.copysign(1, ours) != math.copysign(1, paper):
        return None
    ratio = abs(ours) / abs(paper)
    if ratio > factor:
        return f"{_ratio_text(ratio, factor)}×"
    if ratio < 1 / factor:
        return f"1/{_ratio_text(1 / ratio, factor)} of"
    return None


def _ratio_text(ratio: float, factor: float) -> str:
    """A ratio beyond ``factor``: whole above 10, else one decimal, or two where one decimal
    would round it onto the factor (``3.04`` rather than ``3.0``, which reads as inside it)."""
    if ratio >= 10:
        return f"{ratio:.0f}"
    return f"{ratio:.1f}" if round(ratio, 1) > factor else f"{ratio:.2f}"


def size_statement(ours: float, paper: float, factor: float = SIZE_FACTOR) -> str | None:
    """:func:`size_ratio` in words: ``"same direction, 13× the paper's difference"`` or ``"same
    direction, 1/4 of the paper's difference"``; ``None`` where the sizes do not part."""
    ratio = size_ratio(ours, paper, factor)
    return None if ratio is None else f"same direction, {ratio} the paper's difference"


@functools.cache
def _paper_cells(ablation: str) -> dict[tuple[str, str, str], float]:
    paper = ex.paper_results(ablation)
    paper = paper[paper["dataset"].isin(["all", "1m"])].drop_duplicates(["environment", "metric", "level"])
    keys = zip(paper["environment"], paper["metric"], paper["level"].astype(str), strict=True)
    return {key: float(mean) for key, mean in zip(keys, paper["mean"], strict=True)}


def paper_difference(ablation: str | ex.Ablation, environment: str, metric: str, reference: str, level: str) -> float:
    """The paper's ``level`` minus ``reference`` in one environment (its five-dataset locomotion
    means, the mazes' ``1m`` cells); ``nan`` where its table lacks either."""
    cells = _paper_cells(ex.get_ablation(ablation).name)
    a, b = cells.get((environment, metric, str(reference))), cells.get((environment, metric, str(level)))
    return float("nan") if a is None or b is None else b - a


def paper_half_widths() -> dict[str, float]:
    """The median 95% half-width of each metric over every cell of the paper's tables
    (:func:`opcc_edu.lab.experiments.paper_results`), the precision its margins are read against."""
    table = ex.paper_results()
    return {str(m): float(v) for m, v in table.groupby("metric")["ci"].median().items()}
