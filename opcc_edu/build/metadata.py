"""The metadata a built query set records: command, seed, versions, recipe, counts, checksums."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..envs import get_spec
from ..provenance import command_line, package_versions
from ..queries.filtering import gap_rule, gap_threshold
from .recipe import QueryRecipe
from .starts import MIXED_RANDOM_FRACTION, NOISY_ACTION_STD, StartStates

QUERY_PACKAGES: tuple[str, ...] = ("opcc_edu", "numpy", "torch", "mujoco", "gymnasium", "gymnasium-robotics")
"""Packages whose versions a query set records (those its labels depend on)."""
SEMANTICS = (
    "target = 1 iff V^{policy_a}(state_a, action_a, horizon) < V^{policy_b}(state_b, action_b, horizon); "
    "each side takes its first action, then follows its policy for horizon - 1 steps"
)
"""What a query means, in words (recorded in the metadata)."""


def query_set_metadata(
    env_name: str,
    recipe: QueryRecipe,
    seed: int,
    runs: int,
    rounds: int,
    counts: Mapping[str, Mapping[str, int]],
    starts: StartStates,
    policy_sha256: Mapping[str, str] | str,
    command: str | None = None,
) -> dict[str, Any]:
    """The metadata of a built query set: command, seed, versions, recipe, counts, checksums.

    Args:
        env_name: environment (canonical name).
        recipe: the recipe it was built by.
        seed: the construction seed.
        runs: Monte-Carlo runs per side actually used.
        rounds: rounds of candidates it took.
        counts: per cell name, candidates drawn and kept.
        starts: the candidate start states.
        policy_sha256: :func:`policy_checksums` of the shipped policies it was labelled with, or
            :data:`CALLER_POLICIES`.
        command: the command line to record (default: this process's).

    Returns:
        A JSON-ready dict.
    """
    steps = get_spec(env_name).max_episode_steps if recipe.episode_steps is None else recipe.episode_steps
    return {
        "env_name": env_name,
        "command": command_line() if command is None else command,
        "seed": int(seed),
        "versions": package_versions(QUERY_PACKAGES),
        "n_queries": int(recipe.n_queries),
        "runs": int(runs),
        "gamma": float(recipe.gamma),
        "horizons": list(recipe.horizons),
        "filter_rule": gap_rule(env_name),
        "gap_thresholds": {str(h): gap_threshold(env_name, h) for h in recipe.horizons},
        "candidates_per_round": int(recipe.candidates_per_round),
        "rounds": int(rounds),
        "counts": {name: dict(c) for name, c in counts.items()},
        "start_states": {
            "total": int(len(starts.states)),
            "episodes_per_behavior": int(recipe.episodes_per_behavior),
            "episode_steps": int(steps),
            "behaviors": list(starts.behavior_names),
            "mixed_random_fraction": MIXED_RANDOM_FRACTION,
            "noisy_action_std": NOISY_ACTION_STD,
        },
        "policy_sha256": policy_sha256 if isinstance(policy_sha256, str) else dict(policy_sha256),
        "semantics": SEMANTICS,
    }
