"""Maze navigation data as D4RL made it: a waypoint controller driving the ball between goals.

D4RL's maze2d datasets (Fu et al., 2020) were recorded by a planner that keeps navigating: it
picks a random goal cell, follows a shortest path on the maze grid with a PD controller whose
actions carry Gaussian noise, and picks a new goal as soon as it arrives, without ever
resetting the ball. This module rebuilds that recipe on the package's own maze environments
(:class:`opcc_edu.envs.MazeEnv`):

* :func:`next_cell_table` -- breadth-first search on the grid, once per goal cell: for every
  (goal, current cell) the neighbouring cell that starts a shortest path.
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

import dataclasses
import math
from collections import deque
from collections.abc import Sequence

import numpy as np

from ..envs import get_spec
from ..utils import check_positive_int

MazeMap = Sequence[Sequence[int]]
"""A maze layout: rows of cells, 1 = wall, 0 = free (:attr:`opcc_edu.envs.EnvSpec.maze_map`)."""

# Grid moves in a fixed order, so that ties between equally short paths break the same way
# on every machine: up, down, left, right in (row, column) steps.
_MOVES = np.array([(-1, 0), (1, 0), (0, -1), (0, 1)], dtype=np.int64)


def free_cells(maze_map: MazeMap) -> np.ndarray:
    """(row, column) of every free cell in row-major order: int64 array (F, 2)."""
    layout = np.asarray(maze_map)
    rows, cols = np.nonzero(layout == 0)
    return np.stack([rows, cols], axis=1).astype(np.int64)


def grid_distances(maze_map: MazeMap, goal_cell: tuple[int, int]) -> np.ndarray:
    """Breadth-first-search distance (in cells) from every cell to ``goal_cell``.

    Args:
        maze_map: layout, 1 = wall, 0 = free, rows top to bottom.
        goal_cell: (row, column) of a free cell.

    Returns:
        int64 array with the layout's shape; -1 for walls and cells that cannot reach the goal.
    """
    layout = np.asarray(maze_map)
    goal = (int(goal_cell[0]), int(goal_cell[1]))
    if not (0 <= goal[0] < layout.shape[0] and 0 <= goal[1] < layout.shape[1]) or layout[goal] != 0:
        raise ValueError(f"goal_cell must be a free cell of the maze, got {goal_cell!r}")
    dist = np.full(layout.shape, -1, dtype=np.int64)
    dist[goal] = 0
    queue = deque([goal])
    while queue:
        r, c = queue.popleft()
        for dr, dc in _MOVES:
            nr, nc = r + int(dr), c + int(dc)
            if 0 <= nr < layout.shape[0] and 0 <= nc < layout.shape[1] and layout[nr, nc] == 0 and dist[nr, nc] < 0:
                dist[nr, nc] = dist[r, c] + 1
                queue.append((nr, nc))
    return dist


def next_cell_table(maze_map: MazeMap) -> np.ndarray:
    """The first step of a shortest path for every (goal, current) pair of free cells.

    Returns:
        int64 array (F, F): entry ``[g, c]`` is the index (into :func:`free_cells`) of the
        neighbour of cell ``c`` that is one step closer to goal ``g``; ``c`` itself when
        ``c == g``. Ties are broken by the fixed move order up, down, left, right.
    """
    cells = free_cells(maze_map)
    layout = np.asarray(maze_map)
    index = np.full(layout.shape, -1, dtype=np.int64)
    index[cells[:, 0], cells[:, 1]] = np.arange(len(cells))
    table = np.empty((len(cells), len(cells)), dtype=np.int64)
    for g, goal in enumerate(cells):
        dist = grid_distances(layout, goal)
        for c, (r, col) in enumerate(cells):
            if dist[r, col] <= 0:
                # The goal itself, or a cell cut off from it (no such cell in the benchmark mazes).
                table[g, c] = c
                continue
            for dr, dc in _MOVES:
                nr, nc = r + dr, col + dc
                if 0 <= nr < layout.shape[0] and 0 <= nc < layout.shape[1] and dist[nr, nc] == dist[r, col] - 1:
                    table[g, c] = index[nr, nc]
                    break
    return table


@dataclasses.dataclass(frozen=True)
class MazeGeometry:
    """Conversions between maze cells and the environment's (x, y) frame (metres).

    gymnasium-robotics centres the maze on the origin with unit cells: the centre of cell
    (row, column) is ``x = column + 0.5 - W/2``, ``y = H/2 - row - 0.5`` for a layout of H rows
    and W columns.
    """

    maze_map: tuple[tuple[int, ...], ...]

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.maze_map), len(self.maze_map[0])

    def cell_center(self, cells: np.ndarray) -> np.ndarray:
        """Centres of cells (..., 2) as (row, column) -> (x, y) float64 (..., 2)."""
        cells = np.asarray(cells)
        h, w = self.shape
        return np.stack([cells[..., 1] + 0.5 - w / 2.0, h / 2.0 - cells[..., 0] - 0.5], axis=-1).astype(np.float64)

    def cell_of(self, xy: np.ndarray) -> np.ndarray:
        """The (row, column) containing each position (..., 2) -> int64 (..., 2) (may be a wall)."""
        xy = np.asarray(xy, dtype=np.float64)
        h, w = self.shape
        row = np.floor(h / 2.0 - xy[..., 1]).astype(np.int64)
        col = np.floor(xy[..., 0] + w / 2.0).astype(np.int64)
        return np.stack([np.clip(row, 0, h - 1), np.clip(col, 0, w - 1)], axis=-1)

    def extent(self) -> tuple[float, float, float, float]:
        """``(x_min, x_max, y_min, y_max)`` of the whole layout, walls included."""
        h, w = self.shape
        return -w / 2.0, w / 2.0, -h / 2.0, h / 2.0


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
    """Generate a maze navigation dataset in the real simulator.

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

    from ..envs import make_env, simulator_core

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
