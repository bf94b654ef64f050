"""Provenance of a built query set, and the check that its policies are still the shipped ones.

The values of a query set are true only for the policies it was labelled with. Its metadata
records the sha256 digest of each policy file (``policy_sha256``, by level), so that
:func:`verify_policies` can tell when the shipped policies have changed since the set was built
(the values would then be stale and every score computed on them wrong).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..envs import get_spec
from ..provenance import command_line, package_versions
from .filtering import gap_rule, gap_threshold
from .queryset import QuerySet
from .recipe import QueryRecipe
from .starts import MIXED_RANDOM_FRACTION, NOISY_ACTION_STD, StartStates

QUERY_PACKAGES: tuple[str, ...] = ("opcc_edu", "numpy", "torch", "mujoco", "gymnasium", "gymnasium-robotics")
"""Packages whose versions a query set records (those its labels depend on)."""
CALLER_POLICIES = "policies supplied by the caller"
"""``policy_sha256`` of a set labelled with policies passed to the builder, not the shipped files."""
SEMANTICS = (
    "target = 1 iff V^{policy_a}(state_a, action_a, horizon) < V^{policy_b}(state_b, action_b, horizon); "
    "each side takes its first action, then follows its policy for horizon - 1 steps"
)
"""What a query means, in words (recorded in the metadata)."""


def policy_checksums(env_name: str) -> dict[str, str]:
    """``{level: sha256}`` of the shipped query-policy files of an environment (levels as strings).

    A level whose file is missing is left out. This is :func:`opcc_edu.policies.policy_checksums`,
    imported only when called (the policies package imports torch).
    """
    from ..policies import policy_checksums as shipped_policy_checksums

    return shipped_policy_checksums(get_spec(env_name).name)


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


def verify_policies(query_set: QuerySet, checksums: Mapping[str, str] | None = None) -> None:
    """Check that a query set was labelled with the given policies (default: the shipped ones).

    Compares the digests recorded in ``query_set.metadata["policy_sha256"]`` with ``checksums``
    (``{level: sha256}``, levels as strings; default: :func:`policy_checksums` of the currently
    shipped policy files of the set's environment). Every level on either side must be on the
    other with the same digest.

    A set built with policies passed to :func:`opcc_edu.queries.build_query_set` records
    :data:`CALLER_POLICIES` instead of digests; there is nothing to compare, and it is skipped
    (its builder is responsible for keeping its policies).

    Args:
        query_set: the query set.
        checksums: the digests to compare with, by level.

    Raises:
        ValueError: a digest differs or a level is missing on one side (naming the environment,
            the level and both digests), or the set records no policy checksums at all.
    """
    env_name = query_set.env_name
    recorded = query_set.metadata.get("policy_sha256")
    if recorded == CALLER_POLICIES:
        return
    if not isinstance(recorded, Mapping) or not recorded:
        raise ValueError(
            f"{env_name}: the query set records no policy checksums (metadata 'policy_sha256' is {recorded!r}), "
            "so the policies it was labelled with cannot be verified"
        )
    source = "the shipped policy files" if checksums is None else "the given checksums"
    expected = policy_checksums(env_name) if checksums is None else {str(k): str(v) for k, v in checksums.items()}
    recorded = {str(k): str(v) for k, v in recorded.items()}
    for level in sorted(set(recorded) | set(expected), key=lambda key: (len(key), key)):
        have, want = recorded.get(level), expected.get(level)
        if have != want:
            raise ValueError(
                f"{env_name}: policy level {level} does not match the query set: the set was labelled with "
                f"sha256 {have or '<none recorded>'}, {source} have sha256 {want or '<missing>'}; its values are "
                f"stale. Rebuild the set (opcc_edu.queries.build_and_save_query_set({env_name!r})) or restore the "
                "policies it was labelled with"
            )
