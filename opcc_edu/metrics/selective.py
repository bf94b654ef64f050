"""The exact risk-coverage curve and the paper's summaries of it: AURCC, RPP, CR_K, AUGRC, the oracle.

See :mod:`opcc_edu.metrics` for the definitions; every function takes (N,) predictions, targets
and confidences and is exact (no threshold sweep).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .checks import check_k, loss_and_confidence, query_losses


# --------------------------------------------------------------------------------------------
# The risk-coverage curve and its summaries
# --------------------------------------------------------------------------------------------
def operating_points(loss: np.ndarray, confidence: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
    loss, conf = loss_and_confidence(prediction, target, confidence)
    covered, errors, threshold = operating_points(loss, conf)
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


def reverse_pairs_of_losses(loss: np.ndarray, conf: np.ndarray) -> float:
    wrong = np.sort(conf[loss == 1])
    correct = conf[loss == 0]
    # For each correct query, the wrong queries with strictly larger confidence.
    above = wrong.size - np.searchsorted(wrong, correct, side="right")
    n = float(conf.size)
    return float(int(above.sum(dtype=np.int64)) / (n * n))


def resolution_of_coverage(covered: np.ndarray, n: int, k: int) -> float:
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
    return reverse_pairs_of_losses(*loss_and_confidence(prediction, target, confidence))


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
    k = check_k(k)
    loss, conf = loss_and_confidence(prediction, target, confidence)
    covered, _, _ = operating_points(loss, conf)
    return resolution_of_coverage(covered, conf.size, k)


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
    loss, conf = loss_and_confidence(prediction, target, confidence)
    covered, errors, _ = operating_points(loss, conf)
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
