"""The ``<maze>-d4rl-goal`` variants: the mazes rewarded around D4RL's goal point."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest
import torch

from opcc_edu import datasets as ds
from opcc_edu import envs
from opcc_edu.baselines.heuristic import maze_start_scores
from opcc_edu.datasets.format import REQUIRED_KEYS
from opcc_edu.datasets.real import D4RL_FRAME_SHIFT, d4rl_maze_to_env_frame
from opcc_edu.io import load_npz
from opcc_edu.policies import Actor
from opcc_edu.rewards import reward_fn
from opcc_edu.simulate import BatchSimulator, monte_carlo_returns

OPEN = "maze2d-open"
VARIANT = envs.d4rl_goal_env(OPEN)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPCC_EDU_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_variant_names_round_trip_and_the_registry_keeps_its_base_names():
    assert envs.ENV_NAMES == tuple(envs.ENV_SPECS) and len(envs.ENV_NAMES) == 7 and len(envs.MAZE_NAMES) == 4
    assert envs.D4RL_FRAME_SHIFT == D4RL_FRAME_SHIFT  # re-exported by datasets.real
    for maze in envs.MAZE_NAMES:
        variant = envs.d4rl_goal_env(maze)
        assert variant == maze + envs.D4RL_GOAL_SUFFIX == f"{maze}-d4rl-goal"
        assert envs.base_env_name(variant) == envs.base_env_name(maze) == maze
        spec, base = envs.get_spec(variant), envs.get_spec(maze)
        assert spec.name == variant and spec.goal_shift == (D4RL_FRAME_SHIFT, -D4RL_FRAME_SHIFT)
        assert base.goal_shift == (0.0, 0.0)
        assert spec == dataclasses.replace(base, name=variant, goal_shift=spec.goal_shift)
        assert envs.gym_id(variant) == f"opcc_edu/{variant}-v0"
    assert envs.base_env_name("hopper") == "hopper"


def test_bad_names_raise_value_errors_naming_the_argument():
    with pytest.raises(ValueError, match=r"unknown name \(a maze\) 'hopper'; valid choices: maze2d-open"):
        envs.d4rl_goal_env("hopper")
    with pytest.raises(ValueError, match="unknown name"):
        envs.d4rl_goal_env(VARIANT)  # a variant has no variant
    for bad in ("hopper-d4rl-goal", "maze2d-tiny-d4rl-goal", "maze2d-open-d4rl-goal-d4rl-goal", "nope"):
        with pytest.raises(ValueError, match=r"unknown environment .*walker2d, <maze>-d4rl-goal"):
            envs.base_env_name(bad)
        with pytest.raises(ValueError, match="unknown environment"):
            envs.get_spec(bad)
    with pytest.raises(ValueError, match="dataset name"):
        ds.load_dataset(VARIANT, "medium", progress=False)
    with pytest.raises(ValueError, match=r"env_name \(a maze\)"):
        maze_start_scores("hopper", np.zeros((1, 11)))


@pytest.mark.parametrize("maze", envs.MAZE_NAMES)
def test_the_goal_point_is_d4rls_target_converted(maze):
    variant = envs.d4rl_goal_env(maze)
    spec = envs.get_spec(maze)
    env, base_env = envs.make_env(variant), envs.make_env(maze)
    goal, centre = env.unwrapped.goal, base_env.unwrapped.goal
    np.testing.assert_array_equal(centre, base_env.unwrapped.maze.cell_rowcol_to_xy(np.array(spec.goal_cell)))
    np.testing.assert_array_equal(goal, envs.get_spec(variant).goal_xy)
    np.testing.assert_array_equal(centre, spec.goal_xy)
    assert np.linalg.norm(goal - centre) == pytest.approx(0.2 * np.sqrt(2), abs=1e-12)
    assert goal[0] > centre[0] and goal[1] < centre[1]  # 0.2 right, 0.2 down
    np.testing.assert_allclose(env.unwrapped._inner.goal, goal)  # the target site shown when rendering
    # D4RL's target (row_goal, col_goal) in its observed frame, converted by the package's loader.
    d4rl = {key: np.zeros((1, 2 if key == "actions" else 4)) for key in REQUIRED_KEYS if key != "rewards"}
    d4rl.update(rewards=np.zeros(1), terminals=np.zeros(1, bool), timeouts=np.zeros(1, bool))
    d4rl["infos/goal"] = np.array([spec.goal_cell], dtype=np.float64)
    np.testing.assert_allclose(d4rl_maze_to_env_frame(d4rl, maze)["infos/goal"][0], goal, atol=1e-12)
    env.close()
    base_env.close()


def _two_points():
    """States at the variant's goal point and at a point 0.45 from the centre, 0.55 from the goal point."""
    centre, goal = envs.get_spec(OPEN).goal_xy, envs.get_spec(VARIANT).goal_xy
    shift = goal - centre
    # |u| = 1 with |0.45 u - shift|^2 = 0.55^2, i.e. u . shift = (0.45^2 + |shift|^2 - 0.55^2) / 0.9
    cos = (0.45**2 + shift @ shift - 0.55**2) / (0.9 * np.linalg.norm(shift))
    angle = np.arctan2(shift[1], shift[0]) + np.arccos(cos)
    near_centre = centre + 0.45 * np.array([np.cos(angle), np.sin(angle)])
    assert np.linalg.norm(near_centre - centre) == pytest.approx(0.45)
    assert np.linalg.norm(near_centre - goal) == pytest.approx(0.55)
    return np.array([np.r_[goal, 0.0, 0.0], np.r_[near_centre, 0.0, 0.0]])


def test_the_variant_rewards_around_the_shifted_point_everywhere():
    states = _two_points()
    expected = {VARIANT: [1.0, 0.0], OPEN: [1.0, 1.0]}
    for name, want in expected.items():
        env = envs.make_env(name)
        env.reset(seed=0)
        stepped, got = [], []
        for state in states:
            envs.set_state(env, state)
            obs, reward, *_ = env.step(np.zeros(2))
            stepped.append(obs)
            got.append(reward)
            assert np.linalg.norm(obs[:2] - state[:2]) < 1e-3  # the ball at rest stays put
        assert got == want, name
        env.close()
        sim = BatchSimulator(name, 2)
        sim.reset_to(states)
        _, reward, _ = sim.step(np.zeros((2, 2)))
        assert reward.tolist() == want, name
        next_obs = torch.as_tensor(np.array(stepped))
        assert reward_fn(name)(next_obs, torch.zeros(2, 2, dtype=torch.float64), next_obs).tolist() == want
        actor = Actor(4, 2, hidden_sizes=(4,))
        torch.nn.init.zeros_(actor.layers[-1].weight)
        torch.nn.init.zeros_(actor.layers[-1].bias)  # always the action 0
        returns = monte_carlo_returns(name, states, [actor], np.zeros(2, dtype=int), 1, progress=False)
        assert returns[:, 0].tolist() == want, name


def test_the_heuristic_measures_to_the_goal_point():
    states = _two_points()
    e_base = maze_start_scores(OPEN, states)[1]
    e_variant = maze_start_scores(VARIANT, states)[1]
    np.testing.assert_allclose(e_base, [0.2 * np.sqrt(2), 0.45])
    np.testing.assert_allclose(e_variant, [0.0, 0.55], atol=1e-12)


def _digests(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_variant_dataset_is_the_base_data_with_recomputed_rewards(cache):
    base = ds.load_dataset(OPEN, "1k", progress=False)
    base_folder = ds.dataset_cache_dir(OPEN)
    before = _digests(base_folder)
    data = ds.load_dataset(VARIANT, "1k", progress=False)
    assert _digests(base_folder) == before  # the base maze's cache is untouched
    assert set(data) == set(base)
    for key in base:
        if key != "rewards":
            np.testing.assert_array_equal(data[key], base[key], err_msg=key)
    goal = envs.make_env(VARIANT).unwrapped.goal
    recomputed = np.linalg.norm(base["next_observations"][:, :2] - goal, axis=1) <= envs.GOAL_RADIUS
    assert data["rewards"].dtype == base["rewards"].dtype == np.float32
    np.testing.assert_array_equal(data["rewards"], recomputed.astype(np.float32))
    assert not np.array_equal(data["rewards"], base["rewards"])  # the shift matters on this stream
    # Cached under the variant's own name, with the recomputation recorded.
    [entry] = ds.list_cached(VARIANT)
    assert entry.path.parent.name == VARIANT and entry.size == len(data["rewards"]) == 1000
    meta = load_npz(entry.path)[1]
    assert meta["env_name"] == VARIANT
    assert meta["rewards_recomputed"] == {"base_env": OPEN, "goal_xy": goal.tolist()}
    # Read back from the cache, and generated without it, the same arrays.
    for again in (ds.load_dataset(VARIANT, "1k", progress=False), ds.load_dataset(VARIANT, "1k", cache=False)):
        assert all(np.array_equal(again[k], data[k]) for k in data)
    assert _digests(base_folder) == before
    assert ds.resolve_dataset(VARIANT) == ds.DEFAULT_DATASET[OPEN]
    assert ds.dataset_names(VARIANT) == ds.dataset_names(OPEN)
    assert ds.get_recipe(VARIANT, "1k").env_name == VARIANT
