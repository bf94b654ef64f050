"""``opcc-edu ablation NAME``: run one of the paper's ablations (resumable results table)."""

from __future__ import annotations

import argparse
import shlex
import sys

from .options import (
    UsageError,
    add_baseline,
    add_out,
    add_recipe,
    check_cache_dir,
    check_output_dir,
    choice_type,
    environment,
    non_negative_float,
    non_negative_int,
    positive_int,
    progress_of,
)


def _executor_names() -> tuple[str, ...]:
    from ..lab.experiments import EXECUTORS

    return EXECUTORS


def _positive_float(text: str) -> float:
    """A finite number > 0 (a share of CPUs)."""
    value = non_negative_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be a number > 0, got 0")
    return value


def _ablation_names() -> tuple[str, ...]:
    from ..lab.experiments import ABLATIONS

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
    add_recipe(
        parser,
        "--queries",
        "query sets to answer: paper, hard, or the original benchmark's (original, original-relabelled)",
    )
    add_baseline(
        parser,
        "ensemble (the paper's), heuristic (no model; results go to OUT/QUERIES/PROFILE-heuristic) or fqe "
        "(model-free fitted Q evaluation on the same data, seeds and queries; OUT/QUERIES/PROFILE-fqe)",
    )
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
    parser.add_argument(
        "--executor",
        type=choice_type("executor", _executor_names),
        default="local",
        help="where runs compute: local (this machine; default) or ray (a Ray cluster; the 'cluster' extra)",
    )
    parser.add_argument(
        "--jobs",
        type=positive_int,
        metavar="N",
        default=1,
        help="local: runs at once, each in its own worker process (default 1: one after another in this process)",
    )
    parser.add_argument(
        "--address",
        metavar="ADDR",
        default=None,
        help="ray: the cluster to join, 'auto' or HOST:PORT of `ray start --head` (default: a local cluster)",
    )
    parser.add_argument(
        "--cpus-per-run",
        type=_positive_float,
        metavar="C",
        default=None,
        help="CPUs (torch threads) of one run (default: ray 1, --jobs N an equal share of the cores)",
    )
    parser.add_argument(
        "--gpus-per-run",
        type=non_negative_float,
        metavar="G",
        default=0.0,
        help="ray: GPUs of one run; a fraction shares a GPU (default 0: CPU only)",
    )
    parser.add_argument(
        "--retries",
        type=non_negative_int,
        metavar="N",
        default=2,
        help="attempts after the first for a run that fails or loses its worker (default 2)",
    )
    parser.set_defaults(handler=_ablation)


def _executor_of(args: argparse.Namespace):
    """The executor of the options, checked flag by flag before anything runs."""
    from ..lab.experiments import make_executor

    if args.executor == "local":
        for flag, value in (("--address", args.address), ("--gpus-per-run", args.gpus_per_run)):
            if value:
                raise UsageError(f"{flag} is an option of --executor ray, not of --executor local")
        if args.cpus_per_run is not None and args.jobs == 1:
            raise UsageError("--cpus-per-run sets the threads of worker processes: add --jobs N (N > 1)")
    elif args.jobs != 1:
        raise UsageError(
            "--jobs is an option of --executor local; ray runs as many runs at once as the cluster's CPUs "
            "and GPUs allow (--cpus-per-run, --gpus-per-run)"
        )
    return make_executor(
        args.executor,
        jobs=args.jobs,
        address=args.address,
        cpus_per_run=args.cpus_per_run,
        gpus_per_run=args.gpus_per_run,
    )


def _ablation(args: argparse.Namespace) -> int:
    from ..config import get_profile
    from ..lab.experiments import (
        RunsFailedError,
        compare_with_paper,
        format_table,
        get_ablation,
        results_dir,
        run_ablation,
    )

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
    executor = _executor_of(args)
    check_cache_dir()
    try:
        ours = run_ablation(
            ablation,
            out=args.out,
            profile=profile,
            progress=progress_of(args),
            max_runs=args.max_runs,
            command=shlex.join(["opcc-edu", *args.argv]),
            executor=executor,
            retries=args.retries,
            **plan,
        )
    except RunsFailedError as exc:
        print(f"opcc-edu ablation: error: {exc}", file=sys.stderr)
        return 1
    titles = {level.label: level.display for level in ablation.levels}
    print(f"\n{ablation.title} -- profile {profile.name}, {args.queries} query sets, results in {directory}")
    print(format_table(compare_with_paper(ours, ablation), titles=titles))
    return 0
