"""Selective-prediction metrics for policy-comparison answers: exact RCC, AURCC, RPP, CR_K.

A model answers each of N queries with a prediction ``f(q)`` in {0, 1} and a confidence
``c(q)`` (larger means more sure). Its 0/1 loss is ``l(q) = [f(q) != target(q)]``. Everything
here depends on the confidence only through its *ordering*, and everything is exact:

* **Risk-coverage curve (RCC).** Sweeping a threshold ``tau`` over the real line, the query set
  ``{q : c(q) >= tau}`` changes only at the distinct confidence values, so the curve has one
  operating point per distinct confidence (tied queries enter together) plus the zero-coverage
  point (0, 0). Consecutive points are joined by straight lines (the paper justifies this by
  randomising between two thresholds, Section 3.3 of Koul et al.).
* **AURCC** is the trapezoid area under that piecewise-linear curve over coverage [0, 1]. No
  threshold grid is involved; on confidences that are multiples of 0.01 it equals the 0.01-grid
  sweep of the public reference code, and it stays exact for any other confidence.
* **RPP** (reverse pair proportion) counts pairs (q1, q2) with ``l(q1) < l(q2)`` and
  ``c(q1) < c(q2)``, divided by N**2. With a 0/1 loss that is a count of (correct, wrong)
  pairs ordered the wrong way, which a sort and a binary search give in O(N log N).
* **CR_K** (coverage resolution) is the fraction of the K bins ``[i/K, (i+1)/K)`` (the last one
  closed at 1) that hold the coverage of at least one operating point, the zero-coverage point
  included: a constant confidence scores 2/K, the floor of 0.2 at K = 10 seen in the paper.

Beyond the paper: :func:`oracle_aurcc` (best achievable AURCC for the same predictions),
:func:`excess_aurcc`, :func:`augrc` (area under the generalized risk-coverage curve of
Traub et al., 2024), :func:`expected_random_aurcc` (exact expectation for a uniformly random
confidence) and :func:`mean_confidence_interval` / :func:`format_mean_ci` for the
"mean +- 95% CI over runs" format of the paper's tables.

Tie-fair metrics
----------------
The paper's AURCC and RPP let *ties* move the score, though ties carry no information about
which answer is right. A tied group enters the RCC as one operating point, joined to the
previous one by a straight line. Breaking its ties at random, the expected risks inside the
group lie on a curve (the risk ``E_i / i`` is not linear in i) that bends *above* that line
whenever the risk rises through the group -- always for the first group, whose line starts at
(0, 0) -- so there the ties earn a discount (and a penalty in the rarer case of a group less
wrong than the queries before it). RPP counts a tied (correct, wrong) pair as not reversed: a
pure discount.

Worked example: a constant confidence (every query tied). Its RCC has the two points (0, 0)
and (1, r_f), so ``AURCC = r_f / 2`` and ``RPP = 0`` -- half the AURCC, and a perfect RPP,
for a confidence that knows nothing. A continuous random confidence, which equally knows
nothing, scores ``E[AURCC] = r_f (1 - 1/(2N))`` (:func:`expected_random_aurcc`), about r_f, and
``E[RPP] = C E / (2 N**2)`` with C correct and E wrong answers. The paper's PCI with 100
members puts most queries at confidence 0.99, and its Table 4 ratios AURCC / (loss / 2) of
about 1.0 are what an all-tied confidence scores.

The tie-fair metrics score a confidence as if its ties were broken uniformly at random (a
strict order: N operating points at coverages i/N, plus (0, 0)) and take the exact
expectation, in O(N log N) and without sampling, so ties earn nothing:

* :func:`expected_aurcc` -- expected AURCC; a constant confidence scores exactly
  :func:`expected_random_aurcc`.
* :func:`expected_rpp` -- expected RPP: a tied (correct, wrong) pair counts 1/2; a constant
  confidence scores ``C E / (2 N**2)``, the same as a random one.
* :func:`tie_fair_oracle_aurcc` -- the best expected AURCC any confidence can reach (all
  correct answers first).
* :func:`selective_gain` -- ``(random - expected_aurcc) / (random - tie-fair oracle)``:
  1 = perfect ordering, 0 = no better than random (exactly 0 for a constant confidence),
  negative = worse than random.
* :func:`auroc` -- AUROC of the confidence for separating correct from wrong answers (ties 1/2);
  0.5 for a constant confidence. ``expected_rpp = (1 - AUROC) C E / N**2``.
* :func:`augrc` -- already tie-fair as defined: the generalized risk of a strict order grows
  linearly in expectation inside a tied group, so the straight segment of the tied curve *is*
  the expected curve, and ``AUGRC = r_f**2 / 2 + expected_rpp`` exactly.

:data:`opcc_edu.names.TIE_FAIR_METRICS` lists them; :func:`evaluate` returns them beside the
paper's metrics, which are kept unchanged for comparison with the paper.

Only numpy is imported at module level; scipy and scikit-learn are imported by the
few functions that need them, so ``import opcc_edu.metrics`` stays cheap and never touches
torch.

Layout: :mod:`~opcc_edu.metrics.checks` (input checks), :mod:`~opcc_edu.metrics.selective` (the
curve and the paper's metrics), :mod:`~opcc_edu.metrics.tiefair` (the tie-fair ones); this module
holds :func:`evaluate`, which computes all of them from one sort, and the statistics over runs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..names import METRIC_NAMES, TIE_FAIR_METRICS
from ..utils import check_positive_int
from .checks import check_k, loss_and_confidence, query_losses
from .selective import (
    augrc,
    aurcc,
    coverage_resolution,
    excess_aurcc,
    expected_random_aurcc,
    operating_points,
    oracle_aurcc,
    resolution_of_coverage,
    reverse_pair_proportion,
    reverse_pairs_of_losses,
    risk_coverage_curve,
    selective_loss,
    trapezoid_area,
)
from .tiefair import (
    auroc,
    auroc_of_pairs,
    expected_aurcc,
    expected_aurcc_of_losses,
    expected_risk_coverage_curve,
    expected_rpp,
    oracle_gap,
    pair_counts,
    selective_gain,
    selective_gain_of_losses,
    tie_fair_oracle_aurcc,
)

__all__ = [
    "METRIC_NAMES",
    "TIE_FAIR_METRICS",
    "risk_coverage_curve",
    "aurcc",
    "reverse_pair_proportion",
    "coverage_resolution",
    "oracle_aurcc",
    "excess_aurcc",
    "augrc",
    "expected_random_aurcc",
    "expected_aurcc",
    "expected_risk_coverage_curve",
    "expected_rpp",
    "tie_fair_oracle_aurcc",
    "selective_gain",
    "auroc",
    "selective_loss",
    "query_losses",
    "trapezoid_area",
    "evaluate",
    "mean_confidence_interval",
    "format_mean_ci",
]


def evaluate(prediction: Any, target: Any, confidence: Any, k: int = 10) -> dict[str, float]:
    """Every metric of one set of answers, as in the columns of the paper's tables.

    Args:
        prediction: (N,) 0/1 predictions.
        target: (N,) 0/1 true answers.
        confidence: (N,) finite confidences.
        k: number of coverage bins for CR_K.

    Returns:
        A dict with the paper's metrics ``aurcc``, ``rpp``, ``cr_k``, ``loss`` (risk at full
        coverage) and ``n`` (number of queries), plus ``oracle_aurcc``, ``excess_aurcc``,
        ``augrc``, ``random_aurcc`` (expected AURCC of a random confidence),
        ``n_operating_points`` (distinct confidences), and the tie-fair metrics
        ``expected_aurcc``, ``expected_rpp``, ``tie_fair_oracle_aurcc``, ``selective_gain``
        and ``auroc`` (see the module docstring; ``augrc`` is tie-fair too). The paper's
        metrics are computed exactly as before. ``auroc`` here comes from the same pair count
        as ``expected_rpp`` (it equals :func:`auroc`'s scikit-learn value up to rounding).
        Display names: :data:`METRIC_NAMES`.
    """
    k = check_k(k)
    loss, conf = loss_and_confidence(prediction, target, confidence)
    # One sort serves every curve-based metric; the public functions re-validate otherwise.
    covered, errors, _ = operating_points(loss, conf)
    n = conf.size
    coverage = np.concatenate(([0.0], covered / n))
    area = trapezoid_area(coverage, np.concatenate(([0.0], errors / covered)))
    r_f = float(loss.mean())
    oracle = r_f * r_f / 2.0
    reversed_pairs, tied_pairs = pair_counts(loss, conf)
    return {
        "aurcc": area,
        "rpp": reverse_pairs_of_losses(loss, conf),
        "cr_k": resolution_of_coverage(covered, n, k),
        "loss": r_f,
        "n": int(n),
        "oracle_aurcc": oracle,
        "excess_aurcc": area - oracle,
        "augrc": trapezoid_area(coverage, np.concatenate(([0.0], errors / n))),
        "random_aurcc": r_f * (1.0 - 1.0 / (2.0 * n)),
        "n_operating_points": int(covered.size),
        "expected_aurcc": expected_aurcc_of_losses(loss, conf),
        "expected_rpp": (2 * reversed_pairs + tied_pairs) / (2.0 * n * n),
        "tie_fair_oracle_aurcc": r_f * (1.0 - 1.0 / (2.0 * n)) - oracle_gap(loss) / n,
        "selective_gain": selective_gain_of_losses(loss, conf),
        "auroc": auroc_of_pairs(loss, reversed_pairs, tied_pairs),
    }


# --------------------------------------------------------------------------------------------
# Aggregation over runs
# --------------------------------------------------------------------------------------------
def mean_confidence_interval(values: Any, level: float = 0.95) -> tuple[float, float]:
    """Mean and half-width of the two-sided Student-t confidence interval of the mean.

    This is the "mean +- CI" format of the paper's tables (for example 50 samples in Table 4):
    ``half_width = t_{(1 + level)/2, n - 1} * s / sqrt(n)`` with ``s`` the sample standard
    deviation (ddof=1).

    Args:
        values: (R,) finite values, one per run (seed, dataset, ...).
        level: confidence level in (0, 1).

    Returns:
        ``(mean, half_width)``. With a single value the interval is undefined and
        ``half_width`` is ``nan`` (so a one-seed ``tiny`` run still produces a table).
    """
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"values must be a non-empty 1-D array of shape (R,), got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"values must be finite, got {array[~np.isfinite(array)][0]!r}")
    if not isinstance(level, (float, int, np.floating)) or not 0.0 < float(level) < 1.0:
        raise ValueError(f"level must be a number in (0, 1), got {level!r}")
    mean = float(array.mean())
    if array.size == 1:
        return mean, math.nan
    from scipy import stats

    quantile = float(stats.t.ppf((1.0 + float(level)) / 2.0, df=array.size - 1))
    return mean, quantile * float(array.std(ddof=1)) / math.sqrt(array.size)


def format_mean_ci(mean: float, half_width: float, digits: int = 3) -> str:
    """Format ``mean +- half_width`` like the paper's tables, e.g. ``"0.219 ± 0.005"``.

    A half-width that rounds to zero is shown as ``(<0.001)`` (for ``digits=3``); ``nan`` (a
    single run) shows the mean alone.
    """
    digits = check_positive_int(digits, "digits", minimum=0)
    text = f"{mean:.{digits}f}"
    if math.isnan(half_width):
        return text
    if round(half_width, digits) == 0:
        return f"{text} ± (<{10.0**-digits:.{digits}f})"
    return f"{text} ± {half_width:.{digits}f}"
