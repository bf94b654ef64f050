"""The environments' reward functions as pure batched torch functions, chosen by name.

PETS (Chua et al. 2018) rolls learned dynamics out with the environment's *known* reward
function instead of a learned reward. This module provides that function for the seven
benchmark environments, so that a dynamics ensemble in predefined-reward mode
(``ModelSpec.reward == "predefined"``) scores its own predicted transitions:

* mazes: 1 when the position after the step lies within :data:`opcc_edu.envs.GOAL_RADIUS` of
  the fixed goal (``<=``, as :meth:`opcc_edu.envs.MazeEnv.reward`), else 0;
* ``halfcheetah``, ``hopper``, ``walker2d`` (gymnasium v5):
  ``forward_reward_weight * x_velocity + healthy * healthy_reward - ctrl_cost_weight * sum(a^2)``,
  where ``healthy`` is the v5 health check of the state *after* the step (v5 pays the healthy
  reward only then; HalfCheetah has none).

The observation leaves out the root's x position, so ``x_velocity = (x_after - x_before) / dt``
cannot be computed from observations. Every reward function therefore takes
``(obs, action, next_obs, feature)``, where ``feature`` is the part of the reward the
observations do not determine (:data:`REWARD_FEATURES`: ``x_velocity`` for locomotion, nothing
for the mazes); :func:`reward_feature` computes it from simulator states and
:func:`dataset_reward_feature` for every transition of a dataset (the column a
predefined-reward model learns in place of the reward).

The constants (goal, weights, health ranges, ``dt``) are read from the environment made by
:func:`opcc_edu.envs.make_env` (:func:`reward_spec`), so they cannot drift from it.

One gap remains: Hopper-v5's health check bounds every entry of ``concat(qpos, qvel)[2:]`` by
100, but its observation clips velocities to +-10, so a velocity beyond 100 (unhealthy in the
simulator) looks healthy in the observation. The predefined termination function
(:func:`opcc_edu.envs.termination_fn`) has the same blind spot.

Shapes: ``...`` any batch shape (e.g. (M, B)), D observation size, A action size, S simulator
state size ``nq + nv``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from .envs import ENV_NAMES, GOAL_RADIUS, base_env_name, get_spec, make_env
from .simulate.batch import LocomotionRewardSpec

if TYPE_CHECKING:
    import torch

__all__ = [
    "REWARD_FEATURES",
    "MazeRewardSpec",
    "dataset_reward_feature",
    "missing_states_error",
    "reward_feature",
    "reward_fn",
    "reward_spec",
]

REWARD_FEATURES: dict[str, str | None] = {
    name: (None if get_spec(name).is_maze else "x_velocity") for name in ENV_NAMES
}
"""The part of each environment's reward that observations do not determine (None: none)."""

RewardFn = Callable[..., "torch.Tensor"]


@dataclasses.dataclass(frozen=True)
class MazeRewardSpec:
    """Reward constants of a maze: the fixed goal and the radius around it."""

    goal: tuple[float, float]
    """Goal position (x, y), as :attr:`opcc_edu.envs.MazeEnv.goal`."""
    goal_radius: float
    """A step is rewarded when it ends at most this far from the goal."""


def _check_env(env_name: str) -> str:
    """The environment's base name (a ``-d4rl-goal`` variant's maze); ValueError lists the valid names."""
    return base_env_name(env_name)


@functools.cache
def reward_spec(env_name: str) -> MazeRewardSpec | LocomotionRewardSpec:
    """The reward constants of an environment, read from the environment itself (cached).

    Returns:
        :class:`MazeRewardSpec` for a maze, else
        :class:`opcc_edu.simulate.LocomotionRewardSpec` (weights, health ranges, ``dt``).

    Raises:
        ValueError: unknown ``env_name``, listing the valid ones.
    """
    _check_env(env_name)
    env = make_env(env_name)
    try:
        core = env.unwrapped
        if get_spec(env_name).is_maze:
            goal = np.asarray(core.goal, dtype=np.float64)
            return MazeRewardSpec((float(goal[0]), float(goal[1])), float(GOAL_RADIUS))
        return LocomotionRewardSpec.from_env(env_name, core)
    finally:
        env.close()


def reward_fn(env_name: str) -> RewardFn:
    """The reward function of an environment.

    The returned function has the signature ``reward(obs, action, next_obs, feature=None)``:

    Args (of the returned function):
        obs: (..., D) observations before the step.
        action: (..., A) actions (the control cost is computed in their precision).
        next_obs: (..., D) observations after the step.
        feature: (...) the reward feature of :data:`REWARD_FEATURES` (``x_velocity`` for
            locomotion, required); ignored for the mazes (may be None).

    Returns (of the returned function):
        (...) rewards in the floating dtype of ``next_obs`` (float32 or float64).

    Raises:
        ValueError: unknown ``env_name`` (listing the valid ones); the returned function raises
            ValueError for inputs of the wrong shape or a missing feature.
    """
    _check_env(env_name)
    spec = get_spec(env_name)
    params = reward_spec(env_name)
    if spec.is_maze:
        return functools.partial(_maze_reward, env_name, spec.obs_dim, spec.act_dim, params)
    return functools.partial(_locomotion_reward, env_name, spec.obs_dim, spec.act_dim, params)


def _as_float_tensor(x: Any, name: str) -> torch.Tensor:
    import torch

    x = torch.as_tensor(x)
    if not x.is_floating_point():
        raise ValueError(f"{name} must hold floating-point numbers, got dtype {x.dtype}")
    return x


def _check_shapes(env_name: str, d: int, a: int, obs, action, next_obs) -> tuple[torch.Tensor, ...]:
    obs = _as_float_tensor(obs, "obs")
    action = _as_float_tensor(action, "action")
    next_obs = _as_float_tensor(next_obs, "next_obs")
    if next_obs.ndim == 0 or next_obs.shape[-1] != d:
        raise ValueError(f"next_obs of {env_name} must have shape (..., {d}), got {tuple(next_obs.shape)}")
    if obs.shape != next_obs.shape:
        raise ValueError(f"obs must have the shape of next_obs {tuple(next_obs.shape)}, got {tuple(obs.shape)}")
    if action.shape != (*next_obs.shape[:-1], a):
        raise ValueError(
            f"action of {env_name} must have shape {(*next_obs.shape[:-1], a)} (next_obs's batch shape, A={a}), "
            f"got {tuple(action.shape)}"
        )
    return obs, action, next_obs


def _maze_reward(
    env_name: str, d: int, a: int, params: MazeRewardSpec, obs, action, next_obs, feature=None
) -> torch.Tensor:
    """1 where ``next_obs[..., :2]`` lies within ``goal_radius`` of the goal, else 0."""
    import torch

    _, _, next_obs = _check_shapes(env_name, d, a, obs, action, next_obs)
    distance = torch.hypot(next_obs[..., 0] - params.goal[0], next_obs[..., 1] - params.goal[1])
    return (distance <= params.goal_radius).to(next_obs.dtype)


def _locomotion_healthy(params: LocomotionRewardSpec, next_obs: torch.Tensor) -> torch.Tensor:
    """gymnasium v5's ``is_healthy`` on observations (..., D) -> bool (...).

    Observation ``[qpos[1:], qvel]``: the torso height ``qpos[1]`` is ``obs[0]``, its angle
    ``qpos[2]`` is ``obs[1]``, and ``concat(qpos, qvel)[2:]`` is ``obs[1:]`` (with velocities
    clipped for Hopper, see the module notes). All intervals are open, as in gymnasium.
    """
    import torch

    healthy = torch.ones(next_obs.shape[:-1], dtype=torch.bool, device=next_obs.device)
    if params.healthy_state_range is not None:
        low, high = params.healthy_state_range
        rest = next_obs[..., 1:]
        healthy = healthy & ((low < rest) & (rest < high)).all(dim=-1)
    if params.healthy_z_range is not None:
        low, high = params.healthy_z_range
        healthy = healthy & (low < next_obs[..., 0]) & (next_obs[..., 0] < high)
    if params.healthy_angle_range is not None:
        low, high = params.healthy_angle_range
        healthy = healthy & (low < next_obs[..., 1]) & (next_obs[..., 1] < high)
    return healthy


def _locomotion_reward(
    env_name: str, d: int, a: int, params: LocomotionRewardSpec, obs, action, next_obs, feature=None
) -> torch.Tensor:
    """gymnasium v5: ``(w_f * x_velocity + healthy * r_h) - w_c * sum(action^2)``."""
    _, action, next_obs = _check_shapes(env_name, d, a, obs, action, next_obs)
    if feature is None:
        raise ValueError(f"the reward of {env_name} needs feature=x_velocity (see opcc_edu.rewards.reward_feature)")
    x_velocity = _as_float_tensor(feature, "feature")
    if x_velocity.shape != next_obs.shape[:-1]:
        raise ValueError(
            f"feature (x_velocity) must have next_obs's batch shape {tuple(next_obs.shape[:-1])}, "
            f"got {tuple(x_velocity.shape)}"
        )
    # The same operations, in the same order, as gymnasium's _get_rew.
    forward = params.forward_reward_weight * x_velocity.to(next_obs.dtype)
    healthy = _locomotion_healthy(params, next_obs).to(next_obs.dtype) * params.healthy_reward
    ctrl_cost = params.ctrl_cost_weight * action.square().sum(dim=-1)
    return (forward + healthy) - ctrl_cost.to(next_obs.dtype)


def reward_feature(env_name: str, state: Any, next_state: Any, dt: float | None = None) -> Any:
    """The reward feature of transitions from their simulator states.

    Args:
        env_name: environment.
        state: (..., S) simulator states ``concat(qpos, qvel)`` before the step (numpy or torch;
            only ``qpos[0]``, the root's x position, is read).
        next_state: (..., S) simulator states after the step.
        dt: seconds per step (default: the environment's ``dt``).

    Returns:
        (...) ``x_velocity = (x_after - x_before) / dt`` for locomotion (as gymnasium computes
        it); ``None`` for the mazes, whose reward the observations determine.
    """
    if REWARD_FEATURES[_check_env(env_name)] is None:
        return None
    if np.shape(state) != np.shape(next_state) or len(np.shape(state)) == 0:
        raise ValueError(
            f"state and next_state must have the same shape (..., S), got {np.shape(state)} and {np.shape(next_state)}"
        )
    dt = reward_spec(env_name).dt if dt is None else float(dt)
    return (next_state[..., 0] - state[..., 0]) / dt


def missing_states_error(env_name: str, dataset_name: str | None = None) -> ValueError:
    """The error for a locomotion dataset without simulator states in predefined-reward mode."""
    label = f"dataset {dataset_name!r} of {env_name}" if dataset_name else f"the {env_name} dataset"
    return ValueError(
        f"reward='predefined' needs recorded simulator states (infos/qpos) to compute x_velocity, but {label} "
        "has none (arrays given without infos/qpos); use reward='learned' or a generated dataset"
    )


def dataset_reward_feature(
    env_name: str, dataset: Mapping[str, np.ndarray], dataset_name: str | None = None
) -> np.ndarray:
    """The column a predefined-reward model learns in place of the reward, for every transition.

    Mazes: the recorded rewards (the column is trained but the model's :meth:`step` ignores it).
    Locomotion: ``x_velocity`` from the recorded simulator positions ``infos/qpos``: inside an
    episode the state after step t is the state before step t + 1. The last transition of an
    episode has no recorded successor state; its ``x_velocity`` is recovered from the recorded
    reward by inverting the reward function (exact up to float32 rounding). The positions are
    float32, so the feature is exact to about 1e-4 (in units of velocity).

    Args:
        env_name: environment.
        dataset: D4RL-format dict (``observations``, ``actions``, ``rewards``,
            ``next_observations``, optionally ``terminals``, ``timeouts``; locomotion needs
            ``infos/qpos``).
        dataset_name: named in error messages.

    Returns:
        (T,) float64.

    Raises:
        ValueError: a locomotion dataset without recorded simulator states (``infos/qpos``;
            every generated dataset records them, arrays given by hand may not).
    """
    rewards = np.asarray(dataset["rewards"], dtype=np.float64).reshape(-1)
    if REWARD_FEATURES[_check_env(env_name)] is None:
        return rewards
    if "infos/qpos" not in dataset:
        raise missing_states_error(env_name, dataset_name)
    import torch

    label = f"dataset {dataset_name!r} of {env_name}" if dataset_name else f"the {env_name} dataset"
    qpos = np.asarray(dataset["infos/qpos"], dtype=np.float64)
    obs = np.asarray(dataset["observations"])
    nxt = np.asarray(dataset["next_observations"])
    t = len(rewards)
    if qpos.ndim != 2 or len(qpos) != t:
        raise ValueError(f"infos/qpos of {label} must have shape ({t}, nq), got {qpos.shape}")
    done = np.zeros(t, dtype=bool)
    for key in ("terminals", "timeouts"):
        if key in dataset:
            done |= np.asarray(dataset[key], dtype=bool).reshape(-1)
    # Row t's successor state is recorded when row t + 1 continues its episode.
    continues = np.zeros(t, dtype=bool)
    continues[:-1] = ~done[:-1] & np.all(nxt[:-1] == obs[1:], axis=1)
    feature = np.empty(t, dtype=np.float64)
    rows = np.flatnonzero(continues)
    feature[rows] = reward_feature(env_name, qpos[rows], qpos[rows + 1])
    last = np.flatnonzero(~continues)
    if last.size:
        params = reward_spec(env_name)
        without_forward = reward_fn(env_name)(
            torch.as_tensor(obs[last], dtype=torch.float64),
            torch.as_tensor(np.asarray(dataset["actions"])[last], dtype=torch.float64),
            torch.as_tensor(nxt[last], dtype=torch.float64),
            torch.zeros(last.size, dtype=torch.float64),
        ).numpy()
        feature[last] = (rewards[last] - without_forward) / params.forward_reward_weight
    return feature
