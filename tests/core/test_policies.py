import json
import tempfile

import numpy as np
import pytest
import torch

from opcc_edu import build as builders
from opcc_edu import policies
from opcc_edu.config import get_profile
from opcc_edu.envs import ENV_NAMES, LOCOMOTION_NAMES, get_spec
from opcc_edu.io import CorruptFileError
from opcc_edu.policies import (
    POLICY_LEVELS,
    Actor,
    MazeDistance,
    PPOConfig,
    StackedActors,
    load_actor,
    save_actor,
)

TINY = PPOConfig(n_envs=2, n_steps=128, batch_size=128, n_epochs=2)  # rollout: 256 transitions


def random_actor(obs_dim=5, act_dim=2, hidden=(8, 8), seed=0):
    torch.manual_seed(seed)
    actor = Actor(obs_dim, act_dim, hidden)
    with torch.no_grad():
        for layer in actor.layers:
            layer.weight.normal_(0, 1.0)
            layer.bias.normal_(0, 0.5)
        actor.obs_mean.normal_(0, 1)
        actor.obs_std.uniform_(0.5, 2.0)
    return actor.eval()


def test_actor_is_bounded_deterministic_and_normalises_first():
    actor = random_actor()
    obs = torch.randn(100, 5) * 50
    out = actor(obs)
    assert out.shape == (100, 2)
    assert out.abs().max() <= 1.0
    assert torch.equal(out, actor(obs))
    # Shifting the observation and its mean together leaves the action unchanged.
    shifted = random_actor()
    shifted.obs_mean += 3.0
    assert torch.allclose(shifted(obs + 3.0), out, atol=1e-5)
    with pytest.raises(ValueError, match="obs_dim"):
        actor(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="act_dim"):
        Actor(3, 0)


def test_save_load_round_trip_and_corruption(tmp_path):
    actor = random_actor(hidden=(16, 4, 8))
    path = save_actor(tmp_path / "a.safetensors", actor, {"seed": 7})
    loaded, meta = load_actor(path)
    assert meta["seed"] == 7 and meta["architecture"]["hidden_sizes"] == [16, 4, 8]
    assert loaded.hidden_sizes == (16, 4, 8) and not loaded.training
    obs = torch.randn(20, 5)
    assert torch.equal(loaded(obs), actor(obs))
    raw = bytearray(path.read_bytes())
    raw[-3] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptFileError):
        load_actor(path)


def test_policies_load_and_run_without_stable_baselines3(tmp_path):
    import subprocess
    import sys

    save_actor(tmp_path / "a.safetensors", random_actor(), {})
    code = (
        "import sys; sys.modules['stable_baselines3'] = None\n"  # any import of it now fails
        "import torch; from opcc_edu.policies import load_actor, StackedActors\n"
        f"actor, _ = load_actor({str(tmp_path / 'a.safetensors')!r})\n"
        "out = StackedActors([actor, actor])(torch.zeros(3, 5), torch.tensor([0, 1, 0]))\n"
        "loaded = {m.split('.')[0] for m in sys.modules if sys.modules[m]}\n"
        "assert out.shape == (3, 2) and 'stable_baselines3' not in loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_stacked_actors_equal_a_per_row_loop():
    actors = [random_actor(seed=s) for s in range(4)]
    stacked = StackedActors(actors)
    gen = torch.Generator().manual_seed(0)
    obs = torch.randn(257, 5, generator=gen) * 3
    index = torch.randint(0, 4, (257,), generator=gen)
    expected = torch.stack([actors[int(i)](o) for o, i in zip(obs, index, strict=True)])
    assert torch.allclose(stacked(obs, index), expected, atol=1e-6)
    # Each row really uses its own policy: different policies disagree.
    assert not torch.allclose(stacked(obs, torch.zeros_like(index)), stacked(obs, torch.ones_like(index)))
    with pytest.raises(ValueError, match="index"):
        stacked(obs, torch.full((257,), 4))
    with pytest.raises(ValueError, match="architecture"):
        StackedActors([random_actor(), random_actor(hidden=(8, 9))])


def test_maze_distance_follows_corridors():
    dist = MazeDistance("maze2d-umaze")
    # U-maze: the goal (1, 1) is six cells from the opposite arm's end (3, 1) around the wall.
    assert dist.cell_distance[3, 1] == 6
    assert dist(dist.goal) == pytest.approx(0.0)
    start = dist.centers[(3, 1)]
    assert dist(start) == pytest.approx(6.0)
    # Much longer than the straight line through the wall.
    assert dist(start) > 2.5 * np.linalg.norm(start - dist.goal)


def test_select_levels_golden():
    means = [0.0, 100.0, 35.0, 60.0, 70.0, 90.0, 5.0]
    # best 100 (idx 1), worst 0 (idx 0), targets 66.7 -> 70 (idx 4), 33.3 -> 35 (idx 2)
    assert builders.select_levels(means) == [1, 4, 2, 0]
    with pytest.raises(ValueError):
        builders.select_levels([1.0, 1.0, 1.0, 1.0])


class Recorder:
    def __init__(self):
        self.batches = []

    def __call__(self, *arrays):
        self.batches.append(tuple(np.array(a, copy=True) for a in arrays))

    def stacked(self):
        return [np.concatenate([b[k][None] for b in self.batches]) for k in range(6)]


def test_train_ppo_is_deterministic_and_a_prefix_replays_exactly(tmp_path):
    runs = []
    for name, total in (("a", 2048), ("b", 2048), ("prefix", 1024)):
        rec = Recorder()
        # Run "a" saves extra checkpoints: exporting must not change the run.
        extra = [256, 512, 768] if name == "a" else []
        paths = policies.train_ppo(
            "hopper", 3, total, [0, 1024, *extra], tmp_path / name, progress=False, transition_callback=rec, config=TINY
        )
        runs.append((paths, rec.stacked()))
    (paths_a, rec_a), (paths_b, rec_b), (paths_p, rec_p) = runs
    assert [p.name for p in paths_b] == [
        "step_000000000.safetensors",
        "step_000001024.safetensors",
        "step_000002048.safetensors",
    ]
    paths_a = [paths_a[0], paths_a[4], paths_a[5]]
    obs, action, reward, next_obs, terminated, truncated = rec_a
    assert obs.shape == (1024, 2, 11) and action.shape == (1024, 2, 3)  # vector steps x n_envs
    assert np.abs(action).max() <= 1.0
    assert terminated.any(), "a barely trained hopper must fall within 2048 steps"
    # Transitions chain inside episodes: next_obs is the next obs unless the episode ended.
    cont = ~(terminated[:-1] | truncated[:-1])
    assert np.array_equal(next_obs[:-1][cont], obs[1:][cont])
    for x, y in zip(rec_a, rec_b, strict=True):
        assert np.array_equal(x, y)
    for x, y in zip(rec_p, rec_a, strict=True):
        assert np.array_equal(x, y[: len(x)])
    for pa, pb in zip(paths_a, paths_b, strict=True):
        ta, tb = load_actor(pa)[0].state_dict(), load_actor(pb)[0].state_dict()
        assert all(torch.equal(ta[k], tb[k]) for k in ta)
    mid_a, mid_p = load_actor(paths_a[1])[0].state_dict(), load_actor(paths_p[-1])[0].state_dict()
    assert all(torch.equal(mid_a[k], mid_p[k]) for k in mid_a)
    first, last = load_actor(paths_a[0])[0].state_dict(), load_actor(paths_a[-1])[0].state_dict()
    assert not torch.equal(first["layers.0.weight"], last["layers.0.weight"])


def test_transition_states_reproduce_the_observations(tmp_path):
    from opcc_edu.envs import make_env, set_state

    rec = Recorder()
    policies.train_ppo("hopper", 4, 512, [], tmp_path, progress=False, transition_callback=rec, config=TINY)
    obs, _, _, _, terminated, truncated = rec.stacked()
    qpos = np.stack([b[6] for b in rec.batches])
    qvel = np.stack([b[7] for b in rec.batches])
    assert qpos.shape == (256, 2, 6) and qvel.shape == (256, 2, 6) and qpos.dtype == np.float64
    env = make_env("hopper")
    worst = 0.0
    for t in range(len(obs)):
        for i in range(obs.shape[1]):
            state = np.concatenate([qpos[t, i], qvel[t, i]])
            worst = max(worst, float(np.abs(set_state(env, state) - obs[t, i]).max()))
    assert worst < 1e-6, worst  # obs is float32
    # The step after an episode's end starts from the reset state, not the terminal one.
    ends = np.argwhere((terminated | truncated)[:-1])
    assert len(ends) > 0
    assert not np.array_equal(qpos[ends[0][0] + 1, ends[0][1]], qpos[ends[0][0], ends[0][1]])


def test_train_ppo_reuses_an_identical_earlier_run(tmp_path):
    long = policies.train_ppo("hopper", 2, 768, [0, 256, 512], tmp_path, progress=False, config=TINY)
    stamps = {p: p.stat().st_mtime_ns for p in long}
    again = policies.train_ppo("hopper", 2, 512, [256], tmp_path, progress=False, config=TINY, reuse=True)
    assert again == [tmp_path / "step_000000256.safetensors", tmp_path / "step_000000512.safetensors"]
    assert all(p.stat().st_mtime_ns == stamps[p] for p in again)  # nothing was retrained
    # Another seed is another run: it is trained, not taken from the cache.
    other = policies.train_ppo("hopper", 5, 256, [], tmp_path, progress=False, config=TINY, reuse=True)
    assert load_actor(other[-1])[1]["seed"] == 5
    schedule, total = builders.checkpoint_plan(2048, 4, TINY, stop_step=1000)
    assert total == 1024 and schedule[-1] == 1024
    assert set(schedule[:-1]) <= set(builders.checkpoint_schedule(2048, 4, TINY.rollout_steps))


def test_maze_training_reports_the_sparse_reward(tmp_path):
    rec = Recorder()
    policies.train_ppo("maze2d-open", 0, 256, [], tmp_path, progress=False, transition_callback=rec, config=TINY)
    _, _, reward, next_obs, _, _ = rec.stacked()
    assert set(np.unique(reward)) <= {0.0, 1.0}
    goal = MazeDistance("maze2d-open").goal
    inside = np.linalg.norm(next_obs[..., :2] - goal, axis=-1) <= 0.5
    assert np.array_equal(reward == 1.0, inside)


def test_actor_from_sb3_matches_the_sb3_policy():
    sb3 = pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    from opcc_edu.envs import make_env

    venv = VecNormalize(DummyVecEnv([lambda: make_env("hopper")]), clip_obs=policies.OBS_CLIP)
    rng = np.random.default_rng(0)
    venv.obs_rms.mean = rng.normal(size=11)
    venv.obs_rms.var = rng.uniform(0.1, 3.0, size=11)
    model = sb3.PPO("MlpPolicy", venv, policy_kwargs=dict(activation_fn=torch.nn.Tanh), seed=0, device="cpu")
    actor = policies.actor_from_sb3(model, venv)
    obs = rng.normal(size=(64, 11)) * 4
    with torch.no_grad():
        mean_action = model.policy._predict(
            torch.as_tensor(venv.normalize_obs(obs), dtype=torch.float32), deterministic=True
        )
    assert np.allclose(actor.act(obs), np.tanh(mean_action.numpy()), atol=1e-5)


def test_evaluate_actor_is_reproducible_and_prefix_stable():
    actor = Actor(4, 2)
    a = builders.evaluate_actor("maze2d-open", actor, episodes=3, seed=5)
    b = builders.evaluate_actor("maze2d-open", actor, episodes=2, seed=5)
    assert a.shape == (3,) and np.array_equal(a[:2], b)
    assert np.all((a >= 0) & (a <= get_spec("maze2d-open").max_episode_steps))


def test_build_entry_points_write_assets_that_replay(tmp_path):
    threads = torch.get_num_threads()
    rows = builders.build_query_policies(
        "halfcheetah",
        1536,
        n_checkpoints=4,
        episodes=2,
        assets_dir=tmp_path,
        work_dir=tmp_path / "q",
        config=TINY,
        progress=False,
    )
    assert [r["level"] for r in rows] == list(POLICY_LEVELS)
    assert torch.get_num_threads() == threads  # the single-threaded build restores the caller's setting
    assert builders.describe_query_policies(rows)[1].startswith("halfcheetah level 2: ")
    means = [r["mean_return"] for r in rows]
    assert means[0] == max(means) and means[3] == min(means)
    table = policies.policy_table(assets_dir=tmp_path)
    assert list(table["level"]) == list(POLICY_LEVELS) and set(table["env"]) == {"halfcheetah"}
    actor, meta = load_actor(tmp_path / "policies" / "halfcheetah" / "level2.safetensors")
    assert meta["level"] == 2 and "command" in meta and meta["train_seed"] == builders.QUERY_POLICY_SEED
    again = builders.evaluate_actor("halfcheetah", actor, episodes=2, seed=rows[1]["eval_seed"])
    assert np.allclose(again, rows[1]["returns"], atol=1e-9)

    entry = builders.build_behavior_policies(
        "hopper",
        1536,
        n_checkpoints=6,
        episodes=2,
        assets_dir=tmp_path,
        work_dir=tmp_path / "b",
        config=TINY,
        progress=False,
    )
    assert entry["medium_step"] < entry["expert_step"] == 1536
    args = policies.behavior_train_args("hopper", assets_dir=tmp_path)
    assert args["config"] == TINY and args["seed"] == builders.BEHAVIOR_SEED
    rec = Recorder()
    # Raises unless the replay reproduces the shipped medium weights bit for bit.
    policies.replay_behavior_run("hopper", rec, out_dir=tmp_path / "replay", progress=False, assets_dir=tmp_path)
    assert rec.stacked()[0].shape == (entry["medium_step"] // TINY.n_envs, TINY.n_envs, 11)
    # A shipped medium policy that the run cannot reproduce is reported, never used silently.
    medium_path = tmp_path / "behavior" / "hopper" / "medium.safetensors"
    medium, meta = load_actor(medium_path)
    with torch.no_grad():
        medium.layers[0].bias[0] += 1e-3
    save_actor(medium_path, medium, meta)
    with pytest.raises(RuntimeError, match="did not reproduce"):
        policies.replay_behavior_run(
            "hopper", Recorder(), out_dir=tmp_path / "replay2", progress=False, assets_dir=tmp_path
        )


def test_select_medium_stops_early():
    # Expert 300 -> target 100. The run reaches it at index 3 (130); the later dip to 100 at
    # index 5 is exactly on target but comes after early stopping would have ended the run.
    means = [0.0, 40.0, 80.0, 130.0, 250.0, 100.0, 280.0]
    assert builders.select_medium(means, 300.0) == 2  # |80 - 100| < |130 - 100|
    assert builders.select_medium([0.0, 10.0], 300.0) == 1  # never reached: the closest


def test_paper_table9_golden_values():
    paper = builders.paper_policy_table("halfcheetah")
    assert list(paper["mean_return"]) == [1168, 1044, 785, 94]
    assert len(builders.paper_policy_table()) == 4 * len(ENV_NAMES)


def test_bad_arguments_name_the_valid_choices():
    with pytest.raises(ValueError, match="level"):
        policies.load_policy("maze2d-open", 5)
    with pytest.raises(ValueError, match="valid choices"):
        policies.load_policy("maze9", 1)
    with pytest.raises(ValueError, match="kind"):
        policies.load_behavior_policy("hopper", "novice")
    with pytest.raises(ValueError, match="env_name"):
        policies.load_behavior_policy("maze2d-open", "medium")
    with pytest.raises(ValueError, match="checkpoint_steps"):
        policies.train_ppo("hopper", 0, 256, [512], "/nonexistent", progress=False, config=TINY)


def test_training_leaves_nothing_in_the_temp_dir(tmp_path, monkeypatch):
    # torch's first optimizer step creates its per-user compile cache (torchinductor_<user>) in
    # the temp dir, once per process and shared by every later run: take that step first.
    weight = torch.zeros(1, requires_grad=True)
    weight.sum().backward()
    torch.optim.Adam([weight]).step()
    temp = tmp_path / "system-temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    assert tempfile.gettempdir() == str(temp)
    paths = policies.train_ppo("hopper", 0, 512, [256], tmp_path / "run", progress=False, config=TINY)
    assert len(paths) == 2
    assert sorted(p.name for p in temp.iterdir()) == []


def test_build_defaults_to_the_profile_steps_and_describes_its_result(tmp_path):
    # Candidates come from the schedule of the profile's run (tiny: 20,000 steps) cut at 512.
    entry = builders.build_behavior_policies(
        "hopper",
        stop_step=512,
        n_checkpoints=4,
        episodes=1,
        assets_dir=tmp_path,
        work_dir=tmp_path / "b",
        config=TINY,
        progress=False,
        profile="tiny",
    )
    steps = builders.checkpoint_schedule(get_profile("tiny").policy_train_steps, 4, TINY.rollout_steps)
    assert [s for s in steps if s < 512] == [0, 256]
    assert (entry["medium_step"], entry["expert_step"]) == (256, 512)
    line = builders.describe_behavior_policies(entry)
    assert line.startswith("hopper: medium ") and "(step 256)" in line and "(step 512)" in line
    with pytest.raises(ValueError, match="n_checkpoints"):
        builders.build_behavior_policies("hopper", 512, n_checkpoints=0, assets_dir=tmp_path, config=TINY)
    with pytest.raises(ValueError, match="env_name"):
        builders.build_behavior_policies("maze2d-open", 512, assets_dir=tmp_path, config=TINY)


# ---------------------------------------------------------------------------------------------
# The shipped policies (paper Table 9 analogue)
# ---------------------------------------------------------------------------------------------

SHIPPED = policies.policy_table()
needs_shipped = pytest.mark.skipif(
    set(SHIPPED["env"]) != set(ENV_NAMES), reason="query policies not built for every environment"
)


@needs_shipped
@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_shipped_levels_differ_clearly(env_name):
    table = policies.policy_table(env_name)
    assert list(table["level"]) == list(POLICY_LEVELS)
    assert (table["episodes"] == builders.EVAL_EPISODES).all()
    means = table["mean_return"].to_numpy()
    spread = means[0] - means[-1]
    assert spread > 0
    # Strictly ordered by level with gaps of at least 10% of the best-to-worst spread.
    assert np.all(np.diff(means) < -0.1 * spread), means
    actors = policies.load_policies(env_name)
    assert len(actors) == 4 and all(a.obs_dim == get_spec(env_name).obs_dim for a in actors)


@needs_shipped
def test_policy_checksums_are_the_files_digests():
    from opcc_edu.io import sha256_file

    digests = policies.policy_checksums("maze2d-open")
    assert set(digests) == {str(level) for level in POLICY_LEVELS}
    assert digests["3"] == sha256_file(policies.policy_path("maze2d-open", 3))
    assert policies.policy_checksums("maze2d-open", assets_dir=policies.ASSETS_DIR / "absent") == {}


@needs_shipped
def test_shipped_table_is_honest():
    records = policies.policy_table_records()
    assert "package_versions" in records
    row = next(r for r in records["rows"] if r["env"] == "maze2d-open" and r["level"] == 1)
    assert "command" in row and "train_seed" in row
    again = builders.evaluate_actor(
        "maze2d-open", policies.load_policy("maze2d-open", 1), episodes=2, seed=row["eval_seed"]
    )
    assert np.allclose(again, row["returns"][:2], atol=1e-9)
    assert np.mean(row["returns"]) == pytest.approx(row["mean_return"])


@pytest.mark.skipif(
    not (policies.ASSETS_DIR / "behavior" / policies.BEHAVIOR_FILE).exists(), reason="behaviour policies not built"
)
@pytest.mark.parametrize("env_name", LOCOMOTION_NAMES)
def test_shipped_behavior_policies(env_name):
    info = policies.behavior_info(env_name)
    assert info["medium_step"] < info["expert_step"]
    assert info["medium_mean_return"] < info["expert_mean_return"]
    assert info["seed"] != json.loads(json.dumps(builders.QUERY_POLICY_SEED))
    for kind in policies.BEHAVIOR_KINDS:
        assert policies.load_behavior_policy(env_name, kind).act_dim == get_spec(env_name).act_dim
