"""DOPE's metrics of value estimates: hand-made cases with known answers, scipy, the query sides."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from opcc_edu.predictor_metrics import (
    PREDICTOR_METRICS,
    normalized_absolute_error,
    predictor_metrics,
    query_sides,
    rank_correlation_by_group,
    regret_at_1_by_group,
)

# Four start states: a perfect ranking, a reversed one, a tie for the best estimate, a lone side.
GROUP = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 3])
TRUTH = np.array([1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0, 3.0, 2.0, 7.0])
ESTIMATE = np.array([10.0, 20.0, 30.0, 3.0, 2.0, 1.0, 5.0, 5.0, 1.0, 0.0])


def test_rank_correlation_hand_made_groups():
    rho = rank_correlation_by_group(ESTIMATE, TRUTH, GROUP)
    assert rho.shape == (4,)
    assert rho[0] == pytest.approx(1.0) and rho[1] == pytest.approx(-1.0)
    # ranks (2.5, 2.5, 1) against (1, 3, 2): centred (.5, .5, -1) and (-1, 1, 0), covariance 0
    assert rho[2] == 0.0 == stats.spearmanr(ESTIMATE[6:9], TRUTH[6:9]).statistic
    assert np.isnan(rho[3])  # one side: nothing to rank


def test_regret_at_1_hand_made_groups():
    regret = regret_at_1_by_group(ESTIMATE, TRUTH, GROUP)
    # best pick; worst pick (3 - 1); a tie between true values 1 and 3 (3 - 2 expected); lone side
    np.testing.assert_allclose(regret, [0.0, 2.0, 1.0, 0.0])


def test_rank_correlation_equals_scipy_spearmanr_with_ties():
    rng = np.random.default_rng(3)
    group = rng.integers(0, 40, 500)
    estimate = rng.integers(0, 4, 500).astype(float)  # many ties
    truth = rng.normal(size=500).round(1)
    rho = rank_correlation_by_group(estimate, truth, group)
    for g, value in zip(np.unique(group), rho, strict=True):
        mask = group == g
        expected = stats.spearmanr(estimate[mask], truth[mask]).statistic if mask.sum() > 1 else np.nan
        if np.isnan(expected):
            assert np.isnan(value)
        else:
            assert value == pytest.approx(expected, abs=1e-12)


def test_constant_estimates_have_no_rank_correlation_and_a_random_pick():
    truth = np.array([0.0, 4.0, 8.0])
    same = np.zeros(3)
    assert np.isnan(rank_correlation_by_group(same, truth, np.zeros(3, int))[0])
    assert regret_at_1_by_group(same, truth, np.zeros(3, int))[0] == pytest.approx(8.0 - 4.0)


def test_normalized_absolute_error_by_range_per_horizon():
    truth = np.array([0.0, 10.0, 5.0, 5.0, 20.0, 60.0])
    estimate = np.array([1.0, 10.0, 5.0, 7.0, 30.0, 60.0])
    horizon = np.array([10, 10, 20, 20, 30, 30])
    error = normalized_absolute_error(estimate, truth, horizon)
    np.testing.assert_allclose(error[[0, 1, 4, 5]], [0.1, 0.0, 0.25, 0.0])
    assert np.isnan(error[2:4]).all()  # range 0: undefined


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: rank_correlation_by_group([1.0, np.nan], [1.0, 2.0], [0, 0]), "estimate must be finite"),
        (lambda: rank_correlation_by_group([1.0, 2.0], [1.0, 2.0, 3.0], [0, 0, 0]), "estimate has 2 entries"),
        (lambda: regret_at_1_by_group([], [], []), "truth is empty"),
        (lambda: regret_at_1_by_group([1.0, 2.0], [1.0, 2.0], [0]), "group must be a 1-D array of 2 labels"),
        (lambda: regret_at_1_by_group([1.0, 2.0], [1.0, 2.0], [0.5, 1.0]), "group must hold integers"),
        (lambda: normalized_absolute_error([1.0], [1.0], [[10]]), "horizon must be a 1-D array"),
        (lambda: normalized_absolute_error(["a"], [1.0], [10]), "estimate must be real numbers"),
    ],
)
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.fixture(scope="module")
def queries():
    from opcc_edu.queries import load_queries

    return load_queries("hopper", "hard")


def test_query_sides_group_by_start_state_and_horizon(queries):
    n = len(queries.target)
    sides = query_sides(queries, queries.value_a, queries.value_b)
    keys = {}
    for side in ("a", "b"):
        obs, act = getattr(queries, f"obs_{side}"), getattr(queries, f"action_{side}")
        pol = getattr(queries, f"policy_{side}")
        for i in range(n):
            start = (obs[i].tobytes(), int(queries.horizon[i]))
            keys.setdefault(start, set()).add((act[i].tobytes(), int(pol[i])))
    assert sides.n_groups == len(keys)
    assert sides.estimate.size == sum(len(v) for v in keys.values())
    sizes = np.bincount(sides.group)
    assert sorted(sizes) == sorted(len(v) for v in keys.values())
    assert sizes.max() >= 2  # the hard set shares start states between queries
    # every side of a group has one horizon
    assert all(np.unique(sides.horizon[sides.group == g]).size == 1 for g in range(sides.n_groups))


def test_predictor_metrics_known_answers_on_a_query_set(queries):
    exact = predictor_metrics(queries, queries.value_a, queries.value_b)
    assert set(exact) == {*(str(h) for h in np.unique(queries.horizon)), "all"}
    for row in exact.values():
        assert list(row) == list(PREDICTOR_METRICS)
        assert row["normalized_abs_error"] == 0.0 and row["regret_at_1"] == 0.0
        assert row["rank_correlation"] == pytest.approx(1.0)
        assert 0 < row["n_ranked_groups"] <= row["n_groups"]
    shifted = predictor_metrics(queries, queries.value_a + 3.0, queries.value_b + 3.0)
    for h, row in shifted.items():
        if h != "all":
            assert row["normalized_abs_error"] == pytest.approx(3.0 / row["value_range"])
            assert row["abs_error"] == pytest.approx(3.0)
            assert row["rank_correlation"] == pytest.approx(1.0) and row["regret_at_1"] == 0.0
    reversed_ = predictor_metrics(queries, -queries.value_a, -queries.value_b)["all"]
    assert reversed_["rank_correlation"] == pytest.approx(-1.0) and reversed_["regret_at_1"] > 0
    assert shifted["all"]["value_range"] is None


def test_two_side_start_states_rank_as_their_same_state_comparisons(queries):
    # With two sides, rho is +1 or -1: the mean rho over start states is 1 - 2 x their misordered share.
    rng = np.random.default_rng(0)
    estimate_a = queries.value_a + rng.normal(0, 30, queries.value_a.shape)
    estimate_b = queries.value_b + rng.normal(0, 30, queries.value_b.shape)
    sides = query_sides(queries, estimate_a, estimate_b)
    rho = rank_correlation_by_group(sides.estimate, sides.truth, sides.group)
    pairs = np.bincount(sides.group) == 2
    finite = pairs & np.isfinite(rho)
    assert set(np.unique(rho[finite])) <= {-1.0, 1.0}
    wrong = np.zeros(sides.n_groups, bool)
    for g in np.flatnonzero(finite):
        est, tru = sides.estimate[sides.group == g], sides.truth[sides.group == g]
        wrong[g] = (est[0] < est[1]) != (tru[0] < tru[1])
    assert rho[finite].mean() == pytest.approx(1 - 2 * wrong[finite].mean())


def test_predictor_metrics_checks_lengths(queries):
    with pytest.raises(ValueError, match="estimate_b has 3 entries"):
        predictor_metrics(queries, queries.value_a, np.zeros(3))
