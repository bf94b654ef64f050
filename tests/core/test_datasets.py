"""Offline datasets: format, recipes, the real simulator, cache safety, real-data loaders, coverage."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import types
import warnings

import numpy as np
import pytest
import torch

from opcc_edu import datasets as ds
from opcc_edu import plotting
from opcc_edu.datasets import coverage as ds_coverage
from opcc_edu.datasets.format import REQUIRED_KEYS, episode_ends
from opcc_edu.datasets.locomotion import EpisodeAssembler, generate_policy_dataset, generate_replay_dataset
from opcc_edu.datasets.maze import WaypointController, generate_maze_dataset
from opcc_edu.envs import (
    GOAL_RADIUS,
    MazeGeometry,
    get_spec,
    grid_distances,
    make_env,
    next_cell_table,
    set_state,
    termination_fn,
)
from opcc_edu.io import _HOST


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPCC_EDU_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def umaze():
    return generate_maze_dataset("maze2d-umaze", 1500, seed=3, progress=False)


@pytest.fixture(scope="module")
def hopper_random():
    return ds.generate_dataset("hopper", "random", 1200, seed=1, progress=False)


# --------------------------------------------------------------------------------------------
# Format
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["umaze", "hopper_random"])
def test_keys_dtypes_and_shapes(which, request):
    data = request.getfixturevalue(which)
    env_name = "maze2d-umaze" if which == "umaze" else "hopper"
    spec = get_spec(env_name)
    n = 1500 if which == "umaze" else 1200
    assert ds.validate_dataset(data, env_name, require_infos=True) == n
    assert set(REQUIRED_KEYS) <= set(data)
    assert data["observations"].shape == data["next_observations"].shape == (n, spec.obs_dim)
    assert data["actions"].shape == (n, spec.act_dim)
    for key in ("observations", "actions", "rewards", "next_observations", "infos/qpos", "infos/qvel"):
        assert data[key].dtype == np.float32, key
    assert data["terminals"].dtype == data["timeouts"].dtype == bool
    assert np.abs(data["actions"]).max() <= 1.0


@pytest.mark.parametrize("which", ["umaze", "hopper_random"])
def test_next_observations_continue_inside_episodes(which, request):
    data = request.getfixturevalue(which)
    assert ds.continuity_error(data) == 0.0
    # And the layout really has several episodes glued together.
    assert len(episode_ends(data)) > 3


def test_maze_timeouts_at_table8_limits_and_no_terminals(umaze):
    horizon = get_spec("maze2d-umaze").max_episode_steps
    assert not umaze["terminals"].any()
    expected = np.zeros(1500, bool)
    expected[horizon - 1 :: horizon] = True
    expected[-1] = True
    np.testing.assert_array_equal(umaze["timeouts"], expected)


def test_maze_rewards_are_the_environment_sparse_reward(umaze):
    env = make_env("maze2d-umaze").unwrapped
    expected = (np.linalg.norm(umaze["next_observations"][:, :2] - env.goal, axis=1) <= GOAL_RADIUS).astype(np.float32)
    np.testing.assert_array_equal(umaze["rewards"], expected)
    assert 0 < umaze["rewards"].sum() < len(umaze["rewards"])


def test_maze_transitions_replay_in_the_simulator(umaze):
    env = make_env("maze2d-umaze")
    for t in (0, 17, 299, 300, 1234):
        state = np.concatenate([umaze["infos/qpos"][t], umaze["infos/qvel"][t]]).astype(np.float64)
        set_state(env, state)
        nxt, *_ = env.unwrapped.step(umaze["actions"][t])
        np.testing.assert_allclose(nxt, umaze["next_observations"][t], atol=1e-5)


def test_locomotion_terminals_only_where_the_environment_terminates(hopper_random):
    done = termination_fn("hopper")(torch.as_tensor(hopper_random["next_observations"])).numpy()
    np.testing.assert_array_equal(hopper_random["terminals"], done)
    assert hopper_random["terminals"].sum() > 10  # random hopper falls quickly
    # Every episode boundary is a terminal or a timeout, never both.
    assert not (hopper_random["terminals"] & hopper_random["timeouts"]).any()


def test_locomotion_qpos_qvel_reproduce_observations(hopper_random):
    env = make_env("hopper")
    for t in (0, 5, 600):
        state = np.concatenate([hopper_random["infos/qpos"][t], hopper_random["infos/qvel"][t]]).astype(np.float64)
        obs = set_state(env, state)
        np.testing.assert_allclose(obs, hopper_random["observations"][t], atol=1e-4)


def test_episode_iterator_and_summary(hopper_random):
    episodes = list(ds.iterate_episodes(hopper_random))
    assert sum(len(e["rewards"]) for e in episodes) == len(hopper_random["rewards"])
    for e in episodes[:-1]:
        assert e["terminals"][-1] or e["timeouts"][-1]
        assert not (e["terminals"][:-1] | e["timeouts"][:-1]).any()
    summary = ds.summarize_dataset(hopper_random)
    returns = [float(e["rewards"].astype(np.float64).sum()) for e in episodes]
    assert summary.episodes == len(episodes)
    assert summary.transitions == 1200
    assert summary.mean_episode_return == pytest.approx(np.mean(returns))
    assert summary.max_episode_return == pytest.approx(np.max(returns))


def test_take_prefix_and_concatenate():
    data = {
        "observations": np.arange(10, dtype=np.float32)[:, None],
        "next_observations": np.arange(1, 11, dtype=np.float32)[:, None],
        "actions": np.zeros((10, 1), np.float32),
        "rewards": np.ones(10, np.float32),
        "terminals": np.zeros(10, bool),
        "timeouts": np.zeros(10, bool),
    }
    data["terminals"][3] = True
    head = ds.take_prefix(data, 6)
    assert head["timeouts"].tolist() == [False] * 5 + [True]
    assert not data["timeouts"].any()  # the source is not modified
    both = ds.concatenate_datasets([head, ds.take_prefix(data, 4)])
    assert len(both["rewards"]) == 10
    assert np.flatnonzero(both["terminals"] | both["timeouts"]).tolist() == [3, 5, 9]
    with pytest.raises(ValueError, match="size"):
        ds.take_prefix(data, 11)


# --------------------------------------------------------------------------------------------
# Maze recipe
# --------------------------------------------------------------------------------------------


def test_grid_distances_golden_umaze():
    layout = get_spec("maze2d-umaze").maze_map
    dist = grid_distances(layout, (1, 1))
    # U-maze free cells: row 1 = (1,1) (1,2) (1,3); (2,3); row 3 = (3,1) (3,2) (3,3).
    expected = {(1, 1): 0, (1, 2): 1, (1, 3): 2, (2, 3): 3, (3, 3): 4, (3, 2): 5, (3, 1): 6}
    for cell, d in expected.items():
        assert dist[cell] == d
    assert (dist[np.asarray(layout) == 1] == -1).all()
    with pytest.raises(ValueError, match="goal_cell"):
        grid_distances(layout, (0, 0))


@pytest.mark.parametrize("env_name", ["maze2d-medium", "maze2d-large"])
def test_next_cell_table_follows_shortest_paths(env_name):
    layout = np.asarray(get_spec(env_name).maze_map)
    controller = WaypointController(layout)
    table = next_cell_table(layout)
    for g, goal in enumerate(controller.cells):
        dist = grid_distances(layout, goal)
        for c, cell in enumerate(controller.cells):
            steps, cur = 0, c
            while cur != g:
                nxt = table[g, cur]
                assert np.abs(controller.cells[nxt] - controller.cells[cur]).sum() == 1  # a grid neighbour
                cur, steps = nxt, steps + 1
            assert steps == dist[tuple(cell)]


def test_geometry_matches_gymnasium_robotics():
    env = make_env("maze2d-large").unwrapped
    geometry = MazeGeometry(get_spec("maze2d-large").maze_map)
    for cell in env.free_cells[:10]:
        xy = env.maze.cell_rowcol_to_xy(cell)
        np.testing.assert_allclose(geometry.cell_center(cell), xy)
        np.testing.assert_array_equal(geometry.cell_of(xy + 0.3), env.maze.cell_xy_to_rowcol(xy + 0.3))


def test_noise_free_controller_reaches_a_far_goal():
    env_name = "maze2d-medium"
    spec = get_spec(env_name)
    controller = WaypointController(spec.maze_map)
    env = make_env(env_name)
    start, goal = controller.cells[0], controller.cells[-1]
    obs = set_state(env, np.concatenate([controller.geometry.cell_center(start), np.zeros(2)]))
    goal_index = np.array([controller.n_cells - 1])
    for _ in range(400):
        if controller.reached(obs[None, :2], goal_index)[0]:
            break
        obs, *_ = env.unwrapped.step(controller.action(obs[None], goal_index)[0])
    assert controller.reached(obs[None, :2], goal_index)[0], f"ball stopped at {obs[:2]}, goal {goal}"


def test_maze_sizes_are_prefixes_of_one_stream(umaze):
    small = generate_maze_dataset("maze2d-umaze", 700, seed=3, progress=False)
    for key in small:
        np.testing.assert_array_equal(small[key][:-1], umaze[key][:699], err_msg=key)
    assert small["timeouts"][-1]  # the cut is flagged


def test_generation_is_deterministic_and_seeded(umaze):
    again = generate_maze_dataset("maze2d-umaze", 1500, seed=3, progress=False)
    for key in umaze:
        np.testing.assert_array_equal(umaze[key], again[key])
    other = generate_maze_dataset("maze2d-umaze", 300, seed=4, progress=False)
    assert not np.array_equal(other["observations"], umaze["observations"][:300])


def test_maze_goals_are_resampled_and_visited(umaze):
    goals = {tuple(g) for g in np.round(umaze["infos/goal"], 3)}
    assert len(goals) >= 4  # the controller keeps picking new goal cells


# --------------------------------------------------------------------------------------------
# Locomotion recipes
# --------------------------------------------------------------------------------------------


class CountingPolicy(torch.nn.Module):
    def __init__(self, actor):
        super().__init__()
        self.actor, self.batches = actor, []

    def forward(self, obs):
        self.batches.append(obs.shape[0])
        return self.actor(obs)


def test_policy_data_uses_one_batched_forward_per_step():
    from opcc_edu.policies import Actor

    torch.manual_seed(0)
    policy = CountingPolicy(Actor(17, 6))
    data = generate_policy_dataset("halfcheetah", 100, seed=0, policy=policy, n_streams=4, progress=False)
    assert policy.batches == [4] * 25
    # No noise: the stored actions are exactly the policy's actions for the stored observations.
    with torch.no_grad():
        expected = policy.actor(torch.as_tensor(data["observations"])).numpy()
    np.testing.assert_allclose(data["actions"], expected, atol=1e-6)
    assert ds.continuity_error(data) == 0.0


def test_policy_data_noise_is_seeded():
    from opcc_edu.policies import Actor

    torch.manual_seed(0)
    actor = Actor(11, 3)
    a = generate_policy_dataset("hopper", 200, seed=5, policy=actor, action_noise=0.3, progress=False)
    b = generate_policy_dataset("hopper", 200, seed=5, policy=actor, action_noise=0.3, progress=False)
    c = generate_policy_dataset("hopper", 200, seed=6, policy=actor, action_noise=0.3, progress=False)
    np.testing.assert_array_equal(a["actions"], b["actions"])
    assert not np.array_equal(a["actions"], c["actions"])


def test_episode_assembler_lays_out_episodes_contiguously():
    asm = EpisodeAssembler(2, 5, {"observations": (1,)})
    term = [[0, 0], [1, 0], [0, 0], [0, 1], [0, 0]]
    for t in range(5):
        # Stream k at step t observes 10 * k + t.
        asm.add({"observations": np.array([[t], [10 + t]])}, np.array(term[t], bool), np.zeros(2, bool))
    out = asm.finish(9)
    # Stream 0 finishes [0, 1] at step 1, stream 1 finishes [10..13] at step 3, then partials.
    assert out["observations"][:, 0].tolist() == [0, 1, 10, 11, 12, 13, 2, 3, 4]
    assert out["terminals"].tolist() == [False, True, False, False, False, True, False, False, False]
    assert out["timeouts"][-1]
    with pytest.raises(ValueError, match="exceeds"):
        asm.finish(11)


def test_medium_replay_records_a_deterministic_training_run(monkeypatch):
    from opcc_edu.policies import PPOConfig
    from opcc_edu.policies import ppo as ppo_module

    args = {"env_name": "hopper", "seed": 3, "config": PPOConfig(n_envs=2, n_steps=64, batch_size=64, n_epochs=1)}
    a = generate_replay_dataset("hopper", 200, args, progress=False)
    b = generate_replay_dataset("hopper", 200, args, progress=False)
    assert ds.validate_dataset(a, "hopper") == 200
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    assert ds.continuity_error(a) == 0.0
    done = termination_fn("hopper")(torch.as_tensor(a["next_observations"])).numpy()
    np.testing.assert_array_equal(a["terminals"], done)
    # Reading the simulator states changes nothing in the run: the same run with the reads
    # replaced by zeros gives the same transitions byte for byte. (A stored hash of these
    # transitions is no guard: MuJoCo and torch round differently on different CPUs, so the
    # same seed gives other last bits on another processor.)
    calls = []

    def no_read(venv):
        calls.append(len(venv.envs))
        return np.zeros((len(venv.envs), 6)), np.zeros((len(venv.envs), 6))

    monkeypatch.setattr(ppo_module, "_simulator_states", no_read)
    unread = generate_replay_dataset("hopper", 200, args, progress=False)
    assert len(calls) >= 100 and not unread["infos/qpos"].any()
    for key in ("observations", "actions", "rewards", "next_observations", "terminals", "timeouts"):
        np.testing.assert_array_equal(a[key], unread[key], err_msg=key)
    # Every recorded simulator state reproduces its observation, episode starts included.
    assert a["infos/qpos"].shape == (200, 6) and a["infos/qvel"].shape == (200, 6)
    env = make_env("hopper")
    for t in range(200):
        state = np.concatenate([a["infos/qpos"][t], a["infos/qvel"][t]]).astype(np.float64)
        np.testing.assert_allclose(set_state(env, state), a["observations"][t], atol=1e-4, err_msg=f"row {t}")
    starts = np.flatnonzero(np.r_[True, (a["terminals"] | a["timeouts"])[:-1]])
    assert len(starts) > 1  # episodes that began with an automatic reset are covered


def _behavior_available(env_name: str) -> bool:
    from opcc_edu.datasets.recipes import behavior_weights_path

    return all(behavior_weights_path(env_name, k).exists() for k in ("medium", "expert"))


@pytest.mark.parametrize("env_name", ["halfcheetah", "hopper", "walker2d"])
def test_mean_return_random_below_medium_below_expert(env_name, cache):
    if not _behavior_available(env_name):
        pytest.skip(f"behaviour policies of {env_name} not built")
    # 8 streams x 1000 steps: long enough for whole hopper/walker episodes of every type.
    data = {name: ds.load_dataset(env_name, name, 8000, progress=False) for name in ("random", "medium", "expert")}
    returns = {name: ds.summarize_dataset(d).mean_episode_return for name, d in data.items()}
    per_step = {name: ds.summarize_dataset(d).mean_reward for name, d in data.items()}
    assert returns["random"] < returns["medium"] < returns["expert"], returns
    assert per_step["random"] < per_step["medium"] < per_step["expert"], per_step


@pytest.mark.skipif(
    not any(_behavior_available(e) for e in ("halfcheetah", "hopper", "walker2d")),
    reason="behaviour policies not built",
)
def test_medium_replay_from_the_shipped_behaviour_run(cache):
    from opcc_edu.policies import behavior_info

    env_name = next(e for e in ("halfcheetah", "hopper", "walker2d") if _behavior_available(e))
    recipe = ds.get_recipe(env_name, "medium-replay")
    assert ds.resolve_size(recipe, None) <= int(behavior_info(env_name)["medium_step"])
    data = ds.load_dataset(env_name, "medium-replay", 1000, progress=False)
    assert ds.validate_dataset(data, env_name) == 1000 and ds.continuity_error(data) == 0.0
    with pytest.raises(ValueError, match="exceeds"):
        ds.resolve_size(recipe, int(behavior_info(env_name)["medium_step"]) + 1)


@pytest.mark.skipif(
    not any(_behavior_available(e) for e in ("halfcheetah", "hopper", "walker2d")),
    reason="behaviour policies not built",
)
def test_medium_expert_is_medium_then_expert(cache):
    env_name = next(e for e in ("halfcheetah", "hopper", "walker2d") if _behavior_available(e))
    mixed = ds.load_dataset(env_name, "medium-expert", 1001, progress=False)
    medium = ds.load_dataset(env_name, "medium", 501, progress=False)
    expert = ds.load_dataset(env_name, "expert", 500, progress=False)
    np.testing.assert_array_equal(
        mixed["observations"], np.concatenate([medium["observations"], expert["observations"]])
    )


# --------------------------------------------------------------------------------------------
# Names, sizes and errors
# --------------------------------------------------------------------------------------------


def test_names_and_defaults():
    assert ds.dataset_names("maze2d-open") == ("1k", "10k", "100k", "1m")
    assert ds.dataset_names("walker2d") == ("random", "medium", "medium-replay", "expert", "medium-expert")
    assert ds.DEFAULT_DATASET["maze2d-large"] == "1m"
    assert set(ds.DATASET_NAMES) == {"maze", "locomotion"}


def test_clear_errors_for_unknown_names_and_sizes(cache):
    with pytest.raises(ValueError, match="environment.*valid choices"):
        ds.load_dataset("maze2d-huge", "1m")
    with pytest.raises(ValueError, match="dataset name for hopper.*valid choices: random"):
        ds.load_dataset("hopper", "1m")
    with pytest.raises(ValueError, match="exceeds"):
        ds.load_dataset("maze2d-open", "1k", size=5000)
    with pytest.raises(ValueError, match="size"):
        ds.load_dataset("maze2d-open", "1k", size=0)


def test_profile_sets_default_size(cache):
    from opcc_edu.config import get_profile

    recipe = ds.get_recipe("maze2d-open", "1m")
    assert ds.resolve_size(recipe, None) == min(get_profile().dataset_size, 1_000_000) <= 20_000
    assert ds.resolve_size(ds.get_recipe("maze2d-open", "1k"), None) == 1000
    assert ds.mixture_sizes(7, 2) == [4, 3]


# --------------------------------------------------------------------------------------------
# Cache
# --------------------------------------------------------------------------------------------


def _cached_file(env_name):
    files = [p for p in ds.dataset_cache_dir(env_name).glob("*.npz")]
    assert len(files) == 1
    return files[0]


def test_cache_round_trip_and_reuse(cache):
    first = ds.load_dataset("maze2d-open", "1k", progress=False)
    path = _cached_file("maze2d-open")
    stamp = path.stat().st_mtime_ns
    second = ds.load_dataset("maze2d-open", "1k", progress=False)
    assert path.stat().st_mtime_ns == stamp
    for key in first:
        np.testing.assert_array_equal(first[key], second[key])
    listed = ds.list_cached()
    assert [(c.env_name, c.name, c.size) for c in listed] == [("maze2d-open", "1k", 1000)]
    assert listed[0].summary["transitions"] == 1000


def test_truncated_cache_file_is_detected_and_regenerated(cache):
    original = ds.load_dataset("maze2d-open", "1k", progress=False)
    path = _cached_file("maze2d-open")
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.warns(UserWarning, match="discarding unusable cached dataset"):
        again = ds.load_dataset("maze2d-open", "1k", progress=False)
    for key in original:
        np.testing.assert_array_equal(original[key], again[key])
    # The replacement is a complete file with a valid checksum.
    from opcc_edu.io import load_npz

    arrays, meta = load_npz(path)
    assert meta["size"] == 1000 and len(path.read_bytes()) > len(raw) // 2


def test_cache_file_without_simulator_states_is_regenerated_with_them(cache):
    # Medium-replay files written before the replay recorded simulator states have the same
    # transitions and stream id; they are replaced by complete ones.
    from opcc_edu.datasets.cache import write_cached

    original = ds.load_dataset("maze2d-open", "1k", progress=False)
    path = _cached_file("maze2d-open")
    recipe = ds.get_recipe("maze2d-open", "1k")
    stateless = {key: value for key, value in original.items() if key not in ("infos/qpos", "infos/qvel")}
    write_cached(path, stateless, recipe, 0, ds.stream_id(recipe, 0))
    with pytest.warns(UserWarning, match=r"records no simulator states \(infos/qpos, infos/qvel\)"):
        again = ds.load_dataset("maze2d-open", "1k", progress=False)
    assert set(again) == set(original)
    for key in original:
        np.testing.assert_array_equal(original[key], again[key])
    assert "infos/qpos" in ds.load_dataset("maze2d-open", "1k", progress=False)  # the file was replaced


def test_file_without_checksum_is_not_used(cache):
    ds.load_dataset("maze2d-open", "1k", progress=False)
    path = _cached_file("maze2d-open")
    path.with_name(path.name + ".sha256").unlink()
    with pytest.warns(UserWarning, match="checksum"):
        ds.load_dataset("maze2d-open", "1k", progress=False)
    assert path.with_name(path.name + ".sha256").exists()


def test_interrupted_write_leaves_no_usable_file(cache, monkeypatch):
    import opcc_edu.io as io_module

    def explode(handle, **arrays):
        handle.write(b"PK\x03\x04 partial")
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(io_module.np, "savez_compressed", explode)
        with pytest.raises(KeyboardInterrupt):
            ds.load_dataset("maze2d-open", "1k", progress=False)
    folder = ds.dataset_cache_dir("maze2d-open")
    assert list(folder.glob("*.npz")) == []
    assert list(folder.iterdir()) == []  # the temporary file was removed too
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data = ds.load_dataset("maze2d-open", "1k", progress=False)
    assert len(data["rewards"]) == 1000


def test_smaller_maze_dataset_is_cut_from_a_cached_larger_one(cache, monkeypatch):
    big = ds.load_dataset("maze2d-open", "10k", size=2000, progress=False)

    def no_generation(*args, **kwargs):
        raise AssertionError("should have been cut from the cache")

    monkeypatch.setattr(ds, "generate_dataset", no_generation)
    small = ds.load_dataset("maze2d-open", "1k", progress=False)
    np.testing.assert_array_equal(small["observations"], big["observations"][:1000])
    assert small["timeouts"][-1]


def _left_over_temp_file(folder, age: float = 0.0):
    """A temporary file as a killed writer leaves it (``age`` seconds old)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # its pid now names no process
    path = folder / f".x.npz.{child.pid}.{_HOST}.0123abcd.tmp"
    path.write_bytes(b"left over")
    os.utime(path, (time.time() - age, time.time() - age))
    return path


def _live_temp_file(folder):
    """A temporary file of a writer that is still running (this process)."""
    path = folder / f".y.npz.{os.getpid()}.{_HOST}.0123abcd.tmp"
    path.write_bytes(b"being written")
    return path


def test_clear_cache(cache):
    ds.load_dataset("maze2d-open", "1k", progress=False)
    folder = ds.dataset_cache_dir("maze2d-open")
    _left_over_temp_file(folder)
    live = _live_temp_file(folder)
    assert ds.clear_cache() == 1
    assert list(folder.iterdir()) == [live]  # a running writer is not disturbed


def test_no_cache_writes_nothing(cache):
    data = ds.load_dataset("maze2d-open", "1k", progress=False, cache=False)
    assert not cache.exists(), "cache=False must not even create the cache folder"
    mixture = ds.load_dataset("hopper", "random", size=200, progress=False, cache=False)
    assert not cache.exists() and len(mixture["rewards"]) == 200
    cached = ds.load_dataset("maze2d-open", "1k", progress=False)
    for key in cached:
        np.testing.assert_array_equal(data[key], cached[key])


def test_no_cache_does_not_read_the_cache(cache, monkeypatch):
    ds.load_dataset("maze2d-open", "1k", progress=False)
    calls = []
    real = ds.generate_dataset
    monkeypatch.setattr(ds, "generate_dataset", lambda *a, **k: calls.append(a) or real(*a, **k))
    ds.load_dataset("maze2d-open", "1k", progress=False, cache=False)
    assert len(calls) == 1


def test_next_write_removes_left_over_temporary_files(cache):
    folder = ds.dataset_cache_dir("maze2d-open")
    dead = _left_over_temp_file(folder)
    old = folder / ".z.npz.k3j4_x.tmp"  # named by another writer: only its age tells
    old.write_bytes(b"left over")
    os.utime(old, (time.time() - 120, time.time() - 120))
    fresh = folder / ".w.npz.k3j4_y.tmp"
    fresh.write_bytes(b"maybe being written")
    live = _live_temp_file(folder)
    ds.load_dataset("maze2d-open", "1k", progress=False)
    assert not dead.exists() and not old.exists()
    assert fresh.exists() and live.exists()


def test_cache_key_changes_with_recipe_seed_and_version(monkeypatch):
    recipe = ds.get_recipe("maze2d-open", "1k")
    base = ds.stream_id(recipe, 0)
    assert ds.stream_id(recipe, 1) != base
    assert ds.stream_id(ds.get_recipe("maze2d-open", "1m"), 0) == base  # maze sizes share a stream
    assert ds.stream_id(ds.get_recipe("maze2d-umaze", "1k"), 0) != base
    import dataclasses

    assert ds.stream_id(dataclasses.replace(recipe, action_noise=0.3), 0) != base
    monkeypatch.setattr("opcc_edu.datasets.recipes.DATA_FORMAT_VERSION", 99)
    assert ds.stream_id(recipe, 0) != base


# --------------------------------------------------------------------------------------------
# Real data: D4RL hdf5 and Minari
# --------------------------------------------------------------------------------------------


def test_d4rl_hdf5_round_trip(tmp_path, hopper_random):
    path = tmp_path / "hopper-random.hdf5"
    ds.save_d4rl_hdf5(path, hopper_random)
    loaded = ds.load_d4rl_hdf5(path, "hopper")
    assert set(loaded) == set(hopper_random)
    for key in hopper_random:
        np.testing.assert_array_equal(loaded[key], hopper_random[key])


def test_d4rl_hdf5_without_next_observations(tmp_path, umaze):
    import h5py

    path = tmp_path / "maze.hdf5"
    with h5py.File(path, "w") as f:
        for key in ("observations", "actions", "rewards", "terminals", "timeouts"):
            f.create_dataset(key, data=umaze[key].astype(np.float64) if key != "terminals" else umaze[key])
        f.create_dataset("infos/qpos", data=umaze["infos/qpos"])
    loaded = ds.load_d4rl_hdf5(path, "maze2d-umaze")
    # One transition per episode (its last) has no known next observation and is dropped.
    assert len(loaded["rewards"]) == 1500 - len(episode_ends(umaze))
    assert ds.continuity_error(loaded) == 0.0
    assert loaded["observations"].dtype == np.float32


def test_d4rl_hdf5_dimension_mismatch(tmp_path, hopper_random):
    path = tmp_path / "hopper.hdf5"
    ds.save_d4rl_hdf5(path, hopper_random)
    with pytest.raises(ValueError, match="observation size 17"):
        ds.load_d4rl_hdf5(path, "halfcheetah")
    with pytest.raises(ValueError, match="maze_frame"):
        ds.load_d4rl_hdf5(path, "hopper", maze_frame="mujoco")
    bad = tmp_path / "bad.hdf5"
    ds.save_d4rl_hdf5(bad, {"observations": hopper_random["observations"]})
    with pytest.raises(ValueError, match="missing keys"):
        ds.load_d4rl_hdf5(bad, "hopper")


def d4rl_world_walls(maze_map):
    """D4RL's wall boxes as its source places them: cell (row, column) at world (row + 1, column + 1)."""
    return np.array([(r + 1.0, c + 1.0) for r, row in enumerate(maze_map) for c, v in enumerate(row) if v == 1])


def test_d4rl_maze_frame_conversion_puts_d4rl_walls_on_our_walls():
    # D4RL (d4rl/pointmaze/maze_model.py): the ball's body at world (1.2, 1.2), observations are
    # the slide joints measured from it, walls at world (row + 1, column + 1), reward within 0.5
    # of the target (row_goal, column_goal) in observed coordinates.
    for env_name in ("maze2d-umaze", "maze2d-medium", "maze2d-large"):
        spec = get_spec(env_name)
        geometry = MazeGeometry(spec.maze_map)
        walls = d4rl_world_walls(spec.maze_map)
        observed = walls - 1.2  # where the ball would be observed at a wall's centre
        data = {"observations": np.concatenate([observed, np.zeros_like(observed)], axis=1), "actions": observed}
        ours = ds.d4rl_maze_to_env_frame(data, env_name)["observations"][:, :2]
        cells = geometry.cell_of(ours)
        assert all(spec.maze_map[r][c] == 1 for r, c in cells), env_name
        np.testing.assert_allclose(ours, geometry.cell_center(cells), atol=1e-9)
    # the released start positions never exceed row/column + 0.2: inside the free cell
    spec = get_spec("maze2d-large")
    geometry = MazeGeometry(spec.maze_map)
    free = np.array([(r, c) for r, row in enumerate(spec.maze_map) for c, v in enumerate(row) if v == 0])
    start = free.astype(np.float64) + 0.2  # D4RL resets within +-0.1 of (row, column), so below +0.2
    data = {"observations": np.concatenate([start, np.zeros_like(start)], axis=1), "actions": start}
    ours = ds.d4rl_maze_to_env_frame(data, "maze2d-large")["observations"][:, :2]
    np.testing.assert_array_equal(geometry.cell_of(ours), free)


def test_d4rl_maze_frame_conversion():
    spec = get_spec("maze2d-large")
    geometry = MazeGeometry(spec.maze_map)
    cells = np.array([[1, 1], [7, 9], [3, 5]])
    d4rl_obs = np.concatenate([cells - 0.2, np.tile([[0.5, -2.0]], (3, 1))], axis=1).astype(np.float32)
    goal = np.tile([[7.0, 9.0]], (3, 1)).astype(np.float32)  # D4RL's target: the goal cell's (row, column)
    data = {"observations": d4rl_obs, "actions": np.tile([[1.0, 0.0]], (3, 1)), "infos/goal": goal}
    out = ds.d4rl_maze_to_env_frame(data, "maze2d-large")
    np.testing.assert_allclose(out["observations"][:, :2], geometry.cell_center(cells), atol=1e-6)
    # D4RL's +x (down the rows) is -y here; its +y (along the columns) is +x.
    np.testing.assert_allclose(out["observations"][:, 2:], np.tile([[-2.0, -0.5]], (3, 1)))
    np.testing.assert_allclose(out["actions"], np.tile([[0.0, -1.0]], (3, 1)))
    # The goal cell of D4RL's large maze, (7, 9), is this package's goal cell; D4RL rewards around
    # a point 0.2 further along each of its axes: +x and -y here, 0.28 from the centre.
    env = make_env("maze2d-large").unwrapped
    np.testing.assert_allclose(out["observations"][1, :2], env.goal, atol=1e-6)
    np.testing.assert_allclose(out["infos/goal"][0] - env.goal, [0.2, -0.2], atol=1e-6)


def test_minari_loader_with_a_fake_module(monkeypatch, hopper_random):
    episodes = []
    for ep in list(ds.iterate_episodes(hopper_random))[:3]:
        obs = np.concatenate([ep["observations"], ep["next_observations"][-1:]])
        episodes.append(
            types.SimpleNamespace(
                observations=obs,
                actions=ep["actions"],
                rewards=ep["rewards"],
                terminations=ep["terminals"],
                truncations=ep["timeouts"],
            )
        )
    fake = types.ModuleType("minari")
    fake.load_dataset = lambda dataset_id, download=False: types.SimpleNamespace(
        iterate_episodes=lambda: iter(episodes)
    )
    monkeypatch.setitem(sys.modules, "minari", fake)
    data = ds.load_minari("mujoco/hopper/random-v0", "hopper")
    n = sum(len(e.actions) for e in episodes)
    np.testing.assert_array_equal(data["observations"], hopper_random["observations"][:n])
    np.testing.assert_array_equal(data["terminals"], hopper_random["terminals"][:n])
    with pytest.raises(ValueError, match="observation size 4"):
        ds.load_minari("x", "maze2d-open")


def test_minari_missing_gives_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "minari", None)
    with pytest.raises(ImportError, match="pip install minari"):
        ds.load_minari("mujoco/hopper/medium-v0", "hopper")


# --------------------------------------------------------------------------------------------
# Coverage
# --------------------------------------------------------------------------------------------


class FakeQueries:
    def __init__(self, obs_a, action_a, obs_b, action_b):
        self.obs_a, self.action_a, self.obs_b, self.action_b = obs_a, action_a, obs_b, action_b


def _brute_force(points, queries, center, scale):
    z = (points - center) / scale
    q = (queries - center) / scale
    d = np.linalg.norm(q[:, None, :] - z[None], axis=-1)
    return d.min(axis=1) / np.sqrt(points.shape[1]), d.argmin(axis=1)


def test_coverage_equals_brute_force(hopper_random):
    rng = np.random.default_rng(0)
    n = 40
    queries = FakeQueries(
        rng.normal(size=(n, 11)).astype(np.float32),
        rng.uniform(-1, 1, (n, 3)).astype(np.float32),
        hopper_random["observations"][:n],
        hopper_random["actions"][:n],
    )
    result = ds.query_dataset_distances(queries, hopper_random)
    points = np.concatenate([hopper_random["observations"], hopper_random["actions"]], axis=1).astype(np.float64)
    center, scale = points.mean(0), points.std(0)
    dist_a, idx_a = _brute_force(points, np.concatenate([queries.obs_a, queries.action_a], 1), center, scale)
    np.testing.assert_allclose(result.distance_a, dist_a, rtol=1e-9)
    np.testing.assert_array_equal(result.nearest_a, idx_a)
    # Side b queries are dataset pairs: distance zero at their own index.
    np.testing.assert_allclose(result.distance_b, 0.0, atol=1e-12)
    np.testing.assert_array_equal(result.distance, np.maximum(result.distance_a, result.distance_b))
    assert set(result.summary()) == {"mean", "median", "p90", "max"}


def test_standardised_coverage_ignores_units(umaze):
    rng = np.random.default_rng(1)
    obs = rng.uniform(-1, 1, (30, 4)).astype(np.float32)
    act = rng.uniform(-1, 1, (30, 2)).astype(np.float32)
    base = ds.query_dataset_distances(FakeQueries(obs, act, obs, act), umaze)
    factor = np.array([1000.0, 1.0, 1.0, 0.001], np.float32)
    scaled = dict(umaze, observations=umaze["observations"] * factor)
    moved = ds.query_dataset_distances(FakeQueries(obs * factor, act, obs * factor, act), scaled)
    np.testing.assert_allclose(moved.distance_a, base.distance_a, rtol=1e-4)
    raw = ds.query_dataset_distances(FakeQueries(obs * factor, act, obs * factor, act), scaled, normalize="none")
    assert not np.allclose(raw.distance_a, base.distance_a)
    with pytest.raises(ValueError, match="normalize"):
        ds.query_dataset_distances(FakeQueries(obs, act, obs, act), umaze, normalize="zscore")
    with pytest.raises(ValueError, match="same environment"):
        ds.query_dataset_distances(FakeQueries(obs[:, :3], act, obs[:, :3], act), umaze)


def test_coverage_plots_and_heat_map(umaze):
    import matplotlib

    matplotlib.use("Agg")
    obs = umaze["observations"][:20]
    act = umaze["actions"][:20]
    result = ds.query_dataset_distances(FakeQueries(obs, act, obs + 0.5, act), umaze)
    ax = plotting.plot_query_distances({"1k": result})
    assert "distance" in ax.get_xlabel() and ax.get_ylabel()
    counts, extent = ds.visitation_histogram(umaze, "maze2d-umaze", bins_per_cell=4)
    assert counts.shape == (20, 20) and counts.sum() == 1500
    assert extent == (-2.5, 2.5, -2.5, 2.5)
    # Walls are never visited: the wall row between the U's arms (row 2, columns 0-2).
    assert counts[8:12, 0:12].sum() == 0
    plotting.plot_maze_visitation(umaze, "maze2d-umaze")
    with pytest.raises(ValueError, match="maze"):
        ds.visitation_histogram(umaze, "hopper")


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def test_build_command_and_info(cache, capsys):
    from opcc_edu.cli import main

    assert main(["build", "datasets", "maze2d-open", "1k", "--quiet"]) == 0
    assert "maze2d-open 1k: 1,000 transitions" in capsys.readouterr().out
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "Cached datasets" in out and "maze2d-open" in out and "1,000" in out
    assert main(["build", "datasets", "hopper", "1m"]) == 2
    assert "valid choices" in capsys.readouterr().err


def test_kdtree_and_brute_force_agree(hopper_random, umaze):
    rng = np.random.default_rng(2)
    for data in (hopper_random, umaze):
        points = np.concatenate([data["observations"], data["actions"]], axis=1)
        queries = points[rng.choice(len(points), 50)] + rng.normal(0, 0.3, (50, points.shape[1]))
        tree = ds_coverage.nearest_distances(queries, points, method="kdtree")
        brute = ds_coverage.nearest_distances(queries, points, method="brute")
        np.testing.assert_allclose(tree[0], brute[0], rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(tree[1], brute[1])
    with pytest.raises(ValueError, match="method"):
        ds_coverage.nearest_distances(queries, points, method="ball")


def test_default_dataset_is_used_when_no_name_is_given(cache):
    default = ds.load_dataset("maze2d-open", size=500, progress=False)
    named = ds.load_dataset("maze2d-open", ds.DEFAULT_DATASET["maze2d-open"], size=500, progress=False)
    for key in default:
        np.testing.assert_array_equal(default[key], named[key])


def _queries_available(env_name: str) -> bool:
    from pathlib import Path

    import opcc_edu

    return (Path(opcc_edu.__file__).parent / "assets" / "queries" / f"{env_name}.npz").exists()


@pytest.mark.skipif(not _queries_available("hopper"), reason="hopper query set not shipped")
def test_coverage_of_the_shipped_query_set(hopper_random):
    from opcc_edu.queries import load_queries

    queries = load_queries("hopper")
    result = ds.query_dataset_distances(queries, hopper_random)
    assert result.distance.shape == (len(queries),)
    assert np.isfinite(result.distance).all() and (result.distance >= 0).all()
    # Same-state queries share their start state, so only the first actions separate the sides.
    same = queries.same_state
    if same.any():
        assert np.allclose(queries.obs_a[same], queries.obs_b[same])


def test_reference_sets_common_units(umaze, hopper_random):
    obs = umaze["observations"][:25] + 0.3
    act = umaze["actions"][:25]
    queries = FakeQueries(obs, act, obs, act)
    narrow = ds.take_prefix(umaze, 300)
    own = ds.query_dataset_distances(queries, narrow)
    pooled = ds.pooled_dataset({"a": narrow, "b": umaze})
    common = ds.query_dataset_distances(queries, narrow, reference=pooled)
    points = np.concatenate([pooled["observations"], pooled["actions"]], axis=1).astype(np.float64)
    np.testing.assert_allclose(common.scale, points.std(0))
    assert not np.allclose(own.distance_a, common.distance_a)
    table = ds.coverage_table(queries, {"300": narrow, "all": umaze})
    assert table["median"].iloc[0] >= table["median"].iloc[1]  # a prefix never covers better
