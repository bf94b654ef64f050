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

Only numpy is imported at module level; scipy and matplotlib are imported by the few functions
that need them, so ``import opcc_edu.metrics`` stays cheap and never touches torch.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from .names import METRIC_NAMES

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "METRIC_NAMES",
    "risk_coverage_curve",
    "aurcc",
    "reverse_pair_proportion",
    "coverage_resolution",
    "oracle_aurcc",
    "excess_aurcc",
    "augrc",
    "expected_random_aurcc",
    "selective_loss",
    "query_losses",
    "trapezoid_area",
    "evaluate",
    "mean_confidence_interval",
    "format_mean_ci",
    "plot_risk_coverage",
]


# --------------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------------
def _as_binary(values: Any, argument: str) -> np.ndarray:
    """Return ``values`` as a 1-D int8 array of 0/1 or raise ValueError naming ``argument``."""
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{argument} must be a 1-D array of shape (N,), got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{argument} is empty; at least one query is needed")
    if array.dtype == bool:
        return array.astype(np.int8)
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise ValueError(f"{argument} must hold 0/1 values, got dtype {array.dtype}")
    bad = (array != 0) & (array != 1)
    if np.any(bad):
        raise ValueError(
            f"{argument} must hold only 0/1 values (1 means value_a < value_b); "
            f"found {array[bad][0]!r} at index {int(np.flatnonzero(bad)[0])}"
        )
    return array.astype(np.int8)


def _as_confidence(values: Any, argument: str = "confidence") -> np.ndarray:
    """Return ``values`` as a 1-D finite float64 array or raise ValueError naming ``argument``."""
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{argument} must be a 1-D array of shape (N,), got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{argument} is empty; at least one query is needed")
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
        raise ValueError(f"{argument} must be numeric, got dtype {array.dtype}")
    array = array.astype(np.float64)
    if not np.all(np.isfinite(array)):
        index = int(np.flatnonzero(~np.isfinite(array))[0])
        raise ValueError(f"{argument} must be finite; found {array[index]!r} at index {index}")
    return array


def _check_lengths(**arrays: np.ndarray) -> int:
    lengths = {name: len(array) for name, array in arrays.items()}
    if len(set(lengths.values())) != 1:
        described = ", ".join(f"{name} has {length}" for name, length in lengths.items())
        raise ValueError(f"inputs must have the same number of queries N: {described}")
    return next(iter(lengths.values()))


def query_losses(prediction: Any, target: Any) -> np.ndarray:
    """The 0/1 loss of every answer: (N,) int64, 1 where ``prediction`` differs from ``target``.

    Args:
        prediction: (N,) 0/1 predictions.
        target: (N,) 0/1 true answers.

    Raises:
        ValueError: an input is not 1-D binary, or the lengths differ.
    """
    pred = _as_binary(prediction, "prediction")
    targ = _as_binary(target, "target")
    _check_lengths(prediction=pred, target=targ)
    return (pred != targ).astype(np.int64)


def _loss_and_confidence(prediction: Any, target: Any, confidence: Any) -> tuple[np.ndarray, np.ndarray]:
    loss = query_losses(prediction, target)
    conf = _as_confidence(confidence)
    _check_lengths(prediction=loss, confidence=conf)
    return loss, conf


def _check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k (the number of coverage bins) must be an integer >= 1, got {k!r}")
    return int(k)


# --------------------------------------------------------------------------------------------
# The risk-coverage curve and its summaries
# --------------------------------------------------------------------------------------------
def _operating_points(loss: np.ndarray, confidence: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Covered counts, covered errors and thresholds of every operating point (no (0, 0)).

    Returns arrays of length P (the number of distinct confidences), ordered by decreasing
    threshold, i.e. increasing coverage.
    """
    order = np.argsort(confidence, kind="stable")[::-1]
    sorted_conf = confidence[order]
    cumulative_errors = np.cumsum(loss[order])
    # Last position of each run of equal confidences: tied queries enter together.
    ends = np.flatnonzero(sorted_conf[1:] != sorted_conf[:-1])
    ends = np.append(ends, sorted_conf.size - 1)
    return ends + 1, cumulative_errors[ends], sorted_conf[ends]


def risk_coverage_curve(prediction: Any, target: Any, confidence: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact risk-coverage curve: one operating point per distinct confidence, plus (0, 0).

    Args:
        prediction: (N,) 0/1 predictions (1 means value_a < value_b).
        target: (N,) 0/1 true answers.
        confidence: (N,) finite confidences; only their ordering matters.

    Returns:
        ``(coverage, risk, threshold)``, each of shape (P + 1,) where P is the number of distinct
        confidence values, sorted by increasing coverage. Entry 0 is the zero-coverage point
        (coverage 0, risk 0, threshold ``+inf``); entry i > 0 is the operating point of
        threshold ``threshold[i]`` (covering every query with ``confidence >= threshold[i]``);
        the last entry has coverage 1 and the full-coverage risk.
    """
    loss, conf = _loss_and_confidence(prediction, target, confidence)
    covered, errors, threshold = _operating_points(loss, conf)
    n = conf.size
    coverage = np.concatenate(([0.0], covered / n))
    risk = np.concatenate(([0.0], errors / covered))
    return coverage, risk, np.concatenate(([np.inf], threshold))


def trapezoid_area(x: np.ndarray, y: np.ndarray) -> float:
    """Area under the piecewise-linear curve through the points ``(x[i], y[i])`` (trapezoid rule).

    Args:
        x: (P,) abscissae in the order the curve visits them (e.g. coverage, increasing).
        y: (P,) ordinates.

    Raises:
        ValueError: ``x`` and ``y`` are not 1-D arrays of the same length.
    """
    if np.ndim(x) != 1 or np.shape(x) != np.shape(y):
        raise ValueError(f"x and y must be 1-D arrays of the same length, got shapes {np.shape(x)} and {np.shape(y)}")
    return float(np.sum(np.diff(x) * (y[1:] + y[:-1])) / 2.0)


def _reverse_pairs(loss: np.ndarray, conf: np.ndarray) -> float:
    wrong = np.sort(conf[loss == 1])
    correct = conf[loss == 0]
    # For each correct query, the wrong queries with strictly larger confidence.
    above = wrong.size - np.searchsorted(wrong, correct, side="right")
    n = float(conf.size)
    return float(int(above.sum(dtype=np.int64)) / (n * n))


def _resolution(covered: np.ndarray, n: int, k: int) -> float:
    counts = np.concatenate(([0], covered)).astype(np.int64)
    bins = np.minimum(counts * k // n, k - 1)
    return float(np.unique(bins).size / k)


def aurcc(prediction: Any, target: Any, confidence: Any) -> float:
    """Area under the exact risk-coverage curve (trapezoid rule over coverage [0, 1]).

    Lower is better; 0 means no errors at all. Ties in ``confidence`` form one operating point,
    so the value depends only on the ordering of the confidences (with ties), never on a grid.

    Args:
        prediction: (N,) 0/1 predictions.
        target: (N,) 0/1 true answers.
        confidence: (N,) finite confidences.

    Returns:
        The AURCC, in [0, 1].
    """
    coverage, risk, _ = risk_coverage_curve(prediction, target, confidence)
    return trapezoid_area(coverage, risk)


def selective_loss(prediction: Any, target: Any) -> float:
    """Risk at full coverage: the mean 0/1 loss over all N queries (the paper's "loss")."""
    return float(query_losses(prediction, target).mean())


def reverse_pair_proportion(prediction: Any, target: Any, confidence: Any) -> float:
    """Reverse pair proportion, RPP = (1/N**2) * #{(q1, q2): l(q1) < l(q2) and c(q1) < c(q2)}.

    With a 0/1 loss a reversed pair is a correctly answered query that received *strictly* lower
    confidence than a wrongly answered one (ties are not reversed). Counted by sorting the wrong
    answers' confidences and binary-searching each correct answer's confidence: O(N log N) time
    and O(N) memory, so N = 10**6 takes a fraction of a second.

    Args:
        prediction: (N,) 0/1 predictions.
        target: (N,) 0/1 true answers.
        confidence: (N,) finite confidences.

    Returns:
        The RPP, in [0, 1/4] (at most #correct * #wrong / N**2).
    """
    return _reverse_pairs(*_loss_and_confidence(prediction, target, confidence))


def coverage_resolution(prediction: Any, target: Any, confidence: Any, k: int = 10) -> float:
    """Coverage resolution CR_K: fraction of K coverage bins hit by some operating point.

    The bins are ``[i/K, (i+1)/K)`` for i < K - 1 and ``[(K-1)/K, 1]``. The zero-coverage point
    counts (it falls in bin 0), so a constant confidence, whose only points are coverage 0 and
    1, scores 2/K -- the floor of 0.2 at K = 10 in the paper's tables. Bins are computed with
    integer arithmetic (``covered * K // N``), so a coverage exactly on a bin edge never
    slips into the wrong bin through rounding.

    Args:
        prediction: (N,) 0/1 predictions (only checked: CR_K depends on the confidence alone).
        target: (N,) 0/1 true answers (only checked).
        confidence: (N,) finite confidences.
        k: number of bins K (default 10, as in the paper).

    Returns:
        CR_K in [min(2, K)/K, 1].
    """
    k = _check_k(k)
    loss, conf = _loss_and_confidence(prediction, target, confidence)
    covered, _, _ = _operating_points(loss, conf)
    return _resolution(covered, conf.size, k)


def oracle_aurcc(prediction: Any, target: Any) -> float:
    """Smallest AURCC any confidence can reach with these predictions: ``r_f**2 / 2``.

    With C correct and E wrong answers (r_f = E/N), give every correct answer confidence 1 and
    every wrong one confidence 0 (:func:`opcc_edu.confidence.oracle_confidence`). The curve is
    then 0 up to coverage C/N and a straight line to (1, r_f), of area ``(1 - C/N) * r_f / 2 =
    r_f**2 / 2``. Nothing does better: every operating point at coverage x has risk at least
    ``max(0, 1 - C/(N x))``, which is 0 before C/N and concave after it, so it lies above that
    straight line; a piecewise-linear curve through such points cannot dip below it. Note that
    ranking the correct answers first *without* ties scores worse, because the risks
    ``1 - C/i`` of its extra points lie above the chord.

    Args:
        prediction: (N,) 0/1 predictions.
        target: (N,) 0/1 true answers.

    Returns:
        The oracle AURCC, ``r_f**2 / 2``.
    """
    r_f = selective_loss(prediction, target)
    return r_f * r_f / 2.0


def excess_aurcc(prediction: Any, target: Any, confidence: Any) -> float:
    """AURCC minus the oracle AURCC of the same predictions (>= 0; 0 = perfect ordering).

    Separates the quality of the confidence from the accuracy of the predictions: two models
    with different full-coverage risks can be compared on how much area their ordering wastes.
    """
    return aurcc(prediction, target, confidence) - oracle_aurcc(prediction, target)


def augrc(prediction: Any, target: Any, confidence: Any) -> float:
    """Area under the generalized risk-coverage curve (AUGRC, Traub et al., 2024).

    The generalized risk of a threshold is the fraction of *all* N queries that are covered and
    wrong (selective risk times coverage); its curve runs from (0, 0) to (1, r_f) through the
    same operating points as the RCC, and ties enter linearly as for the RCC. Unlike AURCC it
    does not over-weight the few most confident queries. For a 0/1 loss it equals
    ``(1 - AUROC) * acc * (1 - acc) + (1 - acc)**2 / 2``, where AUROC is the probability that
    a correct answer is more confident than a wrong one (ties count 1/2).

    Args:
        prediction: (N,) 0/1 predictions.
        target: (N,) 0/1 true answers.
        confidence: (N,) finite confidences.

    Returns:
        The AUGRC, in [0, 1/2].
    """
    loss, conf = _loss_and_confidence(prediction, target, confidence)
    covered, errors, _ = _operating_points(loss, conf)
    n = conf.size
    coverage = np.concatenate(([0.0], covered / n))
    generalized_risk = np.concatenate(([0.0], errors / n))
    return trapezoid_area(coverage, generalized_risk)


def expected_random_aurcc(prediction: Any, target: Any) -> float:
    """Exact expected AURCC of a uniformly random confidence: ``r_f * (1 - 1/(2N))``.

    i.i.d. continuous random confidences have no ties (almost surely) and rank the N queries in
    a uniformly random order. The i-th operating point then covers a uniformly random subset of
    size i, whose expected error fraction is exactly r_f (the mean of a hypergeometric draw),
    for every i >= 1; the zero-coverage point has risk 0. AURCC is linear in the risks, so its
    expectation is the trapezoid area under the expected risks: ``(1/N) * (r_f / 2) +
    (1 - 1/N) * r_f``. The paper's "expected AURCC is r_f" is the large-N limit; the first
    trapezoid, which rises from (0, 0), removes ``r_f / (2N)``.

    Args:
        prediction: (N,) 0/1 predictions.
        target: (N,) 0/1 true answers.

    Returns:
        ``E[AURCC]`` over uniformly random confidences.
    """
    loss = query_losses(prediction, target)
    r_f = float(loss.mean())
    return r_f * (1.0 - 1.0 / (2.0 * loss.size))


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
        ``augrc``, ``random_aurcc`` (expected AURCC of a random confidence) and
        ``n_operating_points`` (distinct confidences). Display names: :data:`METRIC_NAMES`.
    """
    k = _check_k(k)
    loss, conf = _loss_and_confidence(prediction, target, confidence)
    # One sort serves every curve-based metric; the public functions re-validate otherwise.
    covered, errors, _ = _operating_points(loss, conf)
    n = conf.size
    coverage = np.concatenate(([0.0], covered / n))
    area = trapezoid_area(coverage, np.concatenate(([0.0], errors / covered)))
    r_f = float(loss.mean())
    oracle = r_f * r_f / 2.0
    return {
        "aurcc": area,
        "rpp": _reverse_pairs(loss, conf),
        "cr_k": _resolution(covered, n, k),
        "loss": r_f,
        "n": int(n),
        "oracle_aurcc": oracle,
        "excess_aurcc": area - oracle,
        "augrc": trapezoid_area(coverage, np.concatenate(([0.0], errors / n))),
        "random_aurcc": r_f * (1.0 - 1.0 / (2.0 * n)),
        "n_operating_points": int(covered.size),
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
    if isinstance(digits, bool) or not isinstance(digits, (int, np.integer)) or digits < 0:
        raise ValueError(f"digits must be a non-negative integer, got {digits!r}")
    text = f"{mean:.{digits}f}"
    if math.isnan(half_width):
        return text
    if round(half_width, digits) == 0:
        return f"{text} ± (<{10.0**-digits:.{digits}f})"
    return f"{text} ± {half_width:.{digits}f}"


# --------------------------------------------------------------------------------------------
# Plotting
# --------------------------------------------------------------------------------------------
def plot_risk_coverage(
    prediction: Any,
    target: Any,
    confidence: Any,
    ax: Axes | None = None,
    label: str | None = None,
    **plot_kwargs: Any,
) -> Axes:
    """Plot the exact risk-coverage curve; see :func:`opcc_edu.plotting.plot_risk_coverage`.

    Kept here so that ``opcc_edu.metrics.plot_risk_coverage`` still works; matplotlib is
    imported only when it is called.
    """
    from .plotting.selective import plot_risk_coverage as plot

    return plot(prediction, target, confidence, ax=ax, label=label, **plot_kwargs)
