"""Tests of opcc_edu.lab.describe: counts, shares and gap quantiles on hand-built query sets."""

from __future__ import annotations

import json

import numpy as np
import pytest

from opcc_edu import envs
from opcc_edu.baselines.heuristic import heuristic_error
from opcc_edu.lab.describe import FORMS, GAP_QUANTILES, describe_queries
from opcc_edu.queries import QuerySet

# Centres of U-maze cells in the environment's frame: x = col + 0.5 - 2.5, y = 2.5 - row - 0.5.
GOAL, NEAR, MID, FAR = (-1.0, 1.0), (0.0, 1.0), (1.0, 1.0), (-1.0, -1.0)  # cells (1,1) (1,2) (1,3) (3,1)


def make_queries(env_name, xy_a, xy_b, policy_a, policy_b, horizon, value_a, value_b, metadata=None):
    """A QuerySet whose start observations begin with ``xy_*`` (N, k), zeros after."""
    spec = envs.get_spec(env_name)
    n = len(horizon)
    obs_a, obs_b = np.zeros((n, spec.obs_dim)), np.zeros((n, spec.obs_dim))
    obs_a[:, : np.shape(xy_a)[1]], obs_b[:, : np.shape(xy_b)[1]] = xy_a, xy_b
    same = np.all(obs_a == obs_b, axis=1)
    value_a, value_b = np.asarray(value_a, dtype=np.float64), np.asarray(value_b, dtype=np.float64)
    return QuerySet(
        env_name=env_name,
        obs_a=obs_a,
        obs_b=obs_b,
        action_a=np.zeros((n, spec.act_dim)),
        action_b=np.zeros((n, spec.act_dim)),
        policy_a=policy_a,
        policy_b=policy_b,
        horizon=horizon,
        gamma=np.ones(n),
        target=(value_a < value_b).astype(np.int8),
        value_a=value_a,
        value_b=value_b,
        returns_a=value_a[:, None],
        returns_b=value_b[:, None],
        state_a=np.zeros((n, 4)),
        state_b=np.zeros((n, 4)) + (~same)[:, None],
        same_state=same,
        metadata=metadata or {},
    )


@pytest.fixture(scope="module")
def maze_set():
    """Eight U-maze queries: three same-state, four self pairs (two of them same-state), two gaps == h."""
    return make_queries(
        "maze2d-umaze",
        xy_a=[MID, NEAR, FAR, NEAR, FAR, MID, GOAL, NEAR],
        xy_b=[MID, FAR, FAR, GOAL, NEAR, MID, FAR, MID],
        policy_a=[1, 2, 3, 1, 4, 2, 2, 1],
        policy_b=[1, 3, 3, 2, 4, 1, 2, 4],
        horizon=[10, 10, 10, 20, 20, 20, 20, 10],
        value_a=[10, 6, 2, 0, 3, 1, 12, 4],
        value_b=[0, 2, 5, 20, 9, 8, 2, 1],
    ).validate()


def test_counts_add_up(maze_set):
    description = describe_queries(maze_set)
    assert description.n == len(maze_set) == 8
    assert description.counts == {
        10: {"same-state": 2, "two-state": 2, "all": 4},
        20: {"same-state": 1, "two-state": 3, "all": 4},
    }
    table = description.table()
    assert list(table.columns) == list(FORMS) and list(table.index) == [10, 20]
    assert table["all"].sum() == description.n
    np.testing.assert_array_equal(table["same-state"] + table["two-state"], table["all"])


def test_shares_match_hand_counts(maze_set):
    description = describe_queries(maze_set)
    assert description.env_name == "maze2d-umaze" and description.recipe == "hard"
    assert description.same_state_share == 3 / 8
    assert description.self_pair_share == 4 / 8  # queries 0, 2, 4, 6
    assert description.same_state_and_policy_share == 2 / 8  # queries 0 and 2
    assert description.target_share == 4 / 8  # queries 2, 3, 4, 5
    # The rule answers the five two-state queries right (the side fewer cells from the goal has
    # the larger value in each); the three same-state ones are exact ties answered 0, wrong for 2 and 5.
    assert description.heuristic_tie_share == 3 / 8
    assert description.heuristic_error == 2 / 8 == heuristic_error(maze_set)


def test_maze_gaps_are_in_units_of_h(maze_set):
    description = describe_queries(maze_set)
    assert description.gap_unit == "h"
    ratios = np.array([10, 4, 3, 20, 6, 7, 10, 3]) / np.array([10, 10, 10, 20, 20, 20, 20, 10])
    assert list(description.gap_quantiles) == list(GAP_QUANTILES)
    assert description.gap_quantiles["min"] == pytest.approx(0.3)
    assert description.gap_quantiles["max"] == 1.0
    assert description.gap_quantiles["median"] == pytest.approx(np.median(ratios))
    assert description.gap_at_horizon_share == 2 / 8  # queries 0 and 3


def test_locomotion_gaps_are_raw_returns():
    queries = make_queries(
        "hopper",
        xy_a=np.zeros((3, 6)),
        xy_b=[[0.0] * 6, [0.0] * 6, [0.0] * 5 + [1.0]],  # side b of query 2 moves forward (index 5)
        policy_a=[1, 2, 3],
        policy_b=[4, 2, 3],
        horizon=[10, 10, 20],
        value_a=[50.0, 10.0, 30.0],
        value_b=[10.0, 25.0, 40.0],
    )
    description = describe_queries(queries)
    assert description.gap_unit == "return" and description.gap_at_horizon_share is None
    assert description.gap_quantiles["min"] == 10.0 and description.gap_quantiles["max"] == 40.0
    assert description.gap_quantiles["median"] == 15.0
    # The rule: level 1 beats 4 (right); level 2 vs 2 from one start is a tie, answered 0 (wrong);
    # level 3 vs 3 with side b faster predicts b (right).
    assert description.heuristic_error == pytest.approx(1 / 3)
    assert description.heuristic_tie_share == pytest.approx(1 / 3)


def test_as_dict_is_json_ready_and_lines_are_printable(maze_set):
    description = describe_queries(maze_set)
    data = json.loads(json.dumps(description.as_dict()))
    assert data["counts"]["10"]["all"] == 4 and data["env_name"] == "maze2d-umaze"
    assert data["gap_quantiles"] == description.gap_quantiles
    lines = description.lines()
    assert lines and all(isinstance(line, str) and line for line in lines)
    assert "maze2d-umaze" in lines[0] and "hard" in lines[0]
    assert any("heuristic" in line for line in lines) and any("gap == h" in line for line in lines)


def test_recipe_and_skipped_heuristic(maze_set):
    paper = maze_set.select(np.arange(4))
    paper.metadata["recipe"] = "paper"
    description = describe_queries(paper, heuristic=False)
    assert description.recipe == "paper" and description.n == 4
    assert description.heuristic_error is None and description.heuristic_tie_share is None
    assert not any("heuristic" in line for line in description.lines())


def test_bad_input_is_rejected(maze_set):
    with pytest.raises(ValueError, match="QuerySet"):
        describe_queries(maze_set.to_frame())
    with pytest.raises(ValueError, match="at least one"):
        describe_queries(maze_set.select(np.zeros(8, dtype=bool)))
    with pytest.raises(ValueError, match="heuristic"):
        describe_queries(maze_set, heuristic="yes")
