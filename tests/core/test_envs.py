import numpy as np
import pytest
import torch

from opcc_edu import envs


@pytest.mark.parametrize("name", envs.ENV_NAMES)
def test_spaces_match_spec(name):
    spec = envs.get_spec(name)
    env = envs.make_env(name, seed=0)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (spec.obs_dim,)
    assert env.action_space.shape == (spec.act_dim,)
    assert np.all(env.action_space.low == -1) and np.all(env.action_space.high == 1)
    assert env.spec.max_episode_steps == spec.max_episode_steps
    env.close()


@pytest.mark.parametrize("name", envs.ENV_NAMES)
def test_state_restore_replays_bit_for_bit(name):
    env = envs.make_env(name, seed=1)
    rng = np.random.default_rng(0)
    for _ in range(15):  # move away from the initial state distribution first
        env.step(rng.uniform(-1, 1, env.action_space.shape))
    state = envs.get_state(env)
    actions = rng.uniform(-1, 1, (25,) + env.action_space.shape)

    def replay():
        first = envs.set_state(env, state)
        out = [first]
        for a in actions:
            obs, reward, terminated, _, _ = env.step(a)
            out.append(np.r_[obs, reward, terminated])
            if terminated:
                break
        return out

    a, b = replay(), replay()
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x, y)
    env.close()


def test_maze_reward_is_sparse_and_fixed_goal():
    env = envs.make_env("maze2d-umaze", seed=0)
    core = env.unwrapped
    goal = core.goal
    np.testing.assert_allclose(goal, core.maze.cell_rowcol_to_xy(np.array([1, 1])))
    envs.set_state(env, np.r_[goal + [0.1, 0.0], 0.0, 0.0])
    _, reward, terminated, _, _ = env.step(np.zeros(2))
    assert reward == 1.0 and not terminated
    envs.set_state(env, np.r_[goal + [2.0, 0.0], 0.0, 0.0])
    _, reward, _, _, _ = env.step(np.zeros(2))
    assert reward == 0.0
    # The goal never moves, whatever happens.
    for _ in range(20):
        env.step(np.ones(2))
    np.testing.assert_array_equal(core.goal, goal)


def test_maze_reset_stays_in_free_cells():
    env = envs.make_env("maze2d-medium")
    core = env.unwrapped
    for seed in range(20):
        obs, _ = env.reset(seed=seed)
        row, col = core.maze.cell_xy_to_rowcol(obs[:2])
        assert core.env_spec.maze_map[row][col] == 0


def test_unknown_environment_lists_choices():
    with pytest.raises(ValueError, match=r"unknown environment 'maze2d-tiny'.*maze2d-umaze.*walker2d"):
        envs.make_env("maze2d-tiny")


def test_termination_functions():
    hopper = envs.termination_fn("hopper")
    healthy = torch.zeros(4, 11)
    healthy[:, 0] = 1.25
    done = hopper(healthy)
    assert done.shape == (4,) and not done.any()
    fallen = healthy.clone()
    fallen[1, 0] = 0.5  # too low
    fallen[2, 1] = 0.3  # tilted
    fallen[3, 5] = float("nan")
    assert hopper(fallen).tolist() == [False, True, True, True]
    walker = envs.termination_fn("walker2d")
    obs = torch.zeros(2, 3, 17)
    obs[..., 0] = 1.2
    obs[1, 2, 0] = 2.5
    assert walker(obs).tolist() == [[False] * 3, [False, False, True]]
    assert not envs.termination_fn("halfcheetah")(torch.full((5, 17), 1e6)).any()


def test_hopper_termination_matches_simulator():
    """The batched torch check agrees with gymnasium's own health check along real episodes."""
    env = envs.make_env("hopper", seed=0)
    fn = envs.termination_fn("hopper")
    rng = np.random.default_rng(0)
    seen_done = False
    for episode in range(3):
        env.reset(seed=episode)
        for _ in range(200):
            obs, _, terminated, truncated, _ = env.step(rng.uniform(-1, 1, 3))
            assert bool(fn(torch.as_tensor(obs, dtype=torch.float64))) == terminated
            if terminated or truncated:
                seen_done |= terminated
                break
    assert seen_done, "random actions should make the hopper fall"


# --------------------------------------------------------------------------------------------
# Nothing left behind, nothing printed
# --------------------------------------------------------------------------------------------
def test_maze_environments_leave_nothing_in_the_temp_folder(tmp_path, monkeypatch):
    import tempfile

    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    assert tempfile.gettempdir() == str(private)
    for name in envs.MAZE_NAMES:
        env = envs.make_env(name, seed=0)
        for _ in range(3):
            env.step(env.action_space.sample())
        env.close()
    assert sorted(p.name for p in private.iterdir()) == []


def test_a_failing_maze_constructor_leaves_nothing_either(tmp_path, monkeypatch):
    import tempfile

    from gymnasium_robotics.envs.maze import point_maze

    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", None)

    def broken(*args, **kwargs):
        raise RuntimeError("no simulator today")

    monkeypatch.setattr(point_maze, "PointEnv", broken)  # fails after the XML was written
    with pytest.raises(RuntimeError, match="no simulator today"):
        envs.MazeEnv("maze2d-open")
    assert list(private.iterdir()) == []


def test_halfcheetah_compiles_without_the_settotalmass_notice(tmp_path, monkeypatch, capfd):
    import mujoco

    monkeypatch.chdir(tmp_path)  # MuJoCo's default handler would also append to ./MUJOCO_LOG.TXT
    env = envs.make_env("halfcheetah", seed=0)
    env.step(np.zeros(6))
    env.close()
    out, err = capfd.readouterr()
    assert "settotalmass" not in out + err
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
    assert mujoco.get_mju_user_warning() is None  # MuJoCo's own handler is back


def test_other_mujoco_warnings_still_reach_the_user():
    import mujoco

    seen = []
    mujoco.set_mju_user_warning(seen.append)
    try:
        with envs._without_settotalmass_notice():
            handler = mujoco.get_mju_user_warning()
            handler("compiler attribute 'settotalmass' is deprecated")
            handler("something else went wrong")
        assert mujoco.get_mju_user_warning() is not None
    finally:
        mujoco.set_mju_user_warning(None)
    assert seen == ["something else went wrong"]
    with envs._without_settotalmass_notice():
        with pytest.warns(RuntimeWarning, match="MuJoCo: another message"):
            mujoco.get_mju_user_warning()("another message")


def test_importing_queries_and_datasets_loads_no_simulator():
    # gymnasium loads when an environment is made, not when a query set or a dataset is read
    import pickle
    import subprocess
    import sys

    code = "import sys, opcc_edu.queries, opcc_edu.datasets; print('gymnasium' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "False"
    # the maze environment, made on first use, is still found (and pickled) as envs.MazeEnv
    env = envs.make_env("maze2d-open", seed=0)
    assert isinstance(env.unwrapped, envs.MazeEnv) and pickle.loads(pickle.dumps(envs.MazeEnv)) is envs.MazeEnv
    env.close()
