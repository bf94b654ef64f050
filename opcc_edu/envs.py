"""The seven OPCC environments on gymnasium + MuJoCo, one registry and one factory.

The OPCC benchmark (paper Table 8) uses four maze2d point-mass mazes and three locomotion
tasks. The original was built on gym, mujoco-py and d4rl, none of which install on current
Python. Here:

* ``maze2d-open``, ``maze2d-umaze``, ``maze2d-medium``, ``maze2d-large`` are gymnasium-robotics
  ``PointMaze`` v3 point masses (the maintained port of D4RL's maze2d) wrapped by
  :class:`MazeEnv`: a *fixed* goal cell per maze (the D4RL goal cells), a sparse reward of 1
  for every step whose resulting position lies within 0.5 of the goal, no termination, the
  observation ``[x, y, vx, vy]`` and the episode limits of Table 8 (150, 300, 600, 800).
  Deviation from D4RL: coordinates are those of gymnasium-robotics (the maze is centred on the
  origin, one cell is one unit), and the goal is the exact centre of its cell; each maze's
  ``<maze>-d4rl-goal`` variant (:func:`d4rl_goal_env`) rewards around D4RL's goal point instead.
* ``halfcheetah``, ``hopper`` and ``walker2d`` are gymnasium's v5 MuJoCo tasks (1000 steps).

Every environment's full simulator state is ``concat(qpos, qvel)``. :func:`get_state` and
:func:`set_state` capture and restore it; restoring also clears MuJoCo's solver warm start, so
that stepping from a restored state is a deterministic function of that state alone.

Termination functions for learned-model rollouts (:data:`TERMINATION_FNS`) are pure batched
torch functions of next observations, chosen by name.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import sys
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .utils import check_choice

if TYPE_CHECKING:
    import gymnasium as gym
    import mujoco


# D4RL's maze layouts as gymnasium-robotics maps (1 = wall, 0 = free), rows top to bottom.
def _layout(rows: str) -> list[list[int]]:
    return [[int(cell) for cell in row] for row in rows.split()]


OPEN_MAP = _layout("1111111 1000001 1000001 1000001 1111111")
UMAZE_MAP = _layout("11111 10001 11101 10001 11111")
MEDIUM_MAP = _layout("11111111 10011001 10010001 11000111 10010001 10100101 10001001 11111111")
LARGE_MAP = _layout(
    "111111111111 100001000001 101101010101 100000010001 101111011101 "
    "100101000001 110101010111 100100010001 111111111111"
)

GOAL_RADIUS = 0.5
"""A maze step is rewarded when the ball ends it within this distance of the goal (D4RL)."""
MAZE_RESET_NOISE = 0.25
"""Uniform noise (per axis) around a free cell's centre for maze start positions."""
MAZE_MAX_SPEED = 5.0
"""PointMaze clips each velocity component to this bound before every step."""
#: Where D4RL's maze2d puts the ball's body in the world (``maze_model.py``: ``pos=[1.2, 1.2, 0]``);
#: its observations are the slide joints' positions, measured from there.
D4RL_BALL_BODY = 1.2
#: Where D4RL puts the wall box of layout cell (row, column): world ``(row + 1, column + 1)``.
D4RL_CELL_OFFSET = 1.0
#: Observed D4RL coordinates of cell (row, column)'s centre are ``(row, column) - D4RL_FRAME_SHIFT``.
D4RL_FRAME_SHIFT = D4RL_BALL_BODY - D4RL_CELL_OFFSET
D4RL_GOAL_SUFFIX = "-d4rl-goal"  # names a maze's variant rewarded around D4RL's goal point, centre + (0.2, -0.2)


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """Static facts about one benchmark environment (paper Table 8)."""

    name: str
    """Registry name, e.g. ``"maze2d-umaze"``."""
    kind: str
    """``"maze"`` or ``"locomotion"``."""
    obs_dim: int
    """Observation size D."""
    act_dim: int
    """Action size A (actions lie in [-1, 1]^A for every environment here)."""
    max_episode_steps: int
    """Episode limit used for data collection and policy evaluation."""
    termination: str
    """Name of the predefined termination function in :data:`TERMINATION_FNS`."""
    gym_id: str | None = None
    """gymnasium id for locomotion tasks."""
    maze_map: tuple[tuple[int, ...], ...] | None = None
    """Maze layout (1 = wall) for maze tasks."""
    goal_cell: tuple[int, int] | None = None
    """(row, column) of the fixed goal cell for maze tasks."""
    goal_shift: tuple[float, float] = (0.0, 0.0)
    """Offset (x, y) of the rewarded point from the goal cell's centre (D4RL's for variants)."""

    @property
    def is_maze(self) -> bool:
        return self.kind == "maze"

    @property
    def goal_xy(self) -> np.ndarray:
        """The rewarded point (x, y) of a maze, :attr:`MazeEnv.goal`: goal cell centre + ``goal_shift``."""
        return MazeGeometry(self.maze_map).cell_center(np.asarray(self.goal_cell)) + self.goal_shift


def _maze(name: str, layout: list[list[int]], goal: tuple[int, int], steps: int) -> EnvSpec:
    return EnvSpec(name, "maze", 4, 2, steps, "none", maze_map=tuple(map(tuple, layout)), goal_cell=goal)


ENV_SPECS: dict[str, EnvSpec] = {
    spec.name: spec
    for spec in (
        _maze("maze2d-open", OPEN_MAP, (2, 3), 150),
        _maze("maze2d-umaze", UMAZE_MAP, (1, 1), 300),
        _maze("maze2d-medium", MEDIUM_MAP, (6, 6), 600),
        _maze("maze2d-large", LARGE_MAP, (7, 9), 800),
        EnvSpec("halfcheetah", "locomotion", 17, 6, 1000, "none", gym_id="HalfCheetah-v5"),
        EnvSpec("hopper", "locomotion", 11, 3, 1000, "hopper", gym_id="Hopper-v5"),
        EnvSpec("walker2d", "locomotion", 17, 6, 1000, "walker2d", gym_id="Walker2d-v5"),
    )
}
ENV_NAMES: tuple[str, ...] = tuple(ENV_SPECS)
MAZE_NAMES: tuple[str, ...] = tuple(n for n, s in ENV_SPECS.items() if s.is_maze)
LOCOMOTION_NAMES: tuple[str, ...] = tuple(n for n, s in ENV_SPECS.items() if not s.is_maze)
DEFAULT_ENV = "maze2d-umaze"


def get_spec(name: str | EnvSpec) -> EnvSpec:
    """The :class:`EnvSpec` of an environment or a maze's ``-d4rl-goal`` variant; ValueError lists valid names.

    The one lookup of a name. A spec is returned as it is: a caller that resolved the
    environment once (:func:`opcc_edu.task.resolve_task`) hands the spec down, and nothing below
    looks the name up again.
    """
    if isinstance(name, EnvSpec):
        return name
    base = name.removesuffix(D4RL_GOAL_SUFFIX) if isinstance(name, str) else name
    if base != name and base in MAZE_NAMES:
        return d4rl_goal_spec(ENV_SPECS[base])
    if name not in ENV_NAMES:
        raise ValueError(f"unknown environment {name!r}; valid choices: {', '.join(ENV_NAMES)}, <maze>-d4rl-goal")
    return ENV_SPECS[name]


def d4rl_goal_spec(spec: EnvSpec) -> EnvSpec:
    """The spec of a maze's variant rewarded around D4RL's goal point (``<maze>-d4rl-goal``)."""
    check_choice(spec.name, MAZE_NAMES, "name (a maze)")
    shift = (D4RL_FRAME_SHIFT, -D4RL_FRAME_SHIFT)
    return dataclasses.replace(spec, name=spec.name + D4RL_GOAL_SUFFIX, goal_shift=shift)


def d4rl_goal_env(name: str) -> str:
    """The variant of maze ``name`` rewarded around D4RL's goal point (``<maze>-d4rl-goal``)."""
    return check_choice(name, MAZE_NAMES, "name (a maze)") + D4RL_GOAL_SUFFIX


def base_env_name(name: str | EnvSpec) -> str:
    """The maze a ``-d4rl-goal`` variant is built on; any other valid name unchanged."""
    return get_spec(name).name.removesuffix(D4RL_GOAL_SUFFIX)


def base_spec(env: str | EnvSpec) -> EnvSpec:
    """The spec of :func:`base_env_name`: a variant's maze, any other environment itself."""
    spec = get_spec(env)
    return ENV_SPECS[base_env_name(spec)] if spec.name.endswith(D4RL_GOAL_SUFFIX) else spec


# --------------------------------------------------------------------------------------------
# Maze environment
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _without_settotalmass_notice() -> Iterator[None]:
    """Drop MuJoCo's deprecation notice about the ``settotalmass`` compiler attribute.

    gymnasium's HalfCheetah-v5 model sets that attribute, so compiling it makes MuJoCo print the
    notice to the process's standard output (which notebooks capture) and append it to
    ``MUJOCO_LOG.TXT`` in the working folder. While the model is built, MuJoCo's warning
    handler skips exactly that message; any other warning goes to the handler installed before,
    or, when there is none, becomes a Python ``RuntimeWarning``.
    """
    import mujoco

    previous = mujoco.get_mju_user_warning()

    def handler(message: str) -> None:
        if "settotalmass" in message:
            return
        if previous is not None:
            previous(message)
            return
        try:
            warnings.warn(f"MuJoCo: {message}", RuntimeWarning, stacklevel=2)
        except Exception:  # an exception must not cross MuJoCo's C callback
            print(f"WARNING: {message}", file=sys.stderr)

    mujoco.set_mju_user_warning(handler)
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)


def _point_maze_class():
    """Import PointMaze quietly: gymnasium-robotics prints an unrelated notice (about its Adroit
    hand tasks) to stderr on import, which would clutter every notebook."""
    import io

    with contextlib.redirect_stderr(io.StringIO()):
        from gymnasium_robotics.envs.maze.point_maze import PointMazeEnv
    return PointMazeEnv


def _remove_maze_xml(path: str | None) -> None:
    """Delete the temporary XML file gymnasium-robotics wrote for a maze (named ``ant_maze*.xml``)."""
    if path and os.path.basename(path).startswith("ant_maze") and path.endswith(".xml"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


class _MazeTask:
    """A D4RL-style maze2d task on gymnasium-robotics' PointMaze: the body of :class:`MazeEnv`.

    Observation ``[x, y, vx, vy]`` (float64), action ``[fx, fy]`` in [-1, 1]^2, reward 1 for a
    step that ends within :data:`GOAL_RADIUS` of the fixed goal, never terminates. Created by
    :func:`make_env` (registered with gymnasium as ``opcc_edu/<name>-v0``), which adds the
    episode limit of Table 8.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}

    def __init__(self, env_name: str = "maze2d-umaze", render_mode: str | None = None):
        import gymnasium as gym

        spec = get_spec(env_name)
        PointMazeEnv = _point_maze_class()
        if not spec.is_maze:
            raise ValueError(f"env_name must be a maze; valid choices: {', '.join(MAZE_NAMES)}")
        layout = [list(row) for row in spec.maze_map]
        self.env_spec = spec
        # PointMaze writes the maze's MuJoCo XML to the system temp folder and never removes
        # it; the model is compiled in the constructor, so the file is deleted right after
        # (also when the constructor fails).
        inner = PointMazeEnv.__new__(PointMazeEnv)
        try:
            inner.__init__(maze_map=layout, render_mode=render_mode, continuing_task=True, reset_target=False)
        finally:
            _remove_maze_xml(getattr(inner, "tmp_xml_file_path", None))
        self._inner = inner
        self.point_env = self._inner.point_env
        self.model = self.point_env.model
        self.data = self.point_env.data
        self.maze = self._inner.maze
        self.goal = spec.goal_xy  # the goal cell's centre (maze.cell_rowcol_to_xy) + goal_shift
        self._inner.goal = self.goal.copy()
        self._inner.update_target_site_pos()
        rows, cols = np.nonzero(np.asarray(layout) == 0)
        self.free_cells = np.stack([rows, cols], axis=1)
        self.free_cell_centers = np.stack([self.maze.cell_rowcol_to_xy(c) for c in self.free_cells])
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(4,), dtype=np.float64)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self.render_mode = render_mode
        self.dt = float(self.point_env.dt)

    def reward(self, xy: np.ndarray) -> np.ndarray:
        """Sparse reward for positions ``xy`` of shape (..., 2)."""
        return (np.linalg.norm(np.asarray(xy) - self.goal, axis=-1) <= GOAL_RADIUS).astype(np.float64)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        if "state" in options:
            set_state(self, options["state"])
        else:
            cell = self.free_cell_centers[self.np_random.integers(len(self.free_cell_centers))]
            xy = cell + self.np_random.uniform(-MAZE_RESET_NOISE, MAZE_RESET_NOISE, size=2)
            set_state(self, np.concatenate([xy, np.zeros(2)]))
        return self._obs(), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, _, _, _, info = self.point_env.step(np.asarray(action, dtype=np.float64))
        reward = float(self.reward(obs[:2]))
        info = dict(info, success=bool(reward > 0))
        return obs.copy(), reward, False, False, info

    def _obs(self) -> np.ndarray:
        return np.concatenate([self.data.qpos, self.data.qvel]).astype(np.float64)

    def render(self) -> np.ndarray | None:
        return self.point_env.render()

    def close(self) -> None:
        self._inner.close()

    @property
    def core(self) -> _MazeTask:
        """The object holding ``model`` and ``data`` (the env itself)."""
        return self


@functools.cache
def _maze_env_class() -> type:
    """``MazeEnv``: :class:`_MazeTask` as a ``gymnasium.Env``, made on first use (PEP 562), so that
    importing this module (and :mod:`opcc_edu.queries`, :mod:`opcc_edu.datasets`) loads no gymnasium."""
    import gymnasium as gym

    return type("MazeEnv", (_MazeTask, gym.Env), {"__doc__": _MazeTask.__doc__, "__module__": __name__})


def __getattr__(name: str) -> Any:
    if name == "MazeEnv":
        return _maze_env_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def gym_id(name: str) -> str:
    """The gymnasium id of a benchmark environment (mazes are registered by this package)."""
    spec = get_spec(name)
    return f"opcc_edu/{spec.name}-v0" if spec.is_maze else spec.gym_id


def make_env(
    name: str, seed: int | None = None, render_mode: str | None = None, max_episode_steps: int | None = None
) -> gym.Env:
    """Create a benchmark environment as a ``gymnasium.Env`` with its episode limit.

    Args:
        name: one of :data:`ENV_NAMES`.
        seed: if given, the environment is reset once with this seed (and its action space
            seeded), so the first observation is reproducible.
        render_mode: ``None`` or ``"rgb_array"`` (MuJoCo rendering, e.g. ``MUJOCO_GL=egl``).
        max_episode_steps: override the Table 8 episode limit.

    Returns:
        A gymnasium environment. ``env.unwrapped`` exposes ``model`` and ``data`` (MuJoCo).
    """
    import gymnasium as gym

    spec = get_spec(name)
    limit = spec.max_episode_steps if max_episode_steps is None else int(max_episode_steps)
    for maze in map(get_spec, MAZE_NAMES + tuple(map(d4rl_goal_env, MAZE_NAMES))):
        if gym_id(maze.name) not in gym.registry:
            entry, kwargs = "opcc_edu.envs:MazeEnv", {"env_name": maze.name}
            gym.register(gym_id(maze.name), entry, max_episode_steps=maze.max_episode_steps, kwargs=kwargs)
    with _without_settotalmass_notice():
        env = gym.make(gym_id(name), render_mode=render_mode, max_episode_steps=limit)
    if seed is not None:
        env.reset(seed=int(seed))
        env.action_space.seed(int(seed))
    return env


def simulator_core(env: gym.Env) -> Any:
    """The object holding ``model``/``data`` of an environment made by :func:`make_env`: MazeEnv or the MuJoCo env."""
    return env.unwrapped


def mujoco_handles(env: gym.Env) -> tuple[mujoco.MjModel, mujoco.MjData]:
    """``(model, data)`` of an environment made by :func:`make_env`."""
    core = simulator_core(env)
    return core.model, core.data


def get_state(env: gym.Env) -> np.ndarray:
    """Full simulator state ``concat(qpos, qvel)`` (float64, a copy)."""
    _, data = mujoco_handles(env)
    return np.concatenate([data.qpos, data.qvel]).astype(np.float64)


def restore_mjdata(model: mujoco.MjModel, data: mujoco.MjData, state: np.ndarray) -> None:
    """Restore ``concat(qpos, qvel)`` into MuJoCo ``data`` deterministically.

    Besides positions and velocities, the controls, actuator activations and the constraint
    solver's warm start are cleared, so later steps depend on ``state`` alone; then
    ``mj_forward`` recomputes every derived quantity.
    """
    import mujoco

    state = np.asarray(state, dtype=np.float64)
    if state.shape != (model.nq + model.nv,):
        raise ValueError(f"state must have shape ({model.nq + model.nv},), got {state.shape}")
    data.qpos[:] = state[: model.nq]
    data.qvel[:] = state[model.nq :]
    data.ctrl[:] = 0.0
    if model.na:
        data.act[:] = 0.0
    data.qacc_warmstart[:] = 0.0
    data.time = 0.0
    mujoco.mj_forward(model, data)


def set_state(env: gym.Env, state: np.ndarray) -> np.ndarray:
    """Restore a state from :func:`get_state` and return the matching observation."""
    model, data = mujoco_handles(env)
    restore_mjdata(model, data, state)
    return observation(env)


def observation(env: gym.Env) -> np.ndarray:
    """The current observation of an environment, computed from its simulator state."""
    core = simulator_core(env)
    if isinstance(core, _MazeTask):
        return core._obs()
    return np.asarray(core._get_obs(), dtype=np.float64)


# --------------------------------------------------------------------------------------------
# Predefined termination functions for model rollouts (batched, torch)
# --------------------------------------------------------------------------------------------


HEALTH_LIMITS: dict[str, tuple[tuple[int, float | None, float | None], ...]] = {
    "none": (),
    "hopper": ((0, 0.7, None), (1, -0.2, 0.2)),
    "walker2d": ((0, 0.8, 2.0), (1, -1.0, 1.0)),
}
"""The health limits the predefined termination functions check, by termination name:
``(observation index, low, high)`` (None: no limit on that side) for the height (index 0) and
the torso angle (index 1); a state on or beyond a limit ends the episode. Hopper's further
check, ``|obs[1:]| < 100`` (a diverged state), is not listed: it is not a body's fall. The
``"health"`` clip box of a model (:data:`opcc_edu.dynamics.spec.CLIP_BOXES`) reaches these
limits, so that every fall the rule defines can happen in a clipped rollout."""


def health_limits(env_name: str | EnvSpec) -> tuple[tuple[int, float | None, float | None], ...]:
    """The :data:`HEALTH_LIMITS` of an environment's termination rule (empty: it never ends)."""
    return HEALTH_LIMITS[get_spec(env_name).termination]


def _no_termination(next_obs):
    """Never terminates: ``next_obs`` (..., D) -> bool (...)."""
    import torch

    return torch.zeros(next_obs.shape[:-1], dtype=torch.bool, device=next_obs.device)


def _hopper_termination(next_obs):
    """Hopper-v5 health check on observations (..., 11) -> done (...).

    Healthy when every entry is finite, ``|obs[1:]| < 100``, height ``obs[0] > 0.7`` and
    torso angle ``|obs[1]| < 0.2``; done is the negation.
    """
    import torch

    (height_low, _), (angle_low, angle_high) = (lim[1:] for lim in HEALTH_LIMITS["hopper"])
    height, angle = next_obs[..., 0], next_obs[..., 1]
    healthy = (
        torch.isfinite(next_obs).all(dim=-1)
        & (next_obs[..., 1:].abs() < 100.0).all(dim=-1)
        & (height > height_low)
        & (angle > angle_low)
        & (angle < angle_high)
    )
    return ~healthy


def _walker2d_termination(next_obs):
    """Walker2d-v5 health check on observations (..., 17) -> done (...).

    Healthy when every entry is finite, height ``0.8 < obs[0] < 2.0`` and
    ``-1 < obs[1] < 1``; done is the negation.
    """
    import torch

    (height_low, height_high), (angle_low, angle_high) = (lim[1:] for lim in HEALTH_LIMITS["walker2d"])
    height, angle = next_obs[..., 0], next_obs[..., 1]
    healthy = (
        torch.isfinite(next_obs).all(dim=-1)
        & (height > height_low)
        & (height < height_high)
        & (angle > angle_low)
        & (angle < angle_high)
    )
    return ~healthy


TERMINATION_FNS: dict[str, Callable] = {
    "none": _no_termination,
    "hopper": _hopper_termination,
    "walker2d": _walker2d_termination,
}


def termination_fn(env_name: str | EnvSpec) -> Callable:
    """The predefined termination function of an environment: ``next_obs (..., D) -> done (...)``."""
    return TERMINATION_FNS[get_spec(env_name).termination]


# --------------------------------------------------------------------------------------------
# Maze geometry: cells, shortest paths and the (x, y) frame
# --------------------------------------------------------------------------------------------
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
