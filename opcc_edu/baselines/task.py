"""What a run answers, resolved once: :class:`Task` and :func:`resolve_task`.

The command line and :func:`opcc_edu.baselines.run_end_to_end` turn the names a user types
(environment, dataset, query recipe, profile) into one :class:`Task` and hand its objects down:
below this boundary no function looks an environment's name up again (a test counts them).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..config import Profile, get_profile
from ..names import DEFAULT_QUERY_RECIPE, QUERY_RECIPES
from ..utils import check_choice

if TYPE_CHECKING:
    from ..datasets import DatasetRecipe
    from ..envs import EnvSpec
    from ..queries import QuerySet


@dataclasses.dataclass(frozen=True)
class Task:
    """One environment's query set, training data and sizes, as objects."""

    spec: EnvSpec
    """The environment the queries are answered in (a maze's ``-d4rl-goal`` variant for the
    original benchmark's sets, :func:`opcc_edu.queries.recipe_spec`)."""
    dataset: DatasetRecipe
    """The recipe of the training data."""
    recipe: str
    """The query set's recipe (:data:`opcc_edu.names.QUERY_RECIPES`)."""
    profile: Profile
    """The sizes: data, query subset, Monte-Carlo runs, model."""

    @property
    def dataset_size(self) -> int:
        """Transitions of the training data: the profile's, capped by the recipe."""
        from ..datasets import resolve_size

        return resolve_size(self.dataset, None, self.profile)

    def queries(self) -> QuerySet:
        """The shipped set of :attr:`recipe`, reduced to the profile's ``queries_per_env``."""
        from ..queries import load_queries
        from .estimate import select_profile_queries

        return select_profile_queries(load_queries(self.spec, self.recipe), n=self.profile.queries_per_env)


def resolve_task(
    env_name: str | None = None,
    dataset_name: str | None = None,
    queries: str = DEFAULT_QUERY_RECIPE,
    profile: Profile | str | None = None,
) -> Task:
    """The :class:`Task` of an environment (None: :data:`opcc_edu.envs.DEFAULT_ENV`), a dataset
    (None: its default), a query recipe and a profile (None: the active one): the one place the
    names are looked up. An unknown one raises a ValueError naming the argument and the choices."""
    from ..datasets import get_recipe, resolve_dataset
    from ..envs import DEFAULT_ENV, get_spec
    from ..queries import recipe_spec

    spec = get_spec(DEFAULT_ENV if env_name is None else env_name)
    spec = recipe_spec(spec, check_choice(queries, QUERY_RECIPES, "queries"))
    return Task(spec, get_recipe(spec, resolve_dataset(spec, dataset_name)), queries, get_profile(profile))


__all__ = ["Task", "resolve_task"]
