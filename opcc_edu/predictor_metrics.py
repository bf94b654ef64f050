"""The value estimates on their own: DOPE's error, rank correlation and regret, per start state.

A policy-comparison answer is right or wrong for two reasons at once: the value estimates (the
*predictor*) and the order in which the confidence ranks them. The metrics of
:mod:`opcc_edu.metrics` judge the pair; this module judges the predictor alone, with the three
metrics of the DOPE benchmark (Fu et al., 2021, Section 3.2 and Appendix A.1):

* **Absolute error** ``|V_hat - V|`` of every estimate, normalised as DOPE normalises it: divided
  by the range (max - min) of the true values, here per environment and horizon, so horizons
  and environments share one scale. A range of 0 leaves the normalised error undefined (NaN).
* **Rank correlation**: Spearman's rho between estimated and true values across the policies
  of one start state (Pearson correlation of the ranks, ties given their average rank, as
  ``scipy.stats.spearmanr``). A start state whose true or estimated values are all equal has
  no ranking and no rho (NaN); means skip it and count the start states that have one.
* **Regret@1**: the true value of the best policy of a start state minus the true value of the
  policy the estimates pick. When several policies tie for the best estimate the pick is taken
  at random among them (expected regret), so tied estimates earn no credit. Normalised by the
  same range as the absolute error.

Where DOPE has one start distribution and a set of policies, a query set has start states.
Both sides of every query are a *side* ``(start observation, first action, policy, horizon)``
with a true value; sides that share a start observation and a horizon form one start state's
set of policies (a side's policy is "take the first action, then follow the policy", so two
sides of one policy with different first actions count as two). Duplicate sides (the same
side in several queries) are merged, their estimates and true values averaged.

Shapes: N queries, S sides, G start-state groups.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from .names import ALL_HORIZONS
from .utils import check_finite

if TYPE_CHECKING:
    from .queries import QuerySet

__all__ = [
    "PREDICTOR_METRICS",
    "PREDICTOR_METRIC_NAMES",
    "PolicySides",
    "normalized_absolute_error",
    "predictor_metrics",
    "query_sides",
    "rank_correlation_by_group",
    "regret_at_1_by_group",
]

#: The keys :func:`predictor_metrics` reports per horizon, in display order.
PREDICTOR_METRICS: tuple[str, ...] = (
    "normalized_abs_error",
    "rank_correlation",
    "normalized_regret_at_1",
    "abs_error",
    "regret_at_1",
    "value_range",
    "n_sides",
    "n_groups",
    "n_ranked_groups",
)

#: Display names (with the better direction) of :data:`PREDICTOR_METRICS`.
PREDICTOR_METRIC_NAMES: dict[str, str] = {
    "normalized_abs_error": "normalised abs. error (↓)",
    "rank_correlation": "rank correlation (↑)",
    "normalized_regret_at_1": "normalised regret@1 (↓)",
    "abs_error": "abs. error (↓)",
    "regret_at_1": "regret@1 (↓)",
    "value_range": "range of true values",
    "n_sides": "sides",
    "n_groups": "start states",
    "n_ranked_groups": "start states ranked",
}


def _as_values(values: Any, argument: str, n: int | None = None) -> np.ndarray:
    """``values`` as a 1-D finite float64 array (of length ``n`` when given), or a ValueError."""
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{argument} must be a 1-D array, got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{argument} is empty; at least one value is needed")
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise ValueError(f"{argument} must be real numbers, got dtype {array.dtype}")
    array = check_finite(array.astype(np.float64), argument)
    if n is not None and array.size != n:
        raise ValueError(f"{argument} has {array.size} entries but the other inputs have {n}")
    return array


def _as_labels(labels: Any, argument: str, n: int) -> np.ndarray:
    """``labels`` as a 1-D int64 array of length ``n`` (a group id or a horizon per value)."""
    array = np.asarray(labels)
    if array.ndim != 1 or array.size != n:
        raise ValueError(f"{argument} must be a 1-D array of {n} labels (one per value), got shape {array.shape}")
    if not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{argument} must hold integers, got dtype {array.dtype}")
    return array.astype(np.int64)


def normalized_absolute_error(estimate: Any, truth: Any, horizon: Any) -> np.ndarray:
    """(S,) ``|estimate - truth| / range``, the range of ``truth`` among the values of each horizon.

    Args:
        estimate: (S,) estimated values.
        truth: (S,) true values.
        horizon: (S,) horizon of each value; the range is taken per horizon.

    Returns:
        (S,) float64 normalised absolute errors; NaN at a horizon whose true values are all equal.
    """
    truth = _as_values(truth, "truth")
    estimate = _as_values(estimate, "estimate", truth.size)
    horizon = _as_labels(horizon, "horizon", truth.size)
    value_range = _range_by(truth, horizon)
    with np.errstate(divide="ignore", invalid="ignore"):
        error = np.abs(estimate - truth) / value_range
    return np.where(value_range > 0, error, np.nan)


def _range_by(values: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(S,) max - min of ``values`` within each value's label."""
    _, inverse = np.unique(labels, return_inverse=True)
    top = np.full(inverse.max() + 1, -np.inf)
    bottom = np.full(inverse.max() + 1, np.inf)
    np.maximum.at(top, inverse, values)
    np.minimum.at(bottom, inverse, values)
    return (top - bottom)[inverse]


def _ranks_within(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """(S,) 1-based rank of every value within its group, ties given their average rank."""
    n = values.size
    order = np.lexsort((values, group))
    g, v = group[order], values[order]
    new_group = np.r_[True, g[1:] != g[:-1]]
    start = np.maximum.accumulate(np.where(new_group, np.arange(n), 0))
    position = (np.arange(n) - start + 1).astype(np.float64)
    run = np.cumsum(new_group | np.r_[True, v[1:] != v[:-1]]) - 1
    average = np.bincount(run, weights=position) / np.bincount(run)
    ranks = np.empty(n)
    ranks[order] = average[run]
    return ranks


def _group_index(group: Any, n: int) -> tuple[np.ndarray, int]:
    """Dense group ids 0..G-1 (in order of the sorted labels) and G."""
    labels = _as_labels(group, "group", n)
    _, inverse = np.unique(labels, return_inverse=True)
    return inverse, int(inverse.max()) + 1


def rank_correlation_by_group(estimate: Any, truth: Any, group: Any) -> np.ndarray:
    """(G,) Spearman's rho between ``estimate`` and ``truth`` within each group.

    Vectorised over groups (one sort, no loop); within a group it equals
    ``scipy.stats.spearmanr(estimate, truth).statistic``.

    Args:
        estimate: (S,) estimated values.
        truth: (S,) true values.
        group: (S,) integer group label of each value; groups are returned in sorted label order.

    Returns:
        (G,) float64 rho; NaN for a group of one value, or whose estimates or true values are
        all equal (no ranking to correlate).
    """
    truth = _as_values(truth, "truth")
    estimate = _as_values(estimate, "estimate", truth.size)
    index, n_groups = _group_index(group, truth.size)
    rank_e, rank_t = _ranks_within(estimate, index), _ranks_within(truth, index)
    count = np.bincount(index, minlength=n_groups).astype(np.float64)
    centred_e = rank_e - (np.bincount(index, rank_e, n_groups) / count)[index]
    centred_t = rank_t - (np.bincount(index, rank_t, n_groups) / count)[index]
    covariance = np.bincount(index, centred_e * centred_t, n_groups)
    spread = np.sqrt(np.bincount(index, centred_e**2, n_groups) * np.bincount(index, centred_t**2, n_groups))
    # Ranks are multiples of 1/2, so a constant group's spread is exactly 0.
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = covariance / spread
    return np.where(spread > 0, np.clip(rho, -1.0, 1.0), np.nan)


def regret_at_1_by_group(estimate: Any, truth: Any, group: Any) -> np.ndarray:
    """(G,) true-value loss of picking each group's policy with the best estimate.

    ``max(truth) - truth[pick]``, where ``pick`` has the largest estimate of its group; with a
    tie for the largest estimate, the mean true value of the tied policies (the expected regret
    of a random pick among them).

    Args:
        estimate: (S,) estimated values.
        truth: (S,) true values.
        group: (S,) integer group label of each value; groups are returned in sorted label order.

    Returns:
        (G,) float64 regret, >= 0 (0 for a group of one value).
    """
    truth = _as_values(truth, "truth")
    estimate = _as_values(estimate, "estimate", truth.size)
    index, n_groups = _group_index(group, truth.size)
    best_truth = np.full(n_groups, -np.inf)
    best_estimate = np.full(n_groups, -np.inf)
    np.maximum.at(best_truth, index, truth)
    np.maximum.at(best_estimate, index, estimate)
    picked = estimate == best_estimate[index]
    n_picked = np.bincount(index, picked.astype(np.float64), n_groups)
    picked_truth = np.bincount(index, np.where(picked, truth, 0.0), n_groups) / n_picked
    return np.maximum(best_truth - picked_truth, 0.0)


@dataclasses.dataclass
class PolicySides:
    """The distinct sides of a query set, with estimates, grouped by start state and horizon."""

    estimate: np.ndarray
    """(S,) estimated value of each side (mean over the queries it appears in)."""
    truth: np.ndarray
    """(S,) true value of each side (mean over the queries it appears in)."""
    horizon: np.ndarray
    """(S,) horizon of each side."""
    policy: np.ndarray
    """(S,) policy level of each side."""
    group: np.ndarray
    """(S,) start-state group of each side: 0..G-1, one per (start observation, horizon)."""

    @property
    def n_groups(self) -> int:
        """Start-state groups G (one side or more)."""
        return int(self.group.max()) + 1


def query_sides(queries: QuerySet, estimate_a: Any, estimate_b: Any) -> PolicySides:
    """The distinct sides of ``queries`` with their estimates, grouped by start state and horizon.

    A side is ``(start observation, first action, policy, horizon)``; repeated sides are merged
    (estimates and true values averaged).

    Args:
        queries: N queries.
        estimate_a: (N,) estimated values of side a.
        estimate_b: (N,) estimated values of side b.
    """
    n = len(queries.target)
    estimate = np.concatenate([_as_values(estimate_a, "estimate_a", n), _as_values(estimate_b, "estimate_b", n)])
    truth = np.concatenate([queries.value_a, queries.value_b]).astype(np.float64)
    horizon = np.concatenate([queries.horizon, queries.horizon]).astype(np.int64)
    policy = np.concatenate([queries.policy_a, queries.policy_b]).astype(np.int64)
    obs = np.concatenate([queries.obs_a, queries.obs_b]).astype(np.float64)
    action = np.concatenate([queries.action_a, queries.action_b]).astype(np.float64)
    start = np.column_stack([obs, horizon])
    side_keys = np.column_stack([start, action, policy])
    _, first, inverse = np.unique(side_keys, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    count = np.bincount(inverse).astype(np.float64)
    _, group = np.unique(start[first], axis=0, return_inverse=True)
    return PolicySides(
        estimate=np.bincount(inverse, estimate) / count,
        truth=np.bincount(inverse, truth) / count,
        horizon=horizon[first],
        policy=policy[first],
        group=group.reshape(-1).astype(np.int64),
    )


def _summarise(sides: PolicySides, mask: np.ndarray) -> dict[str, float | int | None]:
    """The metrics of the sides in ``mask`` (whole groups), JSON-ready (NaN becomes None)."""
    estimate, truth, horizon, group = (sides.estimate[mask], sides.truth[mask], sides.horizon[mask], sides.group[mask])
    value_range = _range_by(truth, horizon)
    nae = normalized_absolute_error(estimate, truth, horizon)
    _, index = np.unique(group, return_inverse=True)
    size = np.bincount(index)
    several = size >= 2
    rho = rank_correlation_by_group(estimate, truth, index)[several]
    regret = regret_at_1_by_group(estimate, truth, index)[several]
    # every side of a group shares its horizon, so any side's range is the group's
    group_range = np.zeros(size.size)
    group_range[index] = value_range
    with np.errstate(divide="ignore", invalid="ignore"):
        normalized_regret = np.where(group_range[several] > 0, regret / group_range[several], np.nan)

    def mean(values: np.ndarray) -> float | None:
        values = values[np.isfinite(values)]
        return float(values.mean()) if values.size else None

    ranges = np.unique(horizon)
    return {
        "normalized_abs_error": mean(nae),
        "rank_correlation": mean(rho),
        "normalized_regret_at_1": mean(normalized_regret),
        "abs_error": mean(np.abs(estimate - truth)),
        "regret_at_1": mean(regret),
        "value_range": float(value_range[0]) if ranges.size == 1 else None,
        "n_sides": int(mask.sum()),
        "n_groups": int(several.sum()),
        "n_ranked_groups": int(np.isfinite(rho).sum()),
    }


def predictor_metrics(queries: QuerySet, estimate_a: Any, estimate_b: Any) -> dict[str, dict[str, float | int | None]]:
    """DOPE's metrics of value estimates on a query set, per horizon and over all horizons.

    Args:
        queries: N queries (their true values ``value_a``, ``value_b`` are the ground truth).
        estimate_a: (N,) estimated values of side a (e.g. the ensemble mean).
        estimate_b: (N,) estimated values of side b.

    Returns:
        ``metrics[h]`` for every horizon ``h`` (a string) and :data:`~opcc_edu.names.ALL_HORIZONS`,
        each with the keys of :data:`PREDICTOR_METRICS`: ``normalized_abs_error`` (mean over
        sides, each normalised by its horizon's range), ``rank_correlation`` (mean rho over the
        start states of two sides or more that have one), ``normalized_regret_at_1`` and
        ``regret_at_1`` (mean over the start states of two sides or more), ``abs_error``,
        ``value_range`` (the horizon's range; None for all horizons together), ``n_sides``,
        ``n_groups`` (start states with two sides or more) and ``n_ranked_groups`` (those with a
        rho). A mean over nothing is None. JSON-ready.
    """
    sides = query_sides(queries, estimate_a, estimate_b)
    out = {str(int(h)): _summarise(sides, sides.horizon == h) for h in np.unique(sides.horizon)}
    out[ALL_HORIZONS] = _summarise(sides, np.ones(sides.horizon.size, dtype=bool))
    return out
