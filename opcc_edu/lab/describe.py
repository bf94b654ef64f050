"""What a query set asks, in a few numbers: its forms, its value gaps and how easy a rule finds it.

Two query sets of the same environment can differ a lot in difficulty: a set with many
same-state queries, or with policies compared with themselves, asks about first actions and
small value differences; a set whose gaps are wide asks about policies that differ clearly.
:func:`describe_queries` gathers the numbers that show this (the share of each form, the
quantiles of the value gap, the share of ``V_a < V_b`` answers and the error of the no-model
rule of :mod:`opcc_edu.baselines.heuristic`) so that a chapter or ``opcc-edu info queries ENV``
can print them before any model is trained.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from ..envs import get_spec
from ..queries.queryset import QuerySet

if TYPE_CHECKING:
    import pandas as pd

FORMS: tuple[str, ...] = ("same-state", "two-state", "all")
"""Columns of :meth:`QuerySetDescription.table`: both sides start in one state, in two, either."""

GAP_QUANTILES: dict[str, float] = {
    "min": 0.0,
    "p05": 0.05,
    "p25": 0.25,
    "median": 0.5,
    "p75": 0.75,
    "p95": 0.95,
    "max": 1.0,
}
"""Names and levels of the value-gap quantiles in :attr:`QuerySetDescription.gap_quantiles`."""


@dataclasses.dataclass(frozen=True)
class QuerySetDescription:
    """Summary statistics of one query set (built by :func:`describe_queries`)."""

    env_name: str
    """Environment of the queries."""
    recipe: str
    """Recipe that built the set (``"hard"`` for sets that record none)."""
    n: int
    """Number of queries N."""
    counts: dict[int, dict[str, int]]
    """Queries per horizon and form: ``{h: {"same-state": ., "two-state": ., "all": .}}``."""
    same_state_share: float
    """Share of queries whose two sides start in the same state."""
    self_pair_share: float
    """Share of queries with ``policy_a == policy_b``."""
    same_state_and_policy_share: float
    """Share of queries with the same state and the same policy (they differ in the first action only)."""
    gap_unit: str
    """Unit of :attr:`gap_quantiles`: ``"h"`` (gap / horizon, mazes) or ``"return"`` (raw, locomotion)."""
    gap_quantiles: dict[str, float]
    """Quantiles of the value gap ``|value_a - value_b|`` in :attr:`gap_unit` (keys of :data:`GAP_QUANTILES`)."""
    gap_at_horizon_share: float | None
    """Mazes: share of queries with gap == h (one side always in the goal, the other never); None otherwise."""
    target_share: float
    """Share of queries with ``V_a < V_b`` (target 1)."""
    heuristic_error: float | None
    """0/1 error of the no-model rule (:func:`opcc_edu.baselines.heuristic.heuristic_error`); None if skipped."""
    heuristic_tie_share: float | None
    """Share of queries the rule cannot tell apart (equal scores, answered 0); None if skipped."""

    def table(self) -> pd.DataFrame:
        """Query counts as a DataFrame: one row per horizon, columns same-state, two-state, all."""
        import pandas as pd

        frame = pd.DataFrame.from_dict(self.counts, orient="index", columns=list(FORMS))
        frame.index.name = "horizon"
        return frame

    def as_dict(self) -> dict[str, Any]:
        """The description as a JSON-ready dict (horizon keys become strings)."""
        data = dataclasses.asdict(self)
        data["counts"] = {str(h): dict(row) for h, row in self.counts.items()}
        return data

    def lines(self) -> list[str]:
        """A compact printable summary, one string per line (for ``opcc-edu info queries ENV``)."""
        unit = "|V_a - V_b| / h" if self.gap_unit == "h" else "|V_a - V_b|"
        q = {
            name: f"{value:.2f}" if self.gap_unit == "h" else f"{value:.1f}"
            for name, value in self.gap_quantiles.items()
        }
        lines = [
            f"Query set {self.env_name} (recipe {self.recipe}): {self.n} queries",
            f"  same-state {self.same_state_share:.1%}, self pairs (policy_a == policy_b) {self.self_pair_share:.1%}, "
            f"both {self.same_state_and_policy_share:.1%}",
            f"  {'horizon':>8} " + " ".join(f"{form:>10}" for form in FORMS),
        ]
        lines += [f"  {h:>8} " + " ".join(f"{row[form]:>10}" for form in FORMS) for h, row in self.counts.items()]
        lines.append(
            f"  gap {unit}: min {q['min']}, 5% {q['p05']}, 25% {q['p25']}, median {q['median']}, "
            f"75% {q['p75']}, 95% {q['p95']}, max {q['max']}"
        )
        if self.gap_at_horizon_share is not None:
            lines.append(f"  gap == h (one side always in the goal, the other never): {self.gap_at_horizon_share:.1%}")
        lines.append(f"  V_a < V_b (target 1): {self.target_share:.1%}")
        if self.heuristic_error is not None:
            lines.append(
                f"  no-model heuristic error: {self.heuristic_error:.3f} "
                f"(ties it cannot break: {self.heuristic_tie_share:.1%})"
            )
        return lines


def describe_queries(query_set: QuerySet, heuristic: bool = True) -> QuerySetDescription:
    """Describe a query set: forms, counts, value gaps, answer balance and the heuristic's error.

    Args:
        query_set: a non-empty :class:`QuerySet`.
        heuristic: also score the no-model rule (locomotion reads the policy table, which
            imports torch); False leaves ``heuristic_error`` and ``heuristic_tie_share`` None.

    Returns:
        A :class:`QuerySetDescription`.

    Raises:
        ValueError: ``query_set`` is not a QuerySet or is empty, its environment is unknown
            (lists the valid names), or ``heuristic`` is not a bool.
    """
    if not isinstance(query_set, QuerySet):
        raise ValueError(f"query_set must be a QuerySet, got {type(query_set).__name__}")
    if not isinstance(heuristic, bool):
        raise ValueError(f"heuristic must be True or False, got {heuristic!r}")
    n = len(query_set)
    if n == 0:
        raise ValueError("query_set must hold at least one query")
    spec = get_spec(query_set.env_name)
    same = query_set.same_state.astype(bool)
    self_pair = query_set.policy_a == query_set.policy_b
    counts = {}
    for h in query_set.horizons:
        at_h = query_set.horizon == h
        counts[h] = {
            "same-state": int((at_h & same).sum()),
            "two-state": int((at_h & ~same).sum()),
            "all": int(at_h.sum()),
        }
    gap = query_set.gap
    horizon = query_set.horizon.astype(np.float64)
    scaled = gap / horizon if spec.is_maze else gap
    quantiles = np.quantile(scaled, list(GAP_QUANTILES.values()))
    error = ties = None
    if heuristic:
        from ..baselines.heuristic import heuristic_answers

        answers = heuristic_answers(query_set)
        error = float(np.mean(answers.prediction != query_set.target))
        ties = float(np.mean(answers.score_a == answers.score_b))
    return QuerySetDescription(
        env_name=spec.name,
        recipe=str(query_set.metadata.get("recipe", "hard")),
        n=n,
        counts=counts,
        same_state_share=float(same.mean()),
        self_pair_share=float(self_pair.mean()),
        same_state_and_policy_share=float((same & self_pair).mean()),
        gap_unit="h" if spec.is_maze else "return",
        gap_quantiles={name: float(v) for name, v in zip(GAP_QUANTILES, quantiles, strict=True)},
        gap_at_horizon_share=float(np.isclose(gap, horizon, rtol=0.0, atol=1e-9).mean()) if spec.is_maze else None,
        target_share=float(query_set.target.mean()),
        heuristic_error=error,
        heuristic_tie_share=ties,
    )
