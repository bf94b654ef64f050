"""Calibration: hand-made ECE and Brier scores, cross-fitted isotonic maps, interval coverage
against the Uncertainty Toolbox, and the calibrated confidence of :class:`Answers`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from opcc_edu.calibration import (
    brier_score,
    calibration_metrics,
    confidence_as_probability,
    coverage_table,
    expected_calibration_error,
    interval_coverage,
    isotonic_calibration,
    miscalibration_area,
    reliability_curve,
)
from opcc_edu.plotting import plot_coverage_curve, plot_reliability


def test_ece_brier_and_reliability_hand_made():
    probability = np.array([0.05, 0.15, 0.95, 0.95, 1.0, 0.1])
    correct = np.array([0, 0, 1, 0, 1, 1])
    curve = reliability_curve(probability, correct, n_bins=10)
    # 0.1 sits on an inner edge and goes up; 1.0 belongs to the last bin
    np.testing.assert_array_equal(curve.count, [1, 2, 0, 0, 0, 0, 0, 0, 0, 3])
    np.testing.assert_allclose(curve.accuracy[[0, 1, 9]], [0.0, 0.5, 2 / 3])
    np.testing.assert_allclose(curve.mean_probability[[0, 1, 9]], [0.05, 0.125, 2.9 / 3])
    assert np.isnan(curve.accuracy[2])
    expected_ece = (1 * 0.05 + 2 * abs(0.5 - 0.125) + 3 * abs(2 / 3 - 2.9 / 3)) / 6
    assert expected_calibration_error(probability, correct, 10) == pytest.approx(expected_ece)
    expected_brier = np.mean((probability - correct) ** 2)
    assert brier_score(probability, correct) == pytest.approx(expected_brier)
    assert brier_score(np.full(4, 0.5), [0, 1, 0, 1]) == 0.25
    assert expected_calibration_error(np.ones(3), np.ones(3)) == 0.0


def test_probability_reading_undoes_the_rescaling():
    np.testing.assert_allclose(confidence_as_probability([0.0, 0.5, 1.0]), [0.5, 0.75, 1.0])
    from opcc_edu.confidence import ensemble_voting

    values_a = np.array([[0.0, 0.0, 0.0, 1.0, 1.0]])  # 3 of 5 members say a < b
    values_b = np.full((1, 5), 0.5)
    _, confidence = ensemble_voting(values_a, values_b)
    assert confidence_as_probability(confidence)[0] == pytest.approx(3 / 5)  # the majority share


def test_isotonic_calibration_is_cross_fitted_and_reproducible():
    from sklearn.isotonic import IsotonicRegression

    rng = np.random.default_rng(0)
    confidence = rng.uniform(size=400)
    correct = (rng.uniform(size=400) < confidence**3).astype(int)
    calibrated = isotonic_calibration(confidence, correct, folds=2, seed=5)
    np.testing.assert_array_equal(calibrated, isotonic_calibration(confidence, correct, folds=2, seed=5))
    assert not np.array_equal(calibrated, isotonic_calibration(confidence, correct, folds=2, seed=6))
    assert calibrated.min() >= 0 and calibrated.max() <= 1
    # each half is mapped by the regression fitted on the other half only
    part = np.empty(400, int)
    part[np.random.default_rng(5).permutation(400)] = np.arange(400) % 2
    for k in (0, 1):
        model = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(
            confidence[part != k], correct[part != k]
        )
        np.testing.assert_allclose(calibrated[part == k], model.predict(confidence[part == k]))
    # a confidence whose P(correct) is its cube: the raw reading is far off, the calibrated one close
    assert expected_calibration_error(confidence, correct) > 0.2
    assert expected_calibration_error(calibrated, correct) < 0.08


def test_calibration_metrics_before_and_after():
    rng = np.random.default_rng(1)
    target = rng.integers(0, 2, 600)
    confidence = rng.uniform(size=600)
    wrong = rng.uniform(size=600) > 0.5 + confidence / 2  # P(correct) = (1 + c) / 2: calibrated as read
    prediction = np.where(wrong, 1 - target, target)
    row = calibration_metrics(prediction, target, confidence)
    assert row["ece"] < 0.06 and row["ece_calibrated"] < 0.08
    assert row["accuracy"] == pytest.approx(1 - wrong.mean()) and row["n"] == 600
    assert row["auroc"] > 0.6
    json.dumps(row)
    free = calibration_metrics(prediction, target, 5 * confidence, as_probability=False)
    assert free["ece"] is None and free["brier"] is None
    assert free["auroc"] == row["auroc"]  # the order is all AUROC sees


def test_gaussian_intervals_and_area_equal_the_uncertainty_toolbox():
    uct = pytest.importorskip("uncertainty_toolbox")
    rng = np.random.default_rng(2)
    members = rng.normal(size=(300, 6)) * rng.uniform(0.5, 2, (300, 1))
    truth = rng.normal(size=300) * 1.5
    expected, observed = interval_coverage(members, truth, "gaussian")
    mean, std = members.mean(axis=1), members.std(axis=1, ddof=1)
    toolbox_expected, toolbox_observed = uct.get_proportion_lists_vectorized(mean, std, truth)
    np.testing.assert_allclose(expected, toolbox_expected)
    np.testing.assert_allclose(observed, toolbox_observed)
    area = uct.miscalibration_area(mean, std, truth, vectorized=True)
    assert miscalibration_area(expected, observed) == pytest.approx(area, abs=1e-12)


def test_t_and_quantile_intervals_reach_their_nominal_coverage():
    rng = np.random.default_rng(4)
    mu = rng.normal(0, 10, 4000)
    members = mu[:, None] + rng.normal(size=(4000, 5))
    # the t interval of the mean covers the true mean at its level (exact for Gaussian members)
    expected, observed = interval_coverage(members, mu, "t")
    assert np.max(np.abs(observed - expected)) < 0.03
    assert miscalibration_area(expected, observed) < 0.01
    # a new draw falls between order statistics j and j + 1 of M members with probability 1/(M + 1)
    many = mu[:, None] + rng.normal(size=(4000, 39))
    new_draw = mu + rng.normal(size=4000)
    expected, observed = interval_coverage(many, new_draw, "quantile")
    assert np.max(np.abs(observed - expected)) < 0.06
    assert observed[0] == 0.0  # a level-0 interval is the median, which a continuous truth misses


def test_members_that_agree_give_point_intervals():
    members = np.ones((3, 4))
    truth = np.array([1.0, 2.0, 1.0])
    for kind in ("t", "gaussian"):
        expected, observed = interval_coverage(members, truth, kind, num_bins=5)
        np.testing.assert_allclose(observed, [2 / 3, 2 / 3, 2 / 3, 2 / 3, 1.0])  # level 1: the whole line
    _, observed = interval_coverage(members, truth, "quantile", num_bins=5)
    np.testing.assert_allclose(observed, 2 / 3)


def test_coverage_table_per_horizon():
    rng = np.random.default_rng(0)
    values_a, values_b = rng.normal(size=(10, 4)), rng.normal(size=(10, 4))
    value_a, value_b = rng.normal(size=10), rng.normal(size=10)
    horizon = np.array([10] * 4 + [20] * 6)
    table = coverage_table(values_a, values_b, value_a, value_b, horizon)
    assert set(table) == {"t", "quantile", "gaussian"}
    assert set(table["t"]) == {"10", "20", "all"}
    assert table["t"]["10"]["n_sides"] == 8 and table["t"]["all"]["n_sides"] == 20
    for rows in table.values():
        for row in rows.values():
            assert 0 <= row["miscalibration_area"] <= 0.5 and 0 <= row["coverage_50"] <= row["coverage_90"] <= 1
    json.dumps(table)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: brier_score([0.2, 1.5], [0, 1]), r"probability must lie in \[0, 1\]"),
        (lambda: brier_score([0.2, np.nan], [0, 1]), "probability must be finite"),
        (lambda: brier_score([0.2, 0.3], [0, 1, 1]), "correct has 3 entries"),
        (lambda: expected_calibration_error([0.2], [2]), "correct must hold 0/1"),
        (lambda: reliability_curve([], []), "probability is empty"),
        (lambda: reliability_curve([0.5], [1], n_bins=0), "n_bins must be an integer >= 1"),
        (lambda: isotonic_calibration([0.1, 0.2], [0, 1], folds=3), "folds must be at most"),
        (lambda: isotonic_calibration([0.1, 0.2], [0, 1], folds=1), "folds must be an integer >= 2"),
        (lambda: interval_coverage(np.ones((3, 2)), np.ones(3), "box"), "unknown kind 'box'; valid choices: t"),
        (lambda: interval_coverage(np.ones((3, 1)), np.ones(3)), "M >= 2 members"),
        (lambda: interval_coverage(np.ones((3, 2)), np.ones(2)), "truth has 2 entries"),
        (lambda: coverage_table(np.ones((3, 2)), np.ones((3, 2)), np.ones(3), np.ones(3), np.ones(2)), "same N"),
    ],
)
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_plots_return_their_axes():
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(0)
    probability = rng.uniform(size=50)
    ax = plot_reliability(probability, rng.integers(0, 2, 50), label="raw")
    assert "ECE" in ax.get_legend_handles_labels()[1][0]
    expected, observed = interval_coverage(rng.normal(size=(50, 3)), rng.normal(size=50))
    assert plot_coverage_curve(expected, observed, ax=ax, label="t") is ax
    plt.close("all")


# --------------------------------------------------------------------------------------------
# Answers: the calibrated confidence, the new summary keys, the printed table
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def answers():
    """Answers of a synthetic 6-member ensemble to the shipped hopper set (no training)."""
    from opcc_edu.baselines.answers import Answers
    from opcc_edu.baselines.config import EnsembleConfig
    from opcc_edu.queries import load_queries

    queries = load_queries("hopper", "paper").select(np.arange(240))
    rng = np.random.default_rng(0)
    noise = 0.3 * np.abs(queries.value_a - queries.value_b).mean()
    values_a = queries.value_a[:, None] + rng.normal(0, noise, (240, 6)) + rng.normal(0, noise, (240, 1))
    values_b = queries.value_b[:, None] + rng.normal(0, noise, (240, 6)) + rng.normal(0, noise, (240, 1))
    config = EnsembleConfig.from_profile("tiny", ensemble_size=6)
    return Answers.from_values("hopper", "synthetic", config, queries, values_a, values_b, ("ev", "pci", "upci"))


def test_answers_calibrate_adds_one_more_confidence_function(answers):
    calibrated = answers.calibrate("pci", seed=1)
    assert calibrated.shape == answers.target.shape and 0 <= calibrated.min() <= calibrated.max() <= 1
    more = answers.with_calibrated("pci", seed=1)
    np.testing.assert_array_equal(more.confidences["pci_cal"], calibrated)
    np.testing.assert_array_equal(more.predictions["pci_cal"], answers.predictions["pci"])
    for name in ("ev", "pci", "upci"):  # the others are untouched
        assert more.metrics[name] == answers.metrics[name]
    table = more.table()
    assert set(table["confidence"]) == {"ev", "pci", "upci", "pci_cal"}
    assert set(table[table["confidence"] == "pci_cal"]["horizon"]) == set(
        table[table["confidence"] == "pci"]["horizon"]
    )
    prefix = more.with_members(3)
    assert set(prefix.metrics) == {"ev", "pci", "upci", "pci_cal"} and prefix.calibrated == more.calibrated
    assert set(more.with_members(1).metrics) == {"ev"}
    with pytest.raises(ValueError, match="unknown confidence 'box'"):
        answers.calibrate("box")
    with pytest.raises(ValueError, match="already a confidence"):
        answers.with_calibrated("pci", name="ev")


def test_summary_adds_predictor_and_calibration_keys_only(answers, tmp_path):
    summary = answers.summary()
    before = {"metrics", "paper_metrics", "tie_fair_metrics", "k", "baseline", "ensemble_size", "n_queries"}
    assert before <= set(summary) and {"predictor_metrics", "calibration"} <= set(summary)
    assert summary["metrics"] == answers.metrics
    predictor = summary["predictor_metrics"]
    assert predictor["all"]["n_groups"] > 0 and -1 <= predictor["all"]["rank_correlation"] <= 1
    assert set(summary["calibration"]["confidence"]) == {"ev", "pci", "upci"}
    assert set(summary["calibration"]["intervals"]) == {"t", "quantile", "gaussian"}
    saved = json.loads(answers.save(tmp_path)["json"].read_text())
    assert saved["predictor_metrics"]["all"]["n_sides"] == predictor["all"]["n_sides"]


def test_format_predictor_metrics_prints_the_loss_beside_dope_metrics(answers):
    from opcc_edu.baselines import format_predictor_metrics

    lines = format_predictor_metrics(answers).splitlines()
    assert lines[0].split() == ["horizon", "loss", "NAE", "rank", "corr", "regret@1", "starts"]
    overall = lines[-3].split()
    assert overall[0] == "all"
    assert float(overall[1]) == pytest.approx(answers.metrics["pci"]["all"]["loss"], abs=5e-5)
    assert float(overall[2]) == pytest.approx(answers.predictor_metrics()["all"]["normalized_abs_error"], abs=5e-5)


def test_heuristic_has_no_value_metrics_but_a_calibration(tmp_path):
    from opcc_edu.baselines import format_predictor_metrics, heuristic_as_answers
    from opcc_edu.queries import load_queries

    heuristic = heuristic_as_answers(load_queries("maze2d-umaze", "paper").select(np.arange(200)))
    summary = heuristic.summary()
    assert summary["predictor_metrics"] is None and summary["calibration"]["intervals"] is None
    assert summary["calibration"]["confidence"]["heuristic"]["ece"] is None
    assert format_predictor_metrics(heuristic) == ""
