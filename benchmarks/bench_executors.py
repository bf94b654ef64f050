"""Wall time of one small ablation grid on each executor, against the in-process runner.

The grid is the ``tiny`` profile's prior-scale ablation on maze2d-umaze with 2 seeds: 4 real
runs (10-member ensembles trained without the ensemble cache, so every executor trains them
all). It runs in this process (the baseline), in 2 local worker processes (``--jobs 2``) and on
a local Ray cluster of 2 CPUs (its start included), in interleaved order, best of ``--repeats``.
Every executor's table is checked to equal the baseline's, row for row.

Tiny runs take seconds, so this measures the executors' overhead (worker start, imports, the
cluster) more than their speed-up; at the paper's scale a run takes hours
(``benchmarks/results/paper_scale.md``) and the overhead vanishes.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_executors.py   # writes benchmarks/results/executors.{json,md}
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from opcc_edu.io import atomic_write_text
from opcc_edu.lab import experiments as ex
from opcc_edu.lab.experiments import executors

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_record import provenance_record, write_json  # noqa: E402
from bench_rollout import RESULTS, machine  # noqa: E402

KEY = ["run_id", "horizon", "confidence", "ensemble_count"]


def make(name: str) -> executors.Executor:
    if name == "in-process":
        return executors.SerialExecutor()
    if name == "2 local processes":
        return executors.ProcessExecutor(2, threads=1)
    return executors.RayExecutor(num_cpus=2)


def timed_grid(name: str, out: Path) -> tuple[float, pd.DataFrame]:
    grid = ex.plan_ablation("prior-scale", "tiny", datasets=["1m"], seeds=2)
    answer = ex.baseline_answer_function("tiny", queries="paper", cache=False)
    start = time.perf_counter()
    results = ex.run_grid(grid, out, answer_fn=answer, profile="tiny", progress=False, executor=make(name))
    seconds = time.perf_counter() - start
    return seconds, results.sort_values(KEY).reset_index(drop=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS / "executors")
    args = parser.parse_args()
    names = ["in-process", "2 local processes", "ray, local cluster of 2 CPUs"]
    best: dict[str, float] = {}
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as scratch:
        reference = None
        for repeat in range(args.repeats):
            for name in names:
                out = Path(scratch) / f"{repeat}-{names.index(name)}"
                seconds, table = timed_grid(name, out)
                if reference is None:
                    reference = table
                pd.testing.assert_frame_equal(table, reference, check_exact=True)
                best[name] = min(best.get(name, float("inf")), seconds)
                shutil.rmtree(out)
                print(f"repeat {repeat + 1}: {name}: {seconds:.1f} s", flush=True)
    info = machine()
    info["load_average_start"], info["load_average_end"] = load_start, os.getloadavg()
    results = {
        **provenance_record(),
        "machine": info,
        "runs": 4,
        "repeats": args.repeats,
        "seconds": best,
    }
    write_json(args.out.with_suffix(".json"), results)
    text = render(results)
    atomic_write_text(args.out.with_suffix(".md"), text)
    print(text)


def render(data: dict) -> str:
    """The report, from the raw record alone."""
    info, best, names = data["machine"], data["seconds"], list(data["seconds"])
    base = best["in-process"]
    lines = [
        "# Executors: one small grid on each (benchmarks/bench_executors.py)",
        "",
        f"Machine: {info['cpu']}, {info['logical_cpus']} logical CPUs, torch {info['torch']}; load average "
        f"{tuple(round(x, 2) for x in info['load_average_start'])} at the start and "
        f"{tuple(round(x, 2) for x in info['load_average_end'])} "
        f"at the end (a shared machine: best of {data['repeats']} interleaved repeats).",
        "",
    ]
    if data.get("command"):
        lines += [f"Command: `{data['command']}` (raw numbers in `executors.json`).", ""]
    lines += [
        f"{data['runs']} real `tiny` runs (prior-scale, maze2d-umaze, 2 seeds; ensembles trained, not cached). "
        "Every executor's table equals the in-process one, row for row.",
        "",
        "| executor | wall seconds | vs in-process |",
        "|---|---|---|",
    ]
    lines += [f"| {name} | {best[name]:.1f} | {base / best[name]:.2f}x |" for name in names]
    lines += [
        "",
        "Tiny runs take seconds: these times are mostly the executors' start (worker processes, the cluster).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
