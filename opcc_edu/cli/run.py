"""``opcc-edu run [ENV] [DATASET]``: the paper's baseline end to end on one environment."""

from __future__ import annotations

import argparse

from .options import (
    add_baseline,
    add_out,
    add_recipe,
    add_reward,
    add_seed,
    check_cache_dir,
    check_output_dir,
    environment,
    non_negative_float,
    positive_int,
    progress_of,
)


def register(parser: argparse.ArgumentParser) -> None:
    """Add the options and handler of ``opcc-edu run``."""
    from ..dynamics.spec import CLIP_BOXES, DEFAULT_CLIP, MODEL_TYPES, TERMINATION_MODES

    parser.description = (
        "The paper's baseline end to end: train a dynamics-model ensemble on an offline dataset (or "
        "load it from the cache), estimate both sides of every policy-comparison query in every member, "
        "predict with EV, PCI and U-PCI, and print AURCC, RPP, CR_K and loss per horizon and overall, "
        "with the tie-fair expected AURCC, selective gain and AUROC beside them, and DOPE's metrics of the value "
        "estimates (normalised error, rank correlation, regret@1) beside the loss. "
        "Writes results.json, results.npz and rcc.png under OUT/ENV/DATASET."
    )
    parser.add_argument(
        "env", metavar="ENV", nargs="?", type=environment, default=None, help="environment (default: maze2d-umaze)"
    )
    parser.add_argument(
        "dataset", metavar="DATASET", nargs="?", default=None, help="dataset (default: the environment's default)"
    )
    add_out(parser, "runs", "output directory (default: runs)")
    add_seed(parser, 0, "seed of training and rollouts (default 0)")
    parser.add_argument(
        "--ensemble-size", type=positive_int, metavar="M", default=None, help="members M (default: the profile's)"
    )
    parser.add_argument(
        "--train-steps", type=positive_int, metavar="N", default=None, help="gradient steps (default: the profile's)"
    )
    parser.add_argument(
        "--model-type",
        choices=list(MODEL_TYPES),
        default="ff",
        help="feed-forward or autoregressive members (default ff)",
    )
    parser.add_argument("--stochastic", action="store_true", help="sample from the members' Gaussians")
    parser.add_argument(
        "--prior-scale",
        type=non_negative_float,
        metavar="S",
        default=0.0,
        help="randomized constant prior scale, >= 0 (default 0: off)",
    )
    parser.add_argument(
        "--termination",
        choices=list(TERMINATION_MODES),
        default="predefined",
        help="how model rollouts terminate (default predefined)",
    )
    parser.add_argument(
        "--clip",
        choices=list(CLIP_BOXES),
        default=DEFAULT_CLIP,
        help="where rollouts clip predicted observations and rewards: nowhere, the box of the data's "
        "observations, of its observations and next observations, or that box reaching the termination "
        f"rule's health limits (default {DEFAULT_CLIP})",
    )
    add_reward(parser)
    parser.add_argument("--mixture", action="store_true", help="a random member per rollout step")
    add_recipe(
        parser,
        "--queries",
        "query sets: paper (built as the original benchmark built its own), hard, or the original benchmark's "
        "released sets (original: its targets; original-relabelled: labelled again today)",
    )
    add_baseline(
        parser,
        "ensemble (the paper's baseline), heuristic (no model: the start closer to the goal, or the policy with "
        "the higher average return, wins; nothing is trained) or fqe (model-free: bootstrapped fitted Q evaluation "
        "of each query policy on the same dataset; --ensemble-size and --train-steps size it too; results under "
        "OUT/ENV/DATASET/fqe)",
    )
    parser.add_argument("--device", default=None, help="torch device: cpu, cuda, cuda:N (default: CUDA when available)")
    parser.add_argument(
        "--no-cache", action="store_true", help="always train the ensemble and store none (datasets are still cached)"
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from ..baselines import EnsembleConfig, run_end_to_end
    from ..datasets import get_recipe, resolve_dataset
    from ..envs import DEFAULT_ENV
    from ..utils import get_device

    env_name = args.env or DEFAULT_ENV
    dataset = resolve_dataset(env_name, args.dataset)
    get_recipe(env_name, dataset)  # an unknown dataset fails now, listing the environment's
    device = get_device(args.device)
    check_output_dir(args.out)
    check_cache_dir()
    sizes = {"ensemble_size": args.ensemble_size, "train_steps": args.train_steps}
    config = EnsembleConfig.from_profile(
        seed=args.seed,
        model_type=args.model_type,
        stochastic=args.stochastic,
        prior_scale=args.prior_scale,
        termination=args.termination,
        clip=args.clip,
        reward=args.reward,
        mixture=args.mixture,
        **{k: v for k, v in sizes.items() if v is not None},
    )
    fqe_config = None
    if args.baseline == "fqe":
        from ..baselines.fqe import FQEConfig

        fqe_config = FQEConfig.from_profile(seed=args.seed, **{k: v for k, v in sizes.items() if v is not None})
    run_end_to_end(
        env_name,
        dataset,
        args.out,
        config,
        device=device,
        cache=not args.no_cache,
        progress=progress_of(args),
        queries=args.queries,
        baseline=args.baseline,
        fqe_config=fqe_config,
    )
    return 0
