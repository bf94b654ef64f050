"""Rolling out many rows in the simulator: validated inputs, the batched policy, the loop.

A row is one rollout: a start state, a policy (0-based index into a list of actors), a
horizon, an optional first action and a discount. :func:`run_rows` steps the rows in chunks
of one reused :class:`~opcc_edu.simulate.batch.BatchSimulator`, with ONE batched policy
forward per step for all live rows of a chunk (:func:`stacked_policy` gathers each row's
policy), and returns their discounted returns, optionally recording every step.

Policies are evaluated in float64 and their actions rounded to float32 (see
:mod:`opcc_edu.simulate` for why that makes values independent of the batch).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..envs import get_spec
from .batch import BatchSimulator

if TYPE_CHECKING:
    from ..policies import StackedActors


@dataclasses.dataclass
class Rows:
    """Validated per-row inputs of a batch of rollouts (N rows)."""

    states: np.ndarray  # (N, S) float64
    policy_index: np.ndarray  # (N,) int64
    horizon: np.ndarray  # (N,) int64
    first_action: np.ndarray | None  # (N, A) float32, NaN rows = no first action
    gamma: np.ndarray  # (N,) float64


def validate_rows(
    env_name: str,
    states: np.ndarray,
    n_policies: int,
    policy_index: np.ndarray,
    horizon: np.ndarray | int,
    first_action: np.ndarray | None,
    gamma: float | np.ndarray,
) -> Rows:
    """Check the per-row inputs of :func:`opcc_edu.simulate.monte_carlo_returns` and
    broadcast scalars; ValueError names the offending argument and its expected shape."""
    spec = get_spec(env_name)
    states = np.asarray(states, dtype=np.float64)
    if states.ndim != 2 or len(states) == 0:
        raise ValueError(f"states must have shape (N, S) with N >= 1, got {states.shape}")
    n = len(states)
    policy_index = np.asarray(policy_index)
    if policy_index.shape != (n,) or not np.issubdtype(policy_index.dtype, np.integer):
        raise ValueError(
            f"policy_index must be an integer array of shape ({n},), got {policy_index.shape} {policy_index.dtype}"
        )
    if policy_index.min() < 0 or policy_index.max() >= n_policies:
        raise ValueError(
            f"policy_index must lie in [0, {n_policies}) (0-based into policies), "
            f"got values in [{policy_index.min()}, {policy_index.max()}]"
        )
    horizon = np.broadcast_to(np.asarray(horizon), (n,)) if np.ndim(horizon) == 0 else np.asarray(horizon)
    if horizon.shape != (n,) or not np.issubdtype(horizon.dtype, np.integer) or horizon.min() < 1:
        raise ValueError(
            f"horizon must be a positive integer or an integer array of shape ({n},) >= 1, got {horizon!r}"
        )
    if first_action is not None:
        first_action = np.asarray(first_action, dtype=np.float32)
        if first_action.shape != (n, spec.act_dim):
            raise ValueError(f"first_action must have shape ({n}, {spec.act_dim}) or be None, got {first_action.shape}")
    gamma = np.asarray(gamma, dtype=np.float64)
    gamma = np.broadcast_to(gamma, (n,)).copy() if gamma.ndim == 0 else gamma
    if gamma.shape != (n,) or not np.all((gamma >= 0.0) & (gamma <= 1.0)):
        raise ValueError(f"gamma must be a float in [0, 1] or an array of shape ({n},) in [0, 1], got {gamma!r}")
    return Rows(states, policy_index.astype(np.int64), horizon.astype(np.int64), first_action, gamma)


def stacked_policy(policies: Sequence[Any]) -> StackedActors:
    """One float64 module evaluating many policies in one call.

    Args:
        policies: P actors with a common observation and action size
            (:class:`opcc_edu.policies.Actor`).

    Returns:
        A :class:`opcc_edu.policies.StackedActors` in float64 and eval mode:
        ``forward(obs (N, D) float64, index (N,) long) -> (N, A)``.
    """
    from ..policies import StackedActors

    if len(policies) == 0:
        raise ValueError("policies must hold at least one actor, got an empty sequence")
    # StackedActors copies the weights into its own buffers, so converting it to float64
    # leaves the caller's float32 actors untouched (float32 -> float64 is exact).
    return StackedActors(list(policies)).double().eval()


def policy_actions_of(stacked: StackedActors, obs: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Actions of many policies at once: row i gets policy ``index[i]``'s action at ``obs[i]``.

    Args:
        stacked: the policies, from :func:`stacked_policy`.
        obs: (n, D) observations.
        index: (n,) int64 indices into the stacked policies.

    Returns:
        (n, A) float32 actions.

    Raises:
        ValueError: ``obs`` is not 2-D, or ``index`` does not have shape (n,).
    """
    import torch

    if np.ndim(obs) != 2 or np.shape(index) != (len(obs),):
        raise ValueError(f"obs must have shape (n, D) and index shape (n,), got {np.shape(obs)} and {np.shape(index)}")

    with torch.no_grad():
        out = stacked(torch.from_numpy(np.ascontiguousarray(obs, dtype=np.float64)), torch.from_numpy(index))
    return out.numpy().astype(np.float32)


def _simulate_chunk(
    sim: BatchSimulator,
    stacked: StackedActors,
    rows: Rows,
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
        actions = policy_actions_of(stacked, obs[live], index[live])
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


def run_rows(
    env_name: str,
    rows: Rows,
    policies: Sequence[Any],
    action_noise: float,
    seed: int,
    batch_size: int,
    progress: bool,
    record: dict[str, np.ndarray] | None = None,
) -> np.ndarray:
    """Discounted returns (N,) of ``rows``, stepped in chunks of one reused simulator.

    Args:
        env_name: environment.
        rows: validated rows (:func:`validate_rows`).
        policies: the actors ``rows.policy_index`` points into.
        action_noise: standard deviation of Gaussian action noise (0: none).
        seed: seed of the noise.
        batch_size: rows stepped together.
        progress: show a tqdm progress bar.
        record: arrays to fill with every step (see :func:`opcc_edu.simulate.simulate_trajectories`).
    """
    from tqdm.auto import tqdm

    n = len(rows.states)
    stacked = stacked_policy(policies)
    rng = np.random.default_rng(seed) if action_noise > 0.0 else None
    sim = _simulator(env_name, min(batch_size, n))
    if rows.states.shape[1] != sim.state_dim:
        raise ValueError(f"states must have shape (N, {sim.state_dim}) for {env_name}, got {rows.states.shape}")
    returns = np.zeros(n, dtype=np.float64)
    bar = tqdm(
        total=int(rows.horizon.sum()), desc=f"simulate {env_name}", unit="step", disable=not progress, leave=False
    )
    try:
        for start in range(0, n, sim.n):
            chunk = np.arange(start, min(start + sim.n, n))
            returns[chunk] = _simulate_chunk(sim, stacked, rows, chunk, rng, action_noise, record, bar)
    finally:
        bar.close()
    return returns
