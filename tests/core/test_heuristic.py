"""Tests of opcc_edu.baselines.heuristic: hand-checked maze distances, both rules, ties, errors."""

from __future__ import annotations

import numpy as np
import pytest

from opcc_edu import envs
from opcc_edu.baselines.heuristic import (
    FORWARD_VELOCITY_INDEX,
    heuristic_answers,
    heuristic_error,
    heuristic_metrics,
    level_mean_returns,
    locomotion_scores,
    maze_goal_distances,
    maze_start_scores,
)
from opcc_edu.names import ALL_HORIZONS
from opcc_edu.queries import QuerySet

INF = np.inf


def make_queries(env_name, obs_a, obs_b, policy_a=None, policy_b=None, horizon=None, value_a=None, value_b=None):
    """A QuerySet with the given starts and values (one Monte-Carlo run, zero actions and states)."""
    spec = envs.ENV_SPECS.get(env_name, envs.get_spec("maze2d-umaze"))
    obs_a, obs_b = np.atleast_2d(obs_a), np.atleast_2d(obs_b)
    n = len(obs_a)
    value_a = np.zeros(n) if value_a is None else np.asarray(value_a, dtype=np.float64)
    value_b = np.zeros(n) if value_b is None else np.asarray(value_b, dtype=np.float64)
    state_a = np.zeros((n, 2 * spec.obs_dim))
    state_b = state_a + (~np.all(obs_a == obs_b, axis=1))[:, None]
    return QuerySet(
        env_name=env_name,
        obs_a=obs_a,
        obs_b=obs_b,
        action_a=np.zeros((n, spec.act_dim)),
        action_b=np.zeros((n, spec.act_dim)),
        policy_a=np.ones(n) if policy_a is None else policy_a,
        policy_b=np.ones(n) if policy_b is None else policy_b,
        horizon=np.full(n, 10) if horizon is None else horizon,
        gamma=np.ones(n),
        target=(value_a < value_b).astype(np.int8),
        value_a=value_a,
        value_b=value_b,
        returns_a=value_a[:, None],
        returns_b=value_b[:, None],
        state_a=state_a,
        state_b=state_b,
        same_state=np.all(obs_a == obs_b, axis=1),
    )


@pytest.fixture(scope="module")
def umaze():
    """The U-maze environment, for its own cell <-> (x, y) conversion."""
    env = envs.MazeEnv("maze2d-umaze")
    yield env
    env.close()


def maze_obs(env, cell, offset=(0.0, 0.0)):
    """Observation [x, y, 0, 0] at the centre of ``cell`` (as the env computes it) plus ``offset``."""
    xy = np.asarray(env.maze.cell_rowcol_to_xy(np.array(cell)), dtype=np.float64) + offset
    return np.array([*xy, 0.0, 0.0])


# --------------------------------------------------------------------------------------------
# Maze distances
# --------------------------------------------------------------------------------------------
def test_umaze_distances_by_hand():
    # UMAZE_MAP: the goal (1, 1) is the top-left free cell; the path runs right along row 1,
    # down column 3 and back left along row 3.
    expected = np.array(
        [
            [INF, INF, INF, INF, INF],
            [INF, 0, 1, 2, INF],
            [INF, INF, INF, 3, INF],
            [INF, 6, 5, 4, INF],
            [INF, INF, INF, INF, INF],
        ]
    )
    grid = maze_goal_distances("maze2d-umaze")
    np.testing.assert_array_equal(grid, expected)
    assert grid is maze_goal_distances("maze2d-umaze")  # computed once
    with pytest.raises(ValueError):
        grid[1, 1] = 5.0  # the cached grid is read-only


@pytest.mark.parametrize("name", envs.MAZE_NAMES)
def test_distances_are_a_bfs_on_every_maze(name):
    spec = envs.get_spec(name)
    layout = np.asarray(spec.maze_map)
    grid = maze_goal_distances(name)
    assert grid.shape == layout.shape
    assert grid[spec.goal_cell] == 0
    np.testing.assert_array_equal(np.isinf(grid), layout == 1)
    for r, c in np.argwhere(layout == 0):
        if (r, c) == spec.goal_cell:
            continue
        neighbours = [grid[r + dr, c + dc] for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1))]
        assert grid[r, c] == 1 + min(neighbours)


def test_start_cells_follow_the_env_conversion(umaze):
    rng = np.random.default_rng(0)
    grid = maze_goal_distances("maze2d-umaze")
    cells = np.argwhere(grid < INF)
    obs = np.stack([maze_obs(umaze, c, rng.uniform(-0.45, 0.45, 2)) for c in cells for _ in range(5)])
    d, e, score = maze_start_scores("maze2d-umaze", obs)
    env_cells = np.stack([umaze.maze.cell_xy_to_rowcol(o[:2]) for o in obs])
    np.testing.assert_array_equal(d, grid[env_cells[:, 0], env_cells[:, 1]])
    np.testing.assert_allclose(e, np.linalg.norm(obs[:, :2] - umaze.goal, axis=1))
    np.testing.assert_allclose(score, -(d + e / (2 * (1 + e))))


# --------------------------------------------------------------------------------------------
# The maze rule
# --------------------------------------------------------------------------------------------
def test_maze_rule_prefers_the_side_fewer_cells_from_the_goal(umaze):
    far, near = maze_obs(umaze, (3, 1)), maze_obs(umaze, (1, 2))  # 6 and 1 cells from the goal
    queries = make_queries("maze2d-umaze", [far, near], [near, far], value_a=[0, 5], value_b=[5, 0])
    answers = heuristic_answers(queries)
    np.testing.assert_array_equal(answers.prediction, [1, 0])  # 1: side b is better
    assert answers.prediction.dtype == np.int8 and answers.confidence.dtype == np.float64
    np.testing.assert_array_equal(answers.score_a > answers.score_b, [False, True])
    assert np.all(np.abs(answers.confidence - 5) < 0.5)
    assert heuristic_error(queries) == 0.0
    assert "cells" in answers.rule


def test_maze_ties_are_broken_by_straight_line_distance(umaze):
    # Both starts in cell (1, 3), two cells from the goal; side a lies nearer to the goal (left).
    closer, farther = maze_obs(umaze, (1, 3), (-0.3, 0.0)), maze_obs(umaze, (1, 3), (0.3, 0.0))
    queries = make_queries("maze2d-umaze", [closer, farther, closer], [farther, closer, closer])
    answers = heuristic_answers(queries)
    np.testing.assert_array_equal(answers.prediction, [0, 1, 0])
    assert 0 < answers.confidence[0] < 0.5 and answers.confidence[0] == answers.confidence[1]
    # An exact tie (the same start) has no preference: answered 0 (V_a < V_b not claimed), confidence 0.
    assert answers.confidence[2] == 0.0


def test_maze_confidence_grows_with_the_cell_difference(umaze):
    goal = maze_obs(umaze, (1, 1))
    # Side a at distance 1, 2, ..., 6; side b at the goal. Euclidean terms disagree as they may.
    cells = [(1, 2), (1, 3), (2, 3), (3, 3), (3, 2), (3, 1)]
    obs_a = [maze_obs(umaze, c, (0.4, -0.4)) for c in cells]
    queries = make_queries("maze2d-umaze", obs_a, [goal] * len(cells))
    answers = heuristic_answers(queries)
    np.testing.assert_array_equal(answers.prediction, 1)  # side b, at the goal, is better
    assert np.all(np.diff(answers.confidence) > 0)
    # A one-cell difference where the straight line says the opposite still beats any tie.
    a, b = maze_obs(umaze, (3, 2), (-0.45, 0.45)), maze_obs(umaze, (3, 3), (0.45, 0.45))
    one_cell = heuristic_answers(make_queries("maze2d-umaze", a, b))
    tie = heuristic_answers(make_queries("maze2d-umaze", maze_obs(umaze, (3, 1)), maze_obs(umaze, (3, 1), (0.4, 0))))
    assert one_cell.prediction[0] == 1 and one_cell.confidence[0] > 0.5 > tie.confidence[0]


# --------------------------------------------------------------------------------------------
# The locomotion rule
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", envs.LOCOMOTION_NAMES)
def test_forward_velocity_index_is_qvel0(name):
    env = envs.make_env(name, seed=0)
    model, _ = envs.mujoco_handles(env)
    state = envs.get_state(env)
    state[model.nq :] = np.linspace(0.1, 0.9, model.nv)
    obs = envs.set_state(env, state)
    env.close()
    assert obs[FORWARD_VELOCITY_INDEX[name]] == pytest.approx(state[model.nq])


def test_locomotion_scores_formula():
    returns = {1: 100.0, 2: 60.0, 3: 50.0, 4: 0.0}  # spread 100, smallest level gap 0.1
    obs = np.zeros((3, 11))
    obs[:, 5] = [0.0, 1.0, -3.0]
    scores = locomotion_scores("hopper", obs, np.array([1, 3, 3]), returns)
    np.testing.assert_allclose(scores, [1.0, 0.5 + 0.025 * 0.5, 0.5 - 0.025 * 0.75])
    with pytest.raises(ValueError, match="policy levels"):
        locomotion_scores("hopper", obs, np.array([1, 3, 5]), returns)
    with pytest.raises(ValueError, match="locomotion"):
        locomotion_scores("maze2d-open", np.zeros((3, 4)), np.ones(3), returns)


def test_locomotion_rule_uses_levels_then_velocity():
    returns = level_mean_returns("walker2d")
    slow, fast = np.zeros(17), np.zeros(17)
    fast[8] = 2.0
    best, worst = max(returns, key=returns.get), min(returns, key=returns.get)
    queries = make_queries(
        "walker2d",
        [fast, slow, slow, fast, slow],
        [slow, fast, fast, slow, slow],
        policy_a=[best, worst, 2, 2, 3],
        policy_b=[worst, best, 2, 2, 3],
    )
    answers = heuristic_answers(queries)
    np.testing.assert_array_equal(answers.prediction, [0, 1, 1, 0, 0])
    spread = max(returns.values()) - min(returns.values())
    np.testing.assert_allclose(answers.confidence[:2], 1.0, atol=0.1)  # best vs worst: the whole spread
    gaps = np.diff(sorted(returns.values())) / spread
    assert answers.confidence[2:4].max() < gaps.min() / 2 <= answers.confidence[:2].min()
    assert answers.confidence[4] == 0.0  # same level, same start
    assert "policy level" in answers.rule


# --------------------------------------------------------------------------------------------
# Error, metrics, bad input
# --------------------------------------------------------------------------------------------
def test_error_and_metrics_per_horizon(umaze):
    near, far = maze_obs(umaze, (1, 2)), maze_obs(umaze, (3, 1))
    queries = make_queries(
        "maze2d-umaze",
        [near, near, far, far],
        [far, far, near, near],
        horizon=[10, 10, 20, 20],
        value_a=[5, 0, 0, 0],
        value_b=[0, 5, 5, 5],  # query 1 contradicts the rule
    )
    assert heuristic_error(queries) == pytest.approx(0.25)
    metrics = heuristic_metrics(queries, k=5)
    assert list(metrics) == ["10", "20", ALL_HORIZONS]
    assert metrics["10"]["loss"] == 0.5 and metrics["20"]["loss"] == 0.0
    assert metrics[ALL_HORIZONS]["loss"] == heuristic_error(queries) and metrics[ALL_HORIZONS]["n"] == 4


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="valid choices"):
        heuristic_answers(make_queries("maze2d-nowhere", np.zeros(4), np.zeros(4)))
    with pytest.raises(ValueError, match="maze2d-umaze"):
        maze_goal_distances("hopper")
    with pytest.raises(ValueError, match="obs"):
        maze_start_scores("maze2d-umaze", np.zeros((3, 3)))
    empty = make_queries("maze2d-umaze", np.zeros((0, 4)), np.zeros((0, 4)), horizon=np.zeros(0))
    with pytest.raises(ValueError, match="at least one"):
        heuristic_error(empty)
