"""The value-error decomposition: each variant checked against an independent computation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from opcc_edu.baselines import EnsembleConfig, estimate_values
from opcc_edu.baselines.training import train_ensemble
from opcc_edu.confidence import compute_confidence
from opcc_edu.datasets import generate_dataset
from opcc_edu.dynamics import build_ensemble
from opcc_edu.lab.diagnose import decompose_value_error, holdout_indices, one_step_errors
from opcc_edu.policies import load_policies
from opcc_edu.queries import load_queries
from opcc_edu.simulate.values import simulate_trajectories

ENV = "maze2d-umaze"


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    data = generate_dataset(ENV, "1m", size=3000, seed=0, progress=False)
    config = EnsembleConfig(ensemble_size=3, hidden_sizes=(32, 32), train_steps=60, batch_size=64, seed=0)
    model, _ = train_ensemble(data, config, ENV, progress=False)
    queries = load_queries(ENV, "hard")
    queries = queries.select(np.r_[np.flatnonzero(queries.same_state)[:4], np.flatnonzero(~queries.same_state)[:4]])
    policies = load_policies(ENV)
    return data, model, queries, policies


@pytest.fixture(scope="module")
def dec(setup):
    data, model, queries, policies = setup
    return decompose_value_error(model, queries, policies, dataset=data)


def test_model_column_is_the_ensembles_estimate(setup, dec):
    data, model, queries, policies = setup
    values_a, values_b = estimate_values(model, queries, policies, progress=False)
    np.testing.assert_array_equal(dec.model, np.concatenate([values_a, values_b]))
    np.testing.assert_array_equal(dec.true, np.concatenate([queries.value_a, queries.value_b]))
    ev = dec.table().query("variant.str.startswith('model') and subset == 'all'")["ev_loss"].item()
    prediction, _ = compute_confidence("ev", values_a, values_b)
    assert ev == pytest.approx(np.mean(prediction != queries.target))


def test_learned_reward_on_true_states_by_hand(setup, dec):
    data, model, queries, policies = setup
    # Side a of query 0, one step at a time: the simulator's states, each member's reward.
    trajectory = simulate_trajectories(
        ENV, queries.state_a[:1], policies, queries.policy_a[:1] - 1, queries.horizon[:1], queries.action_a[:1]
    )
    total = np.zeros(model.ensemble_size)
    for t in range(int(queries.horizon[0])):
        obs = torch.as_tensor(trajectory.observations[0, t], dtype=torch.float32).expand(model.ensemble_size, 1, -1)
        act = torch.as_tensor(trajectory.actions[0, t], dtype=torch.float32).expand(model.ensemble_size, 1, -1)
        reward = model.predict_mean(obs, act)[..., -1].clamp(model.reward_low, model.reward_high)
        total += reward[:, 0].double().numpy()
    np.testing.assert_allclose(dec.model_reward_true_states[0], total, rtol=1e-5, atol=1e-5)
    shares = dec.shares()
    assert shares["reward"] >= 0 and shares["dynamics"] >= 0
    assert shares["total"] <= shares["reward"] + shares["dynamics"] + 1e-9


def test_true_reward_on_model_states_is_the_predefined_reward_mode(setup, dec):
    data, model, queries, policies = setup
    predefined = build_ensemble(dataclasses.replace(model.spec, reward="predefined"), init=False)
    predefined.load_state_dict(model.state_dict())
    values_a, values_b = estimate_values(predefined, queries, policies, progress=False)
    np.testing.assert_allclose(dec.true_reward_model_states, np.concatenate([values_a, values_b]), atol=1e-9)
    # The reward is 0/1 per step, so each value is a whole number of rewarded steps.
    np.testing.assert_array_equal(dec.true_reward_model_states, np.round(dec.true_reward_model_states))


def test_one_step_errors_and_the_holdout_split(setup):
    data, model, queries, policies = setup
    index = holdout_indices(len(data["observations"]), seed=0)
    assert len(index) == 300 and len(np.unique(index)) == 300
    errors = one_step_errors(model, data, index)
    assert errors["obs"].shape == (4,) and np.all(errors["obs"] >= 0) and errors["reward"] >= 0
    # A model that predicts no change at all scores exactly the scale of the true changes.
    still = build_ensemble(model.spec, init=False)
    still.load_state_dict(model.state_dict())
    with torch.no_grad():
        still.target_std.zero_()
        still.target_mean.zero_()
    zero = one_step_errors(still, data, index)
    np.testing.assert_allclose(zero["obs"], zero["obs_scale"], rtol=1e-6)
    assert zero["reward"] == pytest.approx(zero["reward_scale"])


def test_open_loop_error_and_plot(setup, dec):
    data, model, queries, policies = setup
    assert set(dec.open_loop) <= {1, 2, 5, 10, 20, 30, 40, 50} and 1 in dec.open_loop
    assert all(v >= 0 for v in dec.open_loop.values())
    fig = dec.plot()
    assert len(fig.axes) == 2
    table = dec.table()
    assert {"same state", "different state", "all"} <= set(table["subset"])


def test_bad_input(setup):
    data, model, queries, policies = setup
    with pytest.raises(ValueError, match="empty"):
        decompose_value_error(model, queries.select(np.array([], dtype=np.int64)), policies)
    discounted = dataclasses.replace(queries, gamma=np.full(len(queries), 0.9))
    with pytest.raises(ValueError, match="gamma"):
        decompose_value_error(model, discounted, policies)


def test_true_reward_survives_member_blocks(setup):
    """rollout_values splits large ensembles into blocks of members; each block keeps the true reward."""
    from opcc_edu.dynamics import rollout_values
    from opcc_edu.lab.diagnose import _with_true_reward

    data, model, queries, policies = setup
    view = _with_true_reward(model)
    args = (policies, queries.obs_a, queries.policy_a - 1, queries.horizon, queries.action_a)
    whole = rollout_values(view, *args, progress=False)
    blocks = rollout_values(view, *args, member_block=1, chunk_rows=4, progress=False)
    np.testing.assert_allclose(blocks, whole, atol=1e-9)
    np.testing.assert_array_equal(whole, np.round(whole))  # whole numbers of rewarded steps


def test_reward_map_adds_up_to_the_reward_error(setup, dec):
    data, model, queries, policies = setup
    rmap = dec.reward_map(dataset=data, bins_per_cell=5)
    # Every simulator step lands in one patch (the mazes never terminate).
    assert rmap.steps.sum() == dec.horizon.sum()
    assert rmap.data_visits.sum() == len(data["next_observations"])
    # Summed over patches, the step errors are the learned-reward-on-true-states value error,
    # which decompose_value_error computed on its own from whole trajectories.
    expected = (dec.model_reward_true_states.mean(1) - dec.true).sum()
    assert rmap.error_sum.sum() == pytest.approx(expected, rel=1e-6, abs=1e-6)
    assert np.all(rmap.abs_error_sum >= np.abs(rmap.error_sum) - 1e-9)
    bias = rmap.bias
    assert np.all(np.isnan(bias[rmap.steps == 0])) and np.all(np.isfinite(bias[rmap.steps > 0]))
    everything = rmap.error_share_in_sparse_patches(1.0)
    assert everything == {"error_share": 1.0, "step_share": 1.0, "data_share": 1.0}
    nothing = rmap.error_share_in_sparse_patches(0.0)
    assert nothing["data_share"] == 0.0  # patches with no data at all
    assert 0.0 <= nothing["error_share"] <= 1.0
    assert len(rmap.plot().axes) == 4  # two maps and their colour bars


def test_reward_map_by_hand_and_bad_input(dec):
    # One step of error 0.5 near the goal cell's centre lands in the patch that holds that point.
    one = dataclasses.replace(
        dec,
        step_xy=np.array([[[-0.9, 1.1]]]),
        step_reward=np.array([[1.0]]),
        step_learned_reward=np.array([[1.5]]),
    )
    rmap = one.reward_map(bins_per_cell=2)
    assert rmap.steps.sum() == 1 and rmap.data_visits is None
    row, col = np.argwhere(rmap.steps == 1)[0]
    x0, _, _, y1 = rmap.extent
    assert x0 + col * 0.5 <= -0.9 < x0 + (col + 1) * 0.5 and y1 - (row + 1) * 0.5 <= 1.1 < y1 - row * 0.5
    assert rmap.bias[row, col] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="dataset="):
        rmap.error_share_in_sparse_patches()
    with pytest.raises(ValueError, match="bins_per_cell"):
        dec.reward_map(bins_per_cell=0)
    with pytest.raises(ValueError, match="no positions"):
        dataclasses.replace(dec, step_xy=None).reward_map()
    with pytest.raises(ValueError, match="max_data_share"):
        dec.reward_map(dataset={"next_observations": np.zeros((3, 4))}).error_share_in_sparse_patches(2.0)


# --- the termination variant (environments that terminate) -------------------------------------
@pytest.fixture(scope="module")
def hopper_setup():
    torch.manual_seed(0)
    data = generate_dataset("hopper", "medium", size=2000, seed=0, progress=False)
    config = EnsembleConfig(ensemble_size=3, hidden_sizes=(32, 32), train_steps=60, batch_size=64, seed=0)
    assert config.clip and not config.stochastic  # the by-hand rollout below assumes both
    model, _ = train_ensemble(data, config, "hopper", progress=False)
    queries = load_queries("hopper", "hard")
    # the weakest policy (level 4) falls within the horizon from many starts
    falls = np.flatnonzero((queries.policy_a == 4) & (queries.horizon >= 30))[:6]
    queries = queries.select(np.r_[falls, np.flatnonzero(queries.policy_a == 1)[:2]])
    return model, queries, load_policies("hopper")


def test_simulators_termination_on_model_rollouts_by_hand(hopper_setup):
    model, queries, policies = hopper_setup
    dec = decompose_value_error(model, queries, policies)
    n, m = len(queries), model.ensemble_size
    assert dec.model_true_termination.shape == (2 * n, m)
    states = np.concatenate([queries.state_a, queries.state_b])
    level = np.concatenate([queries.policy_a, queries.policy_b])
    horizon = np.concatenate([queries.horizon, queries.horizon])
    first = np.concatenate([queries.action_a, queries.action_b])
    trajectories = simulate_trajectories("hopper", states, policies, level - 1, horizon, first)
    np.testing.assert_array_equal(dec.true_steps, trajectories.valid.sum(1))
    assert (dec.true_steps < horizon).any() and (dec.true_steps >= 1).all()  # some sides fall
    # One side that fell, stepped by hand: the model's states and clipped reward, no model rule
    # stops it, and it runs exactly as many steps as the simulator's trajectory.
    side = int(np.flatnonzero(dec.true_steps < horizon)[0])
    obs = np.concatenate([queries.obs_a, queries.obs_b])[side]
    state = torch.as_tensor(obs, dtype=torch.float32).expand(m, 1, -1)
    total = torch.zeros(m, 1)
    for t in range(int(dec.true_steps[side])):
        if t == 0:
            action = torch.as_tensor(first[side], dtype=torch.float32).expand(m, 1, -1)
        else:
            action = policies[level[side] - 1](state)
        mean = model.predict_mean(state, action)
        total += mean[..., -1].clamp(model.reward_low, model.reward_high)
        state = torch.maximum(torch.minimum(state + mean[..., :-1], model.obs_high), model.obs_low)
    np.testing.assert_allclose(dec.model_true_termination[side], total[:, 0].double().numpy(), rtol=1e-4, atol=1e-4)
    assert "model, the simulator's termination" in set(dec.table()["variant"])


def test_termination_variant_absent_where_it_cannot_be_computed(setup, dec, hopper_setup):
    assert dec.model_true_termination is None  # the maze never terminates
    model, queries, policies = hopper_setup
    learned = EnsembleConfig(ensemble_size=2, hidden_sizes=(16,), train_steps=5, termination="learned", seed=0)
    data = generate_dataset("hopper", "medium", size=500, seed=0, progress=False)
    head, _ = train_ensemble(data, learned, "hopper", progress=False)
    assert decompose_value_error(head, queries.select(np.arange(2)), policies).model_true_termination is None
