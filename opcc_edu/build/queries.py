"""Building a labelled query set: the ``hard`` recipe read top to bottom, and both recipes' entry points.

:func:`build_query_set` builds by either recipe: ``paper`` (the default; see
:mod:`opcc_edu.build.paper_recipe`) or ``hard``, the package's earlier recipe, kept as a
harder variant. The ``hard`` recipe follows the paper's Section 4.2, steps 2-4, with choices
of its own (half same-state queries, any policy pair, a 0.1 h maze filter):

1. Candidate start states: every state visited by episodes of the random policy, of each
   query policy, of each query policy mixed with random actions (half of the steps), and of
   each query policy with Gaussian action noise (:func:`opcc_edu.build.collect_start_states`).
2. Candidate queries for each horizon: half of the form ``(s, pi, s, pi_hat, h)`` and half
   ``(s, pi, s_hat, pi_hat, h)``, with a random policy pair and random first actions
   (:func:`opcc_edu.build.pairs.draw_candidates`).
3. Monte-Carlo labels in the simulator (:func:`opcc_edu.build.pairs.label_candidates`).
4. Ambiguous queries are dropped (:func:`opcc_edu.queries.gap_threshold`). Then queries are
   drawn at random, the same number per horizon and, where possible, per form; rounds of fresh
   candidates are added until every horizon has enough survivors
   (:class:`opcc_edu.build.selection.SurvivorPool`).

The result is a deterministic function of the seed, the recipe and the policies.
"""

from __future__ import annotations

import shlex
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..envs import get_spec
from ..names import DEFAULT_QUERY_RECIPE, ORIGINAL_RECIPES, QUERY_RECIPES
from ..queries.filtering import gap_rule, unambiguous
from ..queries.labelling import observations
from ..queries.metadata import CALLER_POLICIES, policy_checksums
from ..queries.queryset import QuerySet
from ..queries.shipped import query_set_path
from ..utils import check_choice, single_threaded
from .metadata import query_set_metadata
from .pairs import Candidates, draw_candidates, label_candidates
from .paper_recipe import PaperRecipe, collect_pool_states, draw_paper_queries, paper_metadata
from .recipe import DEFAULT_SEED, QueryRecipe
from .selection import SurvivorPool
from .starts import StartStates, collect_start_states

if TYPE_CHECKING:
    import torch


def _env_seed(seed: int, env_name: str) -> np.random.SeedSequence:
    # Different environments get unrelated streams from one user-facing seed.
    return np.random.SeedSequence([int(seed), zlib.crc32(env_name.encode())])


def _filtered_rounds(
    env_name: str,
    starts: StartStates,
    policies: Sequence[torch.nn.Module],
    recipe: QueryRecipe,
    runs: int,
    rng: np.random.Generator,
    progress: bool,
) -> tuple[SurvivorPool, int]:
    """Draw, label and filter rounds of candidates until every cell holds its share.

    Returns:
        ``(pool, rounds)``: the survivors and the number of rounds it took.
    """
    from tqdm.auto import tqdm

    act_dim = get_spec(env_name).act_dim
    levels = tuple(range(1, len(policies) + 1))
    pool = SurvivorPool.for_queries(recipe.horizons, recipe.n_queries)
    # The first half of the rounds insists on both forms; later rounds let one form make up
    # for the other (short-horizon same-state queries rarely have a gap of 10).
    balance_rounds = (recipe.max_rounds + 1) // 2
    half = recipe.candidates_per_round // 2
    rounds = 0
    bar = tqdm(total=recipe.max_rounds, desc=f"query rounds {env_name}", disable=not progress, leave=False)
    while rounds < recipe.max_rounds:
        open_cells = pool.open_cells(balanced=rounds < balance_rounds)
        if not open_cells:
            break
        batch = Candidates.concat(
            [
                draw_candidates(starts, pool.draw_size(cell, missing, half), cell[0], cell[1], levels, act_dim, rng)
                for cell, missing in open_cells
            ]
        )
        returns = label_candidates(
            env_name, starts, batch, policies, recipe.gamma, runs, seed=int(rng.integers(2**31 - 1)), progress=progress
        )
        pool.add([cell for cell, _ in open_cells], batch, returns, unambiguous(env_name, batch.horizon, returns))
        rounds += 1
        bar.update(1)
    bar.close()
    return pool, rounds


def _assemble(
    env_name: str, starts: StartStates, chosen: Candidates, returns: np.ndarray, gamma: float, metadata: dict
) -> QuerySet:
    """The validated :class:`QuerySet` of the chosen candidates and their (2, N, R) returns."""
    state_a, state_b = starts.states[chosen.index_a], starts.states[chosen.index_b]
    value_a, value_b = returns[0].mean(axis=1), returns[1].mean(axis=1)
    queries = QuerySet(
        env_name=env_name,
        obs_a=observations(env_name, state_a),
        obs_b=observations(env_name, state_b),
        action_a=chosen.action_a,
        action_b=chosen.action_b,
        policy_a=chosen.policy_a,
        policy_b=chosen.policy_b,
        horizon=chosen.horizon,
        gamma=np.full(len(chosen), gamma),
        target=(value_a < value_b).astype(np.int8),
        value_a=value_a,
        value_b=value_b,
        returns_a=returns[0],
        returns_b=returns[1],
        state_a=state_a,
        state_b=state_b,
        same_state=chosen.same_state,
        metadata=metadata,
    )
    return queries.validate()


BUILT_RECIPES = tuple(name for name in QUERY_RECIPES if name not in ORIGINAL_RECIPES)
"""The recipes this module builds (the original benchmark's sets are imported: :mod:`opcc_edu.build.original`)."""


def resolve_recipe(
    recipe: str | QueryRecipe | PaperRecipe | None, **recipe_fields: Any
) -> tuple[str, QueryRecipe | PaperRecipe]:
    """``(name, knobs)`` of a recipe given by name or object, with some fields replaced.

    Args:
        recipe: ``"paper"`` or ``"hard"`` (:data:`opcc_edu.names.QUERY_RECIPES`), a
            :class:`PaperRecipe` or a :class:`QueryRecipe` (the ``hard`` recipe's knobs), or
            None for the default (:data:`opcc_edu.names.DEFAULT_QUERY_RECIPE`).
        **recipe_fields: fields of that recipe's dataclass to replace.

    Raises:
        ValueError: an unknown recipe (lists the valid ones), an unknown field (lists the
            recipe's fields) or an invalid value.
    """
    if recipe is None:
        recipe = DEFAULT_QUERY_RECIPE
    if isinstance(recipe, str):
        check_choice(recipe, BUILT_RECIPES, "recipe")
        recipe = PaperRecipe() if recipe == "paper" else QueryRecipe()
    if isinstance(recipe, PaperRecipe):
        return "paper", PaperRecipe.from_overrides(recipe, **recipe_fields)
    if isinstance(recipe, QueryRecipe):
        return "hard", QueryRecipe.from_overrides(recipe, **recipe_fields)
    raise ValueError(
        f"recipe must be one of {', '.join(BUILT_RECIPES)}, a PaperRecipe, a QueryRecipe or None; got {recipe!r}"
    )


def _query_policies(env_name: str, policies: Sequence[torch.nn.Module] | None) -> tuple[Sequence[Any], Any]:
    if policies is None:
        from ..policies import load_policies

        return load_policies(env_name), policy_checksums(env_name)
    return policies, CALLER_POLICIES


def _build_hard(
    env_name: str,
    recipe: QueryRecipe,
    seed: int,
    policies: Sequence[torch.nn.Module] | None,
    progress: bool,
    command: str | None,
) -> QuerySet:
    """The ``hard`` recipe: steps 1-4 of this module's docstring."""
    runs = recipe.runs_or_profile()
    policies, policy_sha256 = _query_policies(env_name, policies)
    seeds = _env_seed(seed, env_name).spawn(3)
    starts = collect_start_states(
        env_name,
        policies,
        recipe.episodes_per_behavior,
        recipe.episode_steps,
        seed=int(seeds[0].generate_state(1)[0]),
        progress=progress,
    )
    rng = np.random.default_rng(seeds[1])
    pool, rounds = _filtered_rounds(env_name, starts, policies, recipe, runs, rng, progress)
    shortfall = pool.shortfall()
    if shortfall:
        raise RuntimeError(
            f"{env_name}: after {rounds} rounds of {recipe.candidates_per_round} candidates per horizon, horizons "
            f"{sorted(shortfall)} lack {shortfall} queries that pass the filter ({gap_rule(env_name)}); "
            f"raise max_rounds or candidates_per_round. Counts: {pool.counts}"
        )
    chosen, returns = pool.select(rng)

    metadata = query_set_metadata(
        env_name, recipe, seed, runs, rounds, pool.counts, starts, policy_sha256, command=command
    )
    metadata["recipe"] = "hard"
    return _assemble(env_name, starts, chosen, returns, recipe.gamma, metadata)


def _build_paper(
    env_name: str,
    recipe: PaperRecipe,
    seed: int,
    policies: Sequence[torch.nn.Module] | None,
    progress: bool,
    command: str | None,
) -> QuerySet:
    """The ``paper`` recipe (:mod:`opcc_edu.build.paper_recipe`)."""
    policies, policy_sha256 = _query_policies(env_name, policies)
    if len(policies) < 2:
        raise ValueError(f"the paper recipe compares distinct policies: it needs at least 2, got {len(policies)}")
    seeds = np.random.SeedSequence([int(seed), zlib.crc32(f"paper/{env_name}".encode())]).spawn(2)
    starts, episodes = collect_pool_states(env_name, policies, recipe, np.random.default_rng(seeds[0]), progress)
    chosen, returns, counts, rounds = draw_paper_queries(
        env_name, starts, policies, recipe, np.random.default_rng(seeds[1]), progress
    )
    metadata = paper_metadata(env_name, recipe, seed, rounds, counts, starts, episodes, policy_sha256, command)
    return _assemble(env_name, starts, chosen, returns, recipe.gamma, metadata)


def build_query_set(
    env_name: str,
    recipe: str | QueryRecipe | PaperRecipe | None = None,
    *,
    seed: int = DEFAULT_SEED,
    policies: Sequence[torch.nn.Module] | None = None,
    progress: bool = True,
    command: str | None = None,
    **recipe_fields: Any,
) -> QuerySet:
    """Construct a labelled query set by one of the two recipes.

    ``paper`` (the default) follows the original benchmark (:mod:`opcc_edu.build.paper_recipe`);
    ``hard`` is the recipe read top to bottom in :mod:`opcc_edu.build.queries`.

    Args:
        env_name: environment.
        recipe: ``"paper"``, ``"hard"``, a :class:`PaperRecipe` or a :class:`QueryRecipe` (the
            ``hard`` knobs); None: ``"paper"``.
        seed: the one seed of the construction; the result is a deterministic function of it.
        policies: the four query policies (default: the shipped ones, ``load_policies``). The
            metadata records the checksums of the shipped policy files, or
            :data:`~opcc_edu.queries.metadata.CALLER_POLICIES` for policies passed here.
        progress: show progress bars.
        command: the command line to record (default: this process's).
        **recipe_fields: fields of the recipe's dataclass replacing its defaults (``paper``:
            ``queries_per_pair``, ``runs``, ``max_candidates_per_pair``, ...; ``hard``:
            ``n_queries``, ``runs``, ``candidates_per_round``, ``max_rounds``, ...).

    Returns:
        A validated :class:`QuerySet` whose metadata records the recipe, command, seed,
        versions, the filter rule, the counts of every step and the policy checksums.

    Raises:
        ValueError: an unknown environment, recipe or recipe field, or an invalid value.
        RuntimeError: (``hard``) some horizon has fewer than its share of queries after
            ``max_rounds``.
    """
    env_name = get_spec(env_name).name
    name, knobs = resolve_recipe(recipe, **recipe_fields)
    if name == "paper":
        return _build_paper(env_name, knobs, seed, policies, progress, command)
    return _build_hard(env_name, knobs, seed, policies, progress, command)


# --------------------------------------------------------------------------------------------
# Building the shipped sets
# --------------------------------------------------------------------------------------------

_FLAGS = {
    "n_queries": "--n-queries",
    "runs": "--runs",
    "candidates_per_round": "--candidates",
    "max_rounds": "--max-rounds",
    "queries_per_pair": "--queries-per-pair",
    "max_candidates_per_pair": "--max-candidates",
}


def build_command(env_name: str, recipe: str = DEFAULT_QUERY_RECIPE, seed: int = DEFAULT_SEED, **fields: Any) -> str:
    """The ``opcc-edu build queries`` command line that rebuilds a set (recorded in its metadata).

    ``fields`` are the recipe fields given on the command line (those of :data:`_FLAGS`).
    """
    check_choice(recipe, BUILT_RECIPES, "recipe")
    words = ["opcc-edu", "build", "queries", get_spec(env_name).name, "--recipe", recipe, "--seed", str(seed)]
    for key, value in fields.items():
        if key not in _FLAGS:
            raise ValueError(f"build_command: no command-line flag for field {key!r}; flags exist for {sorted(_FLAGS)}")
        if value is not None:
            words += [_FLAGS[key], str(value)]
    return shlex.join(words)


def build_and_save_query_set(
    env_name: str,
    out: str | Path | None = None,
    recipe: str = DEFAULT_QUERY_RECIPE,
    seed: int = DEFAULT_SEED,
    progress: bool = True,
    **recipe_fields: Any,
) -> Path:
    """Build an environment's query set as the shipped ones are built, and save it.

    Labels with one torch thread, as the shipped sets were built (the previous thread count is
    restored). The metadata records :func:`build_command` as the command and the wall time in
    ``build_seconds`` (provenance only: the arrays do not depend on it).

    Args:
        env_name: environment.
        out: the ``.npz`` file to write, or an existing directory to write ``<env>.npz`` into
            (default: the shipped location, :func:`opcc_edu.queries.query_set_path`).
        recipe: ``"paper"`` or ``"hard"``.
        seed: construction seed.
        progress: show progress bars.
        **recipe_fields: recipe fields with a command-line flag (``paper``: ``queries_per_pair``,
            ``runs``, ``max_candidates_per_pair``; ``hard``: ``n_queries``, ``runs``,
            ``candidates_per_round``, ``max_rounds``); None values are left out.

    Returns:
        The path written (a ``.sha256`` checksum file lies next to it).
    """
    env_name = get_spec(env_name).name
    fields = {key: value for key, value in recipe_fields.items() if value is not None}
    name, knobs = resolve_recipe(recipe, **fields)
    started = time.perf_counter()
    command = build_command(env_name, name, seed, **fields)
    with single_threaded():
        queries = build_query_set(env_name, knobs, seed=seed, progress=progress, command=command)
    if out is None:
        path = query_set_path(env_name, name)
        path.parent.mkdir(parents=True, exist_ok=True)
    elif Path(out).is_dir():
        path = Path(out) / f"{env_name}.npz"
    else:
        path = Path(out)
    queries.metadata["build_seconds"] = round(time.perf_counter() - started, 1)
    return queries.save(path)


def query_set_summary(queries: QuerySet) -> str:
    """One line describing a built set: size, forms, horizons, rounds (and build time if recorded)."""
    same = int(queries.same_state.sum())
    line = (
        f"{queries.env_name}: {len(queries)} queries ({same} same-state, {len(queries) - same} two-state), "
        f"horizons {queries.horizons}, {queries.metadata.get('rounds', '?')} rounds"
    )
    seconds = queries.metadata.get("build_seconds")
    return line if seconds is None else f"{line}, {seconds:.0f} s"
