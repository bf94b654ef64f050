"""Ground truth: exact policy values in the real simulator, many queries at once.

A policy-comparison query needs two values ``V^pi(s, h)``: start from a simulator state, take a
first action, follow a policy for the remaining steps, and add up the rewards. The OPCC
benchmark labels every query by Monte-Carlo simulation in the environment itself.

This package does that for thousands of queries together:

* :class:`BatchSimulator` holds ``n`` MuJoCo ``MjData`` of one ``MjModel`` and reproduces
  ``make_env(name).step`` bit for bit (rewards and terminations included; see :mod:`.batch`).
* :func:`monte_carlo_returns` steps all queries of a batch together with ONE batched policy
  forward per step (:class:`opcc_edu.policies.StackedActors` gathers each row's policy), stops
  each row at its own horizon, and stops an episode for good when it terminates.
* :func:`simulate_trajectories` records the same rollouts step by step for plots.

Modules: :mod:`.batch` (the simulator), :mod:`.rollout` (rows, the batched policy, the
stepping loop), :mod:`.values` (Monte-Carlo returns and trajectories).

The policies and the simulator are deterministic, so one run per query is already exact;
``runs`` is kept because a stochastic variant (``action_noise > 0``) makes runs differ.

Policies are evaluated in float64 and their actions rounded to float32 (the action space's
type). Float32 matrix products round differently for different batch sizes, which would make
a query's value depend on the other queries that share its batch; in float64 the rounding
error is far below float32 resolution, so the float32 actions, and hence the values, are the
same in any batch and in a one-query loop.
"""

from __future__ import annotations

from .batch import OBS_VELOCITY_CLIP, BatchSimulator, LocomotionRewardSpec
from .rollout import policy_actions_of, stacked_policy
from .values import Trajectories, monte_carlo_returns, simulate_trajectories

__all__ = [
    "OBS_VELOCITY_CLIP",
    "BatchSimulator",
    "LocomotionRewardSpec",
    "Trajectories",
    "monte_carlo_returns",
    "policy_actions_of",
    "simulate_trajectories",
    "stacked_policy",
]
