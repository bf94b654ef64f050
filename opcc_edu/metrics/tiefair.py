"""Tie-fair metrics: ties broken uniformly at random, exact expectations in O(N log N).

See :mod:`opcc_edu.metrics` for the definitions (expected AURCC and RPP, selective gain, AUROC).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .checks import loss_and_confidence, query_losses
from .selective import operating_points


# --------------------------------------------------------------------------------------------
# Tie-fair metrics: ties broken uniformly at random, exact expectations
# --------------------------------------------------------------------------------------------
def _tie_groups(loss: np.ndarray, confidence: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct confidence, in decreasing order: ``(size, errors, before, errors_before)``.

    ``size`` n_g and ``errors`` e_g count the group's queries and wrong answers; ``before`` S
    and ``errors_before`` A count the queries and wrong answers of the more confident groups.
    All (G,) int64.
    """
    covered, cumulative_errors, _ = operating_points(loss, confidence)
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


def oracle_gap(loss: np.ndarray) -> float:
    """``N * (expected_random_aurcc - tie_fair_oracle_aurcc) = C * (H(N) - H(C))``."""
    n = int(loss.size)
    correct = n - int(loss.sum())
    return float(correct * np.sum(1.0 / np.arange(correct + 1, n + 1, dtype=np.float64)))


def pair_counts(loss: np.ndarray, confidence: np.ndarray) -> tuple[int, int]:
    """(correct, wrong) pairs: ``(strictly reversed, tied)``, each O(N log N) by binary search."""
    wrong = np.sort(confidence[loss == 1])
    correct = confidence[loss == 0]
    right = np.searchsorted(wrong, correct, side="right")
    left = np.searchsorted(wrong, correct, side="left")
    reversed_pairs = int((wrong.size - right).sum(dtype=np.int64))
    tied_pairs = int((right - left).sum(dtype=np.int64))
    return reversed_pairs, tied_pairs


def auroc_of_pairs(loss: np.ndarray, reversed_pairs: int, tied_pairs: int) -> float:
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
    loss, conf = loss_and_confidence(prediction, target, confidence)
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
    loss, conf = loss_and_confidence(prediction, target, confidence)
    return expected_aurcc_of_losses(loss, conf)


def expected_aurcc_of_losses(loss: np.ndarray, conf: np.ndarray) -> float:
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
    loss, conf = loss_and_confidence(prediction, target, confidence)
    reversed_pairs, tied_pairs = pair_counts(loss, conf)
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
    return r_f * (1.0 - 1.0 / (2.0 * loss.size)) - oracle_gap(loss) / loss.size


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
    loss, conf = loss_and_confidence(prediction, target, confidence)
    return selective_gain_of_losses(loss, conf)


def selective_gain_of_losses(loss: np.ndarray, conf: np.ndarray) -> float:
    wrong = int(loss.sum())
    if wrong == 0 or wrong == loss.size:
        return 0.0
    return _random_gap(loss, conf) / oracle_gap(loss)


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
    loss, conf = loss_and_confidence(prediction, target, confidence)
    if loss.min() == loss.max():
        return 0.5
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(1 - loss, conf))
