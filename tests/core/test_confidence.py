"""Tests of opcc_edu.confidence: golden values, scipy equivalence, interval semantics, edge cases."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from opcc_edu import confidence as cf
from opcc_edu.metrics import aurcc, oracle_aurcc


def ensemble_values(seed: int, n: int = 200, m: int = 10, correlation: float = 0.5):
    """Synthetic member estimates: a per-query true gap plus correlated member noise."""
    rng = np.random.default_rng(seed)
    base = rng.normal(0.0, 10.0, (n, 1))
    gap = rng.normal(0.0, 2.0, (n, 1))
    shared = rng.normal(0.0, 1.0, (n, m))
    values_a = base + shared + rng.normal(0.0, 1.0 + rng.random((n, 1)), (n, m))
    values_b = base + gap + correlation * shared + rng.normal(0.0, 1.0, (n, m))
    return values_a, values_b


def interval(values: np.ndarray, alpha: float) -> tuple[float, float]:
    """Two-sided alpha-level t interval of the mean of a 1-D sample."""
    half = stats.t.ppf((1 + alpha) / 2, df=values.size - 1) * values.std(ddof=1) / np.sqrt(values.size)
    return values.mean() - half, values.mean() + half


def overlap(first: tuple[float, float], second: tuple[float, float]) -> bool:
    """Closed intervals share a point (partial overlap or containment)."""
    return max(first[0], second[0]) <= min(first[1], second[1])


# --------------------------------------------------------------------------------------------
# Ensemble voting
# --------------------------------------------------------------------------------------------
def test_ensemble_voting_golden():
    values_a = np.array(
        [
            [1.0, 1.0, 1.0, 1.0],  # 4 of 4 members say a < b
            [1.0, 3.0, 1.0, 3.0],  # 2 of 4: exact split predicts 1 with confidence 0
            [3.0, 3.0, 3.0, 1.0],  # 1 of 4: predicts 0, majority 3/4 -> 0.5
            [2.0, 2.0, 2.0, 3.0],  # equal values vote 0: 0 of 4 -> predicts 0, confidence 1
        ]
    )
    values_b = np.full((4, 4), 2.0)
    prediction, confidence = cf.ensemble_voting(values_a, values_b)
    np.testing.assert_array_equal(prediction, [1, 1, 0, 0])
    np.testing.assert_allclose(confidence, [1.0, 0.0, 0.5, 1.0])
    assert prediction.dtype == np.int8 and confidence.dtype == np.float64


def test_ensemble_voting_matches_its_definition():
    values_a, values_b = ensemble_values(1, m=7)
    prediction, confidence = cf.ensemble_voting(values_a, values_b)
    fraction = (values_a < values_b).mean(axis=1)
    np.testing.assert_array_equal(prediction, (fraction >= 0.5).astype(int))
    majority = np.maximum(fraction, 1 - fraction)
    np.testing.assert_allclose(confidence, (majority - 0.5) / 0.5, atol=1e-15)
    # Resolution: at most M // 2 + 1 distinct values.
    assert np.unique(confidence).size <= 7 // 2 + 1


def test_single_member_voting_is_all_or_nothing():
    prediction, confidence = cf.ensemble_voting([[1.0], [3.0]], [[2.0], [2.0]])
    np.testing.assert_array_equal(prediction, [1, 0])
    np.testing.assert_array_equal(confidence, [1.0, 1.0])


# --------------------------------------------------------------------------------------------
# PCI
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("members", [2, 3, 10, 100])
def test_pci_is_one_minus_paired_t_test_p_value(members):
    values_a, values_b = ensemble_values(members, n=100, m=members)
    prediction, confidence = cf.paired_confidence_interval(values_a, values_b)
    p_value = stats.ttest_rel(values_a, values_b, axis=1).pvalue
    np.testing.assert_allclose(confidence, 1 - p_value, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(prediction, ((values_a - values_b).mean(axis=1) < 0).astype(int))


def test_pci_is_the_largest_level_whose_interval_excludes_zero():
    values_a, values_b = ensemble_values(2, n=40, m=8)
    _, confidence = cf.paired_confidence_interval(values_a, values_b)
    for row in range(40):
        difference = values_a[row] - values_b[row]
        alpha = confidence[row]
        if 1e-6 < alpha < 1 - 1e-6:
            low, high = interval(difference, alpha - 1e-6)
            assert not low <= 0 <= high
            low, high = interval(difference, alpha + 1e-6)
            assert low <= 0 <= high


def test_pci_refines_a_percent_grid_search():
    # The public reference tries alpha = 0, 0.01, ..., 1 and keeps the largest that excludes 0;
    # the closed form is that search with infinite resolution.
    values_a, values_b = ensemble_values(3, n=60, m=10)
    _, confidence = cf.paired_confidence_interval(values_a, values_b)
    for row in range(60):
        difference = values_a[row] - values_b[row]
        excluded = [a / 100 for a in range(1, 100) if not overlap(interval(difference, a / 100), (0.0, 0.0))]
        grid = max(excluded, default=0.0)
        assert grid <= confidence[row] + 1e-12 and confidence[row] < grid + 0.01 + 1e-12


def test_pci_degenerate_spreads():
    values_b = np.zeros((3, 5))
    values_a = np.array([[2.0] * 5, [0.0] * 5, [-1.0] * 5])  # constant differences
    prediction, confidence = cf.paired_confidence_interval(values_a, values_b)
    np.testing.assert_array_equal(confidence, [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(prediction, [0, 1, 1])
    # Members that disagree but average to zero: no evidence at all.
    _, confidence = cf.paired_confidence_interval([[1.0, -1.0, 2.0, -2.0]], [[0.0] * 4])
    assert confidence[0] == pytest.approx(0.0, abs=1e-12)


# --------------------------------------------------------------------------------------------
# U-PCI
# --------------------------------------------------------------------------------------------
def test_upci_closed_form_is_the_largest_non_overlapping_level():
    values_a, values_b = ensemble_values(4, n=40, m=6)
    _, confidence = cf.unpaired_confidence_interval(values_a, values_b)
    checked = 0
    for row in range(40):
        alpha = confidence[row]
        if 1e-6 < alpha < 1 - 1e-6:
            checked += 1
            assert not overlap(interval(values_a[row], alpha - 1e-6), interval(values_b[row], alpha - 1e-6))
            assert overlap(interval(values_a[row], alpha + 1e-6), interval(values_b[row], alpha + 1e-6))
    assert checked > 20


def test_upci_counts_containment_as_overlap_and_is_swap_symmetric():
    # Side a is far noisier than side b: at high levels a's interval swallows b's entirely.
    rng = np.random.default_rng(5)
    values_a = 10.0 + rng.normal(0.0, 20.0, (1, 12))
    values_b = 12.0 + rng.normal(0.0, 0.1, (1, 12))
    prediction, confidence = cf.unpaired_confidence_interval(values_a, values_b)
    swapped_prediction, swapped_confidence = cf.unpaired_confidence_interval(values_b, values_a)
    assert swapped_confidence[0] == confidence[0]
    assert swapped_prediction[0] == 1 - prediction[0]
    levels = np.linspace(confidence[0] + 1e-9, 0.999, 200)
    contained = 0
    for alpha in levels:
        first, second = interval(values_a[0], alpha), interval(values_b[0], alpha)
        assert overlap(first, second)
        contained += first[0] <= second[0] and second[1] <= first[1]
    assert contained > 100  # the case a "no partial overlap" test would get wrong


def test_upci_swap_symmetry_on_random_inputs():
    values_a, values_b = ensemble_values(6, n=500, m=5)
    prediction, confidence = cf.unpaired_confidence_interval(values_a, values_b)
    swapped_prediction, swapped_confidence = cf.unpaired_confidence_interval(values_b, values_a)
    np.testing.assert_array_equal(swapped_confidence, confidence)
    np.testing.assert_array_equal(swapped_prediction, 1 - prediction)


def test_upci_is_never_more_confident_than_pci():
    for seed in range(5):
        values_a, values_b = ensemble_values(10 + seed, n=300, m=int(3 + 4 * seed), correlation=0.9)
        pci_prediction, pci = cf.paired_confidence_interval(values_a, values_b)
        upci_prediction, upci = cf.unpaired_confidence_interval(values_a, values_b)
        np.testing.assert_array_equal(pci_prediction, upci_prediction)
        assert np.all(upci <= pci + 1e-12)
        assert np.mean(upci < pci - 1e-6) > 0.5  # strictly, for positively correlated members


def test_upci_degenerate_spreads():
    prediction, confidence = cf.unpaired_confidence_interval([[1.0, 1.0], [4.0, 4.0]], [[2.0, 2.0], [4.0, 4.0]])
    np.testing.assert_array_equal(confidence, [1.0, 0.0])
    np.testing.assert_array_equal(prediction, [1, 1])


def test_exact_ties_predict_one_for_every_function():
    values = np.array([[1.0, 2.0, 3.0, 4.0]])
    for name in cf.CONFIDENCE_FUNCTIONS:
        prediction, confidence = cf.compute_confidence(name, values, values[:, ::-1])
        assert prediction[0] == 1
        assert confidence[0] == pytest.approx(0.0, abs=1e-12)


# --------------------------------------------------------------------------------------------
# Teaching baselines and the registry
# --------------------------------------------------------------------------------------------
def test_random_confidence_is_seeded_and_uniform():
    first = cf.random_confidence(1000, seed=4)
    np.testing.assert_array_equal(first, cf.random_confidence(1000, seed=4))
    assert not np.array_equal(first, cf.random_confidence(1000, seed=5))
    assert first.shape == (1000,) and first.min() >= 0 and first.max() < 1
    assert stats.kstest(first, "uniform").pvalue > 1e-3


def test_oracle_confidence_reaches_the_oracle_aurcc():
    prediction = np.array([1, 0, 1, 1, 0])
    target = np.array([1, 1, 1, 0, 0])
    confidence = cf.oracle_confidence(prediction, target)
    np.testing.assert_array_equal(confidence, [1.0, 0.0, 1.0, 0.0, 1.0])
    assert aurcc(prediction, target, confidence) == pytest.approx(oracle_aurcc(prediction, target))


def test_registry_and_dispatch():
    assert set(cf.CONFIDENCE_FUNCTIONS) == {"ev", "pci", "upci"} == set(cf.CONFIDENCE_NAMES)
    values_a, values_b = ensemble_values(7, n=20, m=4)
    for name, function in cf.CONFIDENCE_FUNCTIONS.items():
        expected = function(values_a, values_b)
        result = cf.compute_confidence(name, values_a, values_b)
        np.testing.assert_array_equal(result[0], expected[0])
        np.testing.assert_array_equal(result[1], expected[1])
    with pytest.raises(ValueError, match="confidence.*ev, pci, upci"):
        cf.compute_confidence("bootstrap", values_a, values_b)


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["ev", "pci", "upci"])
@pytest.mark.parametrize(
    ("values_a", "values_b", "argument"),
    [
        (np.zeros((3, 4)), np.zeros((3, 5)), "same shape"),
        (np.zeros(4), np.zeros(4), "values_a"),
        (np.zeros((2, 4)), np.full((2, 4), np.nan), "values_b"),
        (np.zeros((0, 4)), np.zeros((0, 4)), "values_a"),
        (np.array([["x", "y"]]), np.zeros((1, 2)), "values_a"),
        (np.zeros((2, 3)) + 1j, np.zeros((2, 3)), "values_a must be real"),
        (np.zeros((2, 3)), np.array([[1, 2, 3 + 0j]] * 2), "values_b must be real"),
        (np.zeros((2, 3)), np.array([[0, np.inf, 0]] * 2), "values_b must be finite"),
        (np.array([[0, -np.inf, 0]] * 2), np.zeros((2, 3)), "values_a must be finite"),
    ],
)
def test_bad_input_names_the_argument(name, values_a, values_b, argument):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rejected before any cast: no ComplexWarning either
        with pytest.raises(ValueError, match=argument):
            cf.compute_confidence(name, values_a, values_b)


@pytest.mark.parametrize("name", ["pci", "upci"])
def test_interval_methods_need_two_members(name):
    with pytest.raises(ValueError, match="values_a has M = 1 .*M >= 2"):
        cf.compute_confidence(name, np.zeros((3, 1)), np.ones((3, 1)))


def test_voting_is_defined_for_one_member():
    prediction, confidence = cf.ensemble_voting([[1.0], [2.0]], [[2.0], [1.0]])
    np.testing.assert_array_equal(prediction, [1, 0])
    np.testing.assert_array_equal(confidence, [1.0, 1.0])


# --------------------------------------------------------------------------------------------
# Scale
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["ev", "pci", "upci"])
@pytest.mark.parametrize("scale", [1e170, 1e-170, 1e300, 1e-300, 3.7e-5, 2.0**900])
def test_confidence_does_not_depend_on_the_scale_of_the_values(name, scale):
    values_a, values_b = ensemble_values(11, n=300, m=8)
    expected = cf.compute_confidence(name, values_a, values_b)
    with np.errstate(all="raise"):  # no overflow, underflow or invalid operation on the way
        prediction, confidence = cf.compute_confidence(name, values_a * scale, values_b * scale)
    np.testing.assert_array_equal(prediction, expected[0])
    assert np.all(np.isfinite(confidence)) and confidence.min() >= 0 and confidence.max() <= 1
    # A power of two scales exactly, so the confidence is bit for bit the same; another factor
    # rounds each value once, which moves a confidence by a few ulps at most.
    tolerance = 0.0 if np.frexp(scale)[0] == 0.5 else 1e-12
    np.testing.assert_allclose(confidence, expected[1], rtol=0, atol=tolerance)
    assert expected[1].std() > 0.1  # the comparison covers a spread of confidences


def test_scale_is_per_query_and_keeps_degenerate_cases():
    values_a, values_b = ensemble_values(12, n=4, m=5)
    scales = np.array([[1e-200], [1.0], [1e150], [1e305]])
    for name in ("pci", "upci"):
        expected = cf.compute_confidence(name, values_a, values_b)
        prediction, confidence = cf.compute_confidence(name, values_a * scales, values_b * scales)
        np.testing.assert_array_equal(prediction, expected[0])
        np.testing.assert_allclose(confidence, expected[1], rtol=0, atol=1e-12)
        # near the largest double: a - b would overflow without scaling
        big = np.full((1, 4), 1.7e308)
        assert cf.compute_confidence(name, big, -big)[1][0] == 1.0
        assert cf.compute_confidence(name, big, big)[1][0] == 0.0


def test_bad_baseline_arguments():
    with pytest.raises(ValueError, match="n"):
        cf.random_confidence(0)
    with pytest.raises(ValueError, match="seed"):
        cf.random_confidence(5, seed=-1)
    with pytest.raises(ValueError, match="prediction"):
        cf.oracle_confidence([0, 3], [0, 1])


# --------------------------------------------------------------------------------------------
# Synthetic ensembles
# --------------------------------------------------------------------------------------------
def test_synthetic_ensemble_is_consistent_and_seeded():
    ensemble = cf.synthetic_ensemble(400, 8, seed=3)
    assert len(ensemble) == 400 and ensemble.n_members == 8
    assert ensemble.values_a.shape == ensemble.values_b.shape == (400, 8)
    np.testing.assert_array_equal(ensemble.target, (ensemble.true_a < ensemble.true_b).astype(np.int8))
    assert np.all(np.abs(ensemble.true_b - ensemble.true_a) >= 10.0)
    again = cf.synthetic_ensemble(400, 8, seed=3)
    np.testing.assert_array_equal(again.values_a, ensemble.values_a)
    assert not np.array_equal(cf.synthetic_ensemble(400, 8, seed=4).values_a, ensemble.values_a)


def test_synthetic_ensemble_members_are_correlated_and_informative():
    ensemble = cf.synthetic_ensemble(3000, 30, seed=1, correlation=0.7)
    centred_a = ensemble.values_a - ensemble.values_a.mean(axis=1, keepdims=True)
    centred_b = ensemble.values_b - ensemble.values_b.mean(axis=1, keepdims=True)
    per_query = (centred_a * centred_b).sum(1) / np.sqrt((centred_a**2).sum(1) * (centred_b**2).sum(1))
    assert abs(np.median(per_query) - 0.7) < 0.1
    # Confidence carries information: a correct answer usually outranks a wrong one.
    prediction, confidence = cf.paired_confidence_interval(ensemble.values_a, ensemble.values_b)
    wrong = prediction != ensemble.target
    assert 0.05 < wrong.mean() < 0.4
    auroc = stats.mannwhitneyu(confidence[~wrong], confidence[wrong]).statistic / (wrong.sum() * (~wrong).sum())
    assert auroc > 0.7


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"n_queries": 0}, "n_queries"),
        ({"n_members": 0}, "n_members"),
        ({"correlation": 1.5}, "correlation"),
        ({"difficulty_range": (0.0, 1.0)}, "difficulty_range"),
        ({"min_gap": -1.0}, "min_gap"),
    ],
)
def test_synthetic_ensemble_rejects_bad_arguments(kwargs, argument):
    arguments = {"n_queries": 10, "n_members": 3}
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=argument):
        cf.synthetic_ensemble(**arguments)


def test_members_agreeing_on_equal_values():
    # EV follows the paper's strict vote (equal values vote 0); the interval methods see no
    # difference at all and give confidence 0.
    values = np.full((1, 6), 3.0)
    prediction, confidence = cf.ensemble_voting(values, values)
    assert prediction[0] == 0 and confidence[0] == 1.0
    for function in (cf.paired_confidence_interval, cf.unpaired_confidence_interval):
        prediction, confidence = function(values, values)
        assert prediction[0] == 1 and confidence[0] == 0.0


def test_the_registry_and_the_vocabulary_name_the_same_confidences_in_the_same_order():
    from opcc_edu.names import CONFIDENCE_NAMES, CONFIDENCES

    assert tuple(cf.CONFIDENCE_FUNCTIONS) == CONFIDENCES == tuple(CONFIDENCE_NAMES)
