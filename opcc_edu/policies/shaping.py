"""Reward shaping for the mazes: the dense training reward is minus a distance along the maze.

Mazes train on a dense reward, minus the shortest-path distance through free cells from the ball
to the goal (:class:`MazeDistance`), and are evaluated on the benchmark's sparse reward. A
straight-line distance would pull the ball into walls (the U-maze's goal is behind one).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..envs import get_spec, make_env

_STEPS = ((1, 0), (-1, 0), (0, 1), (0, -1))
"""The 4-connected neighbourhood of a maze cell."""


def _cell_distances(free: np.ndarray, goal_cell: tuple[int, int]) -> np.ndarray:
    """Breadth-first distance (in cells) from every free cell to ``goal_cell``; inf elsewhere."""
    rows, cols = free.shape
    dist = np.full(free.shape, np.inf)
    gr, gc = goal_cell
    dist[gr, gc] = 0.0
    queue = deque([(gr, gc)])
    while queue:
        r, c = queue.popleft()
        for dr, dc in _STEPS:
            nr, nc = r + dr, c + dc
            if 0 <= nr < rows and 0 <= nc < cols and free[nr, nc] and dist[nr, nc] == np.inf:
                dist[nr, nc] = dist[r, c] + 1.0
                queue.append((nr, nc))
    return dist


class MazeDistance:
    """Shortest-path distance to a maze's goal through free cells (the dense training reward).

    Cell-to-goal distances come from a breadth-first search over 4-connected free cells (one
    cell is one unit). A position inside cell c is ``min over c' in {c} + free neighbours of c
    of ||xy - centre(c')|| + dist(c')``: the straight-line distance within the goal's cell and
    an estimate that follows corridors elsewhere.

    Args:
        env_name: a maze name.
    """

    def __init__(self, env_name: str):
        spec = get_spec(env_name)
        if not spec.is_maze:
            raise ValueError(f"env_name must be a maze, got {env_name!r}")
        env = make_env(env_name)
        core = env.unwrapped
        self.maze = core.maze
        self.goal = np.asarray(core.goal, dtype=np.float64)
        env.close()
        layout = np.asarray(spec.maze_map)
        self.rows, self.cols = layout.shape
        self.free = layout == 0
        self.cell_distance = _cell_distances(self.free, spec.goal_cell)
        self.centers = {
            (r, c): np.asarray(self.maze.cell_rowcol_to_xy(np.array([r, c])), dtype=np.float64)
            for r in range(self.rows)
            for c in range(self.cols)
        }

    def __call__(self, xy: np.ndarray) -> float:
        """Distance (m) from position ``xy`` (2,) to the goal along the maze."""
        xy = np.asarray(xy, dtype=np.float64)
        if np.linalg.norm(xy - self.goal) <= 0.5 + 1e-12:
            return float(np.linalg.norm(xy - self.goal))
        r, c = (int(v) for v in self.maze.cell_xy_to_rowcol(xy))
        best = np.inf
        for dr, dc in ((0, 0), *_STEPS):
            nr, nc = r + dr, c + dc
            if 0 <= nr < self.rows and 0 <= nc < self.cols and self.free[nr, nc]:
                best = min(best, float(np.linalg.norm(xy - self.centers[(nr, nc)])) + self.cell_distance[nr, nc])
        if not np.isfinite(best):  # outside the grid (never for a valid state): fall back to a straight line
            best = float(np.linalg.norm(xy - self.goal))
        return best
