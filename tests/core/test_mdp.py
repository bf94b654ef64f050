import numpy as np
import pytest

from opcc_edu.mdp import (
    TabularMDP,
    first_action_policy,
    monte_carlo_error_curve,
    monte_carlo_returns,
    optimal_policy,
    policy_value,
    q_value,
    random_mdp,
)


def chain_mdp():
    """Two states; action 0 stays (reward 1 in state 0), action 1 switches (reward 0)."""
    P = np.zeros((2, 2, 2))
    P[0, 0, 0] = P[1, 0, 1] = 1.0
    P[0, 1, 1] = P[1, 1, 0] = 1.0
    R = np.array([[1.0, 0.0], [0.0, 0.0]])
    return TabularMDP(P, R)


def test_golden_values_on_chain():
    mdp = chain_mdp()
    stay = np.array([0, 0])
    np.testing.assert_allclose(policy_value(mdp, stay, 5), [5.0, 0.0])
    np.testing.assert_allclose(policy_value(mdp, stay, 3, gamma=0.5), [1.75, 0.0])
    # Non-stationary: switch at t=0, then stay -> from state 1 earn 1 for the remaining 3 steps.
    nonstat = np.array([[1, 1], [0, 0], [0, 0], [0, 0]])
    np.testing.assert_allclose(policy_value(mdp, nonstat, 4), [0.0, 3.0])
    value, actions = optimal_policy(mdp, 4)
    np.testing.assert_allclose(value, [4.0, 3.0])
    assert actions[0, 1] == 1 and actions[-1, 1] == 0  # switching on the last step gains nothing


def test_q_equals_value_of_first_action_policy():
    mdp = random_mdp(7, 3, seed=1)
    rng = np.random.default_rng(0)
    policy = rng.dirichlet(np.ones(3), size=(6, 7))  # non-stationary, H=6
    q = q_value(mdp, policy, 6, gamma=0.9)
    for a in range(3):
        modified = first_action_policy(mdp, policy, a, 6)
        np.testing.assert_allclose(q[:, a], policy_value(mdp, modified, 6, gamma=0.9), rtol=1e-12)
    # V is the policy-weighted average of Q at t=0.
    np.testing.assert_allclose((policy[0] * q).sum(-1), policy_value(mdp, policy, 6, 0.9), rtol=1e-12)


def test_optimal_dominates_random_policies():
    mdp = random_mdp(5, 2, seed=3)
    best, _ = optimal_policy(mdp, 8)
    rng = np.random.default_rng(1)
    for _ in range(20):
        v = policy_value(mdp, rng.dirichlet(np.ones(2), size=5), 8)
        assert np.all(v <= best + 1e-12)


def test_monte_carlo_is_unbiased_and_reproducible():
    mdp = random_mdp(6, 2, seed=0)
    policy = np.random.default_rng(2).dirichlet(np.ones(2), size=6)
    exact = policy_value(mdp, policy, 10)
    returns = monte_carlo_returns(mdp, policy, 2, 10, 20_000, seed=5)
    half_width = 4 * returns.std(ddof=1) / np.sqrt(len(returns))
    assert abs(returns.mean() - exact[2]) < half_width
    np.testing.assert_array_equal(returns, monte_carlo_returns(mdp, policy, 2, 10, 20_000, seed=5))
    q = q_value(mdp, policy, 10)
    q_returns = monte_carlo_returns(mdp, policy, 2, 10, 20_000, first_action=1, seed=6)
    assert abs(q_returns.mean() - q[2, 1]) < 4 * q_returns.std(ddof=1) / np.sqrt(20_000)


def test_monte_carlo_error_shrinks_like_inverse_sqrt():
    mdp = random_mdp(6, 2, seed=0)
    policy = np.full((6, 2), 0.5)
    curve = monte_carlo_error_curve(mdp, policy, 0, 10, [10, 1000], n_repeats=200, seed=0)
    ratio = curve["rmse"][0] / curve["rmse"][1]
    assert 6 < ratio < 16  # sqrt(100) = 10


def test_bad_inputs_raise_clear_errors():
    mdp = chain_mdp()
    with pytest.raises(ValueError, match="transitions must be non-negative"):
        TabularMDP(np.ones((2, 2, 2)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="policy must have shape"):
        policy_value(mdp, np.ones((3, 2)) / 2, 4)
    with pytest.raises(ValueError, match="gamma"):
        policy_value(mdp, np.array([0, 0]), 4, gamma=1.5)
    with pytest.raises(ValueError, match="state must lie"):
        monte_carlo_returns(mdp, np.array([0, 0]), 5, 3, 10)
    with pytest.raises(ValueError, match="branching"):
        random_mdp(3, 2, branching=4)
