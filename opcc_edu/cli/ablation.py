"""``opcc-edu ablation NAME``: run one of the paper's ablations (resumable results table)."""

from __future__ import annotations

import argparse
import shlex

from .options import (
    add_baseline,
    add_out,
    add_recipe,
    check_cache_dir,
    check_output_dir,
    choice_type,
    environment,
    non_negative_int,
    positive_int,
    progress_of,
)


def _ablation_names() -> tuple[str, ...]:
    from ..experiments import ABLATIONS

    return tuple(ABLATIONS)


def register(parser: argparse.ArgumentParser) -> None:
    """Add the options and handler of ``opcc-edu ablation``."""
    names = ", ".join(_ablation_names())
    parser.description = (
        "Run one ablation of Koul et al. (Section 7, Appendix B) over environments x datasets x seeds x "
        "levels in the active profile (--profile), recording each run in OUT/PROFILE as it finishes (an "
        f"interrupted ablation resumes), then print ours next to the paper's numbers. Ablations: {names}."
    )
    parser.add_argument("name", metavar="NAME", type=choice_type("ablation", _ablation_names), help=f"one of: {names}")
    add_out(parser, "results/ablations", "results root; results go to OUT/QUERIES/PROFILE (default: results/ablations)")
    add_recipe(parser, "--queries", "query sets to answer: paper or hard")
    add_baseline(parser, "ensemble (the paper's) or heuristic (no model; results go to OUT/QUERIES/PROFILE-heuristic)")
    parser.add_argument(
        "--environments",
        nargs="+",
        type=environment,
        metavar="ENV",
        default=None,
        help="environments (default: the profile's)",
    )
    parser.add_argument(
        "--datasets",
        nargs="+",
        metavar="NAME",
        default=None,
        help="datasets of every environment (default: per profile)",
    )
    parser.add_argument(
        "--seeds",
        type=positive_int,
        metavar="N",
        default=None,
        help="number of seeds, >= 1 (default: the profile's n_seeds)",
    )
    parser.add_argument(
        "--max-runs",
        type=non_negative_int,
        metavar="N",
        default=None,
        help="stop after N new runs (0: only print the table of finished runs)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="list the runs, finished or not, and exit; nothing is written"
    )
    parser.set_defaults(handler=_ablation)


def _ablation(args: argparse.Namespace) -> int:
    from ..config import get_profile
    from ..experiments import compare_with_paper, format_table, get_ablation, results_dir, run_ablation

    profile = get_profile()
    ablation = get_ablation(args.name)
    plan = {
        "environments": args.environments,
        "datasets": args.datasets,
        "seeds": args.seeds,
        "queries": args.queries,
        "baseline": args.baseline,
    }
    directory = results_dir(args.out, profile, args.queries, args.baseline)
    check_output_dir(args.out)
    if args.dry_run:
        status = run_ablation(ablation, out=args.out, profile=profile, dry_run=True, **plan)
        done = int(status["done"].sum())
        print(f"{ablation.name}: {len(status)} runs in profile {profile.name} ({done} done) -> {directory}")
        for run_id, finished in zip(status["run_id"], status["done"], strict=True):
            print(f"  {'done' if finished else 'todo'}  {run_id}")
        return 0
    check_cache_dir()
    ours = run_ablation(
        ablation,
        out=args.out,
        profile=profile,
        progress=progress_of(args),
        max_runs=args.max_runs,
        command=shlex.join(["opcc-edu", *args.argv]),
        **plan,
    )
    titles = {level.label: level.display for level in ablation.levels}
    print(f"\n{ablation.title} -- profile {profile.name}, {args.queries} query sets, results in {directory}")
    print(format_table(compare_with_paper(ours, ablation), titles=titles))
    return 0
