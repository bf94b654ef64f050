"""Expected time and CPU cost of each ablation at the paper's scale, derived from measurements.

Nothing is timed here. The estimate multiplies the work of one ``paper``-profile run by
throughputs measured on this repository's benchmark machine, and counts the runs of every
ablation with :func:`opcc_edu.lab.experiments.plan_ablation`:

* training: M x steps x batch member-samples at the measured training throughput of
  ``benchmarks/results/training.json`` (the MBPO-sized 4x200 model, one CPU thread);
* rollouts: M x 2N sides x h member-steps (every side rolled to h = 50, an upper bound) at
  the measured full-horizon rollout throughput of ``benchmarks/results/rollout.json``
  (M = 100); an autoregressive model takes D + 1 passes per rollout step and
  trains on D + 1 rows (one per target dimension) for every row of a minibatch.

Each throughput is given on two bases: process CPU time (what one dedicated core delivers) and
wall time on the shared machine the benchmark ran on (slower). The two bracket a run. The
method is checked against the end-to-end wall times of the committed ``classroom`` runs
(``results/ablations/hard/classroom/runs.csv``), predicted the same way.

GPU times are not estimated: no GPU measurement exists yet (see the rollout benchmark).

Usage::

    python benchmarks/paper_scale_estimate.py   # writes benchmarks/results/paper_scale.{json,md}
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pandas as pd

from opcc_edu.config import get_profile
from opcc_edu.io import atomic_write_text
from opcc_edu.lab.experiments import ABLATIONS, plan_ablation

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CLASSROOM_RUNS = ROOT / "results" / "ablations" / "hard" / "classroom" / "runs.csv"
HORIZON = 50
LOCOMOTION_D = 17  # the benchmark's model (HalfCheetah / Walker2d sizes)
SLOTS = (1, 16, 64)


def throughputs() -> dict[str, dict[str, float]]:
    training = json.loads((RESULTS / "training.json").read_text())
    rollout = json.loads((RESULTS / "rollout.json").read_text())
    full = next(r for r in rollout["runs"] if r["M"] == 100)["batched_full_horizon"]
    return {
        "training_samples_per_s": {
            "cpu": training["samples_per_s_cpu"]["batched"],
            "wall": training["samples_per_s_wall"]["batched"],
        },
        "rollout_member_steps_per_s": {
            "cpu": full["member_steps_per_s_cpu"],
            "wall": full["member_steps_per_s_wall"],
        },
        "machines": {"training": training["machine"], "rollout": rollout["machine"]},
    }


def run_seconds(profile_name: str, rates: dict, basis: str, autoregressive: bool = False) -> dict[str, float]:
    """Seconds of one run of ``profile_name`` on one CPU thread: training, rollouts, total."""
    profile = get_profile(profile_name)
    queries = profile.queries_per_env or 1500  # 0 = every query: 1,500 per environment
    passes = LOCOMOTION_D + 1 if autoregressive else 1
    # the autoregressive model is taught every target dimension of every row (ar_targets="all"):
    # each training row counts as D + 1 rows
    samples = profile.ensemble_size * profile.dynamics_train_steps * profile.batch_size * passes
    member_steps = profile.ensemble_size * 2 * queries * HORIZON * passes
    train = samples / rates["training_samples_per_s"][basis]
    roll = member_steps / rates["rollout_member_steps_per_s"][basis]
    return {
        "training": train,
        "rollouts": roll,
        "total": train + roll,
        "samples": samples,
        "member_steps": member_steps,
    }


def estimate() -> dict:
    rates = throughputs()
    per_run = {basis: run_seconds("paper", rates, basis) for basis in ("cpu", "wall")}
    per_run_ar = {basis: run_seconds("paper", rates, basis, autoregressive=True) for basis in ("cpu", "wall")}
    classroom = {basis: run_seconds("classroom", rates, basis) for basis in ("cpu", "wall")}
    measured = pd.read_csv(CLASSROOM_RUNS)["seconds"]
    ablations = []
    distinct: set[str] = set()
    for name, ablation in ABLATIONS.items():
        grid = plan_ablation(name, "paper")
        runs = grid.runs()
        distinct |= {r.run_id for r in runs}
        ar_runs = sum(1 for r in runs if r.overrides.get("model_type") == "ar")
        seconds = {
            basis: (len(runs) - ar_runs) * per_run[basis]["total"] + ar_runs * per_run_ar[basis]["total"]
            for basis in ("cpu", "wall")
        }
        longest = {basis: (per_run_ar if ar_runs else per_run)[basis]["total"] for basis in ("cpu", "wall")}
        ablations.append(
            {
                "ablation": name,
                "title": ablation.title,
                "runs": len(runs),
                "levels": len(grid.configurations),
                "core_hours": {basis: seconds[basis] / 3600 for basis in seconds},
                "wall_hours": {
                    str(slots): {b: math.ceil(len(runs) / slots) * longest[b] / 3600 for b in seconds}
                    for slots in SLOTS
                },
            }
        )
    return {
        "inputs": {
            "training": "benchmarks/results/training.json",
            "rollout": "benchmarks/results/rollout.json",
            "classroom_runs": str(CLASSROOM_RUNS.relative_to(ROOT)),
            "horizon_upper_bound": HORIZON,
        },
        "throughputs": rates,
        "paper_run_seconds": per_run,
        "paper_run_seconds_autoregressive": per_run_ar,
        "classroom_check": {
            "predicted_seconds": {b: classroom[b]["total"] for b in classroom},
            "measured_seconds": {
                "runs": int(measured.size),
                "median": float(measured.median()),
                "mean": float(measured.mean()),
                "min": float(measured.min()),
                "max": float(measured.max()),
            },
        },
        "ablations": ablations,
        "distinct_runs": len(distinct),
        "distinct_core_hours": {b: len(distinct) * per_run[b]["total"] / 3600 for b in ("cpu", "wall")},
    }


def hours(low: float, high: float) -> str:
    return f"{low:,.0f}–{high:,.0f}" if low >= 10 else f"{low:.1f}–{high:.1f}"


def summarize(result: dict) -> str:
    rates = result["throughputs"]
    run, run_ar = result["paper_run_seconds"], result["paper_run_seconds_autoregressive"]
    check = result["classroom_check"]
    machine = rates["machines"]["training"]
    paper = get_profile("paper")
    lines = [
        "# Paper scale: expected time and CPU cost per ablation (benchmarks/paper_scale_estimate.py)",
        "",
        "Derived, not timed: the work of one `paper`-profile run times throughputs measured on the benchmark "
        f"machine ({machine['cpu']}, {machine['logical_cpus']} logical CPUs, torch {machine['torch']}, one thread). "
        "Each throughput has two bases: process CPU time (one dedicated core) and wall time on the shared machine "
        "the benchmark ran on; the two bracket a run. GPU: not estimated, no GPU measurement exists yet.",
        "",
        *(
            [
                f"Command: `{result['provenance']['command']}` at commit "
                f"`{str(result['provenance'].get('git_commit'))[:12]}` (raw numbers in `paper_scale.json`).",
                "",
            ]
            if "provenance" in result
            else []
        ),
        "## Inputs (measured)",
        "",
        "| what | CPU-time basis | wall basis | source |",
        "|---|---|---|---|",
        f"| training, member-samples/s (M = 20, 4x200) | {rates['training_samples_per_s']['cpu']:,.0f} | "
        f"{rates['training_samples_per_s']['wall']:,.0f} | benchmarks/results/training.json |",
        f"| rollouts, member-steps/s (M = 100, h = 50) | {rates['rollout_member_steps_per_s']['cpu']:,.0f} | "
        f"{rates['rollout_member_steps_per_s']['wall']:,.0f} | benchmarks/results/rollout.json |",
        "",
        "## One paper-profile run on one CPU thread",
        "",
        f"M = {paper.ensemble_size} members of {len(paper.hidden_sizes)} hidden layers of "
        f"{'/'.join(map(str, sorted(set(paper.hidden_sizes))))} units, "
        f"{paper.dynamics_train_steps:,} steps of batch {paper.batch_size} "
        f"({run['cpu']['samples']:,} member-samples); 1,500 queries, 3,000 sides rolled to h = {HORIZON} "
        f"({run['cpu']['member_steps']:,} member-steps, an upper bound: horizons are 10 to 50).",
        "",
        "| part | CPU-time basis | wall basis |",
        "|---|---|---|",
        f"| training | {run['cpu']['training'] / 3600:.2f} h | {run['wall']['training'] / 3600:.2f} h |",
        f"| rollouts (feed-forward) | {run['cpu']['rollouts']:.0f} s | {run['wall']['rollouts']:.0f} s |",
        f"| training (autoregressive, {LOCOMOTION_D + 1} target dimensions per row) | "
        f"{run_ar['cpu']['training'] / 3600:.1f} h | {run_ar['wall']['training'] / 3600:.1f} h |",
        f"| rollouts (autoregressive, {LOCOMOTION_D + 1} passes per step) | {run_ar['cpu']['rollouts'] / 60:.0f} min | "
        f"{run_ar['wall']['rollouts'] / 60:.0f} min |",
        f"| **one run** (feed-forward) | **{run['cpu']['total'] / 3600:.1f} h** | "
        f"**{run['wall']['total'] / 3600:.1f} h** |",
        "",
        "Check of the method: the committed `classroom` runs "
        f"({check['measured_seconds']['runs']} runs on the same machine, wall time end to end) took a median of "
        f"{check['measured_seconds']['median']:.0f} s (mean {check['measured_seconds']['mean']:.0f} s, range "
        f"{check['measured_seconds']['min']:.0f}–{check['measured_seconds']['max']:.0f} s); the same derivation "
        f"predicts {check['predicted_seconds']['cpu']:.0f} s (CPU-time basis) to "
        f"{check['predicted_seconds']['wall']:.0f} s (wall basis) for a classroom run "
        "(with the 4x200 model; the classroom model is 3x200).",
        "",
        "## Per ablation",
        "",
        "Core-hours are the cost (multiply by the price of a core-hour). Wall time with S one-core slots "
        "(`--executor ray --cpus-per-run 1` on a cluster of S CPUs) is ceil(runs / S) runs one after another; "
        "runs shared by several ablations (the default configuration) are computed once, so a full sweep costs "
        "less than the sum of the rows.",
        "",
        "| ablation | levels | runs | core-hours | wall, 16 slots | wall, 64 slots |",
        "|---|---|---|---|---|---|",
    ]
    for a in result["ablations"]:
        ch, wall = a["core_hours"], a["wall_hours"]
        lines.append(
            f"| {a['ablation']} | {a['levels']} | {a['runs']} | {hours(ch['cpu'], ch['wall'])} | "
            f"{hours(wall['16']['cpu'], wall['16']['wall'])} h | {hours(wall['64']['cpu'], wall['64']['wall'])} h |"
        )
    dc = result["distinct_core_hours"]
    lines += [
        "",
        f"Every ablation together: {result['distinct_runs']:,} distinct runs, "
        f"{hours(dc['cpu'], dc['wall'])} core-hours for feed-forward runs (the autoregressive level adds its "
        "longer training and rollouts: its row above).",
        "",
        "Not covered: threads per run above one (training's speed-up with more threads was not measured), "
        "generating the datasets and query sets (once per environment and dataset, cached), and GPUs.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_record import provenance_record

    result = {"provenance": provenance_record(), **estimate()}
    atomic_write_text(RESULTS / "paper_scale.json", json.dumps(result, indent=2) + "\n")
    text = summarize(result)
    atomic_write_text(RESULTS / "paper_scale.md", text)
    print(text)


if __name__ == "__main__":
    main()
