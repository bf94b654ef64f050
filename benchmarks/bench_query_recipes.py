"""How hard each query set is: the no-model heuristic against the default ensemble, every recipe.

For all seven environments and every query recipe (``paper``, the default, ``hard`` and the
original benchmark's sets, ``original`` and ``original-relabelled``):

* the statistics of the full set (:func:`opcc_edu.lab.describe.describe_queries`): same-state and
  self-pair shares, the median gap, the heuristic's error;
* on the profile's query subset (tiny: 300 queries, the subset ``opcc-edu run`` answers), the
  EV loss and AURCC of the default ensemble (one ensemble per seed, trained once and asked
  every recipe's queries; mean and 95% Student-t interval over the seeds) next to the loss and
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
import json
import platform
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
from opcc_edu.io import atomic_write_text
from opcc_edu.lab.describe import describe_queries
from opcc_edu.metrics import mean_confidence_interval
from opcc_edu.names import ALL_HORIZONS, QUERY_RECIPES
from opcc_edu.queries import load_queries

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_record import provenance_record, write_json  # noqa: E402


def _cell(values: list[float]) -> str:
    mean, half = mean_confidence_interval(values) if len(values) > 1 else (values[0], float("nan"))
    return f"{mean:.3f} ± {half:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--environments", nargs="+", default=list(ENV_NAMES))
    parser.add_argument("--output", default=None, help="the report; its raw record goes to a .json beside it")
    parser.add_argument("--render", action="store_true", help="only rewrite --output from the .json beside it")
    args = parser.parse_args(argv)
    if args.render:
        record = json.loads(Path(args.output).with_suffix(".json").read_text())
        atomic_write_text(Path(args.output), render(record))
        return 0
    torch.set_num_threads(1)
    profile = get_profile()
    started = time.perf_counter()
    sets, answers_rows = [], []
    for env in args.environments:
        full = {recipe: load_queries(env, recipe) for recipe in QUERY_RECIPES}
        subsets = {recipe: select_profile_queries(q) for recipe, q in full.items()}
        for recipe, q in full.items():
            d = describe_queries(q)
            sets.append(
                {
                    "env": env,
                    "recipe": recipe,
                    "n": int(d.n),
                    "same_state_share": float(d.same_state_share),
                    "self_pair_share": float(d.self_pair_share),
                    "median_gap": float(d.gap_quantiles["median"]),
                    "gap_unit": d.gap_unit,
                    "gap_at_horizon_share": None if d.gap_at_horizon_share is None else float(d.gap_at_horizon_share),
                    "heuristic_error": float(d.heuristic_error),
                }
            )
        ev = {recipe: {"loss": [], "aurcc": []} for recipe in QUERY_RECIPES}
        for seed in range(args.seeds):
            config = EnsembleConfig.from_profile(seed=seed)
            model = get_or_train_ensemble(env, DEFAULT_DATASET[env], config, progress=False)
            for recipe in QUERY_RECIPES:
                answers = answer_queries(
                    env, config=config, queries=subsets[recipe], model=model, confidences=("ev",), progress=False
                )
                ev[recipe]["loss"].append(float(answers.metrics["ev"][ALL_HORIZONS]["loss"]))
                ev[recipe]["aurcc"].append(float(answers.metrics["ev"][ALL_HORIZONS]["aurcc"]))
            print(f"{env} seed {seed} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
        for recipe in QUERY_RECIPES:
            rule = heuristic_metrics(subsets[recipe])[ALL_HORIZONS]
            answers_rows.append(
                {
                    "env": env,
                    "recipe": recipe,
                    "n": len(subsets[recipe]),
                    "heuristic_loss": float(rule["loss"]),
                    "heuristic_aurcc": float(rule["aurcc"]),
                    "ev_loss": ev[recipe]["loss"],
                    "ev_aurcc": ev[recipe]["aurcc"],
                }
            )
    data = {
        **provenance_record(),
        "platform": platform.platform(),
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "seeds": list(range(args.seeds)),
        "profile": {
            "name": profile.name,
            "ensemble_size": profile.ensemble_size,
            "dynamics_train_steps": profile.dynamics_train_steps,
            "dataset_size": profile.dataset_size,
            "queries_per_env": profile.queries_per_env,
        },
        "wall_seconds": time.perf_counter() - started,
        "sets": sets,
        "answers": answers_rows,
    }
    text = render(data)
    print(text)
    if args.output:
        write_json(Path(args.output).with_suffix(".json"), data)
        atomic_write_text(Path(args.output), text)
    return 0


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def render(data: dict) -> str:
    """The report, from the raw record alone."""
    p = data["profile"]
    stats = [
        f"| {s['env']} | {s['recipe']} | {s['n']} | {s['same_state_share']:.3f} | {s['self_pair_share']:.3f} | "
        f"{s['median_gap']:.2f} {'h' if s['gap_unit'] == 'h' else ''} | "
        f"{_share(s['gap_at_horizon_share'])} | "
        f"{s['heuristic_error']:.3f} |"
        for s in data["sets"]
    ]
    rows = [
        f"| {r['env']} | {r['recipe']} | {r['n']} | {r['heuristic_loss']:.3f} | {r['heuristic_aurcc']:.3f} | "
        f"{_cell(r['ev_loss'])} | {_cell(r['ev_aurcc'])} | {np.mean(r['ev_loss']) - r['heuristic_loss']:+.3f} |"
        for r in data["answers"]
    ]
    lines = [
        "# How hard each query set is: the no-model heuristic and the default ensemble, every query recipe",
        "",
        f"Command: `{data['command']}` at commit `{str(data['git_commit'])[:12]}` (raw numbers in "
        "`query_recipes.json`)  ",
        f"Machine: {data['platform']}, {data['cores']} cores, torch {data['torch']} (1 thread); "
        f"profile {p['name']} ({p['ensemble_size']} members, {p['dynamics_train_steps']} training steps, "
        f"{p['dataset_size']} transitions of each environment's default dataset); {len(data['seeds'])} seeds; "
        f"wall time {data['wall_seconds']:.0f} s.",
        "",
        "## The sets (all queries of each)",
        "",
        "Gaps are |V_a − V_b|, in units of the horizon h on the mazes. 'gap = h' is the share of maze queries in "
        "which one side stays in the goal for the whole horizon and the other never reaches it.",
        "",
        "| env | recipe | queries | same-state | self pairs | median gap | gap = h | heuristic error |",
        "|---|---|---|---|---|---|---|---|",
        *stats,
        "",
        f"## Answers on the profile's subset ({p['queries_per_env']} queries, as `opcc-edu run`)",
        "",
        "EV = the default ensemble with ensemble voting, mean ± 95% t half-width over seeds. 'EV − heuristic' "
        "is the difference of mean losses: negative means the ensemble beats the rule that learns nothing.",
        "",
        "| env | recipe | queries | heuristic loss | heuristic AURCC | EV loss | EV AURCC | EV − heuristic |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
