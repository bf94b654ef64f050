"""The ambiguity filter: a query is kept only if its two values differ clearly (paper Section 4.2).

A query whose two values are nearly equal has no meaningful answer, so construction drops it:
a value gap below 10 for locomotion (the paper's rule); for mazes, where the sparse reward bounds
a value by ``h``, a gap below ``0.1 * h``, i.e. one side spends at least a tenth of the horizon
more steps in the goal.
"""

from __future__ import annotations

import numpy as np

from ..envs import get_spec
from ..utils import check_positive_int

LOCOMOTION_MIN_GAP = 10.0
"""Smallest kept value gap for locomotion queries (paper Section 4.2, step 4)."""
MAZE_MIN_GAP_FRACTION = 0.1
"""Smallest kept value gap for maze queries, as a fraction of the horizon."""


def gap_threshold(env_name: str, horizon: int) -> float:
    """Smallest value gap a query of this environment and horizon must have to be kept.

    Locomotion: 10, the paper's rule (Section 4.2, step 4). Mazes: ``0.1 * h``. A maze value is
    the number of steps spent inside the goal radius, so it lies in [0, h] and a fixed 10 would
    remove every query of horizon 10; a tenth of the horizon asks one policy to spend clearly
    more of the horizon in the goal than the other, at every horizon alike.
    """
    horizon = check_positive_int(horizon, "horizon")
    if get_spec(env_name).is_maze:
        return MAZE_MIN_GAP_FRACTION * horizon
    return LOCOMOTION_MIN_GAP


def gap_rule(env_name: str) -> str:
    """The filter rule of an environment in words (recorded in the metadata)."""
    if get_spec(env_name).is_maze:
        return f"keep |value_a - value_b| >= {MAZE_MIN_GAP_FRACTION} * horizon (maze values lie in [0, horizon])"
    return f"keep |value_a - value_b| >= {LOCOMOTION_MIN_GAP} (paper Section 4.2)"


def unambiguous(env_name: str, horizon: np.ndarray, returns: np.ndarray) -> np.ndarray:
    """Which labelled candidates pass the filter.

    Args:
        env_name: environment.
        horizon: (C,) horizon of each candidate.
        returns: (2, C, R) Monte-Carlo returns of side a (index 0) and side b (index 1).

    Returns:
        (C,) bool: ``|value_a - value_b| >= gap_threshold(env_name, horizon)``.
    """
    value = returns.mean(axis=2)
    gap = np.abs(value[0] - value[1])
    threshold = np.array([gap_threshold(env_name, int(h)) for h in horizon])
    return gap >= threshold
