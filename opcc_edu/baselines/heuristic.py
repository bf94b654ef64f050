"""A no-model baseline: answer each query by a fixed rule that learns nothing from the dataset.

A learned baseline's error means little without a yardstick: if a rule that looks only at the
start positions and at the policies' average returns already answers most queries, the query
set is easy and a model earns credit only for what it adds on top. :func:`heuristic_answers`
is that yardstick. Each side of a query gets a score (larger = better) and the rule predicts
``1`` (``V_a < V_b``) exactly when ``score_a < score_b``, the same comparison that defines the
target; an exact tie (both sides look the same to the rule, e.g. a same-state query on a maze)
is therefore answered ``0`` with confidence 0.

* **Mazes.** ``d`` = shortest-path length in cells (breadth-first search over 4-connected free
  cells, :func:`maze_goal_distances`) from the cell holding the start position ``obs[:, :2]``
  (found exactly as the environment does, :class:`opcc_edu.envs.MazeGeometry`) to the
  goal cell; ``e`` = Euclidean distance from the start position to the goal point
  (``MazeEnv.goal``: the goal cell's centre, shifted in a ``-d4rl-goal`` variant).
  ``score = -(d + e / (2 * (1 + e)))``. The second term lies in [0, 0.5), so the integer cell
  distance decides and the straight-line distance only breaks its ties.
* **Locomotion.** ``R`` = mean return of the side's policy level in the Table 9 analogue
  (:func:`opcc_edu.policies.policy_table`), divided by the spread (max - min) of the four
  levels' mean returns; ``v`` = forward (x) velocity of the start observation.
  ``score = R + (delta / 4) * v / (1 + |v|)`` with ``delta`` the smallest nonzero gap between
  two levels' scaled mean returns: the velocity term moves a score by less than ``delta / 4``,
  so it only decides between sides that use the same level.

Confidence is ``|score_a - score_b|`` in both cases: on mazes it lies in
``(|d_a - d_b| - 0.5, |d_a - d_b| + 0.5)`` when the cell distances differ and below 0.5 when
they are equal, so it grows with the cell-distance difference; on locomotion it is within
``delta / 2`` of the scaled mean-return difference, so every query with different levels is
more confident than every query with equal levels.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

import numpy as np

from ..envs import MAZE_NAMES, EnvSpec, MazeGeometry, d4rl_goal_env, get_spec, grid_distances
from ..names import ALL_HORIZONS
from ..scoring import score_answers
from ..utils import check_choice

if TYPE_CHECKING:
    from ..queries import QuerySet

FORWARD_VELOCITY_INDEX: dict[str, int] = {"hopper": 5, "halfcheetah": 8, "walker2d": 8}
"""Index of the torso's forward (x) velocity in each locomotion observation.

gymnasium's MuJoCo v5 observations are ``concat(qpos[1:], qvel)`` (the x position is left out),
so ``qvel[0]`` sits right after the ``nq - 1`` positions: Hopper has nq = 6 (index 5),
HalfCheetah and Walker2d have nq = 9 (index 8).
"""

MAZE_RULE = (
    "the side whose start cell is fewer maze cells (BFS, 4-connected) from the goal cell is better; "
    "equal cell distances are broken by the straight-line distance to the goal"
)
LOCOMOTION_RULE = (
    "the side whose policy level has the higher mean return in the policy table is better; "
    "equal levels are broken by the higher forward velocity of the start observation"
)


@dataclasses.dataclass(frozen=True)
class HeuristicAnswers:
    """The no-model rule's answers to N queries.

    ``prediction`` is 1 exactly where ``score_a < score_b`` and ``confidence`` is
    ``|score_a - score_b|`` (the module docstring gives the scores).
    """

    prediction: np.ndarray
    """(N,) int8: 1 means the rule predicts V_a < V_b (side b better)."""
    confidence: np.ndarray
    """(N,) float64 >= 0: larger means more sure; 0 on exact ties."""
    score_a: np.ndarray
    """(N,) float64 score of side a (larger = better)."""
    score_b: np.ndarray
    """(N,) float64 score of side b (larger = better)."""
    rule: str
    """The rule in one sentence."""


def _check_maze(env_name: str | EnvSpec) -> EnvSpec:
    spec = get_spec(env_name)
    check_choice(spec.name, [*MAZE_NAMES, *map(d4rl_goal_env, MAZE_NAMES)], "env_name (a maze)")
    return spec


@functools.cache  # lru_cache(maxsize=None): one grid per maze per process
def _goal_distances(spec: EnvSpec) -> np.ndarray:
    distance = grid_distances(spec.maze_map, spec.goal_cell).astype(np.float64)
    distance[distance < 0] = np.inf
    distance.flags.writeable = False  # shared by every caller through the cache
    return distance


def maze_goal_distances(env_name: str | EnvSpec) -> np.ndarray:
    """Shortest-path length in cells from every cell of a maze to its goal cell.

    Breadth-first search over free cells with 4-connected moves; computed once per maze.

    Args:
        env_name: one of :data:`opcc_edu.envs.MAZE_NAMES`.

    Returns:
        float64 array (rows, cols) of the layout, read-only: 0 at the goal cell, ``np.inf``
        for walls (and for free cells cut off from the goal, none in the benchmark mazes).

    Raises:
        ValueError: ``env_name`` is not a maze (lists the mazes).
    """
    return _goal_distances(_check_maze(env_name))


def maze_start_scores(env_name: str | EnvSpec, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cell distance, straight-line distance and score of maze start observations.

    Args:
        env_name: a maze.
        obs: (N, D) observations ``[x, y, vx, vy]``; only ``x, y`` are used.

    Returns:
        ``(d, e, score)``, each (N,) float64: cell distance to the goal cell, Euclidean
        distance to the goal point (:attr:`opcc_edu.envs.EnvSpec.goal_xy`) and
        ``-(d + e / (2 * (1 + e)))``. A position that falls in a wall cell (never in the
        shipped sets) counts from the nearest free cell centre.

    Raises:
        ValueError: ``env_name`` is not a maze, or ``obs`` has the wrong shape.
    """
    spec = _check_maze(env_name)
    obs = np.asarray(obs, dtype=np.float64)
    if obs.ndim != 2 or obs.shape[1] != spec.obs_dim:
        raise ValueError(f"obs must have shape (N, {spec.obs_dim}) for {spec.name}, got {obs.shape}")
    geometry = MazeGeometry(spec.maze_map)
    xy = obs[:, :2]
    cells = geometry.cell_of(xy)
    distances = maze_goal_distances(spec)
    d = distances[cells[:, 0], cells[:, 1]]
    walled = ~np.isfinite(d)
    if walled.any():  # a ball pressed against a wall can round into it: use the nearest free cell
        free = np.argwhere(np.isfinite(distances))
        nearest = np.linalg.norm(xy[walled, None, :] - geometry.cell_center(free)[None], axis=-1).argmin(axis=1)
        d[walled] = distances[free[nearest, 0], free[nearest, 1]]
    e = np.linalg.norm(xy - spec.goal_xy, axis=1)
    return d, e, -(d + e / (2.0 * (1.0 + e)))


def level_mean_returns(env_name: str | EnvSpec) -> dict[int, float]:
    """Mean return of each query-policy level (the Table 9 analogue, ``policy_table.json``).

    Args:
        env_name: an environment whose policies were built.

    Returns:
        ``{level: mean_return}``.

    Raises:
        ValueError: unknown environment, or no policies recorded for it.
    """
    from ..policies.assets import policy_table

    table = policy_table(get_spec(env_name).name)
    if table.empty:
        raise ValueError(f"no query policies recorded for env_name {env_name!r} in the policy table")
    return {int(level): float(value) for level, value in zip(table["level"], table["mean_return"], strict=True)}


def locomotion_scores(
    env_name: str | EnvSpec, obs: np.ndarray, policy: np.ndarray, mean_returns: dict[int, float] | None = None
) -> np.ndarray:
    """Scores of locomotion query sides: scaled mean return of the level plus a velocity tie-break.

    Args:
        env_name: ``"hopper"``, ``"halfcheetah"`` or ``"walker2d"``.
        obs: (N, D) start observations.
        policy: (N,) policy levels.
        mean_returns: ``{level: mean return}`` (default: :func:`level_mean_returns`).

    Returns:
        (N,) float64 ``R / spread + (delta / 4) * v / (1 + |v|)`` (see the module docstring).

    Raises:
        ValueError: not a locomotion task, a wrong shape, or a level missing from ``mean_returns``.
    """
    spec = get_spec(env_name)
    name = check_choice(spec.name, FORWARD_VELOCITY_INDEX, "env_name (a locomotion task)")
    obs = np.asarray(obs, dtype=np.float64)
    policy = np.asarray(policy)
    if obs.ndim != 2 or obs.shape[1] != spec.obs_dim or policy.shape != obs.shape[:1]:
        raise ValueError(f"obs must be (N, {spec.obs_dim}) and policy (N,), got {obs.shape}, {policy.shape}")
    returns = level_mean_returns(name) if mean_returns is None else dict(mean_returns)
    missing = sorted(set(np.unique(policy).tolist()) - set(returns))
    if missing:
        raise ValueError(f"policy levels {missing} have no mean return; valid choices: {sorted(returns)}")
    values = np.array(sorted(set(returns.values())))
    spread = float(values[-1] - values[0]) or 1.0
    gaps = np.diff(values) / spread
    delta = float(gaps.min()) if gaps.size else 1.0
    velocity = obs[:, FORWARD_VELOCITY_INDEX[name]]
    level_return = np.array([returns[int(k)] for k in policy], dtype=np.float64)
    return level_return / spread + (delta / 4.0) * velocity / (1.0 + np.abs(velocity))


def heuristic_answers(queries: QuerySet) -> HeuristicAnswers:
    """Answer every query with the no-model rule of this module.

    Args:
        queries: a :class:`opcc_edu.queries.QuerySet` (N queries).

    Returns:
        :class:`HeuristicAnswers` with (N,) predictions, confidences and both sides' scores.

    Raises:
        ValueError: unknown environment (lists the valid names), or a locomotion set whose
            policy levels are missing from the policy table.
    """
    spec = queries.spec
    if spec.is_maze:
        score_a = maze_start_scores(spec, queries.obs_a)[2]
        score_b = maze_start_scores(spec, queries.obs_b)[2]
        rule = MAZE_RULE
    else:
        recorded = queries.metadata.get("policy_returns")  # the original benchmark's sets carry their own
        returns = {int(k): float(v) for k, v in recorded.items()} if recorded else level_mean_returns(spec)
        score_a = locomotion_scores(spec, queries.obs_a, queries.policy_a, returns)
        score_b = locomotion_scores(spec, queries.obs_b, queries.policy_b, returns)
        rule = LOCOMOTION_RULE
    return HeuristicAnswers(
        prediction=(score_a < score_b).astype(np.int8),
        confidence=np.abs(score_a - score_b),
        score_a=score_a,
        score_b=score_b,
        rule=rule,
    )


def heuristic_error(queries: QuerySet) -> float:
    """Mean 0/1 loss of :func:`heuristic_answers` against ``queries.target``.

    Args:
        queries: a non-empty query set.

    Returns:
        The share of queries the rule answers wrongly.

    Raises:
        ValueError: an empty query set, or as :func:`heuristic_answers`.
    """
    if len(queries) == 0:
        raise ValueError("queries must hold at least one query")
    return float(np.mean(heuristic_answers(queries).prediction != queries.target))


def heuristic_metrics(
    queries: QuerySet, k: int = 10, answers: HeuristicAnswers | None = None
) -> dict[str, dict[str, float]]:
    """The paper's metrics of the rule, per horizon and over all queries.

    Args:
        queries: a non-empty query set.
        k: coverage bins for CR_K.
        answers: the rule's answers to ``queries`` when already computed (default: computed here).

    Returns:
        ``{str(h): metrics, ..., ALL_HORIZONS: metrics}`` with the dicts of
        :func:`opcc_edu.metrics.evaluate` (key ``"all"`` is :data:`opcc_edu.names.ALL_HORIZONS`).

    Raises:
        ValueError: an empty query set, a bad ``k``, or as :func:`heuristic_answers`.
    """
    if len(queries) == 0:
        raise ValueError("queries must hold at least one query")
    answers = heuristic_answers(queries) if answers is None else answers
    if answers.prediction.shape != (len(queries),):
        raise ValueError(f"answers must hold {len(queries)} predictions, got {answers.prediction.shape}")
    scores = score_answers({"rule": (answers.prediction, answers.confidence)}, queries.target, queries.horizon, k)
    table = scores.table()["rule"]
    return {**{str(h): table[str(h)] for h in queries.horizons}, ALL_HORIZONS: table[ALL_HORIZONS]}
