"""The environments' reward functions, and the predefined-reward mode of the ensembles."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from opcc_edu.envs import ENV_NAMES, LOCOMOTION_NAMES, MAZE_NAMES, get_spec, get_state, make_env, set_state
from opcc_edu.rewards import (
    REWARD_FEATURES,
    dataset_reward_feature,
    reward_feature,
    reward_fn,
    reward_spec,
)

torch.set_num_threads(1)


# --------------------------------------------------------------------------------------------
# The reward functions equal env.step's reward
# --------------------------------------------------------------------------------------------
def _random_transitions(env_name: str, n: int, seed: int = 0):
    """``n`` env.step calls from random perturbed states: states, observations, actions, rewards."""
    rng = np.random.default_rng(seed)
    env = make_env(env_name, seed=seed)
    core = env.unwrapped
    spec = get_spec(env_name)
    rows = {key: [] for key in ("state", "next_state", "obs", "action", "next_obs", "reward")}
    for i in range(n):
        env.reset(seed=seed * 1000 + i)
        state = get_state(env)
        nq = len(state) // 2 if spec.is_maze else core.model.nq
        if spec.is_maze:
            # Half the rows start near the goal, so that both rewards occur.
            centre = core.goal if i % 2 else state[:2]
            state[:2] = centre + rng.uniform(-0.7, 0.7, size=2)
            state[nq:] = rng.uniform(-3.0, 3.0, size=2)
        else:
            state[:nq] += rng.normal(0.0, 0.1, size=nq)
            state[nq:] += rng.normal(0.0, 2.0, size=len(state) - nq)
            if env_name != "halfcheetah":
                # Height and torso angle spread over both sides of the health ranges.
                state[1] += rng.uniform(-0.8, 0.9)
                state[2] += rng.uniform(-1.2, 1.2)
        obs = set_state(env, state)
        action = rng.uniform(-1.0, 1.0, size=spec.act_dim)
        next_obs, reward, *_ = env.step(action)
        for key, value in zip(rows, (state, get_state(env), obs, action, next_obs, reward), strict=True):
            rows[key].append(np.asarray(value, dtype=np.float64))
    env.close()
    return {key: np.stack(value) for key, value in rows.items()}


@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_reward_fn_equals_env_step_on_random_states(env_name):
    data = _random_transitions(env_name, 120)
    feature = reward_feature(env_name, data["state"], data["next_state"])
    assert (feature is None) == get_spec(env_name).is_maze
    tensors = [torch.as_tensor(data[key]) for key in ("obs", "action", "next_obs")]
    feature64 = None if feature is None else torch.as_tensor(feature)
    reward = reward_fn(env_name)(*tensors, feature64)
    assert reward.dtype == torch.float64 and reward.shape == (120,)
    np.testing.assert_allclose(reward.numpy(), data["reward"], rtol=0, atol=1e-9)
    # float32 works too, to float32 precision
    feature32 = None if feature is None else feature64.float()
    reward32 = reward_fn(env_name)(*(t.float() for t in tensors), feature32)
    assert reward32.dtype == torch.float32
    np.testing.assert_allclose(reward32.numpy(), data["reward"], rtol=1e-5, atol=1e-4)
    if env_name in MAZE_NAMES:
        assert set(np.unique(data["reward"])) == {0.0, 1.0}
    elif env_name != "halfcheetah":
        # both healthy and unhealthy outcomes were covered
        without_healthy = reward_fn(env_name)(*tensors, feature64) - (
            reward_spec(env_name).forward_reward_weight * feature64
            - reward_spec(env_name).ctrl_cost_weight * tensors[1].square().sum(-1)
        )
        paid = np.round(without_healthy.numpy(), 6)
        assert set(np.unique(paid)) == {0.0, reward_spec(env_name).healthy_reward}


def test_reward_fn_works_on_any_batch_shape():
    data = _random_transitions("hopper", 12, seed=1)
    fn = reward_fn("hopper")
    flat = fn(*(torch.as_tensor(data[k]) for k in ("obs", "action", "next_obs")), torch.tensor(0.0).expand(12))
    shaped = fn(*(torch.as_tensor(data[k]).reshape(3, 4, -1) for k in ("obs", "action", "next_obs")), torch.zeros(3, 4))
    torch.testing.assert_close(shaped.reshape(-1), flat)


def test_reward_constants_are_read_from_the_environments():
    for env_name in LOCOMOTION_NAMES:
        core = make_env(env_name).unwrapped
        params = reward_spec(env_name)
        assert params.dt == core.dt and params.ctrl_cost_weight == core._ctrl_cost_weight
        assert params.forward_reward_weight == core._forward_reward_weight
    assert reward_spec("hopper").healthy_state_range == (-100.0, 100.0)
    assert reward_spec("halfcheetah").healthy_reward == 0.0
    for env_name in MAZE_NAMES:
        np.testing.assert_array_equal(reward_spec(env_name).goal, make_env(env_name).unwrapped.goal)
    assert REWARD_FEATURES == {name: (None if name in MAZE_NAMES else "x_velocity") for name in ENV_NAMES}


def test_hopper_velocity_beyond_100_is_the_one_thing_observations_cannot_see():
    # Hopper-v5 is unhealthy when |qvel| >= 100, but its observation clips velocities to 10.
    env = make_env("hopper", seed=0)
    state = get_state(env)
    state[11] = 500.0  # the foot joint spins: still above 100 after the step, body upright
    obs = set_state(env, state)
    action = np.zeros(3)
    next_obs, reward, terminated, *_ = env.step(action)
    assert terminated and np.abs(next_obs).max() <= 10.0
    x_velocity = reward_feature("hopper", state, get_state(env))
    ours = reward_fn("hopper")(*(torch.as_tensor(x)[None] for x in (obs, action, next_obs)), torch.tensor([x_velocity]))
    assert float(ours) - reward == pytest.approx(reward_spec("hopper").healthy_reward)


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="unknown environment 'ant'; valid choices: maze2d-open"):
        reward_fn("ant")
    with pytest.raises(ValueError, match="valid choices"):
        reward_feature("ant", np.zeros(3), np.zeros(3))
    fn = reward_fn("hopper")
    obs, act = torch.zeros(5, 11), torch.zeros(5, 3)
    with pytest.raises(ValueError, match=r"next_obs of hopper must have shape \(\.\.\., 11\)"):
        fn(torch.zeros(5, 4), act, torch.zeros(5, 4), torch.zeros(5))
    with pytest.raises(ValueError, match="obs must have the shape of next_obs"):
        fn(torch.zeros(4, 11), act, obs, torch.zeros(5))
    with pytest.raises(ValueError, match=r"action of hopper must have shape \(5, 3\)"):
        fn(obs, torch.zeros(5, 2), obs, torch.zeros(5))
    with pytest.raises(ValueError, match="needs feature=x_velocity"):
        fn(obs, act, obs)
    with pytest.raises(ValueError, match=r"batch shape \(5,\)"):
        fn(obs, act, obs, torch.zeros(5, 1))
    with pytest.raises(ValueError, match="floating-point"):
        fn(obs, act, obs.long(), torch.zeros(5))
    with pytest.raises(ValueError, match="same shape"):
        reward_feature("hopper", np.zeros((2, 12)), np.zeros((3, 12)))
    # the mazes ignore the feature
    maze = reward_fn("maze2d-umaze")
    assert maze(torch.zeros(2, 4), torch.zeros(2, 2), torch.zeros(2, 4)).tolist() == [0.0, 0.0]


# --------------------------------------------------------------------------------------------
# The feature of a dataset
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hopper_random():
    from opcc_edu.datasets.locomotion import generate_policy_dataset

    # Random actions make the hopper fall fast: many episode ends.
    return generate_policy_dataset("hopper", 400, seed=0, n_streams=4, progress=False)


def test_dataset_feature_reproduces_the_recorded_rewards(hopper_random):
    data = hopper_random
    done = data["terminals"] | data["timeouts"]
    assert done.sum() >= 10
    feature = dataset_reward_feature("hopper", data, "random")
    reward = reward_fn("hopper")(
        *(torch.as_tensor(data[k], dtype=torch.float64) for k in ("observations", "actions", "next_observations")),
        torch.as_tensor(feature),
    )
    # float32 positions: about 1e-4 inside episodes; episode ends are inverted from the reward
    np.testing.assert_allclose(reward.numpy(), data["rewards"], rtol=0, atol=5e-4)
    np.testing.assert_allclose(reward.numpy()[done], data["rewards"][done], rtol=0, atol=1e-5)
    inside = np.flatnonzero(~done[:-1])
    expected = (data["infos/qpos"][inside + 1, 0].astype(np.float64) - data["infos/qpos"][inside, 0]) / 0.008
    np.testing.assert_array_equal(feature[inside], expected)


def test_dataset_feature_needs_simulator_states_for_locomotion(hopper_random):
    data = {k: v for k, v in hopper_random.items() if not k.startswith("infos/")}
    with pytest.raises(ValueError, match=r"needs recorded simulator states.*'medium-replay' of hopper"):
        dataset_reward_feature("hopper", data, "medium-replay")
    maze = {"rewards": np.array([0.0, 1.0], np.float32)}
    np.testing.assert_array_equal(dataset_reward_feature("maze2d-umaze", maze), [0.0, 1.0])


# --------------------------------------------------------------------------------------------
# The predefined-reward mode of the ensembles
# --------------------------------------------------------------------------------------------
def _spec(env_name: str, reward: str = "predefined", **choices):
    from opcc_edu.baselines import EnsembleConfig

    config = EnsembleConfig(ensemble_size=3, hidden_sizes=(16,), train_steps=20, batch_size=32, reward=reward)
    return dataclasses.replace(config, **choices).model_spec(env_name)


@pytest.mark.parametrize("model_type", ["ff", "ar"])
def test_a_predefined_reward_model_scores_its_own_predictions(hopper_random, model_type):
    from opcc_edu.dynamics import build_ensemble, train_dynamics

    model = build_ensemble(_spec("hopper", model_type=model_type), seed=0)
    train_dynamics(model, hopper_random, steps=20, batch_size=32, progress=False, device="cpu")
    # the last target column is the x velocity, not the reward
    feature = dataset_reward_feature("hopper", hopper_random)
    assert float(model.reward_high) == pytest.approx(feature.max(), abs=1e-4)
    obs = torch.as_tensor(hopper_random["observations"][:50]).expand(3, -1, -1)
    act = torch.as_tensor(hopper_random["actions"][:50]).expand(3, -1, -1)
    nxt, reward, done = model.step(obs, act)
    mean = model.predict_mean(obs, act)[..., -1].clamp(model.reward_low, model.reward_high)
    torch.testing.assert_close(reward, reward_fn("hopper")(obs, act, nxt, mean))
    assert reward.dtype == torch.float32 and done.shape == reward.shape


def test_a_predefined_reward_maze_model_pays_only_at_the_goal():
    from opcc_edu.dynamics import build_ensemble

    model = build_ensemble(_spec("maze2d-umaze"), seed=0)
    goal = torch.tensor(reward_spec("maze2d-umaze").goal)
    obs = torch.zeros(3, 6, 4)
    obs[..., :2] = goal + torch.linspace(-1.0, 1.0, 6)[:, None]
    nxt, reward, _ = model.step(obs, torch.zeros(3, 6, 2))
    torch.testing.assert_close(reward, reward_fn("maze2d-umaze")(obs, torch.zeros(3, 6, 2), nxt))
    assert set(reward.unique().tolist()) <= {0.0, 1.0}


def test_reward_mode_round_trips_and_default_dicts_are_unchanged(tmp_path):
    from opcc_edu.baselines import EnsembleConfig
    from opcc_edu.dynamics import ModelSpec, build_ensemble, load_ensemble, save_ensemble

    predefined = _spec("hopper")
    assert predefined.reward == "predefined" and predefined.to_dict()["reward"] == "predefined"
    assert ModelSpec.from_dict(predefined.to_dict()) == predefined
    learned = _spec("hopper", reward="learned")
    assert "reward" not in learned.to_dict()  # as saved before the field existed
    assert ModelSpec.from_dict(learned.to_dict()).reward == "learned"
    save_ensemble(tmp_path / "m.safetensors", build_ensemble(predefined, seed=0))
    loaded, _ = load_ensemble(tmp_path / "m.safetensors", device="cpu")
    assert loaded.spec == predefined
    config = EnsembleConfig(reward="predefined")
    assert EnsembleConfig.from_dict(config.to_dict()) == config and config.to_dict()["reward"] == "predefined"
    assert "reward" not in EnsembleConfig().to_dict() and EnsembleConfig.from_dict({}).reward == "learned"
    with pytest.raises(ValueError, match="unknown reward 'true'; valid choices: learned, predefined"):
        EnsembleConfig(reward="true")
    with pytest.raises(ValueError, match="valid choices: learned, predefined"):
        dataclasses.replace(learned, reward="known")


def test_default_cache_key_is_the_one_before_the_reward_mode_existed():
    from opcc_edu.baselines import EnsembleConfig
    from opcc_edu.baselines.cache import ensemble_cache_key, ensemble_cache_path

    # clip="transitions": the default box of before, so the key is the one captured then
    config = EnsembleConfig(ensemble_size=3, hidden_sizes=(8,), train_steps=5, batch_size=4, clip="transitions")
    t = 6
    dataset = {
        "observations": np.arange(t * 4, dtype=np.float32).reshape(t, 4),
        "actions": np.zeros((t, 2), np.float32),
        "rewards": np.ones(t, np.float32),
        "next_observations": np.ones((t, 4), np.float32),
        "terminals": np.zeros(t, bool),
    }
    # Captured before the field was added.
    before = (
        '{"config": {"batch_size": 4, "clip": true, "ensemble_size": 3, "hidden_sizes": [8], "lr": 0.001, '
        '"model_type": "ff", "normalize": true, "prior_scale": 0.0, "seed": 0, "stochastic": false, '
        '"termination": "predefined", "train_steps": 5}, "dataset": {"name": "given", "sha256": '
        '"6f96207c533bc478da122cd2da1504634b8a3339530d1b1ceb98bdbf3f20e1ff", "size": 6}, "env": "maze2d-umaze", '
        '"format": 2}'
    )
    assert json.dumps(ensemble_cache_key("maze2d-umaze", "given", config, dataset=dataset), sort_keys=True) == before
    assert ensemble_cache_path("maze2d-umaze", "given", config, dataset=dataset).name == (
        "ensemble-9ef799abd8e492ee.safetensors"
    )
    predefined = dataclasses.replace(config, reward="predefined")
    assert ensemble_cache_path("maze2d-umaze", "given", predefined, dataset=dataset).name != (
        "ensemble-9ef799abd8e492ee.safetensors"
    )
    # predefined mode also reads the simulator positions: they are part of its key
    with_states = {**dataset, "infos/qpos": np.zeros((t, 2), np.float32)}
    assert ensemble_cache_path("maze2d-umaze", "given", config, dataset=with_states) == ensemble_cache_path(
        "maze2d-umaze", "given", config, dataset=dataset
    )
    assert ensemble_cache_path("maze2d-umaze", "given", predefined, dataset=with_states) != ensemble_cache_path(
        "maze2d-umaze", "given", predefined, dataset=dataset
    )


def test_reward_ablation_and_cli_option():
    from opcc_edu.cli import build_parser
    from opcc_edu.lab.experiments import configuration_label, get_ablation

    ablation = get_ablation("reward")
    assert [configuration_label(level.overrides) for level in ablation.levels] == ["default", "reward=predefined"]
    args = build_parser().parse_args(["run", "maze2d-umaze", "--reward", "predefined"])
    assert args.reward == "predefined"
    assert build_parser().parse_args(["run"]).reward == "learned"


def test_run_a_maze_with_predefined_rewards_end_to_end(tmp_path, capsys):
    from opcc_edu.cli import main

    argv = ["run", "maze2d-umaze", "--reward", "predefined", "--train-steps", "50", "--ensemble-size", "3"]
    assert main([*argv, "--out", str(tmp_path / "runs"), "--no-progress", "--no-cache", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "predefined rewards" in out
    results = json.loads((tmp_path / "runs" / "maze2d-umaze" / "1m" / "results.json").read_text())
    assert results["config"]["reward"] == "predefined"
