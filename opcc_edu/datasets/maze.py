"""Maze navigation data as D4RL made it: a waypoint controller driving the ball between goals.

D4RL's maze2d datasets (Fu et al., 2020) were recorded by a planner that keeps navigating: it
picks a random goal cell, follows a shortest path on the maze grid with a PD controller whose
actions carry Gaussian noise, and picks a new goal as soon as it arrives, without ever
resetting the ball. This module rebuilds that recipe on the package's own maze environments
(:class:`opcc_edu.envs.MazeEnv`):

* :func:`opcc_edu.envs.next_cell_table` -- breadth-first search on the grid, once per goal
  cell: for every (goal, current cell) the neighbouring cell that starts a shortest path.
* :class:`WaypointController` -- the vectorised controller for B streams at once: the waypoint
  is the centre of the next cell on the path (or the goal itself once in the goal cell); the
  action is ``p_gain * (waypoint - xy) + d_gain * velocity`` (D4RL's gains 10 and -1) plus
  N(0, 0.5^2) noise, clipped to [-1, 1]. A goal counts as reached within 0.1 of its centre.
* :func:`generate_maze_dataset` -- B independent streams stepped in the real simulator in
  lock-step. Each stream is cut into episodes of the Table 8 length (timeouts, no terminals);
  the dataset lists episode 0 of every stream, then episode 1 of every stream, and so on, so
  a smaller dataset is always a prefix of a larger one with the same seed and streams.
"""

from __future__ import annotations

import math

import numpy as np

from ..envs import GOAL_RADIUS, MazeGeometry, free_cells, get_spec, make_env, next_cell_table, simulator_core
from ..utils import check_positive_int


def goal_rewards(data: dict[str, np.ndarray], env_name: str) -> dict[str, np.ndarray]:
    """``data`` with ``rewards`` recomputed from ``next_observations[:, :2]`` for the goal point of ``env_name``
    (:attr:`opcc_edu.envs.EnvSpec.goal_xy`) by the rule of :meth:`opcc_edu.envs.MazeEnv.reward`."""
    hit = np.linalg.norm(data["next_observations"][:, :2] - get_spec(env_name).goal_xy, axis=-1) <= GOAL_RADIUS
    return {**data, "rewards": hit.astype(data["rewards"].dtype)}


class WaypointController:
    """Shortest-path PD navigation for B balls at once (D4RL's maze2d data collector).

    Args:
        maze_map: the layout (1 = wall).
        p_gain: proportional gain on the vector to the waypoint (D4RL: 10).
        d_gain: gain on the velocity (D4RL: -1, i.e. damping).
        solve_threshold: distance (m) to the goal centre at which the goal counts as reached
            (D4RL: 0.1).
    """

    def __init__(self, maze_map, p_gain: float = 10.0, d_gain: float = -1.0, solve_threshold: float = 0.1):
        self.geometry = MazeGeometry(tuple(tuple(int(v) for v in row) for row in maze_map))
        self.cells = free_cells(maze_map)
        self.centers = self.geometry.cell_center(self.cells)
        layout = np.asarray(maze_map)
        self._index = np.full(layout.shape, -1, dtype=np.int64)
        self._index[self.cells[:, 0], self.cells[:, 1]] = np.arange(len(self.cells))
        self.table = next_cell_table(maze_map)
        self.p_gain = float(p_gain)
        self.d_gain = float(d_gain)
        self.solve_threshold = float(solve_threshold)

    @property
    def n_cells(self) -> int:
        return len(self.cells)

    def cell_index(self, xy: np.ndarray) -> np.ndarray:
        """Index of the free cell holding each position (B, 2) -> (B,).

        A position that rounds into a wall cell (the ball touching a wall) is assigned the
        nearest free cell centre.
        """
        cells = self.geometry.cell_of(xy)
        idx = self._index[cells[:, 0], cells[:, 1]]
        bad = idx < 0
        if bad.any():
            d = np.linalg.norm(np.asarray(xy)[bad, None, :] - self.centers[None], axis=-1)
            idx[bad] = d.argmin(axis=1)
        return idx

    def waypoints(self, xy: np.ndarray, goal_index: np.ndarray) -> np.ndarray:
        """Next waypoint (B, 2) for balls at ``xy`` (B, 2) heading to goal cells ``goal_index`` (B,)."""
        current = self.cell_index(xy)
        nxt = self.table[goal_index, current]
        return self.centers[nxt]

    def action(self, obs: np.ndarray, goal_index: np.ndarray) -> np.ndarray:
        """Noise-free PD action (B, 2) in [-1, 1] for observations ``[x, y, vx, vy]`` (B, 4)."""
        obs = np.asarray(obs, dtype=np.float64)
        target = self.waypoints(obs[:, :2], goal_index)
        raw = self.p_gain * (target - obs[:, :2]) + self.d_gain * obs[:, 2:4]
        return np.clip(raw, -1.0, 1.0)

    def reached(self, xy: np.ndarray, goal_index: np.ndarray) -> np.ndarray:
        """Whether each ball is within ``solve_threshold`` of its goal centre: bool (B,)."""
        return np.linalg.norm(np.asarray(xy) - self.centers[goal_index], axis=-1) <= self.solve_threshold


def _new_goal(rng: np.random.Generator, n_cells: int, avoid: int) -> int:
    # Uniform over the other free cells, so that every goal means a real trip.
    g = int(rng.integers(n_cells - 1))
    return g + 1 if g >= avoid else g


def generate_maze_dataset(
    env_name: str,
    size: int,
    seed: int = 0,
    n_streams: int = 8,
    action_noise: float = 0.5,
    p_gain: float = 10.0,
    d_gain: float = -1.0,
    solve_threshold: float = 0.1,
    progress: bool = True,
) -> dict[str, np.ndarray]:
    """Generate a maze navigation dataset in the real simulator. (A recipe, read top to bottom.)

    Args:
        env_name: a maze environment (``maze2d-*``).
        size: number of transitions T.
        seed: seeds every stream's start position, goals and action noise
            (stream k uses ``numpy.random.SeedSequence([seed, k])``).
        n_streams: number B of independent navigation streams stepped together. Part of the
            recipe: the same seed with a different B gives different data.
        action_noise: standard deviation of the Gaussian noise added to each action
            coordinate before clipping (D4RL: 0.5).
        p_gain, d_gain, solve_threshold: controller parameters (see :class:`WaypointController`).
        progress: show a tqdm progress bar.

    Returns:
        A D4RL-format dict (see :mod:`opcc_edu.datasets.format`) of T transitions, including
        ``infos/goal`` (the controller's goal position). Rewards are the environment's sparse
        reward for its fixed goal (not the controller's goal).
    """
    from tqdm.auto import tqdm

    spec = get_spec(env_name)
    if not spec.is_maze:
        raise ValueError(f"env_name must be a maze environment for the maze recipe, got {env_name!r}")
    size = check_positive_int(size, "size")
    n_streams = check_positive_int(n_streams, "n_streams")
    if action_noise < 0:
        raise ValueError(f"action_noise must be >= 0, got {action_noise!r}")
    horizon = spec.max_episode_steps
    controller = WaypointController(spec.maze_map, p_gain, d_gain, solve_threshold)
    rounds = math.ceil(size / (n_streams * horizon))
    # Streams that the last round needs at all (later ones would land beyond `size`).
    last_active = math.ceil((size - (rounds - 1) * n_streams * horizon) / horizon)

    rngs = [np.random.default_rng(np.random.SeedSequence([int(seed), k])) for k in range(n_streams)]
    envs = [simulator_core(make_env(env_name)) for _ in range(n_streams)]
    obs = np.stack([env.reset(seed=int(rng.integers(2**31)))[0] for env, rng in zip(envs, rngs, strict=False)])
    start = controller.cell_index(obs[:, :2])
    goal = np.array(
        [_new_goal(rng, controller.n_cells, int(c)) for rng, c in zip(rngs, start, strict=False)], dtype=np.int64
    )

    shape = (rounds, n_streams, horizon)
    buf = {
        "observations": np.zeros(shape + (4,), np.float32),
        "actions": np.zeros(shape + (2,), np.float32),
        "rewards": np.zeros(shape, np.float32),
        "next_observations": np.zeros(shape + (4,), np.float32),
        "infos/goal": np.zeros(shape + (2,), np.float32),
    }
    bar = tqdm(total=size, disable=not progress, desc=f"{env_name} navigation data", unit="step")
    for r in range(rounds):
        active = np.arange(n_streams if r < rounds - 1 else last_active)
        for t in range(horizon):
            o = obs[active]
            done = controller.reached(o[:, :2], goal[active])
            for k in active[done]:
                goal[k] = _new_goal(rngs[k], controller.n_cells, int(goal[k]))
            action = controller.action(o, goal[active])
            noise = np.stack([rngs[k].normal(0.0, action_noise, size=2) for k in active])
            # Stored and executed actions are the same float32 numbers.
            action = np.clip(action + noise, -1.0, 1.0).astype(np.float32)
            for j, k in enumerate(active):
                nxt, reward, _, _, _ = envs[k].step(action[j].astype(np.float64))
                buf["rewards"][r, k, t] = reward
                obs[k] = nxt
            buf["observations"][r, active, t] = o
            buf["actions"][r, active, t] = action
            buf["next_observations"][r, active, t] = obs[active]
            buf["infos/goal"][r, active, t] = controller.centers[goal[active]]
            bar.update(len(active))
    bar.close()
    for env in envs:
        env.close()

    total = rounds * n_streams * horizon
    data = {key: value.reshape((total,) + value.shape[3:])[:size] for key, value in buf.items()}
    timeouts = np.zeros(shape, dtype=bool)
    timeouts[:, :, -1] = True
    data["timeouts"] = timeouts.reshape(total)[:size].copy()
    data["timeouts"][-1] = True
    data["terminals"] = np.zeros(size, dtype=bool)
    # The maze simulator state is exactly the observation (qpos = xy, qvel = velocity).
    data["infos/qpos"] = data["observations"][:, :2].copy()
    data["infos/qvel"] = data["observations"][:, 2:].copy()
    order = ("observations", "actions", "rewards", "next_observations", "terminals", "timeouts")
    return {key: np.ascontiguousarray(data[key]) for key in (*order, "infos/qpos", "infos/qvel", "infos/goal")}
