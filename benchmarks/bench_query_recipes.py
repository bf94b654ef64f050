"""How hard each query set is: the no-model heuristic against the default ensemble, on both recipes.

For all seven environments and both recipes (``paper``, the default, and ``hard``):

* the statistics of the full set (:func:`opcc_edu.lab.describe.describe_queries`): same-state and
  self-pair shares, the median gap, the heuristic's error;
* on the profile's query subset (tiny: 300 queries, the subset ``opcc-edu run`` answers), the
  EV loss and AURCC of the default ensemble (one ensemble per seed, trained once and asked
  both recipes' queries; mean and 95% Student-t interval over the seeds) next to the loss and
  AURCC of the heuristic on the same queries (deterministic: no interval).

The heuristic is the baseline this benchmark measures against: an ensemble that does not beat
a rule that learns nothing has not learned what the set asks.

Usage::

    OPCC_EDU_PROFILE=tiny OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_query_recipes.py \
        --seeds 3 --output benchmarks/results/query_recipes.md
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch

from opcc_edu.baselines import EnsembleConfig, answer_queries, get_or_train_ensemble, select_profile_queries
from opcc_edu.baselines.heuristic import heuristic_metrics
from opcc_edu.config import get_profile
from opcc_edu.datasets import DEFAULT_DATASET
from opcc_edu.envs import ENV_NAMES
from opcc_edu.lab.describe import describe_queries
from opcc_edu.metrics import mean_confidence_interval
from opcc_edu.names import ALL_HORIZONS, QUERY_RECIPES
from opcc_edu.queries import load_queries


def _cell(values: list[float]) -> str:
    mean, half = mean_confidence_interval(values) if len(values) > 1 else (values[0], float("nan"))
    return f"{mean:.3f} ± {half:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--environments", nargs="+", default=list(ENV_NAMES))
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    profile = get_profile()
    started = time.perf_counter()
    stats, rows = [], []
    for env in args.environments:
        full = {recipe: load_queries(env, recipe) for recipe in QUERY_RECIPES}
        subsets = {recipe: select_profile_queries(q) for recipe, q in full.items()}
        for recipe, q in full.items():
            d = describe_queries(q)
            stats.append(
                f"| {env} | {recipe} | {d.n} | {d.same_state_share:.3f} | {d.self_pair_share:.3f} | "
                f"{d.gap_quantiles['median']:.2f} {'h' if d.gap_unit == 'h' else ''} | "
                f"{'-' if d.gap_at_horizon_share is None else f'{d.gap_at_horizon_share:.2f}'} | "
                f"{d.heuristic_error:.3f} |"
            )
        ev = {recipe: {"loss": [], "aurcc": []} for recipe in QUERY_RECIPES}
        for seed in range(args.seeds):
            config = EnsembleConfig.from_profile(seed=seed)
            model = get_or_train_ensemble(env, DEFAULT_DATASET[env], config, progress=False)
            for recipe in QUERY_RECIPES:
                answers = answer_queries(
                    env, config=config, queries=subsets[recipe], model=model, confidences=("ev",), progress=False
                )
                ev[recipe]["loss"].append(answers.metrics["ev"][ALL_HORIZONS]["loss"])
                ev[recipe]["aurcc"].append(answers.metrics["ev"][ALL_HORIZONS]["aurcc"])
            print(f"{env} seed {seed} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
        for recipe in QUERY_RECIPES:
            rule = heuristic_metrics(subsets[recipe])[ALL_HORIZONS]
            gain = np.mean(ev[recipe]["loss"]) - rule["loss"]
            rows.append(
                f"| {env} | {recipe} | {len(subsets[recipe])} | {rule['loss']:.3f} | {rule['aurcc']:.3f} | "
                f"{_cell(ev[recipe]['loss'])} | {_cell(ev[recipe]['aurcc'])} | {gain:+.3f} |"
            )
    command = shlex.join(["python", *sys.argv]) if argv is None else shlex.join(["python", __file__, *argv])
    lines = [
        "# How hard each query set is: the no-model heuristic and the default ensemble, both recipes",
        "",
        f"Command: `OPCC_EDU_PROFILE={profile.name} {command}`  ",
        f"Machine: {platform.platform()}, {os.cpu_count()} cores, torch {torch.__version__} (1 thread); "
        f"profile {profile.name} ({profile.ensemble_size} members, {profile.dynamics_train_steps} training steps, "
        f"{profile.dataset_size} transitions of each environment's default dataset); {args.seeds} seeds; "
        f"wall time {time.perf_counter() - started:.0f} s.",
        "",
        "## The sets (all 1,500 queries of each)",
        "",
        "Gaps are |V_a − V_b|, in units of the horizon h on the mazes. 'gap = h' is the share of maze queries in "
        "which one side stays in the goal for the whole horizon and the other never reaches it.",
        "",
        "| env | recipe | queries | same-state | self pairs | median gap | gap = h | heuristic error |",
        "|---|---|---|---|---|---|---|---|",
        *stats,
        "",
        f"## Answers on the profile's subset ({profile.queries_per_env} queries, as `opcc-edu run`)",
        "",
        "EV = the default ensemble with ensemble voting, mean ± 95% t half-width over seeds. 'EV − heuristic' "
        "is the difference of mean losses: negative means the ensemble beats the rule that learns nothing.",
        "",
        "| env | recipe | queries | heuristic loss | heuristic AURCC | EV loss | EV AURCC | EV − heuristic |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
