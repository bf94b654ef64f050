"""Ground truth: exact policy values in the real simulator, many queries at once.

A policy-comparison query needs two values ``V^pi(s, h)``: start from a simulator state, take a
first action, follow a policy for the remaining steps, and add up the rewards. The OPCC
benchmark labels every query by Monte-Carlo simulation in the environment itself.

This module does that for thousands of queries together:

* :class:`BatchSimulator` holds ``n`` MuJoCo ``MjData`` of one ``MjModel`` and reproduces
  ``make_env(name).step`` exactly (the gymnasium v5 reward formulas with their healthy reward
  and termination for the locomotion tasks, the fixed-goal sparse reward and the velocity clip
  of the mazes in :mod:`opcc_edu.envs`). A test compares it with the gymnasium environment
  bit for bit.
* :func:`monte_carlo_returns` steps all queries of a batch together with ONE batched policy
  forward per step (:class:`opcc_edu.policies.StackedActors` gathers each row's policy), stops
  each row at its own horizon, and stops an episode for good when it terminates.
* :func:`simulate_trajectories` records the same rollouts step by step for plots.

The policies and the simulator are deterministic, so one run per query is already exact;
``runs`` is kept because a stochastic variant (``action_noise > 0``) makes runs differ.

Policies are evaluated in float64 and their actions rounded to float32 (the action space's
type). Float32 matrix products round differently for different batch sizes, which would make
a query's value depend on the other queries that share its batch; in float64 the rounding
error is far below float32 resolution, so the float32 actions, and hence the values, are the
same in any batch and in a one-query loop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from .envs import MAZE_MAX_SPEED, get_spec, make_env, mujoco_handles, restore_mjdata
from .utils import check_positive_int

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
        for row, state in zip(rows, states):
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
        for row, action in zip(rows, clipped):
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
        for row, action in zip(rows, actions):
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


# --------------------------------------------------------------------------------------------
# Monte-Carlo values
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Rows:
    """Validated per-row inputs of a batch of rollouts (N rows)."""

    states: np.ndarray  # (N, S) float64
    policy_index: np.ndarray  # (N,) int64
    horizon: np.ndarray  # (N,) int64
    first_action: np.ndarray | None  # (N, A) float32, NaN rows = no first action
    gamma: np.ndarray  # (N,) float64


def _validate_rows(
    env_name: str,
    states: np.ndarray,
    n_policies: int,
    policy_index: np.ndarray,
    horizon: np.ndarray | int,
    first_action: np.ndarray | None,
    gamma: float | np.ndarray,
) -> _Rows:
    spec = get_spec(env_name)
    states = np.asarray(states, dtype=np.float64)
    if states.ndim != 2 or len(states) == 0:
        raise ValueError(f"states must have shape (N, S) with N >= 1, got {states.shape}")
    n = len(states)
    policy_index = np.asarray(policy_index)
    if policy_index.shape != (n,) or not np.issubdtype(policy_index.dtype, np.integer):
        raise ValueError(f"policy_index must be an integer array of shape ({n},), got {policy_index.shape} {policy_index.dtype}")
    if policy_index.min() < 0 or policy_index.max() >= n_policies:
        raise ValueError(
            f"policy_index must lie in [0, {n_policies}) (0-based into policies), "
            f"got values in [{policy_index.min()}, {policy_index.max()}]"
        )
    horizon = np.broadcast_to(np.asarray(horizon), (n,)) if np.ndim(horizon) == 0 else np.asarray(horizon)
    if horizon.shape != (n,) or not np.issubdtype(horizon.dtype, np.integer) or horizon.min() < 1:
        raise ValueError(f"horizon must be a positive integer or an integer array of shape ({n},) >= 1, got {horizon!r}")
    if first_action is not None:
        first_action = np.asarray(first_action, dtype=np.float32)
        if first_action.shape != (n, spec.act_dim):
            raise ValueError(f"first_action must have shape ({n}, {spec.act_dim}) or be None, got {first_action.shape}")
    gamma = np.broadcast_to(np.asarray(gamma, dtype=np.float64), (n,)).copy() if np.ndim(gamma) == 0 else np.asarray(gamma, dtype=np.float64)
    if gamma.shape != (n,) or not np.all((gamma >= 0.0) & (gamma <= 1.0)):
        raise ValueError(f"gamma must be a float in [0, 1] or an array of shape ({n},) in [0, 1], got {gamma!r}")
    return _Rows(states, policy_index.astype(np.int64), horizon.astype(np.int64), first_action, gamma)


def stacked_policy(policies: Sequence[Any]):
    """One float64 module evaluating many policies in one call.

    Args:
        policies: P actors with a common observation and action size
            (:class:`opcc_edu.policies.Actor`).

    Returns:
        A :class:`opcc_edu.policies.StackedActors` in float64 and eval mode:
        ``forward(obs (N, D) float64, index (N,) long) -> (N, A)``.
    """
    from .policies import StackedActors

    if len(policies) == 0:
        raise ValueError("policies must hold at least one actor, got an empty sequence")
    # StackedActors copies the weights into its own buffers, so converting it to float64
    # leaves the caller's float32 actors untouched (float32 -> float64 is exact).
    return StackedActors(list(policies)).double().eval()


def _policy_actions(stacked, obs: np.ndarray, index: np.ndarray) -> np.ndarray:
    import torch

    with torch.no_grad():
        out = stacked(torch.from_numpy(np.ascontiguousarray(obs, dtype=np.float64)), torch.from_numpy(index))
    return out.numpy().astype(np.float32)


def _rollout_chunk(
    sim: BatchSimulator,
    stacked,
    rows: _Rows,
    chunk: np.ndarray,
    rng: np.random.Generator | None,
    action_noise: float,
    record: dict[str, np.ndarray] | None,
    bar,
) -> np.ndarray:
    """Roll out the rows ``chunk`` (k,) of ``rows`` in ``sim``; returns their returns (k,)."""
    k = len(chunk)
    sim_rows = np.arange(k)
    sim.reset_to(rows.states[chunk], rows=sim_rows)
    horizon = rows.horizon[chunk]
    gamma = rows.gamma[chunk]
    index = rows.policy_index[chunk]
    returns = np.zeros(k, dtype=np.float64)
    discount = np.ones(k, dtype=np.float64)
    done = np.zeros(k, dtype=bool)
    obs = sim.observations(sim_rows)
    if record is not None:
        record["observations"][chunk, 0] = obs
        record["states"][chunk, 0] = sim.states(sim_rows)
    for t in range(int(horizon.max())):
        live = np.flatnonzero(~done & (t < horizon))
        if live.size == 0:
            break
        actions = _policy_actions(stacked, obs[live], index[live])
        if action_noise > 0.0:
            noise = rng.normal(0.0, action_noise, size=actions.shape)
            actions = np.clip(actions + noise, -1.0, 1.0).astype(np.float32)
        if t == 0 and rows.first_action is not None:
            given = rows.first_action[chunk[live]]
            has = ~np.isnan(given).any(axis=1)
            actions[has] = given[has]
        next_obs, reward, terminated = sim.step(actions, rows=live)
        returns[live] += discount[live] * reward
        discount[live] *= gamma[live]
        done[live] |= terminated
        obs[live] = next_obs
        if record is not None:
            record["actions"][chunk[live], t] = actions
            record["rewards"][chunk[live], t] = reward
            record["valid"][chunk[live], t] = True
            record["observations"][chunk[live], t + 1] = next_obs
            record["states"][chunk[live], t + 1] = sim.states(live)
        if bar is not None:
            bar.update(int(live.size))
    return returns


_SIMULATOR_CACHE: dict[str, BatchSimulator] = {}


def _simulator(env_name: str, n: int) -> BatchSimulator:
    """A simulator with at least ``n`` copies, reused across calls for the last environment.

    Allocating an ``MjData`` costs about a millisecond (MuJoCo clears its whole arena), as much
    as a few dozen steps, so repeated labelling calls share one batch of them. Only the most
    recent environment is kept, which bounds the memory to one batch.
    """
    cached = _SIMULATOR_CACHE.get(env_name)
    if cached is None or cached.n < n:
        for old in _SIMULATOR_CACHE.values():
            old.close()
        _SIMULATOR_CACHE.clear()
        cached = _SIMULATOR_CACHE[env_name] = BatchSimulator(env_name, n)
    return cached


def _run(
    env_name: str,
    rows: _Rows,
    policies: Sequence[Any],
    action_noise: float,
    seed: int,
    batch_size: int,
    progress: bool,
    record: dict[str, np.ndarray] | None = None,
) -> np.ndarray:
    from tqdm.auto import tqdm

    n = len(rows.states)
    stacked = stacked_policy(policies)
    rng = np.random.default_rng(seed) if action_noise > 0.0 else None
    sim = _simulator(env_name, min(batch_size, n))
    if rows.states.shape[1] != sim.state_dim:
        raise ValueError(f"states must have shape (N, {sim.state_dim}) for {env_name}, got {rows.states.shape}")
    returns = np.zeros(n, dtype=np.float64)
    bar = tqdm(total=int(rows.horizon.sum()), desc=f"simulate {env_name}", unit="step", disable=not progress, leave=False)
    try:
        for start in range(0, n, sim.n):
            chunk = np.arange(start, min(start + sim.n, n))
            returns[chunk] = _rollout_chunk(sim, stacked, rows, chunk, rng, action_noise, record, bar)
    finally:
        bar.close()
    return returns


def monte_carlo_returns(
    env_name: str,
    states: np.ndarray,
    policies: Sequence[Any],
    policy_index: np.ndarray,
    horizon: np.ndarray | int,
    first_action: np.ndarray | None = None,
    gamma: float | np.ndarray = 1.0,
    runs: int = 1,
    seed: int = 0,
    progress: bool = True,
    *,
    action_noise: float = 0.0,
    batch_size: int = 1024,
) -> np.ndarray:
    """Discounted returns of policies from given states in the real simulator.

    Row i starts in ``states[i]``, takes ``first_action[i]`` (when given and not NaN), then
    follows ``policies[policy_index[i]]`` until ``horizon[i]`` steps have been taken or the
    episode terminates (hopper, walker2d), whichever comes first. All rows of a batch are
    stepped together; each step runs one batched forward of all policies.

    Args:
        env_name: one of :data:`opcc_edu.envs.ENV_NAMES`.
        states: (N, S) full simulator states ``concat(qpos, qvel)``.
        policies: P actors (``forward(obs (..., D)) -> (..., A)``).
        policy_index: (N,) int, 0-based into ``policies``.
        horizon: (N,) int >= 1, or one int for all rows.
        first_action: (N, A) first actions, or None (every step from the policy). A row of
            NaNs means "no first action" for that row.
        gamma: discount, a float or (N,) floats in [0, 1].
        runs: Monte-Carlo runs R per row. With ``action_noise == 0`` the rollouts are
            deterministic, so the R runs are identical and simulated once.
        seed: seeds the action noise (unused when ``action_noise == 0``).
        progress: show a tqdm progress bar.
        action_noise: standard deviation of Gaussian noise added to every policy action
            (clipped to [-1, 1]); 0 for the benchmark's deterministic policies.
        batch_size: rows simulated together (memory: about 0.5 MB per row).

    Returns:
        (N, R) float64 returns.
    """
    runs = check_positive_int(runs, "runs")
    batch_size = check_positive_int(batch_size, "batch_size")
    if not np.isfinite(action_noise) or action_noise < 0:
        raise ValueError(f"action_noise must be a finite float >= 0, got {action_noise!r}")
    rows = _validate_rows(env_name, states, len(policies), policy_index, horizon, first_action, gamma)
    if action_noise == 0.0:
        returns = _run(env_name, rows, policies, 0.0, seed, batch_size, progress)
        return np.repeat(returns[:, None], runs, axis=1)
    # Run r of row i is row r * N + i of one big batch, so one noise stream covers all runs.
    n = len(rows.states)
    tiled = _Rows(
        np.tile(rows.states, (runs, 1)),
        np.tile(rows.policy_index, runs),
        np.tile(rows.horizon, runs),
        None if rows.first_action is None else np.tile(rows.first_action, (runs, 1)),
        np.tile(rows.gamma, runs),
    )
    returns = _run(env_name, tiled, policies, float(action_noise), seed, batch_size, progress)
    return returns.reshape(runs, n).T.copy()


@dataclasses.dataclass
class Trajectories:
    """Step-by-step record of rollouts (N rows, H = the largest horizon).

    Entries past a row's horizon or after its termination are NaN (``valid`` is False).
    """

    observations: np.ndarray
    """(N, H + 1, D) observations, the start observation first."""
    states: np.ndarray
    """(N, H + 1, S) simulator states."""
    actions: np.ndarray
    """(N, H, A) actions taken."""
    rewards: np.ndarray
    """(N, H) rewards."""
    valid: np.ndarray
    """(N, H) bool: the step was taken."""

    @property
    def returns(self) -> np.ndarray:
        """(N,) undiscounted returns."""
        return np.nansum(self.rewards, axis=1)


def simulate_trajectories(
    env_name: str,
    states: np.ndarray,
    policies: Sequence[Any],
    policy_index: np.ndarray,
    horizon: np.ndarray | int,
    first_action: np.ndarray | None = None,
    progress: bool = False,
    batch_size: int = 1024,
) -> Trajectories:
    """Record the rollouts behind :func:`monte_carlo_returns` (gamma = 1, no noise).

    Args and shapes as in :func:`monte_carlo_returns`.

    Returns:
        A :class:`Trajectories`.
    """
    batch_size = check_positive_int(batch_size, "batch_size")
    rows = _validate_rows(env_name, states, len(policies), policy_index, horizon, first_action, 1.0)
    spec = get_spec(env_name)
    n, h, s = len(rows.states), int(rows.horizon.max()), rows.states.shape[1]
    record = {
        "observations": np.full((n, h + 1, spec.obs_dim), np.nan),
        "states": np.full((n, h + 1, s), np.nan),
        "actions": np.full((n, h, spec.act_dim), np.nan, dtype=np.float32),
        "rewards": np.full((n, h), np.nan),
        "valid": np.zeros((n, h), dtype=bool),
    }
    _run(env_name, rows, policies, 0.0, 0, batch_size, progress, record=record)
    return Trajectories(**record)
