"""Monte-Carlo values and recorded trajectories of policies in the real simulator."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..envs import get_spec
from ..utils import check_positive_int
from .rollout import Rows, run_rows, validate_rows


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
    rows = validate_rows(env_name, states, len(policies), policy_index, horizon, first_action, gamma)
    if action_noise == 0.0:
        returns = run_rows(env_name, rows, policies, 0.0, seed, batch_size, progress)
        return np.repeat(returns[:, None], runs, axis=1)
    # Run r of row i is row r * N + i of one big batch, so one noise stream covers all runs.
    n = len(rows.states)
    tiled = Rows(
        np.tile(rows.states, (runs, 1)),
        np.tile(rows.policy_index, runs),
        np.tile(rows.horizon, runs),
        None if rows.first_action is None else np.tile(rows.first_action, (runs, 1)),
        np.tile(rows.gamma, runs),
    )
    returns = run_rows(env_name, tiled, policies, float(action_noise), seed, batch_size, progress)
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
    rows = validate_rows(env_name, states, len(policies), policy_index, horizon, first_action, 1.0)
    spec = get_spec(env_name)
    n, h, s = len(rows.states), int(rows.horizon.max()), rows.states.shape[1]
    record = {
        "observations": np.full((n, h + 1, spec.obs_dim), np.nan),
        "states": np.full((n, h + 1, s), np.nan),
        "actions": np.full((n, h, spec.act_dim), np.nan, dtype=np.float32),
        "rewards": np.full((n, h), np.nan),
        "valid": np.zeros((n, h), dtype=bool),
    }
    run_rows(env_name, rows, policies, 0.0, 0, batch_size, progress, record=record)
    return Trajectories(**record)
