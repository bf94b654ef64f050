"""Member value estimates of both sides of every query, and the profile's query subset."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import get_profile
from ..dynamics import rollout_values
from ..envs import base_env_name, get_spec

if TYPE_CHECKING:
    import torch

    from ..dynamics import DynamicsEnsemble
    from ..envs import EnvSpec
    from ..queries import QuerySet


def estimate_values(
    model: DynamicsEnsemble,
    queries: QuerySet,
    policies: Sequence[Any] | None = None,
    runs: int = 1,
    mixture: bool = False,
    seed: int = 0,
    reduce_runs: bool = True,
    device: torch.device | str | None = None,
    memory_budget: int | None = None,
    progress: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Every member's value estimate of both sides of every query.

    Side a of query i starts at ``obs_a[i]``, takes ``action_a[i]``, then follows policy
    level ``policy_a[i]`` for ``horizon[i] - 1`` more steps inside the model; returns are
    discounted by ``gamma[i]`` and stop at the model's termination. All queries, both sides,
    all members and all runs are simulated together (:func:`opcc_edu.dynamics.rollout_values`,
    which first checks that the values fit in memory).

    Args:
        model: a trained ensemble with M members.
        queries: a :class:`opcc_edu.queries.QuerySet` with N queries.
        policies: the query policies, index i = level i + 1 (None:
            :func:`opcc_edu.policies.load_policies` of the queries' environment).
        runs: Monte-Carlo runs R per member (more than 1 only helps stochastic models or
            mixtures).
        mixture: advance each trajectory with a random member per step.
        seed: seed of model noise and the mixture.
        reduce_runs: average over runs and return (N, M); else return (N, M, R).
        device: torch device (default: the model's).
        memory_budget: bytes of activations per rollout chunk (default: automatic).
        progress: show a progress bar.

    Returns:
        ``(values_a, values_b)``, each (N, M) float64 (or (N, M, R)).
    """
    if policies is None:
        from ..queries import query_policies

        policies = query_policies(queries)
    n = len(queries)
    obs = np.concatenate([queries.obs_a, queries.obs_b]).astype(np.float32)
    first = np.concatenate([queries.action_a, queries.action_b]).astype(np.float32)
    level = np.concatenate([queries.policy_a, queries.policy_b]).astype(np.int64)
    if n and (level.min() < 1 or level.max() > len(policies)):
        raise ValueError(
            f"query policy levels must lie in [1, {len(policies)}] (one per policy), got [{level.min()}, {level.max()}]"
        )
    values = rollout_values(
        model,
        policies,
        obs,
        policy_index=level - 1,
        horizon=np.concatenate([queries.horizon, queries.horizon]),
        first_action=first,
        gamma=np.concatenate([queries.gamma, queries.gamma]),
        runs=runs,
        mixture=mixture,
        seed=seed,
        memory_budget=memory_budget,
        device=device,
        progress=progress,
    )
    if reduce_runs:
        values = values.mean(axis=-1)
    return values[:n], values[n:]


def answering_env(env_name: str | EnvSpec, queries: QuerySet) -> EnvSpec:
    """The environment a baseline trains and answers in for ``queries`` (its spec): theirs, which
    for the original benchmark's maze sets is the ``-d4rl-goal`` variant of ``env_name``.

    Raises:
        ValueError: the queries belong to another environment.
    """
    if base_env_name(queries.spec) != base_env_name(env_name):
        raise ValueError(f"queries are for {queries.env_name!r} but env_name is {get_spec(env_name).name!r}")
    return queries.spec


def select_profile_queries(queries: QuerySet, n: int | None = None, seed: int = 0) -> QuerySet:
    """A reproducible subset of ``n`` queries, spread evenly over horizons.

    Args:
        queries: the full set.
        n: queries to keep (None: the active profile's ``queries_per_env``; 0 or at least N
            keeps all).
        seed: seed of the draw within each horizon.

    Returns:
        The subset (``queries`` itself when all are kept), in the original order: the rows
        :func:`profile_query_indices` names.
    """
    keep = profile_query_indices(queries, n, seed)
    return queries if len(keep) == len(queries) else queries.select(keep)


def profile_query_indices(queries: QuerySet, n: int | None = None, seed: int = 0) -> np.ndarray:
    """The rows of ``queries`` that :func:`select_profile_queries` keeps, ascending.

    Two subsets of one query set drawn at different ``n`` are not nested; their shared queries
    are the intersection of their indices (``np.intersect1d``).
    """
    n = get_profile().queries_per_env if n is None else int(n)
    total = len(queries)
    if n <= 0 or n >= total:
        return np.arange(total)
    rng = np.random.default_rng(seed)
    horizons = np.asarray(queries.horizon)
    levels, counts = np.unique(horizons, return_counts=True)
    quota = counts * n / total  # proportional allocation, largest remainders round up
    share = np.floor(quota).astype(int)
    share[np.argsort(-(quota - share), kind="stable")[: n - share.sum()]] += 1
    keep = [
        rng.choice(np.flatnonzero(horizons == h), size=int(c), replace=False)
        for h, c in zip(levels, share, strict=True)
    ]
    return np.sort(np.concatenate(keep))
