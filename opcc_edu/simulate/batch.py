"""The batched simulator: ``n`` copies of one benchmark environment stepped together.

:class:`BatchSimulator` holds ``n`` MuJoCo ``MjData`` of one ``MjModel`` and reproduces
``make_env(name).step`` exactly (the gymnasium v5 reward formulas with their healthy reward
and termination for the locomotion tasks, the fixed-goal sparse reward and the velocity clip
of the mazes in :mod:`opcc_edu.envs`). A test compares it with the gymnasium environment bit
for bit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..envs import MAZE_MAX_SPEED, get_spec, make_env, mujoco_handles, restore_mjdata
from ..utils import check_positive_int

# gymnasium v5 Hopper and Walker2d clip the velocities in their observations (not in the
# simulator state) to this bound; HalfCheetah does not.
OBS_VELOCITY_CLIP: dict[str, float | None] = {"halfcheetah": None, "hopper": 10.0, "walker2d": 10.0}


@dataclasses.dataclass(frozen=True)
class LocomotionRewardSpec:
    """Reward and termination constants of a gymnasium v5 locomotion task.

    Read from the gymnasium environment itself (its constructor defaults), so that the batched
    simulator cannot drift from it.
    """

    frame_skip: int
    """MuJoCo steps per environment step."""
    dt: float
    """Seconds per environment step (``timestep * frame_skip``)."""
    forward_reward_weight: float
    """Weight of the forward velocity of the root along x."""
    ctrl_cost_weight: float
    """Weight of the squared action norm."""
    healthy_reward: float
    """Reward for every step that ends healthy (0 for HalfCheetah)."""
    terminate_when_unhealthy: bool
    """Whether an unhealthy state ends the episode."""
    healthy_z_range: tuple[float, float] | None
    """Open interval for the torso height ``qpos[1]`` (None: no check)."""
    healthy_angle_range: tuple[float, float] | None
    """Open interval for the torso angle ``qpos[2]`` (None: no check)."""
    healthy_state_range: tuple[float, float] | None
    """Open interval for every entry of ``concat(qpos, qvel)[2:]`` (Hopper only)."""
    obs_velocity_clip: float | None
    """Bound applied to the velocities in the observation (None: not clipped)."""

    @classmethod
    def from_env(cls, env_name: str, core: Any) -> LocomotionRewardSpec:
        """Read the constants from a gymnasium v5 MuJoCo environment (``env.unwrapped``)."""
        has_health = hasattr(core, "_healthy_reward")

        def pair(name: str) -> tuple[float, float] | None:
            value = getattr(core, name, None)
            return None if value is None else (float(value[0]), float(value[1]))

        return cls(
            frame_skip=int(core.frame_skip),
            dt=float(core.dt),
            forward_reward_weight=float(core._forward_reward_weight),
            ctrl_cost_weight=float(core._ctrl_cost_weight),
            healthy_reward=float(core._healthy_reward) if has_health else 0.0,
            terminate_when_unhealthy=bool(getattr(core, "_terminate_when_unhealthy", False)),
            healthy_z_range=pair("_healthy_z_range"),
            healthy_angle_range=pair("_healthy_angle_range"),
            healthy_state_range=pair("_healthy_state_range"),
            obs_velocity_clip=OBS_VELOCITY_CLIP[env_name],
        )


class BatchSimulator:
    """``n`` copies of one benchmark environment stepped together.

    Each copy is a MuJoCo ``MjData`` of the environment's ``MjModel``; :meth:`step` applies
    exactly the operations of ``make_env(env_name).step`` to each of them, and computes
    observations, rewards and terminations for all copies with NumPy.

    Args:
        env_name: one of :data:`opcc_edu.envs.ENV_NAMES`.
        n: number of copies.

    Example:
        >>> sim = BatchSimulator("hopper", 8)
        >>> sim.reset_to(states)                       # (8, S)
        >>> obs, reward, terminated = sim.step(actions)  # (8, A) -> (8, D), (8,), (8,)
    """

    def __init__(self, env_name: str, n: int):
        import mujoco

        self.spec = get_spec(env_name)
        self.env_name = self.spec.name
        self.n = check_positive_int(n, "n")
        self._env = make_env(self.env_name)
        self._core = getattr(self._env.unwrapped, "core", self._env.unwrapped)
        self.model, _ = mujoco_handles(self._env)
        self._mujoco = mujoco
        self.data = [mujoco.MjData(self.model) for _ in range(self.n)]
        self.nq, self.nv = int(self.model.nq), int(self.model.nv)
        self.state_dim = self.nq + self.nv
        self.obs_dim = self.spec.obs_dim
        self.act_dim = self.spec.act_dim
        self.reward_spec = None if self.spec.is_maze else LocomotionRewardSpec.from_env(self.env_name, self._core)

    # ----------------------------------------------------------------------------------------
    def _rows(self, rows: np.ndarray | Sequence[int] | None) -> np.ndarray:
        if rows is None:
            return np.arange(self.n)
        rows = np.asarray(rows)
        if rows.ndim != 1 or not np.issubdtype(rows.dtype, np.integer):
            raise ValueError(f"rows must be a 1-D integer array, got shape {rows.shape} dtype {rows.dtype}")
        if rows.size and (rows.min() < 0 or rows.max() >= self.n):
            raise ValueError(f"rows must lie in [0, {self.n}), got values in [{rows.min()}, {rows.max()}]")
        return rows

    def reset_to(self, states: np.ndarray, rows: np.ndarray | Sequence[int] | None = None) -> None:
        """Restore full simulator states ``concat(qpos, qvel)``.

        Args:
            states: (n, S) float64, or (len(rows), S) when ``rows`` is given.
            rows: optional indices of the copies to restore (default: all).
        """
        rows = self._rows(rows)
        states = np.asarray(states, dtype=np.float64)
        if states.shape != (len(rows), self.state_dim):
            raise ValueError(f"states must have shape ({len(rows)}, {self.state_dim}), got {states.shape}")
        for row, state in zip(rows, states, strict=True):
            restore_mjdata(self.model, self.data[row], state)

    def states(self, rows: np.ndarray | Sequence[int] | None = None) -> np.ndarray:
        """Full simulator states: (n, S) float64 (or (len(rows), S))."""
        rows = self._rows(rows)
        out = np.empty((len(rows), self.state_dim), dtype=np.float64)
        for i, row in enumerate(rows):
            out[i, : self.nq] = self.data[row].qpos
            out[i, self.nq :] = self.data[row].qvel
        return out

    def observations(self, rows: np.ndarray | Sequence[int] | None = None) -> np.ndarray:
        """Observations: (n, D) float64 (or (len(rows), D)), as the environment returns them."""
        return self._observe(self.states(rows))

    def _observe(self, states: np.ndarray) -> np.ndarray:
        if self.spec.is_maze:
            return states.copy()
        qpos, qvel = states[:, 1 : self.nq], states[:, self.nq :]
        clip = self.reward_spec.obs_velocity_clip
        if clip is not None:
            qvel = np.clip(qvel, -clip, clip)
        return np.concatenate([qpos, qvel], axis=1)

    # ----------------------------------------------------------------------------------------
    def step(
        self, actions: np.ndarray, rows: np.ndarray | Sequence[int] | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Advance every copy (or the copies in ``rows``) by one environment step.

        Args:
            actions: (n, A) (or (len(rows), A)). Their dtype matters as it does for gymnasium:
                the locomotion control cost is computed in the actions' own precision.
            rows: optional indices of the copies to step; the others are left untouched.

        Returns:
            ``(obs (k, D) float64, reward (k,) float64, terminated (k,) bool)`` with k the number
            of stepped copies.
        """
        rows = self._rows(rows)
        actions = np.asarray(actions)
        if not np.issubdtype(actions.dtype, np.floating):
            actions = actions.astype(np.float64)
        if actions.shape != (len(rows), self.act_dim):
            raise ValueError(f"actions must have shape ({len(rows)}, {self.act_dim}), got {actions.shape}")
        if self.spec.is_maze:
            return self._step_maze(actions, rows)
        return self._step_locomotion(actions, rows)

    def _step_maze(self, actions: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        mujoco, model, bound = self._mujoco, self.model, MAZE_MAX_SPEED
        # PointEnv.step clips the action, clips the velocity through set_state (which also runs
        # mj_forward) and takes one MuJoCo step. That extra mj_forward is skipped here: mj_step
        # recomputes every derived quantity from qpos, qvel, ctrl and the solver warm start,
        # none of which mj_forward changes, so the result stays bit-identical (tested).
        clipped = np.clip(actions.astype(np.float64), -1.0, 1.0)
        for row, action in zip(rows, clipped, strict=True):
            data = self.data[row]
            qvel = data.qvel
            if qvel.max() > bound or qvel.min() < -bound:
                qvel[:] = np.clip(qvel, -bound, bound)
            data.ctrl[:] = action
            mujoco.mj_step(model, data, nstep=1)
        obs = self.observations(rows)
        reward = self._core.reward(obs[:, :2])
        return obs, reward, np.zeros(len(rows), dtype=bool)

    def _step_locomotion(self, actions: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        mujoco, model, spec = self._mujoco, self.model, self.reward_spec
        x_before = np.array([self.data[row].qpos[0] for row in rows], dtype=np.float64)
        for row, action in zip(rows, actions, strict=True):
            data = self.data[row]
            data.ctrl[:] = action
            mujoco.mj_step(model, data, nstep=spec.frame_skip)
        states = self.states(rows)
        x_velocity = (states[:, 0] - x_before) / spec.dt
        healthy = self._healthy(states)
        # Same operations, in the same order and precision, as the gymnasium v5 reward.
        forward = spec.forward_reward_weight * x_velocity
        ctrl_cost = spec.ctrl_cost_weight * np.sum(np.square(actions), axis=1)
        reward = (forward + healthy * spec.healthy_reward) - ctrl_cost
        terminated = ~healthy if spec.terminate_when_unhealthy else np.zeros(len(rows), dtype=bool)
        return self._observe(states), reward.astype(np.float64), terminated

    def _healthy(self, states: np.ndarray) -> np.ndarray:
        spec = self.reward_spec
        healthy = np.ones(len(states), dtype=bool)
        if spec.healthy_state_range is not None:
            low, high = spec.healthy_state_range
            rest = states[:, 2:]
            healthy &= np.all((low < rest) & (rest < high), axis=1)
        if spec.healthy_z_range is not None:
            low, high = spec.healthy_z_range
            healthy &= (low < states[:, 1]) & (states[:, 1] < high)
        if spec.healthy_angle_range is not None:
            low, high = spec.healthy_angle_range
            healthy &= (low < states[:, 2]) & (states[:, 2] < high)
        return healthy

    def close(self) -> None:
        """Release the environment used to build the model."""
        self._env.close()
