"""One-step error of the ensembles a committed ablation grid trained, level against level.

``bench_training.py --model-type ar`` trains fresh models at the ``tiny`` sizes to compare the
autoregressive objectives. This script measures the models the grid itself trained and
answered with: for every run of an ablation in a profile (by default ``model-type`` in
``classroom`` on maze2d-umaze and Hopper, 3 seeds) it obtains the run's ensemble through the
ensemble cache, with the configuration the grid used
(:func:`opcc_edu.lab.experiments.run_ensemble_config`), and scores it on the transitions its
training held out (:func:`opcc_edu.lab.diagnose.holdout_indices`, the run's seed). The
measure is ``bench_training.py``'s: the one-step mean squared error per target dimension in
standardised units, mean over members, the autoregressive model predicting each dimension from
its own earlier predictions as in a rollout.

The data are read at the size the grid's runs read, which ``meta.json`` records in the results
directory (``--results``; the ``paper/classroom`` runs read 20,000 transitions, not the profile's
200,000). A run whose ensemble is not in the cache is trained first (the same weights the grid trained:
training is seeded), so the script reproduces on a machine that never ran the grid; it says for
each run whether the cache held it.

``python benchmarks/bench_model_error.py [--ablation model-type] [--profile classroom]
[--seeds 3] [--results DIR] [ENV ...]`` writes ``benchmarks/results/model_error_<ablation>_<profile>.json``
and ``.md`` (``..._<profile>_<results root>.*`` for a grid outside ``results/ablations``, such as
``results/ablations-classroom/paper/classroom``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from opcc_edu.io import atomic_write_text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_record import model_sizes, provenance_record, write_json  # noqa: E402
from bench_rollout import RESULTS, machine  # noqa: E402
from bench_training import held_out_mse_per_dim  # noqa: E402

DEFAULT_ENVIRONMENTS = ("maze2d-umaze", "hopper")


def measure(ablation: str, profile: str, seeds: int, environments: list[str], results: Path) -> dict:
    """``{env/dataset: {level: [{seed, cache_hit, mse_per_dim, ...}, ...]}}`` over the grid's runs.

    The data size is the one the grid's runs read (``results``'s ``meta.json``), else the
    profile's."""
    from opcc_edu.baselines import get_or_train_ensemble
    from opcc_edu.config import use_profile
    from opcc_edu.datasets import load_dataset
    from opcc_edu.datasets.recipes import get_recipe, max_size
    from opcc_edu.lab.experiments import (
        configuration_label,
        get_ablation,
        plan_ablation,
        results_sizes,
        run_ensemble_config,
    )
    from opcc_edu.lab.experiments.runner import profile_sizes

    recorded = (results_sizes(results) if results.is_dir() else None) or profile_sizes(profile)

    labels = {configuration_label(lv.overrides): lv.label for lv in get_ablation(ablation).levels}
    results: dict = {}
    with use_profile(profile):
        grid = plan_ablation(ablation, profile, environments=environments, seeds=seeds)
        order = [configuration_label(c) for c in grid.configurations]
        runs = sorted(
            grid.runs(), key=lambda r: (environments.index(r.environment), order.index(r.configuration), r.seed)
        )
        for run in runs:
            level = labels.get(run.configuration, run.configuration)
            config = run_ensemble_config(run, profile)
            size = min(recorded["dataset_size"], max_size(get_recipe(run.environment, run.dataset)))
            start = time.perf_counter()
            model = get_or_train_ensemble(run.environment, run.dataset, config, dataset_size=size, progress=False)
            data = load_dataset(run.environment, run.dataset, size=size, progress=False)
            mse = held_out_mse_per_dim(model, data, config.seed)
            cell = {
                "seed": run.seed,
                "configuration": run.configuration,
                "cache_hit": bool(model.info.get("cache_hit", False)),
                "ensemble": Path(model.info.get("path", "")).name,
                "transitions": int(len(data["observations"])),
                "mse_per_dim": mse.tolist(),
                "mse": float(mse.mean()),
                "seconds": time.perf_counter() - start,
            }
            results.setdefault(f"{run.environment}/{run.dataset}", {}).setdefault(str(level), []).append(cell)
            print(
                f"  {run.environment}/{run.dataset} {run.configuration} seed {run.seed}: mse {cell['mse']:.4f} "
                f"({'cache' if cell['cache_hit'] else 'trained'}, {cell['seconds']:.0f}s)",
                flush=True,
            )
    return results


def render(data: dict) -> str:
    """The report, from the raw record alone (a record written before the profile's sizes were
    recorded reads them from the profile)."""
    c, host, results = data["config"], data["machine"], data["results"]
    prof = data.get("profile_sizes") or model_sizes(c["profile"])
    grid = Path(c["results"])
    results_option = f" --results {grid}" if results_suffix(RESULTS.parents[1] / grid) else ""
    command = data.get("command") or (
        f"python benchmarks/bench_model_error.py --ablation {c['ablation']} --profile {c['profile']} "
        f"--seeds {c['seeds']}{results_option} {' '.join(c['environments'])}"
    )
    lines = [
        f"# One-step error of the `{c['ablation']}` grid's ensembles, profile `{c['profile']}`",
        "",
        f"`{command}` (the runs of "
        f"`{grid}`, at the data size its `meta.json` records) "
        f"on {host['cpu']}, torch {host['torch']}. "
        f"Profile `{c['profile']}`: {prof['ensemble_size']} members of {prof['hidden_sizes']}, "
        f"{prof['dynamics_train_steps']} gradient steps of {prof['batch_size']} rows per member. Each run's own "
        "ensemble (the grid's configuration and seed, through the ensemble cache), scored on the "
        "transitions its training held out: one-step MSE per target dimension in standardised units, "
        "mean over members and dimensions; the autoregressive model predicts each dimension from its own "
        "earlier predictions.",
        "",
        "| data | level | runs | from the cache | MSE per seed | mean | ratio to the first level |",
        "|---|---|---|---|---|---|---|",
    ]
    for data, levels in results.items():
        first = None
        for level, cells in levels.items():
            mean = float(np.mean([c["mse"] for c in cells]))
            first = mean if first is None else first
            lines.append(
                f"| {data} | {level} | {len(cells)} | {sum(c['cache_hit'] for c in cells)} | "
                + ", ".join(f"{c['mse']:.4f}" for c in cells)
                + f" | {mean:.4f} | {mean / first:.2f} |"
            )
    return "\n".join(lines) + "\n"


def results_suffix(results: Path) -> str:
    """``""`` for a grid under ``results/ablations``, else ``"_<its results root>"`` (for instance
    ``_ablations-classroom``), so that two grids of one profile write two files."""
    root = results.resolve().parents[1]
    return "" if root == (RESULTS.parents[1] / "results" / "ablations").resolve() else f"_{root.name}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("environments", nargs="*", default=list(DEFAULT_ENVIRONMENTS))
    parser.add_argument("--ablation", default="model-type", help="registry key of the ablation")
    parser.add_argument("--profile", default="classroom")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--results",
        type=Path,
        default=None,
        help="the grid's results directory, whose meta.json names the data size its runs read "
        "(default: results/ablations/paper/<profile>)",
    )
    args = parser.parse_args(argv)
    if args.results is None:
        args.results = RESULTS.parents[1] / "results" / "ablations" / "paper" / args.profile
    args.results = args.results.resolve()
    torch.set_num_threads(args.threads)
    host = machine()
    results = measure(args.ablation, args.profile, args.seeds, args.environments, args.results)
    host["load_average_end"] = os.getloadavg()
    stem = RESULTS / f"model_error_{args.ablation}_{args.profile}{results_suffix(args.results)}"
    meta = {
        **provenance_record(),
        "machine": host,
        "config": {**vars(args), "results": str(args.results.relative_to(RESULTS.parents[1]))},
        "profile_sizes": model_sizes(args.profile),
    }
    write_json(stem.with_suffix(".json"), {**meta, "results": results})
    report = render({**meta, "results": results})
    atomic_write_text(stem.with_suffix(".md"), report)
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
