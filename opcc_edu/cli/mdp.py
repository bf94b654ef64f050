"""``opcc-edu mdp-demo``: exact (dynamic programming) vs Monte-Carlo values on a small tabular MDP."""

from __future__ import annotations

import argparse

import numpy as np

from .options import add_seed, positive_int, unit_float


def register(parser: argparse.ArgumentParser) -> None:
    """Add the options and handler of ``opcc-edu mdp-demo``."""
    parser.description = (
        "The MDP-background chapter's demonstration: exact finite-horizon values by backward induction "
        "against Monte-Carlo estimates (the profile's mdp_rollouts rollouts per state), and how the "
        "Monte-Carlo error shrinks like 1/sqrt(n)."
    )
    parser.add_argument("--states", type=positive_int, metavar="N", default=6, help="number of states (default 6)")
    parser.add_argument("--actions", type=positive_int, metavar="N", default=2, help="number of actions (default 2)")
    parser.add_argument("--horizon", type=positive_int, metavar="H", default=10, help="horizon h (default 10)")
    parser.add_argument("--gamma", type=unit_float, metavar="G", default=1.0, help="discount in [0, 1] (default 1.0)")
    add_seed(parser, 0, "seed of the MDP, the policy and the rollouts (default 0)")
    parser.set_defaults(handler=_mdp_demo)


def mdp_demo_lines(states: int, actions: int, horizon: int, gamma: float, seed: int, rollouts: int) -> list[str]:
    """The demonstration read top to bottom: a random MDP and policy, exact values, Monte-Carlo
    means with 95% interval half-widths, and the RMSE of the Monte-Carlo mean against n."""
    from ..mdp import monte_carlo_error_curve, monte_carlo_returns, policy_value, random_mdp

    mdp = random_mdp(states, actions, branching=min(3, states), seed=seed)
    rng = np.random.default_rng(seed)
    policy = rng.dirichlet(np.ones(actions), size=states)
    exact = policy_value(mdp, policy, horizon, gamma)
    lines = [
        f"Random MDP: {states} states, {actions} actions, h={horizon}, gamma={gamma}",
        f"Exact V (backward induction) vs Monte-Carlo mean of {rollouts} rollouts:",
        f"  {'state':>5} {'exact':>10} {'MC mean':>10} {'MC 95% CI half-width':>22}",
    ]
    for s in range(states):
        returns = monte_carlo_returns(mdp, policy, s, horizon, rollouts, gamma, seed=rng)
        half = 1.96 * returns.std(ddof=1) / np.sqrt(rollouts)
        lines.append(f"  {s:>5} {exact[s]:>10.4f} {returns.mean():>10.4f} {half:>22.4f}")
    counts = np.unique(np.geomspace(10, rollouts, 5).astype(int))
    curve = monte_carlo_error_curve(mdp, policy, 0, horizon, counts, n_repeats=40, gamma=gamma, seed=seed)
    lines += ["", "RMSE of the Monte-Carlo mean at state 0 (should fall like 1/sqrt(n)):"]
    sigma = float(curve["std_return"])
    for c, e in zip(curve["counts"], curve["rmse"], strict=True):
        lines.append(f"  n={int(c):>7}  rmse={e:.4f}  sigma/sqrt(n)={sigma / np.sqrt(c):.4f}")
    return lines


def _mdp_demo(args: argparse.Namespace) -> int:
    from ..config import get_profile

    for line in mdp_demo_lines(
        args.states, args.actions, args.horizon, args.gamma, args.seed, get_profile().mdp_rollouts
    ):
        print(line)
    return 0
