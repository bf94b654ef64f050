"""``opcc-edu build datasets ENV [NAME]``: generate datasets into the cache."""

from __future__ import annotations

import argparse
import time

from ..envs import ENV_NAMES
from ..utils import check_choice


def add_build_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``datasets`` target to ``opcc-edu build``."""
    p = subparsers.add_parser(
        "datasets",
        help="generate offline datasets (D4RL format) into the cache",
        description="Generate an environment's offline datasets deterministically from a seed and store "
        "them in the cache ($OPCC_EDU_CACHE/datasets, else ~/.cache/opcc_edu/datasets). Sizes follow the "
        "active profile (--profile before `build`) unless --size is given. Locomotion medium/expert data "
        "need the shipped behaviour policies.",
    )
    p.add_argument("env", metavar="ENV", help=f"environment, or 'all' ({', '.join(ENV_NAMES)})")
    p.add_argument("name", metavar="NAME", nargs="?", default=None, help="dataset name (default: every dataset of ENV)")
    p.add_argument("--size", type=int, default=None, help="transitions (default: profile dataset_size, capped)")
    p.add_argument("--seed", type=int, default=0, help="data seed (default 0)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(handler=_build)


def _build(args: argparse.Namespace) -> int:
    from . import dataset_names, load_dataset, summarize_dataset

    envs = ENV_NAMES if args.env == "all" else (check_choice(args.env, ENV_NAMES, "environment"),)
    for env_name in envs:
        names = dataset_names(env_name) if args.name is None else (check_choice(args.name, dataset_names(env_name), f"dataset name for {env_name}"),)
        for name in names:
            start = time.perf_counter()
            try:
                data = load_dataset(env_name, name, args.size, args.seed, progress=not args.quiet)
            except FileNotFoundError as exc:
                if args.name is not None:
                    raise
                print(f"{env_name} {name}: skipped ({exc})")
                continue
            s = summarize_dataset(data)
            print(
                f"{env_name} {name}: {s.transitions:,} transitions, {s.episodes} episodes, "
                f"mean return {s.mean_episode_return:.1f}, max {s.max_episode_return:.1f} "
                f"({time.perf_counter() - start:.1f} s)"
            )
    return 0
