"""Ground truth: the batched simulator reproduces gymnasium exactly; batched Monte-Carlo values
equal a naive one-environment, one-query-at-a-time loop."""

import copy

import numpy as np
import pytest
import torch

from opcc_edu import envs
from opcc_edu.policies import Actor
from opcc_edu.simulate import BatchSimulator, monte_carlo_returns, simulate_trajectories


def visited_states(name, n, seed=0, every=7):
    """States from random play, spread over an episode (reset after a termination)."""
    env = envs.make_env(name, seed=seed)
    rng = np.random.default_rng(seed)
    states = []
    while len(states) < n:
        for _ in range(every):
            _, _, terminated, truncated, _ = env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))
            if terminated or truncated:
                env.reset(seed=int(rng.integers(1000)))
        states.append(envs.get_state(env))
    env.close()
    return np.array(states)


def states_near_goal(name, n, seed=0):
    """Maze states inside the goal cell, so that sparse rewards are actually collected."""
    goal = envs.make_env(name).unwrapped.goal
    rng = np.random.default_rng(seed)
    return np.concatenate([goal + rng.uniform(-0.45, 0.45, (n, 2)), rng.uniform(-3, 3, (n, 2))], axis=1)


def untrained_policies(name, count=3, seed=0):
    spec = envs.get_spec(name)
    torch.manual_seed(seed)
    policies = [Actor(spec.obs_dim, spec.act_dim, hidden_sizes=(16, 16)).eval() for _ in range(count)]
    # Make the policies act decisively (untrained nets output near-zero actions), so that
    # episodes really differ and hoppers fall.
    with torch.no_grad():
        for p in policies:
            p.layers[-1].weight.mul_(8.0)
    return policies


def naive_returns(name, states, policies, index, horizon, first_action, gamma):
    """One gymnasium environment, one query at a time, one policy call per step."""
    env = envs.make_env(name, seed=0)
    # Same float64 evaluation as the batched code (see opcc_edu.simulate's module docstring).
    doubles = [copy.deepcopy(p).double() for p in policies]
    out = np.zeros(len(states))
    for i, state in enumerate(states):
        obs = envs.set_state(env, state)
        total, discount = 0.0, 1.0
        for t in range(horizon[i]):
            if t == 0 and first_action is not None and not np.isnan(first_action[i]).any():
                action = first_action[i]
            else:
                with torch.no_grad():
                    action = doubles[index[i]](torch.from_numpy(obs)[None]).numpy()[0].astype(np.float32)
            obs, reward, terminated, _, _ = env.step(action)
            total += discount * reward
            discount *= gamma[i]
            if terminated:
                break
        out[i] = total
    env.close()
    return out


@pytest.mark.parametrize("name", envs.ENV_NAMES)
def test_batch_step_equals_gymnasium_step_bit_for_bit(name):
    states = visited_states(name, 5)
    spec = envs.get_spec(name)
    rng = np.random.default_rng(1)
    if spec.is_maze:  # speeds beyond the clip bound of 5 exercise the velocity clip
        states[:3, 2:] = rng.uniform(-8, 8, (3, 2))
    # Out-of-range actions too: the maze clips them, locomotion charges their full cost.
    actions = rng.uniform(-1.3, 1.3, size=(12, len(states), spec.act_dim)).astype(np.float32)
    sim = BatchSimulator(name, len(states))
    sim.reset_to(states)
    np.testing.assert_array_equal(sim.states(), states)
    reference = [envs.make_env(name, seed=0) for _ in states]
    first = [envs.set_state(env, s) for env, s in zip(reference, states, strict=True)]
    np.testing.assert_array_equal(sim.observations(), np.array(first))
    alive = np.ones(len(states), dtype=bool)
    checked = 0
    for t in range(len(actions)):
        rows = np.flatnonzero(alive)
        if rows.size == 0:
            break
        obs, reward, terminated = sim.step(actions[t, rows], rows=rows)
        for k, i in enumerate(rows):
            obs_ref, reward_ref, terminated_ref, _, _ = reference[i].step(actions[t, i])
            assert np.array_equal(obs[k], obs_ref), (t, i)
            assert reward[k] == reward_ref, (t, i, reward[k], reward_ref)
            assert terminated[k] == terminated_ref
            checked += 1
        alive[rows[terminated]] = False
    assert checked >= len(states)
    for env in reference:
        env.close()


@pytest.mark.parametrize("name", ["maze2d-umaze", "halfcheetah", "hopper", "walker2d"])
def test_monte_carlo_equals_naive_loop(name):
    spec = envs.get_spec(name)
    states = states_near_goal(name, 10, seed=3) if spec.is_maze else visited_states(name, 10, seed=3)
    policies = untrained_policies(name)
    rng = np.random.default_rng(2)
    n = len(states)
    index = rng.integers(0, len(policies), n)
    horizon = rng.integers(1, 31, n)
    first_action = rng.uniform(-1, 1, (n, spec.act_dim)).astype(np.float32)
    first_action[::4] = np.nan  # rows without a first action
    gamma = np.where(np.arange(n) % 2 == 0, 1.0, 0.95)
    # batch_size 4 splits the rows over three simulator batches
    batched = monte_carlo_returns(
        name, states, policies, index, horizon, first_action, gamma, progress=False, batch_size=4
    )
    naive = naive_returns(name, states, policies, index, horizon, first_action, gamma)
    assert batched.shape == (n, 1)
    np.testing.assert_array_equal(batched[:, 0], naive)
    assert np.ptp(naive) > 0  # a comparison that could fail


def test_hopper_episodes_stop_for_good_at_termination():
    states = visited_states("hopper", 6, seed=4)
    policies = untrained_policies("hopper")
    traj = simulate_trajectories("hopper", states, policies, np.zeros(6, dtype=int), 40)
    lengths = traj.valid.sum(axis=1)
    assert (lengths < 40).any(), "the decisive untrained policies should make some hopper fall"
    for row, length in enumerate(lengths):
        assert traj.valid[row, :length].all() and not traj.valid[row, length:].any()
        assert np.isnan(traj.rewards[row, length:]).all()
    returns = monte_carlo_returns("hopper", states, policies, np.zeros(6, dtype=int), 40, progress=False)
    np.testing.assert_allclose(returns[:, 0], traj.returns, rtol=0, atol=1e-12)
    # A longer horizon adds nothing once a row has terminated.
    longer = monte_carlo_returns("hopper", states, policies, np.zeros(6, dtype=int), 80, progress=False)
    fell = lengths < 40
    np.testing.assert_array_equal(longer[fell, 0], returns[fell, 0])


def test_values_do_not_depend_on_the_batch():
    states = visited_states("walker2d", 12, seed=5)
    policies = untrained_policies("walker2d")
    index = np.arange(12) % 3
    full = monte_carlo_returns("walker2d", states, policies, index, 25, progress=False)
    part = monte_carlo_returns("walker2d", states[[7, 2]], policies, index[[7, 2]], 25, progress=False)
    np.testing.assert_array_equal(part[:, 0], full[[7, 2], 0])


def test_runs_deterministic_and_noisy():
    states = visited_states("maze2d-open", 4, seed=6)
    policies = untrained_policies("maze2d-open")
    index = np.zeros(4, dtype=int)
    exact = monte_carlo_returns("maze2d-open", states, policies, index, 30, runs=3, progress=False)
    assert exact.shape == (4, 3) and np.all(exact == exact[:, :1])
    states_h = visited_states("halfcheetah", 4, seed=6)
    policies_h = untrained_policies("halfcheetah")
    noisy = dict(runs=3, seed=1, progress=False, action_noise=0.3)
    a = monte_carlo_returns("halfcheetah", states_h, policies_h, index, 20, **noisy)
    b = monte_carlo_returns("halfcheetah", states_h, policies_h, index, 20, **noisy)
    np.testing.assert_array_equal(a, b)
    assert np.all(np.ptp(a, axis=1) > 0)


def test_bad_inputs_name_the_argument():
    states = visited_states("maze2d-open", 2)
    policies = untrained_policies("maze2d-open", count=2)
    with pytest.raises(ValueError, match="policy_index"):
        monte_carlo_returns("maze2d-open", states, policies, np.array([0, 2]), 5, progress=False)
    with pytest.raises(ValueError, match="horizon"):
        monte_carlo_returns("maze2d-open", states, policies, np.array([0, 1]), 0, progress=False)
    with pytest.raises(ValueError, match="first_action"):
        monte_carlo_returns("maze2d-open", states, policies, np.array([0, 1]), 5, np.zeros((2, 3)), progress=False)
    with pytest.raises(ValueError, match="gamma"):
        monte_carlo_returns("maze2d-open", states, policies, np.array([0, 1]), 5, gamma=1.5, progress=False)
    with pytest.raises(ValueError, match="states"):
        monte_carlo_returns("maze2d-open", states[:, :3], policies, np.array([0, 1]), 5, progress=False)
    with pytest.raises(ValueError, match="runs"):
        monte_carlo_returns("maze2d-open", states, policies, np.array([0, 1]), 5, runs=0, progress=False)
    with pytest.raises(ValueError, match="environment"):
        BatchSimulator("maze2d-huge", 2)
    sim = BatchSimulator("maze2d-open", 2)
    with pytest.raises(ValueError, match="actions"):
        sim.step(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="rows"):
        sim.step(np.zeros((1, 2)), rows=[5])


def test_policy_actions_of_gives_each_row_its_own_policys_action():
    from opcc_edu.simulate import policy_actions_of, stacked_policy

    torch.manual_seed(0)
    actors = [Actor(4, 2, hidden_sizes=(8,)).eval() for _ in range(3)]
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    index = np.array([2, 0, 1, 2, 0], dtype=np.int64)
    actions = policy_actions_of(stacked_policy(actors), obs, index)
    assert actions.shape == (5, 2) and actions.dtype == np.float32
    with torch.no_grad():
        expected = np.stack([actors[i](torch.from_numpy(o)[None]).numpy()[0] for o, i in zip(obs, index, strict=True)])
    np.testing.assert_allclose(actions, expected, atol=1e-6)
    with pytest.raises(ValueError, match="index shape"):
        policy_actions_of(stacked_policy(actors), obs, index[:3])
