"""Subcommands of ``opcc-edu`` (registered in :mod:`opcc_edu.cli`)."""

from __future__ import annotations

import argparse
import importlib

import numpy as np

from .config import get_profile
from .utils import check_positive_int

# Modules that contribute a section to `opcc-edu info` through a function
# `info_lines() -> list[str]`; missing modules are skipped.
INFO_PROVIDERS: tuple[str, ...] = (
    "opcc_edu.policies",
    "opcc_edu.queries",
    "opcc_edu.datasets",
    "opcc_edu.experiments",
)


def add_info(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "info",
        help="list environments, profiles, policies, datasets and query sets",
        description="List the benchmark's environments (paper Table 8), the active profile, and the "
        "policies, datasets and query sets shipped with or cached by the package.",
    )
    p.set_defaults(handler=_info)


def _info(args: argparse.Namespace) -> int:
    from . import __version__
    from .envs import ENV_SPECS

    profile = get_profile()
    print(f"opcc_edu {__version__} -- active profile: {profile.name}")
    print("\nEnvironments (paper Table 8):")
    print(f"  {'name':<15} {'kind':<11} {'obs':>4} {'act':>4} {'steps':>6}  termination")
    for spec in ENV_SPECS.values():
        print(
            f"  {spec.name:<15} {spec.kind:<11} {spec.obs_dim:>4} {spec.act_dim:>4} "
            f"{spec.max_episode_steps:>6}  {spec.termination}"
        )
    for module_name in INFO_PROVIDERS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        provider = getattr(module, "info_lines", None)
        if provider is not None:
            print()
            for line in provider():
                print(line)
    return 0


def add_mdp_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "mdp-demo",
        help="exact (dynamic programming) vs Monte-Carlo values on a small tabular MDP",
        description="The MDP-background chapter's demonstration: exact finite-horizon values by "
        "backward induction against Monte-Carlo estimates, and how the Monte-Carlo error shrinks "
        "like 1/sqrt(n).",
    )
    _add_mdp_args(p)
    p.set_defaults(handler=_mdp_demo)


def _add_mdp_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--states", type=int, default=6, help="number of states (default 6)")
    p.add_argument("--actions", type=int, default=2, help="number of actions (default 2)")
    p.add_argument("--horizon", type=int, default=10, help="horizon h (default 10)")
    p.add_argument("--gamma", type=float, default=1.0, help="discount (default 1.0)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def _mdp_demo(args: argparse.Namespace) -> int:
    from .mdp import monte_carlo_error_curve, monte_carlo_returns, policy_value, random_mdp

    mdp = random_mdp(args.states, args.actions, branching=min(3, args.states), seed=args.seed)
    rng = np.random.default_rng(args.seed)
    policy = rng.dirichlet(np.ones(args.actions), size=args.states)
    exact = policy_value(mdp, policy, args.horizon, args.gamma)
    n = get_profile().mdp_rollouts
    print(f"Random MDP: {args.states} states, {args.actions} actions, h={args.horizon}, gamma={args.gamma}")
    print(f"Exact V (backward induction) vs Monte-Carlo mean of {n} rollouts:")
    print(f"  {'state':>5} {'exact':>10} {'MC mean':>10} {'MC 95% CI half-width':>22}")
    for s in range(args.states):
        returns = monte_carlo_returns(mdp, policy, s, args.horizon, n, args.gamma, seed=rng)
        half = 1.96 * returns.std(ddof=1) / np.sqrt(n)
        print(f"  {s:>5} {exact[s]:>10.4f} {returns.mean():>10.4f} {half:>22.4f}")
    counts = np.unique(np.geomspace(10, n, 5).astype(int))
    curve = monte_carlo_error_curve(mdp, policy, 0, args.horizon, counts, n_repeats=40, gamma=args.gamma, seed=args.seed)
    print("\nRMSE of the Monte-Carlo mean at state 0 (should fall like 1/sqrt(n)):")
    for c, e in zip(curve["counts"], curve["rmse"]):
        print(f"  n={int(c):>7}  rmse={e:.4f}  sigma/sqrt(n)={float(curve['std_return']) / np.sqrt(c):.4f}")
    return 0


def add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="train (or load) a dynamics ensemble, answer an environment's queries, score EV/PCI/U-PCI",
        description="The paper's baseline end to end: train a dynamics-model ensemble on an offline "
        "dataset (or load it from the cache), estimate both sides of every policy-comparison query in "
        "every member, predict with EV, PCI and U-PCI, and print AURCC, RPP, CR_K and loss per horizon "
        "and overall. Writes results.json, results.npz and rcc.png under OUT/ENV/DATASET.",
    )
    p.add_argument("env", nargs="?", default=None, help="environment (default: maze2d-umaze)")
    p.add_argument("dataset", nargs="?", default=None, help="dataset (default: the environment's default)")
    p.add_argument("--out", default="runs", help="output directory (default: runs/)")
    p.add_argument("--seed", type=int, default=0, help="seed of training and rollouts (default 0)")
    p.add_argument("--ensemble-size", type=int, default=None, help="members M (default: the profile's)")
    p.add_argument("--train-steps", type=int, default=None, help="gradient steps (default: the profile's)")
    p.add_argument("--model-type", choices=["ff", "ar"], default="ff", help="feed-forward or autoregressive")
    p.add_argument("--stochastic", action="store_true", help="sample from the members' Gaussians")
    p.add_argument("--prior-scale", type=float, default=0.0, help="randomized constant prior scale (0 = off)")
    p.add_argument("--termination", choices=["predefined", "learned", "none"], default="predefined")
    p.add_argument("--mixture", action="store_true", help="a random member per rollout step")
    p.add_argument("--device", default=None, help="torch device (default: CUDA when available)")
    p.add_argument(
        "--threads", type=int, default=None, help="CPU threads for torch (default: torch's choice; 1 is best on a busy machine)"
    )
    p.add_argument("--no-cache", action="store_true", help="always train; store nothing")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        from .baselines import EnsembleConfig, run_end_to_end
    except ImportError as exc:  # a partial install: fall back to the tabular demonstration
        print(f"opcc-edu run: the model-based pipeline is unavailable ({exc}); running mdp-demo instead")
        return _mdp_demo(argparse.Namespace(states=6, actions=2, horizon=10, gamma=1.0, seed=args.seed))
    if args.threads is not None:
        import torch

        torch.set_num_threads(check_positive_int(args.threads, "--threads"))
    sizes = {"ensemble_size": args.ensemble_size, "train_steps": args.train_steps}
    config = EnsembleConfig.from_profile(
        seed=args.seed,
        model_type=args.model_type,
        stochastic=args.stochastic,
        prior_scale=args.prior_scale,
        termination=args.termination,
        mixture=args.mixture,
        **{k: v for k, v in sizes.items() if v is not None},
    )
    run_end_to_end(args.env, args.dataset, args.out, config, device=args.device, cache=not args.no_cache, progress=not args.no_progress)
    return 0
