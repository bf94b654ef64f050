"""The knobs of the construction recipe, in one frozen, validated dataclass."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..config import get_profile
from ..names import HORIZONS
from ..utils import check_positive_int

DEFAULT_N_QUERIES = 1500
"""Queries per shipped set (the paper's count, Table 8)."""
DEFAULT_SEED = 0
"""Seed of the shipped sets."""


@dataclasses.dataclass(frozen=True)
class QueryRecipe:
    """How a query set is built (everything but the seed, the policies and the progress bars).

    The defaults are those of the shipped sets (with ``runs`` from the active profile).
    """

    n_queries: int = DEFAULT_N_QUERIES
    """Queries to select, spread evenly over ``horizons`` (and over the two forms of each
    horizon where enough candidates survive the filter)."""
    runs: int | None = None
    """Monte-Carlo runs R per side (None: the active profile's ``mc_runs``)."""
    horizons: Sequence[int] = HORIZONS
    """Query horizons (stored as a tuple of distinct positive ints)."""
    candidates_per_round: int = 2000
    """Candidates drawn per horizon and round, half of each form (the paper draws 2000 per
    horizon once). A form whose candidates rarely pass the filter draws more (up to 8 times as
    many) in later rounds, in proportion to its pass rate."""
    max_rounds: int = 20
    """Rounds of fresh candidates before giving up on a horizon that lacks survivors."""
    episodes_per_behavior: int = 8
    """Episodes per behaviour for the start states (:func:`opcc_edu.build.collect_start_states`)."""
    episode_steps: int | None = None
    """Length of those episodes (None: the environment's limit)."""
    gamma: float = 1.0
    """Discount of every query."""

    def __post_init__(self) -> None:
        check_positive_int(self.n_queries, "n_queries")
        if self.runs is not None:
            check_positive_int(self.runs, "runs")
        check_positive_int(self.candidates_per_round, "candidates_per_round", minimum=2)
        check_positive_int(self.max_rounds, "max_rounds")
        check_positive_int(self.episodes_per_behavior, "episodes_per_behavior")
        if self.episode_steps is not None:
            check_positive_int(self.episode_steps, "episode_steps")
        horizons = tuple(check_positive_int(h, "horizons entry") for h in self.horizons)
        if len(set(horizons)) != len(horizons) or not horizons:
            raise ValueError(f"horizons must be distinct positive integers, got {horizons!r}")
        object.__setattr__(self, "horizons", horizons)
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must lie in [0, 1], got {self.gamma!r}")

    @classmethod
    def from_overrides(cls, recipe: QueryRecipe | None = None, **overrides: object) -> QueryRecipe:
        """``recipe`` (default: the shipped recipe) with some fields replaced.

        Raises:
            ValueError: an unknown field (lists the valid ones) or an invalid value.
        """
        if recipe is not None and not isinstance(recipe, QueryRecipe):
            raise ValueError(
                f"recipe must be a QueryRecipe or None, got {recipe!r}; pass the recipe's fields as keywords "
                f"({', '.join(f.name for f in dataclasses.fields(cls))})"
            )
        fields = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(overrides) - set(fields))
        if unknown:
            raise ValueError(f"unknown query recipe field(s) {unknown}; valid fields: {', '.join(fields)}")
        return dataclasses.replace(recipe or cls(), **overrides)

    def runs_or_profile(self) -> int:
        """``runs``, or the active profile's ``mc_runs`` when it is None."""
        return get_profile().mc_runs if self.runs is None else self.runs
