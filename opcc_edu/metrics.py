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

Only numpy is imported at module level; scipy, scikit-learn and matplotlib are imported by the
few functions that need them, so ``import opcc_edu.metrics`` stays cheap and never touches
torch.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from .names import METRIC_NAMES, TIE_FAIR_METRICS

if TYPE_CHECKING:
    from matplotlib.axes import Axes

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
    a correct answer is more confident than a wrong one (ties count 1/2), i.e.
    ``r_f**2 / 2 + expected_rpp`` (:func:`auroc`, :func:`expected_rpp`).

    AUGRC is **tie-fair as it stands**: it equals the expected AUGRC of the strict orders
    obtained by breaking ties uniformly at random. Inside a tied group of n_g queries with e_g
    wrong answers, entered after S queries with A wrong ones, the generalized risk of a random
    strict order after j of its queries is ``(A + j e_g / n_g) / N`` in expectation -- linear in
    j, so the expected curve is the straight segment the tied curve already draws, and the
    area, linear in the risks, has the same expectation. (The selective risk ``E_i / i`` of
    AURCC is not linear in i, which is why :func:`aurcc` is not tie-fair.) A constant confidence
    scores ``r_f**2 / 2 + C E / (2 N**2)``, the same as a random one.

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


# --------------------------------------------------------------------------------------------
# Tie-fair metrics: ties broken uniformly at random, exact expectations
# --------------------------------------------------------------------------------------------
def _tie_groups(loss: np.ndarray, confidence: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct confidence, in decreasing order: ``(size, errors, before, errors_before)``.

    ``size`` n_g and ``errors`` e_g count the group's queries and wrong answers; ``before`` S
    and ``errors_before`` A count the queries and wrong answers of the more confident groups.
    All (G,) int64.
    """
    covered, cumulative_errors, _ = _operating_points(loss, confidence)
    covered = covered.astype(np.int64)
    cumulative_errors = cumulative_errors.astype(np.int64)
    before = np.concatenate(([0], covered[:-1]))
    errors_before = np.concatenate(([0], cumulative_errors[:-1]))
    return covered - before, cumulative_errors - errors_before, before, errors_before


def _random_gap(loss: np.ndarray, confidence: np.ndarray) -> float:
    """``N * (expected_random_aurcc - expected_aurcc)`` (the derivation: :func:`expected_aurcc`).

    Written as ``sum_g [(n_g E - e_g N) / N - (A n_g - e_g S) / n_g * (H(S + n_g) - H(S))]``
    with integer numerators, so that it is exactly 0 for a constant confidence.
    """
    size, errors, before, errors_before = _tie_groups(loss, confidence)
    n = int(loss.size)
    total_errors = int(errors.sum())
    # H(S + n_g) - H(S) = sum_{j=1..n_g} 1/(S + j): one reduceat over 1/k, no cumulative rounding.
    inverse = 1.0 / np.arange(1, n + 1, dtype=np.float64)
    harmonic = np.add.reduceat(inverse, before)
    rate_term = (size * total_errors - errors * n).astype(np.float64) / n
    order_term = (errors_before * size - errors * before).astype(np.float64) / size
    return float(np.sum(rate_term - order_term * harmonic))


def _oracle_gap(loss: np.ndarray) -> float:
    """``N * (expected_random_aurcc - tie_fair_oracle_aurcc) = C * (H(N) - H(C))``."""
    n = int(loss.size)
    correct = n - int(loss.sum())
    return float(correct * np.sum(1.0 / np.arange(correct + 1, n + 1, dtype=np.float64)))


def _pair_counts(loss: np.ndarray, confidence: np.ndarray) -> tuple[int, int]:
    """(correct, wrong) pairs: ``(strictly reversed, tied)``, each O(N log N) by binary search."""
    wrong = np.sort(confidence[loss == 1])
    correct = confidence[loss == 0]
    right = np.searchsorted(wrong, correct, side="right")
    left = np.searchsorted(wrong, correct, side="left")
    reversed_pairs = int((wrong.size - right).sum(dtype=np.int64))
    tied_pairs = int((right - left).sum(dtype=np.int64))
    return reversed_pairs, tied_pairs


def _pairs_auroc(loss: np.ndarray, reversed_pairs: int, tied_pairs: int) -> float:
    wrong = int(loss.sum())
    correct = int(loss.size) - wrong
    if wrong == 0 or correct == 0:
        return 0.5
    return 1.0 - (2 * reversed_pairs + tied_pairs) / (2.0 * correct * wrong)


def expected_risk_coverage_curve(prediction: Any, target: Any, confidence: Any) -> tuple[np.ndarray, np.ndarray]:
    """The expected risk-coverage curve when ties are broken uniformly at random (tie-fair).

    A strict order has one operating point per query: coverage i/N, risk E_i / i. Inside a
    tied group of n_g queries with e_g wrong answers, after S queries with A wrong answers,
    the expected risk after its first j queries is ``(A + j e_g / n_g) / (S + j)`` (see
    :func:`expected_aurcc`, which is the trapezoid area under this curve).

    Args:
        prediction: (N,) 0/1 predictions.
        target: (N,) 0/1 true answers.
        confidence: (N,) finite confidences.

    Returns:
        ``(coverage, risk)``, each (N + 1,): coverage ``i / N`` for i = 0..N and the expected
        selective risk there (0 at coverage 0, the full-coverage risk at coverage 1).

    Raises:
        ValueError: an input is not 1-D, empty, non-binary or non-finite, or the lengths differ.
    """
    loss, conf = _loss_and_confidence(prediction, target, confidence)
    size, errors, before, errors_before = _tie_groups(loss, conf)
    group = np.repeat(np.arange(size.size), size)
    j = np.arange(1, loss.size + 1) - before[group]
    risk = (errors_before[group] + j * errors[group] / size[group]) / (before[group] + j)
    return np.arange(loss.size + 1) / loss.size, np.concatenate(([0.0], risk))


def expected_aurcc(prediction: Any, target: Any, confidence: Any) -> float:
    """Expected AURCC when ties in ``confidence`` are broken uniformly at random (tie-fair).

    A strict order of the N queries has N operating points at coverages i/N plus (0, 0), so
    its AURCC is ``(1/N) * (sum_{i=1..N} r_i - r_N / 2)`` with ``r_i = E_i / i`` and E_i the
    wrong answers among the i most confident. Group the queries by distinct confidence in
    decreasing order: group g holds n_g queries with e_g wrong answers (``p_g = e_g / n_g``),
    after S queries with A wrong answers. Breaking the group's ties at random, the first j of
    its queries are a uniform draw, so ``E[E_{S+j}] = A + j p_g`` (hypergeometric mean) and

        ``sum_{j=1..n_g} E[r_{S+j}] = n_g p_g + (A - p_g S) (H(S + n_g) - H(S))``

    with H the harmonic numbers. AURCC is linear in the E_i, so this is exact: O(N log N), no
    sampling. It is computed as ``expected_random_aurcc - D / N`` with
    ``D = N r_f - sum_i E[r_i]`` summed with integer numerators, so a constant confidence (one
    group, S = A = 0) gives exactly ``r_f (1 - 1/(2N))`` -- :func:`expected_random_aurcc`, the
    score of a confidence that knows nothing -- instead of the paper AURCC's ``r_f / 2``.
    Without ties it equals :func:`aurcc` (up to rounding).

    Args:
        prediction: (N,) 0/1 predictions.
        target: (N,) 0/1 true answers.
        confidence: (N,) finite confidences.

    Returns:
        ``E[AURCC]`` over uniformly random tie-breaking, in
        ``[tie_fair_oracle_aurcc, 1]``; lower is better.

    Raises:
        ValueError: an input is not 1-D, empty, non-binary or non-finite, or the lengths differ.
    """
    loss, conf = _loss_and_confidence(prediction, target, confidence)
    return _expected_aurcc(loss, conf)


def _expected_aurcc(loss: np.ndarray, conf: np.ndarray) -> float:
    r_f = float(loss.mean())
    return r_f * (1.0 - 1.0 / (2.0 * loss.size)) - _random_gap(loss, conf) / loss.size


def expected_rpp(prediction: Any, target: Any, confidence: Any) -> float:
    """Expected RPP when ties in ``confidence`` are broken uniformly at random (tie-fair).

    ``(#{(correct, wrong) pairs with the correct one strictly less confident}
    + 1/2 #{tied (correct, wrong) pairs}) / N**2``: a random tie-break reverses a tied pair with
    probability 1/2. A constant confidence scores ``C E / (2 N**2)`` (C correct, E wrong), as a
    random one does, where the paper's RPP gives it a perfect 0. Equal to
    ``(1 - AUROC) C E / N**2`` (:func:`auroc`) and to ``AUGRC - r_f**2 / 2`` (:func:`augrc`).
    O(N log N) by sorting the wrong answers' confidences and two binary searches.

    Args:
        prediction: (N,) 0/1 predictions.
        target: (N,) 0/1 true answers.
        confidence: (N,) finite confidences.

    Returns:
        ``E[RPP]`` in [0, 1/4]; lower is better.
    """
    loss, conf = _loss_and_confidence(prediction, target, confidence)
    reversed_pairs, tied_pairs = _pair_counts(loss, conf)
    n = float(conf.size)
    return (2 * reversed_pairs + tied_pairs) / (2.0 * n * n)


def tie_fair_oracle_aurcc(prediction: Any, target: Any) -> float:
    """Smallest expected AURCC (:func:`expected_aurcc`) any confidence can reach.

    Every strict order has ``E_i >= max(0, i - C)`` wrong answers among its i most confident
    (C correct answers), so its risks are at least those of "all correct answers first, then
    the wrong ones", and so is any average of strict orders. That order scores

        ``(1/N) * (sum_{i=C+1..N} (1 - C/i) - r_f / 2)``

    = ``expected_random_aurcc - C (H(N) - H(C)) / N`` (H: harmonic numbers), reached by
    :func:`opcc_edu.confidence.oracle_confidence`. It lies above the paper's
    :func:`oracle_aurcc` ``r_f**2 / 2``, which only the tie discount reaches: there the wrong
    answers are tied, and the straight line from (C/N, 0) to (1, r_f) cuts under the concave
    risks ``1 - C/i`` of any strict order. The two are close: for large N with accuracy
    ``a = C/N`` they tend to ``(1 - a) + a ln a`` and ``(1 - a)**2 / 2`` (0.0503 against 0.045
    at a = 0.7). Both are 0 with no wrong answer; with no correct answer this one equals
    :func:`expected_random_aurcc` (nothing can be ordered).

    Args:
        prediction: (N,) 0/1 predictions.
        target: (N,) 0/1 true answers.

    Returns:
        The tie-fair oracle AURCC.
    """
    loss = query_losses(prediction, target)
    r_f = float(loss.mean())
    return r_f * (1.0 - 1.0 / (2.0 * loss.size)) - _oracle_gap(loss) / loss.size


def selective_gain(prediction: Any, target: Any, confidence: Any) -> float:
    """Normalised selective gain: ``(random - expected_aurcc) / (random - tie-fair oracle)``.

    ``random`` is :func:`expected_random_aurcc`, the expected AURCC of a confidence that knows
    nothing, and the tie-fair oracle is :func:`tie_fair_oracle_aurcc`. The gain is 1 for a
    perfect ordering (every correct answer more confident than every wrong one), 0 for no
    better than random -- exactly 0 for a constant confidence, however many ties -- and
    negative for worse than random (it can fall below -1: a confidence that puts every wrong
    answer first loses more than the oracle gains). Unlike AURCC it does not depend on the
    loss: it measures the ordering alone, and on one scale for every set of predictions.

    Numerator and denominator are computed in closed form (:func:`expected_aurcc`'s ``D`` and
    ``C (H(N) - H(C))``), not by subtracting nearly equal areas.

    Args:
        prediction: (N,) 0/1 predictions.
        target: (N,) 0/1 true answers.
        confidence: (N,) finite confidences.

    Returns:
        The gain, at most 1. When all answers are correct or all are wrong (including N = 1)
        random and oracle coincide and the confidence has nothing to separate: 0.0 (never
        NaN).
    """
    loss, conf = _loss_and_confidence(prediction, target, confidence)
    return _selective_gain(loss, conf)


def _selective_gain(loss: np.ndarray, conf: np.ndarray) -> float:
    wrong = int(loss.sum())
    if wrong == 0 or wrong == loss.size:
        return 0.0
    return _random_gap(loss, conf) / _oracle_gap(loss)


def auroc(prediction: Any, target: Any, confidence: Any) -> float:
    """AUROC of ``confidence`` for telling correct answers from wrong ones (tie-fair).

    The probability that a randomly drawn correct answer is more confident than a randomly
    drawn wrong one, ties counting 1/2 (``sklearn.metrics.roc_auc_score`` with the correct
    answers as the positive class), so ``1 - AUROC = N**2 expected_rpp / (C E)``. 1 = perfect
    separation, 0.5 = none (a constant or a random confidence), 0 = reversed. scikit-learn is
    imported only here.

    Args:
        prediction: (N,) 0/1 predictions.
        target: (N,) 0/1 true answers.
        confidence: (N,) finite confidences.

    Returns:
        The AUROC in [0, 1]. When all answers are correct or all are wrong there is nothing to
        separate and the AUROC is undefined: 0.5 (never NaN, and no exception from sklearn).
    """
    loss, conf = _loss_and_confidence(prediction, target, confidence)
    if loss.min() == loss.max():
        return 0.5
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(1 - loss, conf))


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
    k = _check_k(k)
    loss, conf = _loss_and_confidence(prediction, target, confidence)
    # One sort serves every curve-based metric; the public functions re-validate otherwise.
    covered, errors, _ = _operating_points(loss, conf)
    n = conf.size
    coverage = np.concatenate(([0.0], covered / n))
    area = trapezoid_area(coverage, np.concatenate(([0.0], errors / covered)))
    r_f = float(loss.mean())
    oracle = r_f * r_f / 2.0
    reversed_pairs, tied_pairs = _pair_counts(loss, conf)
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
        "expected_aurcc": _expected_aurcc(loss, conf),
        "expected_rpp": (2 * reversed_pairs + tied_pairs) / (2.0 * n * n),
        "tie_fair_oracle_aurcc": r_f * (1.0 - 1.0 / (2.0 * n)) - _oracle_gap(loss) / n,
        "selective_gain": _selective_gain(loss, conf),
        "auroc": _pairs_auroc(loss, reversed_pairs, tied_pairs),
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
