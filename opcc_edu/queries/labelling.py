"""Ground-truth labels by simulation: Monte-Carlo returns of both sides of every query.

Both sides of C queries are simulated together, as 2C rows of one call to
:func:`opcc_edu.simulate.monte_carlo_returns`: rows ``0 .. C-1`` are side a, rows
``C .. 2C-1`` side b. Policy levels are 1-based, the policy list 0-based.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..envs import get_spec
from ..simulate import BatchSimulator, monte_carlo_returns
from .queryset import QuerySet

if TYPE_CHECKING:
    import torch


def simulate_both_sides(
    env_name: str,
    state_a: np.ndarray,
    state_b: np.ndarray,
    policies: Sequence[torch.nn.Module],
    policy_a: np.ndarray,
    policy_b: np.ndarray,
    horizon: np.ndarray,
    action_a: np.ndarray,
    action_b: np.ndarray,
    gamma: float | np.ndarray,
    runs: int,
    seed: int,
    progress: bool,
) -> np.ndarray:
    """(2, N, R) Monte-Carlo returns of side a (index 0) and side b (index 1) of N queries.

    Both sides run as 2N rows of one :func:`opcc_edu.simulate.monte_carlo_returns` call; policy
    levels ``policy_a``/``policy_b`` are 1-based indices into ``policies``.
    """
    n = len(horizon)
    returns = monte_carlo_returns(
        env_name,
        np.concatenate([state_a, state_b]),
        policies,
        np.concatenate([policy_a, policy_b]) - 1,
        np.concatenate([horizon, horizon]),
        np.concatenate([action_a, action_b]),
        gamma,
        runs=runs,
        seed=seed,
        progress=progress,
    )
    return returns.reshape(2, n, returns.shape[1])


def observations(env_name: str, states: np.ndarray) -> np.ndarray:
    """(N, D) float32 observations of the simulator states ``states`` (N, S)."""
    if len(states) == 0:
        return np.zeros((0, get_spec(env_name).obs_dim), dtype=np.float32)
    sim = BatchSimulator(env_name, len(states))
    sim.reset_to(states)
    obs = sim.observations().astype(np.float32)
    sim.close()
    return obs


def recompute_values(
    queries: QuerySet, policies: Sequence[torch.nn.Module] | None = None, progress: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Recompute both values of every query from its stored states in the simulator.

    Args:
        queries: the query set.
        policies: the policies of its levels (default: the shipped ones).
        progress: show a progress bar.

    Returns:
        ``(value_a (N,), value_b (N,))`` float64.
    """
    if policies is None:
        from .metadata import query_policies

        policies = query_policies(queries)
    returns = simulate_both_sides(
        queries.env_name,
        queries.state_a,
        queries.state_b,
        policies,
        queries.policy_a,
        queries.policy_b,
        queries.horizon,
        queries.action_a,
        queries.action_b,
        np.concatenate([queries.gamma, queries.gamma]),
        queries.runs,
        0,
        progress,
    )
    value = returns.mean(axis=2)
    return value[0], value[1]
