"""``opcc-edu build TARGET ...``: regenerate benchmark assets deterministically from a seed.

Targets: ``policies`` (PPO query or behaviour policies; needs the ``train`` extra), ``queries``
(a labelled query set) and ``datasets`` (offline datasets into the cache). Shipped assets record
the command and seed that produced them.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from .errors import require_extra
from .options import (
    UsageError,
    add_command,
    add_out,
    add_recipe,
    add_seed,
    check_cache_dir,
    check_output_dir,
    echo_stderr,
    environment,
    environment_or_all,
    positive_int,
    progress_of,
)


def register(parser: argparse.ArgumentParser) -> None:
    """Add the targets of ``opcc-edu build``."""
    parser.description = (
        "Regenerate a benchmark asset deterministically from its seed. Shipped assets record the "
        "command and seed that produced them."
    )
    targets = parser.add_subparsers(dest="target", metavar="TARGET", title="targets")
    targets.required = True
    _register_policies(targets)
    _register_queries(targets)
    _register_datasets(targets)


def _one_thread_note(args: argparse.Namespace, target: str) -> None:
    if getattr(args, "threads", None) not in (None, 1):
        echo_stderr(
            f"opcc-edu build {target}: note: one torch thread, as the shipped assets were built; --threads is ignored"
        )


# --------------------------------------------------------------------------------------------
# build policies
# --------------------------------------------------------------------------------------------
def _register_policies(targets: argparse._SubParsersAction) -> None:
    p = add_command(
        targets,
        "policies",
        help="train the query policies (or behaviour policies) of one environment with PPO",
        description="Train one PPO run, evaluate every checkpoint and ship four query policies of distinct "
        "quality (paper Table 9), or with --behavior the medium and expert behaviour policies of a "
        "locomotion dataset. Deterministic given --seed; trains with one torch thread. Needs the 'train' "
        "extra (stable-baselines3).",
    )
    p.add_argument("env", metavar="ENV", type=environment, help="environment")
    p.add_argument("--behavior", action="store_true", help="build the behaviour policies (locomotion only) instead")
    p.add_argument(
        "--steps",
        type=positive_int,
        metavar="N",
        default=None,
        help="PPO environment steps (default: the profile's policy_train_steps)",
    )
    add_seed(p, None, "training seed (default: the seed of the shipped policies)")
    p.add_argument(
        "--checkpoints",
        type=positive_int,
        metavar="N",
        default=16,
        help="evenly spaced candidate checkpoints (default 16)",
    )
    p.add_argument(
        "--episodes",
        type=positive_int,
        metavar="N",
        default=None,
        help="evaluation episodes per checkpoint (default: as the shipped policies)",
    )
    add_out(p, None, "write the policies here instead of the package's assets", aliases=("--assets-dir",))
    p.add_argument("--work-dir", metavar="DIR", default=None, help="directory for all checkpoints (default: the cache)")
    p.add_argument(
        "--stop-at",
        type=positive_int,
        metavar="N",
        default=None,
        help="end the run after N steps; candidates are the --steps run's checkpoints before it",
    )
    p.add_argument(
        "--no-reuse", action="store_true", help="retrain even if the work directory holds this run's checkpoints"
    )
    p.set_defaults(handler=_build_policies)


def _build_policies(args: argparse.Namespace) -> int:
    from ..config import get_profile
    from ..envs import LOCOMOTION_NAMES

    if args.behavior and args.env not in LOCOMOTION_NAMES:
        raise UsageError(
            f"--behavior needs a locomotion environment, got {args.env!r}; valid choices: {', '.join(LOCOMOTION_NAMES)}"
        )
    steps = args.steps if args.steps is not None else get_profile().policy_train_steps
    if args.stop_at is not None and args.stop_at > steps:
        raise UsageError(f"--stop-at {args.stop_at} must be at most --steps ({steps})")
    from .. import policies
    from ..build import policies as builders

    check_output_dir(args.out if args.out is not None else policies.ASSETS_DIR, default=args.out is None)
    if args.work_dir is not None:
        check_output_dir(args.work_dir, "--work-dir")
    else:
        check_cache_dir()
    require_extra("train")
    _one_thread_note(args, "policies")
    common = {
        "total_steps": steps,
        "n_checkpoints": args.checkpoints,
        "assets_dir": args.out,
        "work_dir": args.work_dir,
        "stop_step": args.stop_at,
        "reuse": not args.no_reuse,
        "progress": progress_of(args),
    }
    if args.seed is not None:
        common["seed"] = args.seed
    if args.episodes is not None:
        common["episodes"] = args.episodes
    if args.behavior:
        print(builders.describe_behavior_policies(builders.build_behavior_policies(args.env, **common)))
    else:
        for line in builders.describe_query_policies(builders.build_query_policies(args.env, **common)):
            print(line)
    return 0


# --------------------------------------------------------------------------------------------
# build queries
# --------------------------------------------------------------------------------------------
def _register_queries(targets: argparse._SubParsersAction) -> None:
    p = add_command(
        targets,
        "queries",
        help="construct and label the policy-comparison query set of one environment",
        description="Collect candidate start states, draw candidate queries for horizons 10-50, label them by "
        "simulation with the shipped policies (one torch thread, as the shipped sets), drop ambiguous ones and "
        "select the query set (paper Section 4.2). --recipe paper (the default) builds as the original benchmark "
        "did: 250 queries for each pair of distinct policies, a gap above 10 everywhere; --recipe hard is the "
        "harder variant (half same-state queries, any policy pair, a 0.1 h maze filter). Deterministic given "
        "--seed.",
    )
    p.add_argument("env", metavar="ENV", type=environment_or_all, help="environment, or 'all'")
    add_recipe(p, "--recipe", "construction recipe")
    add_seed(p, None, "construction seed (default: the seed of the shipped sets)")
    p.add_argument(
        "--n-queries",
        type=positive_int,
        metavar="N",
        default=None,
        help="queries to select (default: as the shipped sets; paper recipe: a multiple of the 6 policy pairs)",
    )
    p.add_argument(
        "--runs",
        type=positive_int,
        metavar="R",
        default=None,
        help="Monte-Carlo runs per side (default: the profile's mc_runs)",
    )
    p.add_argument(
        "--candidates",
        type=positive_int,
        metavar="N",
        default=None,
        help="hard recipe: candidates per horizon and round (default: as the shipped sets)",
    )
    p.add_argument(
        "--max-rounds",
        type=positive_int,
        metavar="N",
        default=None,
        help="hard recipe: rounds of candidates before giving up (default: as the shipped sets)",
    )
    p.add_argument(
        "--max-candidates",
        type=positive_int,
        metavar="N",
        default=None,
        help="paper recipe: candidates a policy pair may draw before it stops (default: as the shipped sets)",
    )
    add_out(p, None, "write ENV.npz into this directory (default: the package's shipped location)")
    p.add_argument("--output", dest="output_file", default=None, help=argparse.SUPPRESS)  # former spelling: a file
    p.set_defaults(handler=_build_queries)


def _recipe_options(args: argparse.Namespace) -> dict[str, object]:
    """The keyword arguments of ``build_and_save_query_set`` given on the command line."""
    hard_only = {"--candidates": args.candidates, "--max-rounds": args.max_rounds}
    paper_only = {"--max-candidates": args.max_candidates}
    wrong = [flag for flag, value in (paper_only if args.recipe == "hard" else hard_only).items() if value is not None]
    if wrong:
        raise UsageError(f"{', '.join(wrong)} does not apply to --recipe {args.recipe}")
    options: dict[str, object] = {"recipe": args.recipe}
    if args.seed is not None:
        options["seed"] = args.seed
    if args.runs is not None:
        options["runs"] = args.runs
    if args.recipe == "hard":
        fields = {"n_queries": args.n_queries, "candidates_per_round": args.candidates, "max_rounds": args.max_rounds}
    else:
        from ..build.paper_recipe import policy_pairs

        pairs = policy_pairs(args.env if args.env != "all" else None)
        if args.n_queries is not None and args.n_queries % pairs:
            raise UsageError(f"--n-queries must be a multiple of the {pairs} policy pairs for --recipe paper")
        per_pair = None if args.n_queries is None else args.n_queries // pairs
        fields = {"queries_per_pair": per_pair, "max_candidates_per_pair": args.max_candidates}
    options.update({key: value for key, value in fields.items() if value is not None})
    return options


def _build_queries(args: argparse.Namespace) -> int:
    from ..envs import ENV_NAMES
    from ..names import ORIGINAL_RECIPES

    if args.recipe in ORIGINAL_RECIPES:
        raise UsageError(
            f"--recipe {args.recipe}: the original benchmark's sets are converted, not built: run "
            "`python scripts/import_original_benchmark.py SOURCE` (a checkout of koulanurag/opcc), then "
            "`python scripts/relabel_original_benchmark.py` to label them again"
        )

    names = list(ENV_NAMES) if args.env == "all" else [args.env]
    _one_thread_note(args, "queries")
    out, option, directory = args.out, "--out", args.out
    if args.output_file is not None:  # the former --output: a file for one environment, a directory for all
        out, option = args.output_file, "--output"
        directory = out if args.env == "all" else Path(out).parent
    from .. import build, queries

    options = _recipe_options(args)
    if directory is None:
        check_output_dir(queries.QUERIES_DIR, default=True)
    else:
        check_output_dir(directory, option)
        Path(directory).mkdir(parents=True, exist_ok=True)
    for name in names:
        path = build.build_and_save_query_set(name, out=out, progress=progress_of(args), **options)
        print(f"{build.query_set_summary(queries.QuerySet.load(path))} -> {path}")
    return 0


# --------------------------------------------------------------------------------------------
# build datasets
# --------------------------------------------------------------------------------------------
def _register_datasets(targets: argparse._SubParsersAction) -> None:
    p = add_command(
        targets,
        "datasets",
        help="generate offline datasets (D4RL format) into the cache",
        description="Generate an environment's offline datasets deterministically from a seed and store them "
        "in the cache ($OPCC_EDU_CACHE/datasets, else ~/.cache/opcc_edu/datasets). Sizes follow the active "
        "profile unless --size is given. Locomotion medium and expert data need the shipped behaviour "
        "policies.",
    )
    p.add_argument("env", metavar="ENV", type=environment_or_all, help="environment, or 'all'")
    p.add_argument("name", metavar="NAME", nargs="?", default=None, help="dataset name (default: every dataset of ENV)")
    p.add_argument(
        "--size",
        type=positive_int,
        metavar="T",
        default=None,
        help="transitions (default: the profile's dataset_size, capped by the dataset)",
    )
    add_seed(p, 0, "data seed (default 0)")
    p.set_defaults(handler=_build_datasets)


def build_datasets(
    env: str, name: str | None, size: int | None, seed: int, progress: bool, echo: Callable[[str], object] = print
) -> int:
    """Generate (or load from the cache) the named dataset of ``env``, or every dataset of it.

    ``env`` may be ``"all"``. Without a ``name``, a dataset that needs an unbuilt behaviour
    policy is reported as skipped; with a ``name`` that is an error. Returns the number built.
    """
    from ..datasets import dataset_names, get_recipe, load_dataset, summarize_dataset
    from ..envs import ENV_NAMES

    envs = ENV_NAMES if env == "all" else (env,)
    if name is not None:
        for env_name in envs:
            get_recipe(env_name, name)  # every name is checked before anything is generated
    built = 0
    for env_name in envs:
        for dataset in dataset_names(env_name) if name is None else (name,):
            start = time.perf_counter()
            try:
                data = load_dataset(env_name, dataset, size, seed, progress=progress)
            except FileNotFoundError as exc:
                if name is not None:
                    raise
                echo(f"{env_name} {dataset}: skipped ({exc})")
                continue
            s = summarize_dataset(data)
            echo(
                f"{env_name} {dataset}: {s.transitions:,} transitions, {s.episodes} episodes, "
                f"mean return {s.mean_episode_return:.1f}, max {s.max_episode_return:.1f} "
                f"({time.perf_counter() - start:.1f} s)"
            )
            built += 1
    return built


def _build_datasets(args: argparse.Namespace) -> int:
    check_cache_dir()
    build_datasets(args.env, args.name, args.size, args.seed, progress_of(args))
    return 0
