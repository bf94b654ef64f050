"""Policy-comparison queries: the typed query set, its labels and the shipped sets.

A policy-comparison query (PCQ) ``q = (s, pi, s_hat, pi_hat, h)`` asks whether
``V^pi(s, h) < V^pi_hat(s_hat, h)`` (paper Section 3.1); each side also carries a first action.

* :mod:`~opcc_edu.queries.queryset` -- :class:`QuerySet`, the data contract (validation, ``.npz``).
* :mod:`~opcc_edu.queries.labelling` -- ground-truth values by simulation (:func:`recompute_values`).
* :mod:`~opcc_edu.queries.filtering` -- the ambiguity filter (:func:`gap_threshold`).
* :mod:`~opcc_edu.queries.metadata` -- the check that a set's policies are the shipped ones
  (:func:`verify_policies`).
* :mod:`~opcc_edu.queries.shipped` -- the shipped sets of both recipes (:func:`load_queries`).

How the shipped sets were built (start states, candidate pairs, the two recipes) is the asset
builders' wing, :mod:`opcc_edu.build`; how hard a set is, :func:`opcc_edu.lab.describe.describe_queries`.
"""

from ..names import DEFAULT_QUERY_RECIPE, HORIZONS, QUERY_RECIPES
from .filtering import LOCOMOTION_MIN_GAP, MAZE_MIN_GAP_FRACTION, gap_rule, gap_threshold
from .labelling import observations, recompute_values, simulate_both_sides
from .metadata import CALLER_POLICIES, policy_assets_dir, policy_checksums, query_policies, verify_policies
from .queryset import QuerySet
from .shipped import QUERIES_DIR, load_queries, query_set_path, recipe_env, recipe_of, recipe_spec

__all__ = [
    "CALLER_POLICIES",
    "DEFAULT_QUERY_RECIPE",
    "HORIZONS",
    "LOCOMOTION_MIN_GAP",
    "MAZE_MIN_GAP_FRACTION",
    "QUERIES_DIR",
    "QUERY_RECIPES",
    "QuerySet",
    "gap_rule",
    "gap_threshold",
    "load_queries",
    "observations",
    "policy_assets_dir",
    "policy_checksums",
    "query_policies",
    "query_set_path",
    "recipe_env",
    "recipe_spec",
    "recipe_of",
    "recompute_values",
    "simulate_both_sides",
    "verify_policies",
]
