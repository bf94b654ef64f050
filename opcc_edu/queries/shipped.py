"""The shipped query sets (``opcc_edu/assets/queries/<recipe>/<env>.npz``): paths, loading, listing.

Two recipes, seven environments each (:data:`opcc_edu.names.QUERY_RECIPES`): ``paper``, the
default and the benchmark, built as the original benchmark built its sets, and ``hard``, the
package's earlier sets, shipped unchanged as a harder variant. Each was built with ``opcc-edu
build queries ENV --recipe R`` (:func:`opcc_edu.build.build_and_save_query_set`); its metadata
records the command, seed, package versions, the filter rule, the counts of every step and the
checksums of the policies it was labelled with, which :func:`load_queries` checks. The ``hard``
files predate recipe names and record none: a set without one is a ``hard`` set.
"""

from __future__ import annotations

from pathlib import Path

from ..envs import EnvSpec, base_env_name, base_spec, d4rl_goal_spec, get_spec
from ..names import DEFAULT_QUERY_RECIPE, ORIGINAL_RECIPES, QUERY_RECIPES
from ..utils import check_choice
from .metadata import verify_policies
from .queryset import QuerySet

QUERIES_DIR = Path(__file__).resolve().parents[1] / "assets" / "queries"
"""Folder of the shipped query sets (one subfolder per recipe)."""


def recipe_of(query_set: QuerySet) -> str:
    """The recipe a query set was built by (``"hard"`` for sets that predate recipe names)."""
    return str(query_set.metadata.get("recipe", "hard"))


def query_set_path(env_name: str | EnvSpec, recipe: str = DEFAULT_QUERY_RECIPE) -> Path:
    """Where the shipped query set of ``env_name`` built by ``recipe`` lives.

    Raises:
        ValueError: unknown environment or recipe (lists the valid ones).
    """
    check_choice(recipe, QUERY_RECIPES, "recipe")
    return QUERIES_DIR / recipe / f"{base_env_name(env_name)}.npz"


def recipe_env(env_name: str | EnvSpec, recipe: str) -> str:
    """The name of :func:`recipe_spec`."""
    return recipe_spec(env_name, recipe).name


def recipe_spec(env: str | EnvSpec, recipe: str) -> EnvSpec:
    """The environment a recipe's sets are answered in: a maze's ``-d4rl-goal`` variant for the
    original benchmark's sets (D4RL rewarded around another point than our goal), else itself."""
    check_choice(recipe, QUERY_RECIPES, "recipe")
    spec = base_spec(env)
    return d4rl_goal_spec(spec) if recipe in ORIGINAL_RECIPES and spec.is_maze else spec


def load_queries(env_name: str | EnvSpec, recipe: str = DEFAULT_QUERY_RECIPE, verify: bool = True) -> QuerySet:
    """The shipped query set of an environment (validated).

    Args:
        env_name: environment.
        recipe: ``"paper"`` (the default, the benchmark), ``"hard"`` (the harder variant),
            ``"original"`` (the original benchmark's sets, :mod:`opcc_edu.build.original`) or
            ``"original-relabelled"`` (those queries labelled again today).
        verify: check that the set was labelled with the currently shipped policies
            (:func:`opcc_edu.queries.verify_policies`).

    Returns:
        The set; ``metadata["recipe"]`` names its recipe.

    Raises:
        ValueError: unknown environment or recipe (lists the valid names), the file records
            another recipe than its folder, or (with ``verify``) the shipped policies differ
            from those the set was labelled with.
        FileNotFoundError: the set has not been built (``opcc-edu build queries ENV --recipe R``).
    """
    if not isinstance(verify, bool):
        raise ValueError(f"verify must be True or False, got {verify!r} (the recipe is the second argument)")
    path = query_set_path(env_name, recipe)
    if not path.exists():
        how = (
            "convert the original benchmark with `python scripts/import_original_benchmark.py SOURCE` and "
            "`python scripts/relabel_original_benchmark.py`"
            if recipe in ORIGINAL_RECIPES
            else f"build it with `opcc-edu build queries {base_env_name(env_name)} --recipe {recipe}`"
        )
        raise FileNotFoundError(f"{path} is missing; {how}")
    queries = QuerySet.load(path, get_spec(env_name))
    recorded = recipe_of(queries)
    if recorded != recipe:
        raise ValueError(f"{path} records recipe {recorded!r} but lies in the folder of recipe {recipe!r}")
    queries.metadata["recipe"] = recorded
    if verify:
        verify_policies(queries)
    return queries
