"""Provenance of a built query set, and the check that its policies are still the shipped ones.

The values of a query set are true only for the policies it was labelled with. Its metadata
records the sha256 digest of each policy file (``policy_sha256``, by level), so that
:func:`verify_policies` can tell when the shipped policies have changed since the set was built
(the values would then be stale and every score computed on them wrong).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..envs import EnvSpec, base_env_name
from .queryset import QuerySet

CALLER_POLICIES = "policies supplied by the caller"
"""``policy_sha256`` of a set labelled with policies passed to the builder, not the shipped files."""


def policy_checksums(env_name: str | EnvSpec, assets_dir: Path | None = None) -> dict[str, str]:
    """``{level: sha256}`` of the shipped query-policy files of an environment (levels as strings).

    A level whose file is missing is left out. This is :func:`opcc_edu.policies.policy_checksums`,
    imported only when called (the policies package imports torch).
    """
    from ..policies import policy_checksums as shipped_policy_checksums

    return shipped_policy_checksums(base_env_name(env_name), assets_dir)


def policy_assets_dir(query_set: QuerySet) -> Path | None:
    """Assets folder of the policies a set compares: the original benchmark's converted ones for
    the ``original`` recipes (``metadata["policy_assets"]``), else None (the package's own)."""
    if query_set.metadata.get("policy_assets") != "original":
        return None
    from ..policies import ORIGINAL_ASSETS_DIR

    return ORIGINAL_ASSETS_DIR


def query_policies(query_set: QuerySet) -> list[Any]:
    """The four policies of a query set (index i holds level i + 1), from where it says they live."""
    from ..policies import load_policies

    return load_policies(base_env_name(query_set.spec), policy_assets_dir(query_set))


def verify_policies(query_set: QuerySet, checksums: Mapping[str, str] | None = None) -> None:
    """Check that a query set was labelled with the given policies (default: the shipped ones).

    Compares the digests recorded in ``query_set.metadata["policy_sha256"]`` with ``checksums``
    (``{level: sha256}``, levels as strings; default: :func:`policy_checksums` of the currently
    shipped policy files of the set's environment). Every level on either side must be on the
    other with the same digest.

    A set built with policies passed to :func:`opcc_edu.build.build_query_set` records
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
    if checksums is None:
        expected = policy_checksums(query_set.spec, policy_assets_dir(query_set))
    else:
        expected = {str(k): str(v) for k, v in checksums.items()}
    recorded = {str(k): str(v) for k, v in recorded.items()}
    for level in sorted(set(recorded) | set(expected), key=lambda key: (len(key), key)):
        have, want = recorded.get(level), expected.get(level)
        if have != want:
            raise ValueError(
                f"{env_name}: policy level {level} does not match the query set: the set was labelled with "
                f"sha256 {have or '<none recorded>'}, {source} have sha256 {want or '<missing>'}; its values are "
                f"stale. Rebuild the set (opcc_edu.build.build_and_save_query_set({env_name!r})) or restore the "
                "policies it was labelled with"
            )
