"""Policy-comparison queries: the typed query set, its construction recipe, the shipped sets.

A policy-comparison query (PCQ) ``q = (s, pi, s_hat, pi_hat, h)`` asks whether
``V^pi(s, h) < V^pi_hat(s_hat, h)`` (paper Section 3.1); each side also carries a first action.

* :mod:`~opcc_edu.queries.queryset` -- :class:`QuerySet`, the data contract (validation, ``.npz``).
* :mod:`~opcc_edu.queries.recipe` -- :class:`QueryRecipe`, the knobs of the construction.
* :mod:`~opcc_edu.queries.starts` -- candidate start states (:func:`collect_start_states`).
* :mod:`~opcc_edu.queries.pairs` -- candidate queries: policy pairs and first actions.
* :mod:`~opcc_edu.queries.labelling` -- ground-truth values by simulation (:func:`recompute_values`).
* :mod:`~opcc_edu.queries.filtering` -- the ambiguity filter (:func:`gap_threshold`).
* :mod:`~opcc_edu.queries.selection` -- rounds of candidates, the same count per horizon and form.
* :mod:`~opcc_edu.queries.metadata` -- provenance and policy checksums (:func:`verify_policies`).
* :mod:`~opcc_edu.queries.paper_recipe` -- the ``paper`` recipe (:class:`PaperRecipe`), the default.
* :mod:`~opcc_edu.queries.build` -- :func:`build_query_set` (both recipes); the ``hard`` recipe read top to bottom.
* :mod:`~opcc_edu.queries.describe` -- what a set holds and how hard it is (:func:`describe_queries`).
* :mod:`~opcc_edu.queries.shipped` -- the shipped sets of both recipes (:func:`load_queries`).
"""

from ..names import DEFAULT_QUERY_RECIPE, HORIZONS, QUERY_RECIPES
from .build import build_and_save_query_set, build_command, build_query_set, query_set_summary, resolve_recipe
from .describe import QuerySetDescription, describe_queries
from .filtering import LOCOMOTION_MIN_GAP, MAZE_MIN_GAP_FRACTION, gap_rule, gap_threshold
from .labelling import recompute_values
from .metadata import CALLER_POLICIES, policy_checksums, verify_policies
from .paper_recipe import PAPER_MIN_GAP, PAPER_NOISE_STD, PaperRecipe, collect_pool_states, paper_filter
from .queryset import QuerySet
from .recipe import DEFAULT_N_QUERIES, DEFAULT_SEED, QueryRecipe
from .shipped import QUERIES_DIR, info_lines, load_queries, query_set_path, recipe_of
from .starts import MIXED_RANDOM_FRACTION, NOISY_ACTION_STD, StartStates, collect_start_states

__all__ = [
    "CALLER_POLICIES",
    "DEFAULT_N_QUERIES",
    "DEFAULT_QUERY_RECIPE",
    "DEFAULT_SEED",
    "HORIZONS",
    "LOCOMOTION_MIN_GAP",
    "MAZE_MIN_GAP_FRACTION",
    "MIXED_RANDOM_FRACTION",
    "NOISY_ACTION_STD",
    "PAPER_MIN_GAP",
    "PAPER_NOISE_STD",
    "PaperRecipe",
    "QUERIES_DIR",
    "QUERY_RECIPES",
    "QueryRecipe",
    "QuerySet",
    "QuerySetDescription",
    "StartStates",
    "build_and_save_query_set",
    "build_command",
    "build_query_set",
    "collect_pool_states",
    "collect_start_states",
    "describe_queries",
    "gap_rule",
    "gap_threshold",
    "info_lines",
    "load_queries",
    "paper_filter",
    "policy_checksums",
    "query_set_path",
    "query_set_summary",
    "recipe_of",
    "recompute_values",
    "resolve_recipe",
    "verify_policies",
]
