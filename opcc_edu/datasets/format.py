"""The D4RL data format: validation, episodes, summaries, slicing and concatenation.

A dataset is a ``dict[str, numpy.ndarray]`` with T transitions, exactly as D4RL hands them out
(``d4rl.qlearning_dataset`` style, i.e. with ``next_observations``):

===========================  ===========  =========================================================
key                          shape        meaning
===========================  ===========  =========================================================
``observations``             (T, D) f32   observation before the step
``actions``                  (T, A) f32   action taken, in [-1, 1]^A
``rewards``                  (T,)   f32   reward of the step
``next_observations``        (T, D) f32   observation after the step
``terminals``                (T,)   bool  the environment terminated (next state is absorbing)
``timeouts``                 (T,)   bool  the episode was cut here without termination
``infos/qpos``               (T, nq) f32  simulator positions before the step
``infos/qvel``               (T, nv) f32  simulator velocities before the step
``infos/goal``               (T, 2) f32   (mazes only) the navigation controller's current target
===========================  ===========  =========================================================

An *episode* is a maximal run of transitions that ends at a terminal, a timeout, or the end of
the arrays; inside an episode ``next_observations[t] == observations[t + 1]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from ..envs import EnvSpec, get_spec

REQUIRED_KEYS: tuple[str, ...] = (
    "observations",
    "actions",
    "rewards",
    "next_observations",
    "terminals",
    "timeouts",
)
"""Keys every dataset carries."""
INFO_KEYS: tuple[str, ...] = ("infos/qpos", "infos/qvel")
"""Simulator-state keys carried by every generated dataset (optional for loaded files)."""
OPTIONAL_KEYS: tuple[str, ...] = ("infos/goal",)
"""Extra keys some datasets carry."""

_FLOAT_KEYS = ("observations", "actions", "rewards", "next_observations", *INFO_KEYS, *OPTIONAL_KEYS)
_BOOL_KEYS = ("terminals", "timeouts")


@dataclasses.dataclass(frozen=True)
class DatasetSummary:
    """Summary statistics of one dataset (what ``opcc-edu info`` prints)."""

    transitions: int
    """Number of transitions T."""
    episodes: int
    """Number of episodes (split at terminals, timeouts and the end of the arrays)."""
    terminals: int
    """Number of terminal transitions."""
    mean_episode_return: float
    """Mean undiscounted return over all episodes (partial ones included)."""
    max_episode_return: float
    """Largest undiscounted episode return."""
    mean_episode_length: float
    """Mean number of transitions per episode."""
    mean_reward: float
    """Mean reward per transition."""

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


def as_float32(data: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Cast a dataset to the canonical dtypes (float32 floats, bool flags), copying only if needed."""
    out: dict[str, np.ndarray] = {}
    for key, value in data.items():
        arr = np.asarray(value)
        if key in _BOOL_KEYS:
            arr = arr.astype(bool, copy=False)
        elif key in _FLOAT_KEYS or np.issubdtype(arr.dtype, np.floating):
            arr = arr.astype(np.float32, copy=False)
        out[key] = arr
    return out


def validate_dataset(
    data: Mapping[str, np.ndarray],
    env_name: str | EnvSpec | None = None,
    require_infos: bool = False,
) -> int:
    """Check keys, dtypes and shapes of a dataset; return its number of transitions T.

    Args:
        data: the dataset dict.
        env_name: if given, the observation and action sizes must match the environment's
            (paper Table 8 sizes; see :func:`opcc_edu.envs.get_spec`).
        require_infos: also require ``infos/qpos`` and ``infos/qvel``.

    Returns:
        T, the number of transitions.

    Raises:
        ValueError: naming the offending key, its value and what was expected.
    """
    required = REQUIRED_KEYS + (INFO_KEYS if require_infos else ())
    missing = [key for key in required if key not in data]
    if missing:
        raise ValueError(f"dataset is missing keys {missing}; required keys: {', '.join(required)}")
    obs = np.asarray(data["observations"])
    if obs.ndim != 2:
        raise ValueError(f"observations must have shape (T, D), got {obs.shape}")
    n = obs.shape[0]
    for key in data:
        arr = np.asarray(data[key])
        if arr.shape[:1] != (n,):
            raise ValueError(f"dataset[{key!r}] has {arr.shape[:1]} rows but observations has {n}")
    for key in ("rewards", "terminals", "timeouts"):
        if np.asarray(data[key]).ndim != 1:
            raise ValueError(f"dataset[{key!r}] must have shape (T,), got {np.asarray(data[key]).shape}")
    for key in _BOOL_KEYS:
        if np.asarray(data[key]).dtype != bool:
            raise ValueError(f"dataset[{key!r}] must have dtype bool, got {np.asarray(data[key]).dtype}")
    for key in _FLOAT_KEYS:
        if key in data and np.asarray(data[key]).dtype != np.float32:
            raise ValueError(f"dataset[{key!r}] must have dtype float32, got {np.asarray(data[key]).dtype}")
    if np.asarray(data["next_observations"]).shape != obs.shape:
        raise ValueError(
            f"next_observations has shape {np.asarray(data['next_observations']).shape}, observations has {obs.shape}"
        )
    actions = np.asarray(data["actions"])
    if actions.ndim != 2:
        raise ValueError(f"actions must have shape (T, A), got {actions.shape}")
    if env_name is not None:
        spec = get_spec(env_name)
        if obs.shape[1] != spec.obs_dim:
            raise ValueError(
                f"observations have size D={obs.shape[1]} but environment {spec.name!r} has "
                f"observation size {spec.obs_dim}"
            )
        if actions.shape[1] != spec.act_dim:
            raise ValueError(
                f"actions have size A={actions.shape[1]} but environment {spec.name!r} has action size {spec.act_dim}"
            )
    return int(n)


def episode_ends(data: Mapping[str, np.ndarray]) -> np.ndarray:
    """Indices (exclusive ends) of the episodes: positions after each terminal/timeout, and T.

    Returns:
        int64 array of shape (E,), strictly increasing, last entry T (empty when T = 0).
    """
    done = np.asarray(data["terminals"], dtype=bool) | np.asarray(data["timeouts"], dtype=bool)
    n = done.shape[0]
    ends = np.flatnonzero(done) + 1
    if n and (ends.size == 0 or ends[-1] != n):
        ends = np.append(ends, n)
    return ends.astype(np.int64)


def episode_slices(data: Mapping[str, np.ndarray]) -> list[slice]:
    """``slice`` objects of every episode, in order."""
    ends = episode_ends(data)
    starts = np.concatenate([[0], ends[:-1]]) if ends.size else ends
    return [slice(int(s), int(e)) for s, e in zip(starts, ends, strict=False)]


def iterate_episodes(data: Mapping[str, np.ndarray]) -> Iterator[dict[str, np.ndarray]]:
    """Yield each episode as a dataset dict of its own (views, not copies).

    Episodes end at terminals, timeouts and the end of the arrays (a trailing partial episode
    is yielded too).
    """
    for part in episode_slices(data):
        yield {key: np.asarray(value)[part] for key, value in data.items()}


def episode_returns(data: Mapping[str, np.ndarray]) -> np.ndarray:
    """Undiscounted return of every episode: float64 array of shape (E,)."""
    ends = episode_ends(data)
    if ends.size == 0:
        return np.zeros(0)
    cumulative = np.concatenate([[0.0], np.cumsum(np.asarray(data["rewards"], dtype=np.float64))])
    starts = np.concatenate([[0], ends[:-1]])
    return cumulative[ends] - cumulative[starts]


def summarize_dataset(data: Mapping[str, np.ndarray]) -> DatasetSummary:
    """Transitions, episodes and return statistics of a dataset."""
    n = int(np.asarray(data["observations"]).shape[0])
    returns = episode_returns(data)
    ends = episode_ends(data)
    rewards = np.asarray(data["rewards"], dtype=np.float64)
    return DatasetSummary(
        transitions=n,
        episodes=int(ends.size),
        terminals=int(np.asarray(data["terminals"]).sum()),
        mean_episode_return=float(returns.mean()) if returns.size else 0.0,
        max_episode_return=float(returns.max()) if returns.size else 0.0,
        mean_episode_length=float(n / ends.size) if ends.size else 0.0,
        mean_reward=float(rewards.mean()) if n else 0.0,
    )


def continuity_error(data: Mapping[str, np.ndarray]) -> float:
    """Largest ``|next_observations[t] - observations[t + 1]|`` over steps inside episodes.

    Zero (up to float32 rounding) for a well-formed dataset; a large value means transitions
    of different episodes were interleaved.
    """
    obs = np.asarray(data["observations"])
    nxt = np.asarray(data["next_observations"])
    done = np.asarray(data["terminals"], dtype=bool) | np.asarray(data["timeouts"], dtype=bool)
    inside = ~done[:-1]
    if not inside.any():
        return 0.0
    return float(np.abs(nxt[:-1][inside] - obs[1:][inside]).max())


def take_prefix(data: Mapping[str, np.ndarray], size: int) -> dict[str, np.ndarray]:
    """The first ``size`` transitions, with the last one marked as a timeout.

    The cut ends an episode without termination, so it is flagged in ``timeouts``; every other
    entry equals the corresponding entry of ``data``.
    """
    n = int(np.asarray(data["observations"]).shape[0])
    if not 0 < size <= n:
        raise ValueError(f"size must lie in [1, {n}], got {size!r}")
    out = {key: np.array(np.asarray(value)[:size]) for key, value in data.items()}
    if not out["terminals"][-1]:
        out["timeouts"][-1] = True
    return out


def concatenate_datasets(parts: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Concatenate datasets (keys present in all parts are kept); each part's end becomes a boundary."""
    if not parts:
        raise ValueError("parts must contain at least one dataset")
    keys = [key for key in parts[0] if all(key in p for p in parts[1:])]
    out = {key: np.concatenate([np.asarray(p[key]) for p in parts], axis=0) for key in keys}
    # A part that stops mid-episode must not run into the next part's first episode.
    offset = 0
    for part in parts:
        offset += int(np.asarray(part["observations"]).shape[0])
        if offset and not out["terminals"][offset - 1]:
            out["timeouts"][offset - 1] = True
    return out
