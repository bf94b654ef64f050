"""Finite-horizon values on small tabular MDPs: exact dynamic programming and Monte Carlo.

The OPCC problem is stated for finite horizons ``h`` and discount ``gamma``:

    V^pi(s, h) = E[ sum_{t<h} gamma^t R(S_t, A_t) | S_0 = s, A_t ~ pi_t(S_t) ].

Policies may be *non-stationary* (a different decision rule per time step). A Q-value is the
value of a particular non-stationary policy: take action ``a`` at t = 0, then follow ``pi``.
This module computes all of these exactly by backward induction on a tabular MDP, and
estimates them by Monte-Carlo simulation so that the two can be compared.

Shapes use S states, K actions, H horizon, N rollouts. A policy is an array of action
probabilities: ``(S, K)`` for a stationary policy or ``(H, S, K)`` for a non-stationary one
(row ``t`` is the rule used at time ``t``); integer arrays ``(S,)`` / ``(H, S)`` of actions are
accepted too and mean deterministic policies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from .utils import check_positive_int


@dataclasses.dataclass(frozen=True)
class TabularMDP:
    """A finite MDP with deterministic expected rewards.

    Attributes:
        transitions: (S, K, S) array, ``transitions[s, a, s']`` = P(s' | s, a).
        rewards: (S, K) array of rewards R(s, a).
    """

    transitions: np.ndarray
    rewards: np.ndarray

    def __post_init__(self):
        P = np.asarray(self.transitions, dtype=np.float64)
        R = np.asarray(self.rewards, dtype=np.float64)
        if P.ndim != 3 or P.shape[0] != P.shape[2]:
            raise ValueError(f"transitions must have shape (S, K, S), got {P.shape}")
        if R.shape != P.shape[:2]:
            raise ValueError(f"rewards must have shape (S, K) = {P.shape[:2]}, got {R.shape}")
        if (P < 0).any() or not np.allclose(P.sum(-1), 1.0, atol=1e-9):
            raise ValueError("transitions must be non-negative and each transitions[s, a] must sum to 1")
        if not np.isfinite(R).all():
            raise ValueError("rewards must be finite")
        object.__setattr__(self, "transitions", P)
        object.__setattr__(self, "rewards", R)

    @property
    def n_states(self) -> int:
        return self.transitions.shape[0]

    @property
    def n_actions(self) -> int:
        return self.transitions.shape[1]


def random_mdp(n_states: int = 6, n_actions: int = 2, branching: int = 3, seed: int = 0) -> TabularMDP:
    """A random MDP: each (s, a) reaches ``branching`` random states with Dirichlet weights.

    Rewards are uniform on [0, 1]. Reproducible from ``seed``.
    """
    n_states = check_positive_int(n_states, "n_states")
    n_actions = check_positive_int(n_actions, "n_actions")
    branching = check_positive_int(branching, "branching")
    if branching > n_states:
        raise ValueError(f"branching must be <= n_states ({n_states}), got {branching}")
    rng = np.random.default_rng(seed)
    P = np.zeros((n_states, n_actions, n_states))
    for s in range(n_states):
        for a in range(n_actions):
            succ = rng.choice(n_states, size=branching, replace=False)
            P[s, a, succ] = rng.dirichlet(np.ones(branching))
    R = rng.uniform(0.0, 1.0, size=(n_states, n_actions))
    return TabularMDP(P, R)


def _policy_table(mdp: TabularMDP, policy, horizon: int) -> np.ndarray:
    """Normalise a policy to action probabilities of shape (H, S, K)."""
    S, K = mdp.n_states, mdp.n_actions
    pol = np.asarray(policy)
    if np.issubdtype(pol.dtype, np.integer):
        if pol.shape not in ((S,), (horizon, S)):
            raise ValueError(f"deterministic policy must have shape ({S},) or ({horizon}, {S}), got {pol.shape}")
        if (pol < 0).any() or (pol >= K).any():
            raise ValueError(f"policy actions must lie in [0, {K - 1}]")
        pol = np.eye(K)[pol]
    pol = np.asarray(pol, dtype=np.float64)
    if pol.shape == (S, K):
        pol = np.broadcast_to(pol, (horizon, S, K))
    if pol.shape != (horizon, S, K):
        raise ValueError(f"policy must have shape ({S}, {K}) or ({horizon}, {S}, {K}), got {pol.shape}")
    if (pol < 0).any() or not np.allclose(pol.sum(-1), 1.0, atol=1e-9):
        raise ValueError("policy probabilities must be non-negative and sum to 1 over actions")
    return pol


def first_action_policy(mdp: TabularMDP, policy: np.ndarray, action: int, horizon: int) -> np.ndarray:
    """The non-stationary policy "take ``action`` at t = 0, then follow ``policy``": (H, S, K)."""
    if not 0 <= int(action) < mdp.n_actions:
        raise ValueError(f"action must lie in [0, {mdp.n_actions - 1}], got {action!r}")
    pol = _policy_table(mdp, policy, horizon).copy()
    pol[0] = 0.0
    pol[0, :, int(action)] = 1.0
    return pol


def policy_value(mdp: TabularMDP, policy: np.ndarray, horizon: int, gamma: float = 1.0) -> np.ndarray:
    """Exact V^pi(s, h) for every state by backward induction.

    Args:
        mdp: the MDP.
        policy: (S, K) / (H, S, K) probabilities or (S,) / (H, S) integer actions.
        horizon: h >= 0; ``V(s, 0) = 0``.
        gamma: discount in [0, 1].

    Returns:
        (S,) array of values.
    """
    horizon = check_positive_int(horizon, "horizon", minimum=0)
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must lie in [0, 1], got {gamma!r}")
    if horizon == 0:
        return np.zeros(mdp.n_states)
    pol = _policy_table(mdp, policy, horizon)
    value = np.zeros(mdp.n_states)
    # Backward in time: at step t the remaining value is r + gamma * E[V_{t+1}].
    for t in reversed(range(horizon)):
        q = mdp.rewards + gamma * mdp.transitions @ value
        value = (pol[t] * q).sum(-1)
    return value


def q_value(mdp: TabularMDP, policy: np.ndarray, horizon: int, gamma: float = 1.0) -> np.ndarray:
    """Exact Q^pi(s, a, h): take ``a`` first, then follow ``pi`` for h - 1 steps. (S, K).

    ``policy`` is indexed from the start of the episode: after the first action, step t uses
    the policy's rule for time t (so a non-stationary policy is not shifted).
    """
    horizon = check_positive_int(horizon, "horizon")
    pol = _policy_table(mdp, policy, horizon)
    value = np.zeros(mdp.n_states)
    for t in reversed(range(1, horizon)):
        q = mdp.rewards + gamma * mdp.transitions @ value
        value = (pol[t] * q).sum(-1)
    return mdp.rewards + gamma * mdp.transitions @ value


def optimal_policy(mdp: TabularMDP, horizon: int, gamma: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Finite-horizon optimal values and the (non-stationary) greedy policy.

    Returns:
        ``(values (S,), actions (H, S))``; ``actions[t]`` is optimal at time t.
    """
    horizon = check_positive_int(horizon, "horizon")
    value = np.zeros(mdp.n_states)
    actions = np.zeros((horizon, mdp.n_states), dtype=np.int64)
    for t in reversed(range(horizon)):
        q = mdp.rewards + gamma * mdp.transitions @ value
        actions[t] = q.argmax(-1)
        value = q.max(-1)
    return value, actions


def monte_carlo_returns(
    mdp: TabularMDP,
    policy: np.ndarray,
    state: int,
    horizon: int,
    n_rollouts: int,
    gamma: float = 1.0,
    first_action: int | None = None,
    seed: int | np.random.Generator = 0,
) -> np.ndarray:
    """Simulate ``n_rollouts`` episodes from ``state`` and return their discounted returns (N,).

    All rollouts advance together (vectorised over N), one time step per loop iteration.
    ``first_action`` (optional) replaces the policy's choice at t = 0 -- a Q-value estimate.
    """
    horizon = check_positive_int(horizon, "horizon", minimum=0)
    n_rollouts = check_positive_int(n_rollouts, "n_rollouts")
    if not 0 <= int(state) < mdp.n_states:
        raise ValueError(f"state must lie in [0, {mdp.n_states - 1}], got {state!r}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    if horizon == 0:
        return np.zeros(n_rollouts)
    pol = _policy_table(mdp, policy, horizon)
    if first_action is not None:
        pol = first_action_policy(mdp, pol, first_action, horizon)
    cum_pol = np.cumsum(pol, axis=-1)
    cum_P = np.cumsum(mdp.transitions, axis=-1)
    states = np.full(n_rollouts, int(state))
    returns = np.zeros(n_rollouts)
    for t in range(horizon):
        # Inverse-CDF sampling; clip guards against round-off at the top of a CDF.
        actions = np.minimum((rng.random((n_rollouts, 1)) > cum_pol[t, states]).sum(-1), mdp.n_actions - 1)
        returns += gamma**t * mdp.rewards[states, actions]
        states = np.minimum((rng.random((n_rollouts, 1)) > cum_P[states, actions]).sum(-1), mdp.n_states - 1)
    return returns


def monte_carlo_error_curve(
    mdp: TabularMDP,
    policy: np.ndarray,
    state: int,
    horizon: int,
    rollout_counts: Sequence[int],
    n_repeats: int = 50,
    gamma: float = 1.0,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Root-mean-square error of the Monte-Carlo mean against the exact value, per rollout count.

    For each count n in ``rollout_counts`` the estimate is repeated ``n_repeats`` times with
    independent rollouts. The error should shrink like 1/sqrt(n).

    Returns:
        dict with ``counts`` (C,), ``rmse`` (C,), ``exact`` (scalar array), and ``std_return``
        (the standard deviation of a single return, estimated from the largest count).
    """
    counts = np.asarray([check_positive_int(int(c), "rollout_counts") for c in rollout_counts])
    n_repeats = check_positive_int(n_repeats, "n_repeats")
    exact = policy_value(mdp, policy, horizon, gamma)[state]
    rng = np.random.default_rng(seed)
    rmse = np.empty(len(counts))
    for i, n in enumerate(counts):
        returns = monte_carlo_returns(mdp, policy, state, horizon, int(n) * n_repeats, gamma, seed=rng)
        means = returns.reshape(n_repeats, int(n)).mean(-1)
        rmse[i] = np.sqrt(np.mean((means - exact) ** 2))
    std_return = returns.std(ddof=1)
    return {"counts": counts, "rmse": rmse, "exact": np.asarray(exact), "std_return": np.asarray(std_return)}
