"""Tie-fair metrics against brute force over every tie-breaking order.

For N <= 7 every strict order consistent with the confidence (every permutation inside every
tie group) is enumerated; the expectation of a metric under uniformly random tie-breaking is
the plain mean over those orders. Each strict order is scored by hand here (risks E_i / i,
reversed pairs), independently of the package.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

import opcc_edu
from opcc_edu import metrics
from opcc_edu.names import METRIC_NAMES, METRICS, TABLE_METRICS, TIE_FAIR_METRICS

NEW_FUNCTIONS = ("expected_aurcc", "expected_rpp", "selective_gain", "auroc")


# --------------------------------------------------------------------------------------------
# Brute force
# --------------------------------------------------------------------------------------------
def strict_orders(confidence: np.ndarray):
    """Every order of the query indices by decreasing confidence, ties in every possible order."""
    groups = [np.flatnonzero(confidence == value) for value in np.unique(confidence)[::-1]]
    for parts in itertools.product(*(itertools.permutations(group) for group in groups)):
        yield np.concatenate([np.asarray(part, dtype=np.int64) for part in parts])


def strict_aurcc(loss: np.ndarray, order: np.ndarray) -> float:
    """AURCC of a strict order: points (i/N, E_i/i) and (0, 0), trapezoids."""
    n = loss.size
    risk = np.concatenate(([0.0], np.cumsum(loss[order]) / np.arange(1, n + 1)))
    return float(np.sum((risk[1:] + risk[:-1]) / 2) / n)


def strict_augrc(loss: np.ndarray, order: np.ndarray) -> float:
    n = loss.size
    risk = np.concatenate(([0.0], np.cumsum(loss[order]) / n))
    return float(np.sum((risk[1:] + risk[:-1]) / 2) / n)


def strict_rpp(loss: np.ndarray, order: np.ndarray) -> float:
    """Pairs (correct, wrong) with the correct one later in the order, over N**2."""
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    count = sum(1 for c in np.flatnonzero(loss == 0) for w in np.flatnonzero(loss == 1) if rank[c] > rank[w])
    return count / loss.size**2


def brute(prediction, target, confidence) -> dict[str, float]:
    """Expected AURCC, RPP and AUGRC over every tie-breaking order, and the tie-fair oracle."""
    loss = (np.asarray(prediction) != np.asarray(target)).astype(int)
    confidence = np.asarray(confidence, dtype=float)
    orders = list(strict_orders(confidence))
    every = list(itertools.permutations(range(loss.size)))
    return {
        "expected_aurcc": float(np.mean([strict_aurcc(loss, o) for o in orders])),
        "expected_rpp": float(np.mean([strict_rpp(loss, o) for o in orders])),
        "augrc": float(np.mean([strict_augrc(loss, o) for o in orders])),
        "tie_fair_oracle_aurcc": min(strict_aurcc(loss, np.asarray(o)) for o in every),
    }


def hand_auroc(prediction, target, confidence) -> float:
    """P(correct more confident than wrong) + 1/2 P(tie), pair by pair."""
    loss = np.asarray(prediction) != np.asarray(target)
    confidence = np.asarray(confidence, dtype=float)
    correct, wrong = confidence[~loss], confidence[loss]
    wins = sum(1.0 if c > w else 0.5 if c == w else 0.0 for c in correct for w in wrong)
    return wins / (correct.size * wrong.size)


def case(seed: int, n: int, levels: int):
    rng = np.random.default_rng(seed)
    prediction = rng.integers(0, 2, n)
    target = rng.integers(0, 2, n)
    confidence = rng.integers(0, levels, n) / 4.0
    return prediction, target, confidence


CASES = [case(seed, n, levels) for seed, (n, levels) in enumerate(itertools.product(range(1, 8), (1, 2, 3, 7)))]
CASES += [
    # golden case of test_metrics: a tie at 0.9 between a correct and a wrong answer
    (np.array([1, 0, 1, 0]), np.array([1, 1, 1, 1]), np.array([0.9, 0.9, 0.5, 0.1])),
    # heavy ties mixed with singletons
    (np.array([1, 1, 0, 0, 1, 0, 1]), np.array([1, 0, 0, 1, 1, 1, 0]), np.array([3, 3, 3, 2, 1, 1, 1])),
]


# --------------------------------------------------------------------------------------------
# Every new metric against brute force
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("prediction, target, confidence", CASES)
def test_tie_fair_metrics_equal_the_mean_over_every_tie_breaking_order(prediction, target, confidence):
    expected = brute(prediction, target, confidence)
    aurcc = metrics.expected_aurcc(prediction, target, confidence)
    assert aurcc == pytest.approx(expected["expected_aurcc"], abs=1e-12)
    assert metrics.expected_rpp(prediction, target, confidence) == pytest.approx(expected["expected_rpp"], abs=1e-15)
    # AUGRC needs no tie-breaking: its tied segment is already the expected curve.
    assert metrics.augrc(prediction, target, confidence) == pytest.approx(expected["augrc"], abs=1e-12)
    oracle = metrics.tie_fair_oracle_aurcc(prediction, target)
    assert oracle == pytest.approx(expected["tie_fair_oracle_aurcc"], abs=1e-12)
    assert oracle >= metrics.oracle_aurcc(prediction, target) - 1e-15
    random = metrics.expected_random_aurcc(prediction, target)
    gain = metrics.selective_gain(prediction, target, confidence)
    loss = np.asarray(prediction) != np.asarray(target)
    if 0 < loss.sum() < loss.size:
        assert gain == pytest.approx((random - expected["expected_aurcc"]) / (random - oracle), abs=1e-12)
        assert metrics.auroc(prediction, target, confidence) == pytest.approx(
            hand_auroc(prediction, target, confidence), abs=1e-12
        )
    else:
        assert gain == 0.0 and metrics.auroc(prediction, target, confidence) == 0.5
        assert oracle == pytest.approx(random, abs=1e-15)


@pytest.mark.parametrize("prediction, target, confidence", CASES)
def test_evaluate_carries_the_tie_fair_metrics(prediction, target, confidence):
    result = metrics.evaluate(prediction, target, confidence)
    for name in NEW_FUNCTIONS:
        assert result[name] == pytest.approx(getattr(metrics, name)(prediction, target, confidence), abs=1e-12)
    assert result["tie_fair_oracle_aurcc"] == metrics.tie_fair_oracle_aurcc(prediction, target)
    assert set(TIE_FAIR_METRICS) <= set(result) and set(result) <= set(METRIC_NAMES)
    assert all(isinstance(result[name], float) and math.isfinite(result[name]) for name in TIE_FAIR_METRICS)


def test_the_oracle_is_the_best_expected_aurcc_of_any_confidence_with_ties():
    # every confidence with values in {0, 1, 2} on 6 queries: none beats the tie-fair oracle
    prediction = np.array([1, 0, 1, 1, 0, 1])
    target = np.array([1, 1, 1, 0, 0, 1])
    oracle = metrics.tie_fair_oracle_aurcc(prediction, target)
    scores = [
        metrics.expected_aurcc(prediction, target, np.array(levels))
        for levels in itertools.product(range(3), repeat=prediction.size)
    ]
    assert min(scores) == pytest.approx(oracle, abs=1e-12)
    assert min(scores) >= oracle - 1e-12
    # the oracle confidence reaches it, and its gain is 1
    loss = prediction != target
    assert metrics.expected_aurcc(prediction, target, (~loss).astype(float)) == pytest.approx(oracle, abs=1e-15)
    assert metrics.selective_gain(prediction, target, (~loss).astype(float)) == pytest.approx(1.0, abs=1e-12)
    # the paper's oracle is lower: only the tie discount reaches r_f**2 / 2
    assert metrics.oracle_aurcc(prediction, target) < oracle


@pytest.mark.parametrize("seed", range(5))
def test_closed_forms_match_exact_rational_arithmetic_for_larger_n(seed):
    # N = 80 with many ties: E[r_i] summed in Fractions, group by group, from the hypergeometric mean
    rng = np.random.default_rng(100 + seed)
    n = 80
    loss = rng.random(n) < rng.uniform(0.1, 0.9)
    confidence = rng.integers(0, 9, n).astype(float)
    prediction, target = loss.astype(int), np.zeros(n, dtype=int)
    total, before, errors_before = Fraction(0), 0, 0
    for value in np.unique(confidence)[::-1]:
        group = loss[confidence == value]
        size, errors = int(group.size), int(group.sum())
        total += sum(Fraction(errors_before * size + j * errors, size * (before + j)) for j in range(1, size + 1))
        before, errors_before = before + size, errors_before + errors
    r_f = Fraction(int(loss.sum()), n)
    exact = (total - r_f / 2) / n
    assert metrics.expected_aurcc(prediction, target, confidence) == pytest.approx(float(exact), rel=1e-13)
    correct = n - int(loss.sum())
    oracle = (sum(Fraction(i - correct, i) for i in range(correct + 1, n + 1)) - r_f / 2) / n
    assert metrics.tie_fair_oracle_aurcc(prediction, target) == pytest.approx(float(oracle), rel=1e-13)
    random = r_f * (1 - Fraction(1, 2 * n))
    gain = (random - exact) / (random - oracle)
    assert metrics.selective_gain(prediction, target, confidence) == pytest.approx(float(gain), rel=1e-12)


# --------------------------------------------------------------------------------------------
# The facts the metrics are for
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 5, 40, 1001])
def test_a_constant_confidence_scores_exactly_what_a_random_one_does(n):
    rng = np.random.default_rng(n)
    prediction, target = rng.integers(0, 2, n), rng.integers(0, 2, n)
    constant = np.full(n, 0.99)
    loss = prediction != target
    errors, correct = int(loss.sum()), n - int(loss.sum())
    r_f = errors / n
    assert metrics.aurcc(prediction, target, constant) == pytest.approx(r_f / 2)  # the paper's discount
    assert metrics.expected_aurcc(prediction, target, constant) == metrics.expected_random_aurcc(prediction, target)
    assert metrics.selective_gain(prediction, target, constant) == 0.0
    assert metrics.expected_rpp(prediction, target, constant) == pytest.approx(correct * errors / (2 * n * n))
    assert metrics.reverse_pair_proportion(prediction, target, constant) == 0.0  # the paper's perfect score
    assert metrics.auroc(prediction, target, constant) == 0.5
    assert metrics.augrc(prediction, target, constant) == pytest.approx(r_f**2 / 2 + correct * errors / (2 * n * n))


def test_ties_move_the_paper_aurcc_both_ways_and_the_expected_aurcc_not_at_all():
    # a tie where the risk rises (the first group, from (0, 0)): the paper's AURCC gets a discount
    prediction, target = np.array([1, 1, 1]), np.array([1, 0, 0])
    tied, split = np.array([1.0, 1.0, 1.0]), np.array([3.0, 2.0, 1.0])
    assert metrics.aurcc(prediction, target, tied) < metrics.expected_aurcc(prediction, target, tied)
    # a tie where the risk falls (two correct answers after a wrong one): a penalty
    prediction, target = np.array([1, 1, 1]), np.array([0, 1, 1])
    tied = np.array([1.0, 0.5, 0.5])
    assert metrics.aurcc(prediction, target, tied) == pytest.approx(1 / 6 + 4 / 9)
    assert metrics.expected_aurcc(prediction, target, tied) == pytest.approx((1 + 1 / 2 + 1 / 3 - 1 / 6) / 3)
    assert metrics.expected_aurcc(prediction, target, tied) < metrics.aurcc(prediction, target, tied)
    # without ties both agree
    assert metrics.expected_aurcc(prediction, target, split) == pytest.approx(metrics.aurcc(prediction, target, split))


@pytest.mark.parametrize("seed", range(4))
def test_without_ties_the_tie_fair_metrics_are_the_paper_metrics(seed):
    rng = np.random.default_rng(seed)
    n = 300
    prediction, target, confidence = rng.integers(0, 2, n), rng.integers(0, 2, n), rng.random(n)
    assert metrics.expected_aurcc(prediction, target, confidence) == pytest.approx(
        metrics.aurcc(prediction, target, confidence), abs=1e-13
    )
    assert metrics.expected_rpp(prediction, target, confidence) == metrics.reverse_pair_proportion(
        prediction, target, confidence
    )


@pytest.mark.parametrize("seed", range(6))
def test_identities_between_rpp_auroc_and_augrc(seed):
    prediction, target, confidence = case(seed, 200, 5)
    loss = prediction != target
    n, errors = loss.size, int(loss.sum())
    correct = n - errors
    rpp = metrics.expected_rpp(prediction, target, confidence)
    auc = metrics.auroc(prediction, target, confidence)
    assert rpp == pytest.approx((1 - auc) * correct * errors / n**2, abs=1e-14)
    assert metrics.augrc(prediction, target, confidence) == pytest.approx((errors / n) ** 2 / 2 + rpp, abs=1e-14)
    assert metrics.evaluate(prediction, target, confidence)["auroc"] == pytest.approx(auc, abs=1e-14)


def test_tie_fair_metrics_depend_only_on_the_ordering():
    prediction, target, confidence = case(11, 150, 6)
    transformed = np.exp(confidence) - 3.0
    permutation = np.random.default_rng(0).permutation(150)
    for name in NEW_FUNCTIONS:
        function = getattr(metrics, name)
        base = function(prediction, target, confidence)
        assert function(prediction, target, transformed) == pytest.approx(base, abs=1e-14)
        assert function(prediction[permutation], target[permutation], confidence[permutation]) == pytest.approx(
            base, abs=1e-14
        )


def test_all_correct_all_wrong_and_a_single_query():
    conf = np.array([0.1, 0.4, 0.4, 0.9])
    ones = np.ones(4, dtype=int)
    right = metrics.evaluate(ones, ones, conf)
    assert right["expected_aurcc"] == 0.0 and right["expected_rpp"] == 0.0
    assert right["tie_fair_oracle_aurcc"] == 0.0 and right["selective_gain"] == 0.0 and right["auroc"] == 0.5
    wrong = metrics.evaluate(ones, 1 - ones, conf)
    assert wrong["expected_aurcc"] == pytest.approx(1 - 1 / 8) == wrong["tie_fair_oracle_aurcc"]
    assert wrong["expected_rpp"] == 0.0 and wrong["selective_gain"] == 0.0 and wrong["auroc"] == 0.5
    assert metrics.auroc(ones, 1 - ones, conf) == 0.5 and metrics.selective_gain(ones, ones, conf) == 0.0
    for target, risk in ((1, 0.0), (0, 0.5)):
        single = metrics.evaluate([1], [target], [0.3])
        assert single["expected_aurcc"] == risk == single["aurcc"]
        assert single["selective_gain"] == 0.0 and single["auroc"] == 0.5 and single["expected_rpp"] == 0.0


def test_gain_is_negative_when_the_wrong_answers_come_first():
    prediction = np.array([1, 1, 1, 1, 1, 1])
    target = np.array([1, 1, 1, 0, 0, 1])
    loss = prediction != target
    assert metrics.selective_gain(prediction, target, loss.astype(float)) < -0.5
    assert metrics.auroc(prediction, target, loss.astype(float)) == 0.0


def test_auroc_hand_count():
    # correct at 0.9, 0.5, 0.5; wrong at 0.5, 0.2: pairs (0.9>0.5) 1, (0.9>0.2) 1, (0.5=0.5) 1/2 twice,
    # (0.5>0.2) 1 twice: (1 + 1 + 0.5 + 0.5 + 1 + 1) / 6 = 5/6
    prediction = np.array([1, 1, 1, 1, 1])
    target = np.array([1, 1, 1, 0, 0])
    confidence = np.array([0.9, 0.5, 0.5, 0.5, 0.2])
    assert metrics.auroc(prediction, target, confidence) == pytest.approx(5 / 6)
    assert metrics.evaluate(prediction, target, confidence)["auroc"] == pytest.approx(5 / 6)
    # E[RPP]: nothing strictly reversed, two tied pairs at 1/2 each: 1 / 5**2
    assert metrics.expected_rpp(prediction, target, confidence) == pytest.approx(1 / 25)


@pytest.mark.parametrize("prediction, target, confidence", CASES)
def test_expected_curve_is_the_mean_curve_over_every_tie_breaking_order(prediction, target, confidence):
    loss = (np.asarray(prediction) != np.asarray(target)).astype(float)
    curves = [
        np.concatenate(([0.0], np.cumsum(loss[order]) / np.arange(1, loss.size + 1)))
        for order in strict_orders(np.asarray(confidence, dtype=float))
    ]
    coverage, risk = metrics.expected_risk_coverage_curve(prediction, target, confidence)
    np.testing.assert_allclose(coverage, np.arange(loss.size + 1) / loss.size)
    np.testing.assert_allclose(risk, np.mean(curves, axis=0), atol=1e-12)
    assert metrics.trapezoid_area(coverage, risk) == pytest.approx(
        metrics.expected_aurcc(prediction, target, confidence), abs=1e-12
    )


# --------------------------------------------------------------------------------------------
# Bad input: the existing clear errors, never a NaN
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", (*NEW_FUNCTIONS, "expected_risk_coverage_curve"))
@pytest.mark.parametrize(
    "prediction, target, confidence, message",
    [
        ([1, 0], [1, 1], [0.5, np.nan], "confidence must be finite"),
        ([1, 0], [1, 1], [np.inf, 0.5], "confidence must be finite"),
        ([], [], [], "empty"),
        ([1, 0, 1], [1, 1], [0.5, 0.2, 0.1], "same number of queries"),
        ([1, 0], [1, 1], [0.5, 0.2, 0.1], "same number of queries"),
        ([1, 2], [1, 1], [0.5, 0.2], "0/1"),
        ([[1, 0]], [[1, 1]], [[0.5, 0.2]], "1-D"),
    ],
)
def test_bad_input_raises_a_clear_value_error(name, prediction, target, confidence, message):
    with pytest.raises(ValueError, match=message):
        getattr(metrics, name)(prediction, target, confidence)


def test_oracle_bad_input():
    with pytest.raises(ValueError, match="same number of queries"):
        metrics.tie_fair_oracle_aurcc([1, 0], [1])
    with pytest.raises(ValueError, match="empty"):
        metrics.tie_fair_oracle_aurcc([], [])


# --------------------------------------------------------------------------------------------
# Names and exports
# --------------------------------------------------------------------------------------------
def test_names_and_exports():
    assert TIE_FAIR_METRICS == ("expected_aurcc", "expected_rpp", "selective_gain", "augrc", "auroc")
    assert TABLE_METRICS == (*METRICS, *TIE_FAIR_METRICS)
    assert METRICS == ("aurcc", "rpp", "cr_k", "loss"), "the paper's four metrics keep their meaning"
    for name in (*NEW_FUNCTIONS, "tie_fair_oracle_aurcc"):
        assert getattr(opcc_edu, name) is getattr(metrics, name)
        assert name in metrics.__all__ and name in METRIC_NAMES
        assert getattr(metrics, name).__doc__


def test_evaluate_keeps_the_paper_metrics_as_the_individual_functions_compute_them():
    prediction, target, confidence = case(7, 500, 12)
    result = metrics.evaluate(prediction, target, confidence)
    assert result["aurcc"] == metrics.aurcc(prediction, target, confidence)
    assert result["rpp"] == metrics.reverse_pair_proportion(prediction, target, confidence)
    assert result["cr_k"] == metrics.coverage_resolution(prediction, target, confidence)
    assert result["loss"] == metrics.selective_loss(prediction, target)
    assert result["augrc"] == metrics.augrc(prediction, target, confidence)
    assert result["oracle_aurcc"] == metrics.oracle_aurcc(prediction, target)
    assert result["random_aurcc"] == metrics.expected_random_aurcc(prediction, target)
    old_keys = [
        "aurcc",
        "rpp",
        "cr_k",
        "loss",
        "n",
        "oracle_aurcc",
        "excess_aurcc",
        "augrc",
        "random_aurcc",
        "n_operating_points",
    ]
    assert list(result)[: len(old_keys)] == old_keys
    assert list(result)[len(old_keys) :] == [
        "expected_aurcc",
        "expected_rpp",
        "tie_fair_oracle_aurcc",
        "selective_gain",
        "auroc",
    ]
