"""Tests of opcc_edu.metrics: golden values, brute-force and 0.01-grid equivalence, edge cases."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from opcc_edu import metrics, plotting
from opcc_edu.confidence import oracle_confidence, random_confidence

PACKAGE_DIR = Path(metrics.__file__).resolve().parents[1]  # opcc_edu/


# --------------------------------------------------------------------------------------------
# Reference implementations (deliberately naive)
# --------------------------------------------------------------------------------------------
def grid_aurcc(loss: np.ndarray, confidence_percent: np.ndarray) -> float:
    """AURCC by sweeping tau over the 0.01 grid 0, 0.01, ..., 1.01, as the public reference does.

    ``confidence_percent`` holds integers 0..100; confidences and thresholds are both built as
    ``integer / 100`` so that ``c >= tau`` is decided exactly. tau = 1.01 covers nothing and
    yields the (0, 0) point.
    """
    confidence = confidence_percent / 100.0
    points = []
    for step in range(102):
        tau = step / 100.0
        covered = confidence >= tau
        count = covered.sum()
        risk = loss[covered].sum() / count if count else 0.0
        points.append((count / loss.size, risk))
    points.sort()
    coverage, risk = np.array(points).T
    return float(np.sum(np.diff(coverage) * (risk[1:] + risk[:-1]) / 2))


def brute_force_curve(loss: np.ndarray, confidence: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Operating points straight from the definition: one mask per distinct threshold."""
    coverage, risk = [0.0], [0.0]
    for tau in sorted(set(confidence.tolist()), reverse=True):
        covered = confidence >= tau
        coverage.append(covered.mean())
        risk.append(loss[covered].mean())
    return np.array(coverage), np.array(risk)


def brute_force_rpp(loss: np.ndarray, confidence: np.ndarray) -> float:
    reversed_pairs = (loss[:, None] < loss[None, :]) & (confidence[:, None] < confidence[None, :])
    return reversed_pairs.sum() / loss.size**2


def brute_force_auroc(loss: np.ndarray, confidence: np.ndarray) -> float:
    """P(correct answer more confident than a wrong one), ties counting 1/2."""
    good, bad = confidence[loss == 0], confidence[loss == 1]
    wins = (good[:, None] > bad[None, :]).sum() + 0.5 * (good[:, None] == bad[None, :]).sum()
    return wins / (good.size * bad.size)


def random_case(rng: np.random.Generator, n: int, levels: int):
    """Predictions, targets and heavily tied integer confidence levels in [0, levels)."""
    prediction = rng.integers(0, 2, n)
    target = np.where(rng.random(n) < 0.3, 1 - prediction, prediction)
    return prediction, target, rng.integers(0, levels, n)


# --------------------------------------------------------------------------------------------
# Golden values
# --------------------------------------------------------------------------------------------
# Four queries, two tied at the top: losses 0, 1, 0, 1 in decreasing confidence.
GOLD_PRED = np.array([1, 1, 0, 0])
GOLD_TARGET = np.array([1, 0, 0, 1])
GOLD_CONF = np.array([0.9, 0.9, 0.5, 0.1])


def test_golden_curve():
    coverage, risk, threshold = metrics.risk_coverage_curve(GOLD_PRED, GOLD_TARGET, GOLD_CONF)
    np.testing.assert_allclose(coverage, [0.0, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(risk, [0.0, 0.5, 1 / 3, 0.5])
    np.testing.assert_array_equal(threshold, [np.inf, 0.9, 0.5, 0.1])


def test_golden_metrics():
    result = metrics.evaluate(GOLD_PRED, GOLD_TARGET, GOLD_CONF)
    # 0.5 * 0.25 + 0.25 * (1/2 + 1/3) / 2 * 2 = 1/8 + 5/24 = 1/3.
    assert result["aurcc"] == pytest.approx(1 / 3, abs=1e-15)
    # Only (correct at 0.5, wrong at 0.9) is reversed; the tie at 0.9 is not.
    assert result["rpp"] == pytest.approx(1 / 16, abs=1e-15)
    # Coverages 0, 0.5, 0.75, 1 fall in bins 0, 5, 7, 9.
    assert result["cr_k"] == pytest.approx(0.4)
    assert result["loss"] == 0.5
    assert result["n"] == 4
    assert result["oracle_aurcc"] == pytest.approx(0.125)
    assert result["excess_aurcc"] == pytest.approx(1 / 3 - 0.125)
    # Generalized risk: (0, 0), (0.5, 0.25), (0.75, 0.25), (1, 0.5).
    assert result["augrc"] == pytest.approx(0.21875, abs=1e-15)
    assert result["random_aurcc"] == pytest.approx(0.5 * (1 - 1 / 8))
    assert result["n_operating_points"] == 3


def test_evaluate_matches_individual_functions():
    rng = np.random.default_rng(3)
    pred, target, levels = random_case(rng, 500, 30)
    conf = levels / 7.0
    result = metrics.evaluate(pred, target, conf, k=20)
    assert result["aurcc"] == metrics.aurcc(pred, target, conf)
    assert result["rpp"] == metrics.reverse_pair_proportion(pred, target, conf)
    assert result["cr_k"] == metrics.coverage_resolution(pred, target, conf, k=20)
    assert result["loss"] == metrics.selective_loss(pred, target)
    assert result["oracle_aurcc"] == metrics.oracle_aurcc(pred, target)
    assert result["excess_aurcc"] == pytest.approx(metrics.excess_aurcc(pred, target, conf), abs=1e-15)
    assert result["augrc"] == metrics.augrc(pred, target, conf)
    assert result["random_aurcc"] == metrics.expected_random_aurcc(pred, target)
    assert set(metrics.METRIC_NAMES) >= set(result)


# --------------------------------------------------------------------------------------------
# Equivalence with naive implementations
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(8))
def test_aurcc_equals_grid_sweep_on_percent_confidences(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    pred, target, _ = random_case(rng, n, 2)
    # Few distinct multiples of 0.01 (heavy ties), always including the extremes 0 and 1.
    support = np.unique(np.concatenate(([0, 100], rng.integers(0, 101, 6))))
    percent = rng.choice(support, n)
    loss = (pred != target).astype(float)
    assert metrics.aurcc(pred, target, percent / 100.0) == pytest.approx(grid_aurcc(loss, percent), abs=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_curve_and_rpp_equal_brute_force(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 300))
    pred, target, levels = random_case(rng, n, int(rng.integers(1, 12)))
    conf = rng.normal(size=12)[levels]  # arbitrary reals, heavy ties
    loss = (pred != target).astype(float)
    coverage, risk, _ = metrics.risk_coverage_curve(pred, target, conf)
    expected_coverage, expected_risk = brute_force_curve(loss, conf)
    np.testing.assert_allclose(coverage, expected_coverage, atol=1e-15)
    np.testing.assert_allclose(risk, expected_risk, atol=1e-15)
    assert metrics.reverse_pair_proportion(pred, target, conf) == pytest.approx(brute_force_rpp(loss, conf), abs=1e-15)


def test_exact_where_the_grid_is_not():
    # Confidences 0.123 and 0.127 are different operating points; a 0.01 grid merges them.
    pred = np.array([1, 1, 1, 1])
    target = np.array([1, 0, 1, 1])
    conf = np.array([0.127, 0.123, 0.05, 0.9])
    loss = (pred != target).astype(float)
    coverage, risk = brute_force_curve(loss, conf)
    exact = float(np.sum(np.diff(coverage) * (risk[1:] + risk[:-1]) / 2))
    assert metrics.aurcc(pred, target, conf) == pytest.approx(exact, abs=1e-15)
    percent_on_grid = np.floor(conf * 100).astype(int)  # what a 0.01 sweep effectively sees
    assert abs(grid_aurcc(loss, percent_on_grid) - exact) > 1e-3


def test_depends_only_on_the_ordering_of_confidences():
    rng = np.random.default_rng(5)
    pred, target, levels = random_case(rng, 300, 15)
    conf = levels.astype(float)
    base = metrics.evaluate(pred, target, conf)
    transformed = metrics.evaluate(pred, target, np.exp(conf / 3) - 40.0)  # strictly increasing
    permutation = rng.permutation(300)
    permuted = metrics.evaluate(pred[permutation], target[permutation], conf[permutation])
    for key in ("aurcc", "rpp", "cr_k", "augrc"):
        assert transformed[key] == pytest.approx(base[key], abs=1e-14)
        assert permuted[key] == pytest.approx(base[key], abs=1e-14)


def test_rpp_handles_a_million_queries_exactly():
    # Every correct answer below every wrong one: exactly (N/2)**2 reversed pairs.
    n = 1_000_000
    pred = np.ones(n, dtype=np.int8)
    target = np.tile(np.array([0, 1], dtype=np.int8), n // 2)
    conf = target.astype(np.float64)  # correct (target 1) get the higher confidence ...
    assert metrics.reverse_pair_proportion(pred, target, conf) == 0.0
    assert metrics.reverse_pair_proportion(pred, target, 1.0 - conf) == 0.25  # ... or the lower


# --------------------------------------------------------------------------------------------
# CR_K
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [2, 5, 10, 37])
def test_constant_confidence_gives_the_two_bin_floor(k):
    pred = np.array([1, 0, 1, 1, 0, 0, 1])
    target = np.array([1, 1, 0, 1, 0, 1, 1])
    assert metrics.coverage_resolution(pred, target, np.full(7, 0.3), k=k) == pytest.approx(2 / k)


def test_cr_k_paper_floor_and_single_bin():
    pred = target = np.zeros(50, dtype=int)
    assert metrics.coverage_resolution(pred, target, np.zeros(50)) == pytest.approx(0.2)
    assert metrics.coverage_resolution(pred, target, np.arange(50.0), k=1) == 1.0


def test_cr_k_bin_edges_are_exact():
    # N = K = 100 distinct confidences hit every bin; a float floor(0.29 * 100) = 28 would miss 29.
    n = 100
    pred = target = np.zeros(n, dtype=int)
    assert metrics.coverage_resolution(pred, target, np.arange(n, dtype=float), k=100) == 1.0
    # Coverages 0, 1/3, 2/3, 1 land in bins 0, 3, 6, 9.
    assert metrics.coverage_resolution(pred[:3], target[:3], np.arange(3.0)) == pytest.approx(0.4)


# --------------------------------------------------------------------------------------------
# Beyond the paper: oracle, AUGRC, random baseline
# --------------------------------------------------------------------------------------------
def test_oracle_aurcc_is_the_minimum_over_all_confidences():
    # Exhaustive: every assignment of 3 confidence levels to 6 queries (all weak orderings).
    rng = np.random.default_rng(11)
    for _ in range(4):
        pred, target, _ = random_case(rng, 6, 2)
        best = min(
            metrics.aurcc(pred, target, np.array(levels, dtype=float))
            for levels in itertools.product(range(3), repeat=6)
        )
        oracle = metrics.oracle_aurcc(pred, target)
        assert best == pytest.approx(oracle, abs=1e-15)
        assert metrics.aurcc(pred, target, oracle_confidence(pred, target)) == pytest.approx(oracle, abs=1e-15)


def test_oracle_bounds_random_confidences_and_excess_is_nonnegative():
    rng = np.random.default_rng(12)
    pred, target, _ = random_case(rng, 200, 2)
    for seed in range(20):
        conf = random_confidence(200, seed)
        assert metrics.excess_aurcc(pred, target, conf) >= 0.0
    # Strictly ranking the correct answers first is worse than the two-level oracle.
    loss = (pred != target).astype(float)
    strict = np.where(loss == 0, 2.0, 0.0) + rng.permutation(200) / 1000
    assert metrics.aurcc(pred, target, strict) > metrics.oracle_aurcc(pred, target) + 1e-6


def test_all_wrong_and_all_right():
    pred = np.ones(5, dtype=int)
    conf = np.linspace(0, 1, 5)
    all_wrong = metrics.evaluate(pred, np.zeros(5, dtype=int), conf)
    assert all_wrong["loss"] == 1.0 and all_wrong["rpp"] == 0.0
    assert all_wrong["aurcc"] == pytest.approx(1 - 0.2 / 2)  # rises to 1 over the first 1/5
    assert all_wrong["oracle_aurcc"] == 0.5
    all_right = metrics.evaluate(pred, pred, conf)
    assert all_right["aurcc"] == 0.0 and all_right["augrc"] == 0.0 and all_right["oracle_aurcc"] == 0.0


@pytest.mark.parametrize("seed", range(6))
def test_augrc_matches_its_auroc_decomposition(seed):
    # Traub et al. (2024): AUGRC = (1 - AUROC) acc (1 - acc) + (1 - acc)**2 / 2, ties as 1/2.
    rng = np.random.default_rng(200 + seed)
    pred, target, levels = random_case(rng, int(rng.integers(5, 300)), 9)
    loss = (pred != target).astype(float)
    if loss.min() == loss.max():
        loss[0] = 1 - loss[0]
        target[0] = 1 - target[0]
    acc = 1 - loss.mean()
    expected = (1 - brute_force_auroc(loss, levels)) * acc * (1 - acc) + 0.5 * (1 - acc) ** 2
    assert metrics.augrc(pred, target, levels) == pytest.approx(expected, abs=1e-14)


def test_expected_random_aurcc_by_exhaustive_enumeration():
    # All 7! orderings of 7 queries are equally likely under i.i.d. continuous confidences.
    pred = np.array([1, 0, 1, 1, 0, 1, 0])
    target = np.array([1, 1, 0, 1, 0, 0, 0])
    areas = [metrics.aurcc(pred, target, np.array(ranks, dtype=float)) for ranks in itertools.permutations(range(7))]
    assert np.mean(areas) == pytest.approx(metrics.expected_random_aurcc(pred, target), abs=1e-14)
    r_f = 3 / 7
    assert metrics.expected_random_aurcc(pred, target) == pytest.approx(r_f * (1 - 1 / 14))


def test_random_confidence_scores_the_full_coverage_risk_on_average():
    # Fixed seeds: the mean AURCC of 40 random confidences on 2000 queries is r_f up to noise.
    rng = np.random.default_rng(21)
    pred, target, _ = random_case(rng, 2000, 2)
    areas = np.array([metrics.aurcc(pred, target, random_confidence(2000, seed)) for seed in range(40)])
    r_f = metrics.selective_loss(pred, target)
    standard_error = areas.std(ddof=1) / math.sqrt(areas.size)
    assert abs(areas.mean() - r_f) < 4 * standard_error + r_f / 2000
    # And it is far from the oracle: a random order wastes most of the available area.
    assert areas.mean() > 3 * metrics.oracle_aurcc(pred, target)


# --------------------------------------------------------------------------------------------
# Aggregation helpers
# --------------------------------------------------------------------------------------------
def test_mean_confidence_interval_matches_scipy():
    values = np.array([0.21, 0.23, 0.22, 0.25, 0.19])
    mean, half = metrics.mean_confidence_interval(values)
    low, high = stats.t.interval(0.95, df=4, loc=values.mean(), scale=stats.sem(values))
    assert mean == pytest.approx(values.mean())
    assert half == pytest.approx((high - low) / 2)
    _, half_99 = metrics.mean_confidence_interval(values, level=0.99)
    assert half_99 > half
    single_mean, single_half = metrics.mean_confidence_interval([0.3])
    assert single_mean == 0.3 and math.isnan(single_half)


def test_format_mean_ci_like_the_paper():
    assert metrics.format_mean_ci(0.2193, 0.0049) == "0.219 ± 0.005"
    assert metrics.format_mean_ci(0.2, 0.0002) == "0.200 ± (<0.001)"
    assert metrics.format_mean_ci(0.2, math.nan) == "0.200"
    assert metrics.format_mean_ci(0.25, 0.012, digits=2) == "0.25 ± 0.01"


# --------------------------------------------------------------------------------------------
# Plotting and bad input
# --------------------------------------------------------------------------------------------
def test_plot_risk_coverage_returns_labelled_axes():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = plotting.plot_risk_coverage(GOLD_PRED, GOLD_TARGET, GOLD_CONF, label="gold")
    line = ax.get_lines()[0]
    np.testing.assert_allclose(line.get_xdata(), [0.0, 0.5, 0.75, 1.0])
    assert "coverage" in ax.get_xlabel() and "risk" in ax.get_ylabel()
    assert "gold" in line.get_label() and "0.333" in line.get_label()
    _, existing = plt.subplots()
    assert plotting.plot_risk_coverage(GOLD_PRED, GOLD_TARGET, GOLD_CONF, ax=existing) is existing
    # A later, higher curve widens the risk axis instead of being clipped.
    plotting.plot_risk_coverage(GOLD_PRED, 1 - GOLD_PRED, GOLD_CONF, ax=existing)  # every answer wrong
    assert existing.get_ylim()[0] == 0.0 and existing.get_ylim()[1] >= 1.0
    assert len(existing.get_lines()) == 2
    plt.close("all")


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"prediction": [1, 2, 0]}, "prediction"),
        ({"prediction": [1.0, float("nan"), 0.0]}, "prediction"),
        ({"target": [1, 0, -1]}, "target"),
        ({"confidence": [0.1, float("inf"), 0.3]}, "confidence"),
        ({"confidence": [0.1, 0.2]}, "confidence"),
        ({"prediction": [[1, 0, 1]]}, "prediction"),
        ({"prediction": [], "target": [], "confidence": []}, "prediction"),
        ({"confidence": ["a", "b", "c"]}, "confidence"),
    ],
)
def test_bad_input_names_the_argument(kwargs, argument):
    inputs = {"prediction": [1, 0, 1], "target": [1, 1, 0], "confidence": [0.1, 0.2, 0.3]}
    inputs.update(kwargs)
    for function in (metrics.aurcc, metrics.reverse_pair_proportion, metrics.evaluate, metrics.augrc):
        with pytest.raises(ValueError, match=argument):
            function(**inputs)


def test_bad_k_and_level():
    with pytest.raises(ValueError, match="k"):
        metrics.coverage_resolution([1], [1], [0.5], k=0)
    with pytest.raises(ValueError, match="level"):
        metrics.mean_confidence_interval([1.0, 2.0], level=1.5)
    with pytest.raises(ValueError, match="values"):
        metrics.mean_confidence_interval([])


def test_boolean_inputs_are_accepted():
    result = metrics.evaluate(np.array([True, False]), np.array([True, True]), np.array([1, 0]))
    # Points (0, 0), (0.5, 0), (1, 0.5): only the last segment has area.
    assert result["loss"] == 0.5 and result["aurcc"] == pytest.approx(0.5 * 0.5 / 2)


def test_modules_do_not_import_torch():
    # Load the package directory without its __init__ (other modules may need torch) and make
    # any torch import fail loudly.
    code = f"""
import sys, types
sys.modules["torch"] = None
package = types.ModuleType("opcc_edu")
package.__path__ = [{str(PACKAGE_DIR)!r}]
sys.modules["opcc_edu"] = package
import opcc_edu.metrics, opcc_edu.confidence
assert "torch" not in [name for name, module in sys.modules.items() if module is not None]
assert "scipy.stats" not in sys.modules, "scipy.stats should be imported lazily"
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_query_losses_and_trapezoid_area_by_hand():
    np.testing.assert_array_equal(metrics.query_losses([1, 0, 1, 0], [1, 1, 0, 0]), [0, 1, 1, 0])
    with pytest.raises(ValueError, match="prediction"):
        metrics.query_losses([2, 0], [1, 0])
    with pytest.raises(ValueError):
        metrics.query_losses([1, 0, 1], [1, 0])
    # a triangle under (0, 0) -> (0.5, 1) -> (1, 0) has area 1/2; a step is read as a ramp
    assert metrics.trapezoid_area(np.array([0.0, 0.5, 1.0]), np.array([0.0, 1.0, 0.0])) == 0.5
    assert metrics.trapezoid_area(np.array([0.0, 1.0]), np.array([1.0, 0.0])) == 0.5
    assert metrics.trapezoid_area(np.array([0.3]), np.array([0.7])) == 0.0
    with pytest.raises(ValueError, match="same length"):
        metrics.trapezoid_area(np.array([0.0, 1.0]), np.array([0.0, 1.0, 2.0]))
