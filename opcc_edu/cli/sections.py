"""The package's sections of ``opcc-edu info``: the shipped query sets and the datasets (cached or not).

Each is a function ``() -> list[str]`` named in :data:`opcc_edu.cli.info.INFO_PROVIDERS`.
"""

from __future__ import annotations

import numpy as np

from ..datasets import DEFAULT_DATASET, dataset_names
from ..datasets.cache import dataset_cache_dir, list_cached
from ..envs import ENV_NAMES
from ..names import QUERY_RECIPES
from ..queries import QuerySet, gap_rule, query_set_path, verify_policies


def queries_lines() -> list[str]:
    """Lines for ``opcc-edu info``: the shipped query sets of both recipes."""
    lines = ["Query sets (paper Table 8: 1500 queries per environment; horizons 10-50):"]
    lines.append(
        f"  {'recipe':<6} {'env':<15} {'queries':>7} {'same-state':>10} {'V_a<V_b':>8} {'median gap':>10}  filter"
    )
    for recipe, name in ((r, n) for r in QUERY_RECIPES for n in ENV_NAMES):
        path = query_set_path(name, recipe)
        if not path.exists():
            lines.append(f"  {recipe:<6} {name:<15} {'not built':>7}")
            continue
        try:
            queries = QuerySet.load(path)
        except (ValueError, OSError) as exc:
            lines.append(f"  {recipe:<6} {name:<15} unreadable ({exc})")
            continue
        try:
            verify_policies(queries)
            stale = ""
        except ValueError:
            stale = "  [stale: the shipped policies changed since it was built]"
        lines.append(
            f"  {recipe:<6} {name:<15} {len(queries):>7} {int(queries.same_state.sum()):>10} "
            f"{queries.target.mean():>8.2f} {np.median(queries.gap):>10.2f}  "
            f"{queries.metadata.get('filter_rule', gap_rule(name))}{stale}"
        )
    return lines


def datasets_lines() -> list[str]:
    """The datasets section of ``opcc-edu info``: names per environment and the cached files."""
    lines = ["Datasets (D4RL format; `opcc-edu build datasets ENV [NAME]` generates them):"]
    for env_name in ENV_NAMES:
        names = ", ".join(f"{n}*" if n == DEFAULT_DATASET[env_name] else n for n in dataset_names(env_name))
        lines.append(f"  {env_name:<15} {names}")
    lines.append("  (* default)")
    cached = list_cached()
    lines.append(f"Cached datasets in {dataset_cache_dir(create=False)}: {len(cached)}")
    if cached:
        lines.append(
            f"  {'env':<15} {'name':<14} {'seed':>4} {'transitions':>11} {'episodes':>8} "
            f"{'mean return':>11} {'max return':>10} {'MB':>7}"
        )
    for c in cached:
        s = c.summary or {}
        lines.append(
            f"  {c.env_name:<15} {c.name:<14} {c.seed:>4} {c.size:>11,} {s.get('episodes', float('nan')):>8} "
            f"{s.get('mean_episode_return', float('nan')):>11.1f} {s.get('max_episode_return', float('nan')):>10.1f} "
            f"{c.megabytes:>7.1f}"
        )
    return lines
