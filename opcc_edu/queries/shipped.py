"""The seven shipped query sets (``opcc_edu/assets/queries/<env>.npz``): paths, loading, listing.

Each was built with ``opcc-edu build queries ENV`` (:func:`opcc_edu.queries.build_and_save_query_set`);
its metadata records the command, seed, package versions, the filter rule, the counts of every
step and the checksums of the policies it was labelled with, which :func:`load_queries` checks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..envs import ENV_NAMES, get_spec
from .filtering import gap_rule
from .metadata import verify_policies
from .queryset import QuerySet

QUERIES_DIR = Path(__file__).resolve().parents[1] / "assets" / "queries"
"""Folder of the shipped query sets."""


def query_set_path(env_name: str) -> Path:
    """Where the shipped query set of ``env_name`` lives."""
    return QUERIES_DIR / f"{get_spec(env_name).name}.npz"


def load_queries(env_name: str, verify: bool = True) -> QuerySet:
    """The shipped query set of an environment (validated).

    Args:
        env_name: environment.
        verify: check that the set was labelled with the currently shipped policies
            (:func:`opcc_edu.queries.verify_policies`).

    Raises:
        ValueError: unknown environment (lists the valid names), or (with ``verify``) the
            shipped policies differ from those the set was labelled with.
        FileNotFoundError: the set has not been built (``opcc-edu build queries ENV``).
    """
    path = query_set_path(env_name)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; build it with `opcc-edu build queries {env_name}`")
    queries = QuerySet.load(path)
    if verify:
        verify_policies(queries)
    return queries


def info_lines() -> list[str]:
    """Lines for ``opcc-edu info``: the shipped query sets."""
    lines = ["Query sets (paper Table 8: 1500 queries per environment; horizons 10-50):"]
    lines.append(f"  {'env':<15} {'queries':>7} {'same-state':>10} {'V_a<V_b':>8} {'median gap':>10}  filter")
    for name in ENV_NAMES:
        path = query_set_path(name)
        if not path.exists():
            lines.append(f"  {name:<15} {'not built':>7}")
            continue
        try:
            queries = QuerySet.load(path)
        except (ValueError, OSError) as exc:
            lines.append(f"  {name:<15} unreadable ({exc})")
            continue
        try:
            verify_policies(queries)
            stale = ""
        except ValueError:
            stale = "  [stale: the shipped policies changed since it was built]"
        lines.append(
            f"  {name:<15} {len(queries):>7} {int(queries.same_state.sum()):>10} {queries.target.mean():>8.2f} "
            f"{np.median(queries.gap):>10.2f}  {gap_rule(name)}{stale}"
        )
    return lines
