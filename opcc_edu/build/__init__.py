"""The asset builders: how the shipped query policies and query sets were made.

Run through ``opcc-edu build policies|queries ENV``; every file they write records its command and
seed. They import the core (:mod:`opcc_edu`), never the reverse; a student reads them to see how a
benchmark is built, and never needs them to use one.

* :mod:`opcc_edu.build.evaluation` -- evaluating actors and checkpoints in lockstep.
* :mod:`opcc_edu.build.levels` -- candidate checkpoints and the choice of quality levels.
* :mod:`opcc_edu.build.table` -- the shipped policies beside the paper's Table 9.
* :mod:`opcc_edu.build.policies` -- :func:`build_query_policies`, :func:`build_behavior_policies`.
* :mod:`opcc_edu.build.recipe` -- :class:`QueryRecipe`, the knobs of a query set's construction.
* :mod:`opcc_edu.build.starts` -- candidate start states (:func:`collect_start_states`).
* :mod:`opcc_edu.build.pairs` -- candidate queries (policy pairs, first actions) and their labels.
* :mod:`opcc_edu.build.selection` -- rounds of candidates, the same count per horizon and form.
* :mod:`opcc_edu.build.paper_recipe` -- the ``paper`` recipe (:class:`PaperRecipe`), the default.
* :mod:`opcc_edu.build.queries` -- :func:`build_query_set` (both recipes); the ``hard`` recipe
  read top to bottom.
* :mod:`opcc_edu.build.metadata` -- the provenance a built query set records.
"""

from .evaluation import EVAL_EPISODES, EVAL_SEED, CheckpointReturns, evaluate_actor, evaluate_checkpoints
from .levels import checkpoint_plan, checkpoint_schedule, select_levels, select_medium
from .metadata import QUERY_PACKAGES, SEMANTICS, query_set_metadata
from .paper_recipe import PAPER_MIN_GAP, PAPER_NOISE_STD, PaperRecipe, collect_pool_states, paper_filter
from .policies import (
    BEHAVIOR_SEED,
    QUERY_POLICY_SEED,
    build_behavior_policies,
    build_query_policies,
    describe_behavior_policies,
    describe_query_policies,
)
from .queries import build_and_save_query_set, build_command, build_query_set, query_set_summary, resolve_recipe
from .recipe import DEFAULT_N_QUERIES, DEFAULT_SEED, QueryRecipe
from .starts import MIXED_RANDOM_FRACTION, NOISY_ACTION_STD, StartStates, collect_start_states
from .table import PAPER_TABLE9, paper_policy_table

__all__ = [
    "EVAL_EPISODES",
    "EVAL_SEED",
    "CheckpointReturns",
    "PAPER_TABLE9",
    "evaluate_actor",
    "evaluate_checkpoints",
    "paper_policy_table",
    "BEHAVIOR_SEED",
    "QUERY_POLICY_SEED",
    "build_behavior_policies",
    "build_query_policies",
    "checkpoint_plan",
    "checkpoint_schedule",
    "describe_behavior_policies",
    "describe_query_policies",
    "select_levels",
    "select_medium",
    "DEFAULT_N_QUERIES",
    "DEFAULT_SEED",
    "MIXED_RANDOM_FRACTION",
    "NOISY_ACTION_STD",
    "PAPER_MIN_GAP",
    "PAPER_NOISE_STD",
    "QUERY_PACKAGES",
    "SEMANTICS",
    "PaperRecipe",
    "QueryRecipe",
    "StartStates",
    "build_and_save_query_set",
    "build_command",
    "build_query_set",
    "collect_pool_states",
    "collect_start_states",
    "paper_filter",
    "query_set_metadata",
    "query_set_summary",
    "resolve_recipe",
]
