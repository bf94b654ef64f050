"""Loading real D4RL (hdf5) and Minari datasets, and writing D4RL-style hdf5 files.

Users who have D4RL's ``.hdf5`` files (e.g. ``maze2d-umaze-sparse-v1.hdf5``,
``hopper-medium-v2.hdf5``) or locally installed Minari datasets can run every experiment on them
instead of the generated data. Dimensions are checked against the environment.

Maze coordinates: D4RL's maze2d places cell (row, column) at ``(x, y) = (row, column)``, whereas
the environments here (gymnasium-robotics) centre the maze on the origin with
``x = column + 0.5 - W/2`` and ``y = H/2 - row - 0.5``. Pass ``maze_frame="d4rl"`` to convert
positions, velocities and actions of a D4RL maze2d file into the package's frame (a rotation by
90 degrees plus a shift).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..envs import D4RL_BALL_BODY, D4RL_CELL_OFFSET, D4RL_FRAME_SHIFT, get_spec  # noqa: F401 (re-exported)
from ..utils import check_choice
from .format import REQUIRED_KEYS, as_float32, validate_dataset

MAZE_FRAMES = ("env", "d4rl")


def _import_h5py():
    try:
        import h5py
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ImportError("reading or writing hdf5 files needs h5py: pip install 'opcc_edu[data]'") from exc
    return h5py


def save_d4rl_hdf5(path: str | os.PathLike, data: Mapping[str, np.ndarray]) -> None:
    """Write a dataset as a D4RL-style hdf5 file (keys as datasets, ``infos/...`` as a group)."""
    h5py = _import_h5py()
    with h5py.File(path, "w") as handle:
        for key, value in data.items():
            handle.create_dataset(key, data=np.asarray(value), compression="gzip")


def _read_hdf5(path: str | os.PathLike) -> dict[str, np.ndarray]:
    h5py = _import_h5py()
    out: dict[str, np.ndarray] = {}
    with h5py.File(path, "r") as handle:

        def visit(name: str, node: Any) -> None:
            if isinstance(node, h5py.Dataset) and node.shape and len(node.shape) >= 1:
                out[name] = node[()]

        handle.visititems(visit)
    return out


def _fill_next_observations(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Derive ``next_observations`` from ``observations[t + 1]`` where it is known.

    Older D4RL files (maze2d among them) store no next observation. Inside an episode it is the
    next row; at an episode's last transition it is unknown, so those transitions are dropped
    (terminal transitions stay only when the file has ``next_observations``).
    """
    obs = data["observations"]
    done = np.asarray(data["terminals"], bool) | np.asarray(data["timeouts"], bool)
    keep = ~done
    keep[-1] = False
    idx = np.flatnonzero(keep)
    out = {key: np.asarray(value)[idx] for key, value in data.items()}
    out["next_observations"] = obs[idx + 1]
    # The row after a dropped boundary starts a new episode: mark the end of each kept run.
    ends = np.flatnonzero(np.diff(idx) != 1)
    out["timeouts"] = np.zeros(idx.size, bool)
    out["timeouts"][ends] = True
    if idx.size:
        out["timeouts"][-1] = True
    out["terminals"] = np.zeros(idx.size, bool)
    return out


def d4rl_maze_to_env_frame(data: Mapping[str, np.ndarray], env_name: str) -> dict[str, np.ndarray]:
    """Convert a D4RL maze2d dataset's coordinates into this package's maze frame.

    D4RL (``d4rl/pointmaze/maze_model.py``) puts the ball's body at world (1.2, 1.2) and the wall
    of layout cell (row, column) at world (row + 1, column + 1); its observations are the ball's
    slide-joint positions, measured from the body. So the centre of cell (row, column) is observed
    at ``(row - 0.2, column - 0.2)``, and an observed position ``(x, y)`` lies at fractional cell
    ``(row, column) = (x + 0.2, y + 0.2)``. Here the centre of that cell is
    ``x = column + 0.5 - W/2``, ``y = H/2 - row - 0.5``. Velocities and actions (forces along x
    and y) rotate the same way, without the shift: ``(vx, vy) -> (vy, -vx)``. ``infos/goal`` holds
    D4RL's target, a point in observed coordinates (the rewarded disc is centred there, 0.28 from
    the goal cell's centre), and is converted like a position.
    """
    spec = get_spec(env_name)
    if not spec.is_maze:
        raise ValueError(f"env_name must be a maze for a maze-frame conversion, got {env_name!r}")
    h, w = len(spec.maze_map), len(spec.maze_map[0])

    def position(xy: np.ndarray) -> np.ndarray:
        row, column = xy[:, 0] + D4RL_FRAME_SHIFT, xy[:, 1] + D4RL_FRAME_SHIFT
        return np.stack([column + 0.5 - w / 2.0, h / 2.0 - row - 0.5], axis=1)

    def obs_convert(obs: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs)
        out = np.empty_like(obs)
        out[:, :2] = position(obs[:, :2].astype(np.float64))
        out[:, 2] = obs[:, 3]
        out[:, 3] = -obs[:, 2]
        return out

    out = dict(data)
    for key in ("observations", "next_observations"):
        if key in out:
            out[key] = obs_convert(out[key])
    actions = np.asarray(out["actions"])
    out["actions"] = np.stack([actions[:, 1], -actions[:, 0]], axis=1).astype(actions.dtype)
    if "infos/qpos" in out and "infos/qvel" in out:
        state = obs_convert(np.concatenate([out["infos/qpos"], out["infos/qvel"]], axis=1))
        out["infos/qpos"], out["infos/qvel"] = state[:, :2], state[:, 2:]
    if "infos/goal" in out:
        goal = np.asarray(out["infos/goal"])
        out["infos/goal"] = position(goal.astype(np.float64)).astype(goal.dtype)
    return out


def load_d4rl_hdf5(path: str | os.PathLike, env_name: str, maze_frame: str = "env") -> dict[str, np.ndarray]:
    """Load a D4RL ``.hdf5`` file into the package's format.

    Args:
        path: the file.
        env_name: environment the data belongs to; observation and action sizes must match.
        maze_frame: ``"env"`` if maze coordinates are already in this package's frame (files
            written by :func:`save_d4rl_hdf5`), ``"d4rl"`` for original D4RL maze2d files.

    Returns:
        A D4RL-format dict (float32 floats, bool flags), keeping the file's ``infos/qpos``,
        ``infos/qvel`` and ``infos/goal`` when present. ``next_observations`` is derived when the
        file lacks it (see :func:`_fill_next_observations`).

    Raises:
        ValueError: missing keys, or sizes that do not match ``env_name``.
    """
    check_choice(maze_frame, MAZE_FRAMES, "maze_frame")
    raw = _read_hdf5(path)
    if "timeouts" not in raw and "observations" in raw:
        raw["timeouts"] = np.zeros(len(raw["observations"]), bool)
    needed = [k for k in REQUIRED_KEYS if k != "next_observations" and k not in raw]
    if needed:
        raise ValueError(f"{path} is missing keys {needed}; a D4RL file holds {', '.join(REQUIRED_KEYS)}")
    keep = ("infos/qpos", "infos/qvel", "infos/goal")
    data = {k: v for k, v in raw.items() if k in REQUIRED_KEYS or k in keep}
    data["rewards"] = np.asarray(data["rewards"]).reshape(-1)
    data["terminals"] = np.asarray(data["terminals"]).reshape(-1).astype(bool)
    data["timeouts"] = np.asarray(data["timeouts"]).reshape(-1).astype(bool)
    if "next_observations" not in data:
        data = _fill_next_observations(data)
    if maze_frame == "d4rl":
        data = d4rl_maze_to_env_frame(data, env_name)
    data = as_float32(data)
    validate_dataset(data, env_name)
    return data


def _minari_module():
    try:
        import minari
    except ImportError as exc:
        raise ImportError(
            "loading Minari datasets needs the optional package minari: pip install minari "
            "(then download a dataset with `minari download <dataset id>`)"
        ) from exc
    return minari


def _flat_observation(obs: Any) -> np.ndarray:
    # Minari's maze datasets store dict observations; the agent's own state is "observation".
    if isinstance(obs, Mapping):
        if "observation" not in obs:
            raise ValueError(f"dict observations without an 'observation' entry (keys {sorted(obs)})")
        obs = obs["observation"]
    return np.asarray(obs)


def load_minari(dataset_id: str, env_name: str, download: bool = False) -> dict[str, np.ndarray]:
    """Load a local Minari dataset (e.g. ``"mujoco/hopper/medium-v0"``) in D4RL format.

    Minari (optional; imported only here) stores whole episodes with T + 1 observations each;
    they are cut into transitions, ``terminals`` from its terminations and ``timeouts`` from its
    truncations (and at the end of each episode otherwise). Minari's maze datasets use the same
    frame as this package (gymnasium-robotics). ``infos/qpos``/``infos/qvel`` are not filled.

    Args:
        dataset_id: Minari dataset id.
        env_name: environment whose sizes the data must match.
        download: let Minari download the dataset if it is not local (needs the internet).

    Raises:
        ImportError: minari is not installed (with the command that installs it).
        ValueError: sizes that do not match ``env_name``.
    """
    minari = _minari_module()
    get_spec(env_name)
    dataset = minari.load_dataset(dataset_id, download=download)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in REQUIRED_KEYS}
    for episode in dataset.iterate_episodes():
        obs = _flat_observation(episode.observations)
        actions = np.asarray(episode.actions)
        n = actions.shape[0]
        if obs.shape[0] != n + 1:
            raise ValueError(f"Minari episode with {n} actions has {obs.shape[0]} observations, expected {n + 1}")
        terminals = np.asarray(episode.terminations, bool).reshape(n)
        timeouts = np.asarray(episode.truncations, bool).reshape(n) & ~terminals
        if n and not terminals[-1]:
            timeouts[-1] = True
        parts["observations"].append(obs[:-1])
        parts["next_observations"].append(obs[1:])
        parts["actions"].append(actions.reshape(n, -1))
        parts["rewards"].append(np.asarray(episode.rewards).reshape(n))
        parts["terminals"].append(terminals)
        parts["timeouts"].append(timeouts)
    if not parts["observations"]:
        raise ValueError(f"Minari dataset {dataset_id!r} holds no episodes")
    data = as_float32({key: np.concatenate(values) for key, values in parts.items()})
    validate_dataset(data, env_name)
    return data
