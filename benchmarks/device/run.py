"""One prepared device measurement: throughput, a book chapter and a paper-profile run.

Run through ``benchmarks/device/run.sh OUTDIR [--device cuda|cpu] [--quick]``, which installs
carried wheels when needed and puts this checkout on ``PYTHONPATH``. Four steps, each in its
own process with its own time budget; a step that fails or runs out of time is recorded and the
next one runs, so a partial run still leaves every file it could write:

1. ``rollout`` -- :mod:`bench_rollout`'s designs on the device (the batched ensemble, the
   reference design, a member loop, one whole-batch ``bmm``) and the dense-GEMM floor, for
   M = 10 and 100 members, N = 1500 queries, h = 50: member-steps per second and their ratios
   (``rollout.json``).
2. ``training`` -- :mod:`bench_training`'s stacked-ensemble training on the device, member-samples
   per second (``training.json``).
3. ``chapter`` -- one book chapter executed end to end with Jupyter's kernel (nbclient) at the
   ``classroom`` profile, its wall time (``chapter.json``) and the executed notebook
   (``chapter_<name>.ipynb``).
4. ``paper`` -- one environment's ``opcc-edu run`` at the ``paper`` profile, or the largest share
   of its training that fits the time left: the dataset generated and timed first, a short
   probe run, then the longest run that fits; the measured rate, the full run extrapolated, and
   :mod:`paper_scale_estimate`'s method applied to the throughputs of steps 1 and 2
   (``paper_run.json``).

Then ``environment.json`` (device, driver, versions, command, commit, times, every step's wall
time and status) and ``summary.md`` (the numbers and the targets, met or not). With
``--device cpu`` (or ``--quick``) every size shrinks, the chapter runs at the ``tiny`` profile and
the paper step at the ``tiny`` profile too, so that the whole script can be tested on a CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import glob
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BENCH = ROOT / "benchmarks"
STEPS = ("rollout", "training", "chapter", "paper")
OUTPUTS = {"rollout": "rollout.json", "training": "training.json", "chapter": "chapter.json", "paper": "paper_run.json"}
DEFAULT_CHAPTER = "book/answering_pcqs.ipynb"
RESERVE_S = 8.0  # kept back from the deadline for environment.json and summary.md

# Targets of the GPU measurement.
TARGET_VS_REFERENCE = 30.0  # the batched design over the reference design, same device, same run
TARGET_RATE = 1e8  # member-steps/s on an H100-class GPU, M = 100, N = 1500, h = 50
TARGET_RATE_SIZES = {"M": 100, "queries": 1500, "horizon": 50}
TARGET_CHAPTER_S = 120.0  # the classroom chapter, end to end
H100_CLASS = ("H100", "H200", "GH200", "B100", "B200", "GB200")


@dataclasses.dataclass(frozen=True)
class Sizes:
    """Sizes of every step: the full measurement, or the quick one for a CPU."""

    members: tuple[int, ...]
    queries: int
    timed_steps: int
    reference_steps: int
    horizon: int
    repeats: int
    gemm_rows: tuple[int, ...]
    train_members: tuple[int, ...]
    train_steps: int
    train_batch: int
    train_transitions: int
    train_repeats: int
    chapter_profile: str
    paper_profile: str
    paper_probe_steps: int
    paper_max_steps: int | None
    budgets: dict[str, float]
    total_budget_s: float


FULL = Sizes(
    members=(10, 100),
    queries=1500,
    timed_steps=20,
    reference_steps=3,
    horizon=50,
    repeats=3,
    gemm_rows=(2**14, 2**16, 2**18),
    train_members=(20, 100),
    train_steps=500,
    train_batch=256,
    train_transitions=20_000,
    train_repeats=3,
    chapter_profile="classroom",
    paper_profile="paper",
    paper_probe_steps=1000,
    paper_max_steps=None,
    budgets={"rollout": 100.0, "training": 60.0, "chapter": 150.0, "paper": 1e9},
    total_budget_s=470.0,
)
QUICK = Sizes(
    members=(2, 4),
    queries=40,
    timed_steps=2,
    reference_steps=2,
    horizon=4,
    repeats=1,
    gemm_rows=(256, 1024),
    train_members=(2,),
    train_steps=10,
    train_batch=64,
    train_transitions=2000,
    train_repeats=1,
    chapter_profile="tiny",
    paper_profile="tiny",
    paper_probe_steps=20,
    paper_max_steps=60,
    budgets={"rollout": 300.0, "training": 300.0, "chapter": 300.0, "paper": 1e9},  # a busy CPU is slow
    total_budget_s=1200.0,
)


def fmt(x: float | None) -> str:
    """How summary.md writes every number (the same string the tests rebuild from the JSON)."""
    return "n/a" if x is None else f"{x:.4g}"


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(stamp: str) -> datetime.datetime:
    """A Jupyter time stamp (ISO 8601, ``Z`` or an offset, up to nanoseconds) as a datetime."""
    stamp = stamp.replace("Z", "+00:00")
    head, _, tail = stamp.partition(".")
    if tail:
        digits = "".join(ch for ch in tail if ch.isdigit())
        stamp = f"{head}.{digits[:6]}{tail[len(digits) :]}"
    return datetime.datetime.fromisoformat(stamp)


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(path)


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# ----------------------------------------------------------------------------------------------
# Timing on a device
# ----------------------------------------------------------------------------------------------


def synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device) -> tuple[float, float]:
    """Wall and process CPU seconds of ``fn()``, the device's queue drained before and after."""
    synchronize(device)
    w, c = time.perf_counter(), time.process_time()
    fn()
    synchronize(device)
    return time.perf_counter() - w, max(time.process_time() - c, 1e-9)


def gemm_floor_device(model, policies, device, rows_options) -> dict:
    """:func:`bench_rollout.gemm_floor` on a GPU: the same layer shapes and conversion to
    member-steps per second, each ``torch.mm`` timed with the device synchronised."""
    import numpy as np
    import torch
    from torch import nn

    shapes = [(layer.in_features, layer.out_features) for layer in model.net.layers]
    shapes += [(m.in_features, m.out_features) for m in policies[0] if isinstance(m, nn.Linear)]
    per_row, flops, detail = 0.0, 0, []
    for a, b in shapes:
        w = torch.randn(a, b, device=device)
        best = np.inf
        for rows in rows_options:
            x = torch.randn(rows, a, device=device)
            torch.mm(x, w)
            for _ in range(3):
                synchronize(device)
                t = time.perf_counter()
                for _ in range(10):
                    torch.mm(x, w)
                synchronize(device)
                best = min(best, (time.perf_counter() - t) / 10 / rows)
        per_row += best
        flops += 2 * a * b
        detail.append({"shape": [a, b], "gflops": 2 * a * b / best / 1e9})
    return {
        "member_steps_per_s": 1.0 / per_row,
        "flops_per_member_step": flops,
        "gflops_effective": flops / per_row / 1e9,
        "rows_options": list(rows_options),
        "layers": detail,
    }


# ----------------------------------------------------------------------------------------------
# Step 1: rollout throughput
# ----------------------------------------------------------------------------------------------


def rollout_members(br, m: int, sizes: Sizes, device) -> dict:
    """:func:`bench_rollout.bench_members` on ``device``: the same model, inputs and designs."""
    import numpy as np
    import torch

    from opcc_edu.baselines import EnsembleConfig
    from opcc_edu.dynamics import build_ensemble

    sides = 2 * sizes.queries
    spec = EnsembleConfig(ensemble_size=m, hidden_sizes=br.HIDDEN).model_spec("halfcheetah")
    model = build_ensemble(spec, seed=0).eval()
    rng = np.random.default_rng(0)  # the statistics bench_rollout sets
    obs = rng.normal(size=(1000, br.D))
    act = rng.uniform(-1, 1, (1000, br.A))
    model.set_statistics(obs, act, obs + 0.01 * rng.normal(size=obs.shape), rng.normal(size=1000))
    members32 = [mod.to(device) for mod in br.member_modules(model, torch.float32)]
    members64 = [mod.to(device) for mod in br.member_modules(model, torch.float64)]
    model = model.to(device)
    policies = [p.to(device) for p in br.make_policies()]
    policies64 = [p.to(device) for p in br.make_policies(torch.float64)]
    inputs = br.Inputs(sides)
    warm = br.Inputs(min(sides, 256), seed=1)

    def on_device(fn):  # the reference and the member loop make their tensors with factory calls
        def call():
            with torch.device(device):
                fn()

        return call

    def designs(data, steps, ref_steps):
        return {
            "member_loop": (on_device(lambda: br.run_member_loop(model, members32, policies, data, steps)), steps),
            "naive_bmm": (lambda: br.run_batched(model, policies, data, steps, whole=True), steps),
            "batched": (lambda: br.run_batched(model, policies, data, steps), steps),
            "reference": (
                on_device(lambda: br.run_reference(model, members64, policies64, data, ref_steps)),
                ref_steps,
            ),
        }

    for fn, _ in designs(warm, 2, 2).values():  # CUDA context, kernels, library handles
        timed(fn, device)
    timed_designs = designs(inputs, sizes.timed_steps, sizes.reference_steps)
    best = {name: [np.inf, np.inf] for name in timed_designs}
    floor: dict = {}
    for _ in range(sizes.repeats):
        for name, (fn, _) in timed_designs.items():
            wall, cpu = timed(fn, device)
            best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]
            print(f"  M={m:<4} {name:<12} wall {wall:8.3f}s cpu {cpu:8.3f}s", flush=True)
        if device.type == "cpu":
            this = br.gemm_floor(model, policies, rows_options=sizes.gemm_rows)
        else:
            this = gemm_floor_device(model, policies, device, tuple(sizes.gemm_rows) + (m * sides,))
        if not floor or this["member_steps_per_s"] > floor["member_steps_per_s"]:
            floor = this
    out: dict = {
        "M": m,
        "sides": sides,
        "queries": sizes.queries,
        "timed_steps": sizes.timed_steps,
        "reference_steps": sizes.reference_steps,
        "designs": {},
    }
    for name, (_, steps) in timed_designs.items():
        member_steps = m * sides * steps
        out["designs"][name] = {
            "member_steps_per_s_wall": member_steps / best[name][0],
            "member_steps_per_s_cpu": member_steps / best[name][1],
            "seconds_wall": best[name][0],
            "member_steps": member_steps,
        }
    out["gemm_floor"] = floor
    _, plan = br.run_batched(model, policies, inputs, sizes.timed_steps)
    out["batched_plan"] = {
        "chunks": len(plan.chunks),
        "rows_per_chunk": plan.chunks[0][0],
        "member_block": plan.member_block,
    }
    if sizes.horizon:  # the best of as many full-horizon runs as there are repeats
        full = lambda: br.run_batched(model, policies, inputs, sizes.horizon)  # noqa: E731
        wall, cpu = min(timed(full, device) for _ in range(sizes.repeats))
        out["batched_full_horizon"] = {
            "horizon": sizes.horizon,
            "seconds_wall": wall,
            "member_steps": m * sides * sizes.horizon,
            "member_steps_per_s_wall": m * sides * sizes.horizon / wall,
            "member_steps_per_s_cpu": m * sides * sizes.horizon / cpu,
        }
        print(f"  M={m:<4} batched h={sizes.horizon:<3}  wall {wall:8.3f}s", flush=True)
    d = out["designs"]
    b = d["batched"]["member_steps_per_s_wall"]
    out["ratios"] = {
        "batched_vs_reference": b / d["reference"]["member_steps_per_s_wall"],
        "batched_vs_member_loop": b / d["member_loop"]["member_steps_per_s_wall"],
        "batched_vs_naive_bmm": b / d["naive_bmm"]["member_steps_per_s_wall"],
        "batched_share_of_gemm_floor": b / floor["member_steps_per_s"],
    }
    if "batched_full_horizon" in out:
        f = out["batched_full_horizon"]["member_steps_per_s_wall"]
        out["ratios"]["full_horizon_vs_reference"] = f / d["reference"]["member_steps_per_s_wall"]
        out["ratios"]["full_horizon_share_of_gemm_floor"] = f / floor["member_steps_per_s"]
    if device.type == "cuda":
        out["peak_memory_bytes"] = torch.cuda.max_memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
    return out


def step_rollout(args, sizes: Sizes, device, out_path: Path) -> None:
    import bench_rollout as br
    import torch

    results = {
        "what": "rollout throughput on the device (benchmarks/bench_rollout.py's designs and GEMM floor)",
        "device": str(device),
        "machine": br.machine(),
        "config": {
            "members": list(sizes.members),
            "queries": sizes.queries,
            "sides": 2 * sizes.queries,
            "timed_steps": sizes.timed_steps,
            "reference_steps": sizes.reference_steps,
            "horizon": sizes.horizon,
            "repeats": sizes.repeats,
            "model": f"D = {br.D}, A = {br.A}, {len(br.HIDDEN)}x{br.HIDDEN[0]} SiLU; "
            f"{br.POLICIES} policies {len(br.POLICY_HIDDEN)}x{br.POLICY_HIDDEN[0]} tanh",
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        },
        "runs": [],
    }
    for m in sizes.members:
        results["runs"].append(rollout_members(br, m, sizes, device))
        write_json(out_path, results)  # what finished survives a time limit


# ----------------------------------------------------------------------------------------------
# Step 2: training throughput
# ----------------------------------------------------------------------------------------------


def step_training(args, sizes: Sizes, device, out_path: Path) -> None:
    import bench_training as bt
    import numpy as np

    data = bt.dataset(sizes.train_transitions)
    committed = read_json(BENCH / "results" / "training.json")
    results: dict = {
        "what": "stacked-ensemble training throughput on the device (benchmarks/bench_training.py)",
        "device": str(device),
        "config": {
            "members": list(sizes.train_members),
            "steps": sizes.train_steps,
            "batch_size": sizes.train_batch,
            "transitions": sizes.train_transitions,
            "repeats": sizes.train_repeats,
            "model": f"D = {bt.D}, A = {bt.A}, {len(bt.HIDDEN)}x{bt.HIDDEN[0]} SiLU, deterministic MSE, Adam",
        },
        "runs": [],
        "committed_cpu": None,
    }
    if committed:
        results["committed_cpu"] = {
            "source": "benchmarks/results/training.json",
            "members": committed["config"]["members"],
            "threads": committed["config"]["threads"],
            "samples_per_s_wall": committed["samples_per_s_wall"]["batched"],
            "samples_per_s_cpu": committed["samples_per_s_cpu"]["batched"],
        }
    designs = {"batched": bt.run_batched}
    if device.type == "cpu":
        designs["member_loop"] = bt.run_member_loop  # written for the CPU
    else:
        results["member_loop"] = "not measured: bench_training.run_member_loop runs on the CPU only"
    for m in sizes.train_members:
        for fn in designs.values():  # warm-up: CUDA context, kernels, optimiser state
            fn(data, m, 3, sizes.train_batch)
        best = {name: np.inf for name in designs}
        for _ in range(sizes.train_repeats):
            for name, fn in designs.items():
                seconds = fn(data, m, sizes.train_steps, sizes.train_batch)  # the gradient steps alone
                best[name] = min(best[name], seconds)
                print(f"  M={m:<4} {name:<12} {seconds:7.3f}s", flush=True)
        samples = m * sizes.train_batch * sizes.train_steps
        run = {
            "M": m,
            "samples": samples,
            "designs": {
                name: {"seconds": s, "samples_per_s": samples / s, "steps_per_s": sizes.train_steps / s}
                for name, s in best.items()
            },
        }
        if results["committed_cpu"] and m == results["committed_cpu"]["members"]:
            run["batched_vs_committed_cpu_wall"] = (
                run["designs"]["batched"]["samples_per_s"] / results["committed_cpu"]["samples_per_s_wall"]
            )
        results["runs"].append(run)
        write_json(out_path, results)


# ----------------------------------------------------------------------------------------------
# Step 3: one chapter end to end
# ----------------------------------------------------------------------------------------------


def cache_files() -> set[str]:
    """The package's cached files (datasets, ensembles), not torch's compile caches."""
    from opcc_edu.utils import cache_root

    root = cache_root()
    if not root.exists():
        return set()
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and p.relative_to(root).parts[0] not in ("torchinductor", "triton")
    }


def step_chapter(args, sizes: Sizes, device, out_path: Path, deadline: float) -> None:
    os.environ["OPCC_EDU_PROFILE"] = sizes.chapter_profile  # the kernel inherits it
    path = (ROOT / args.chapter).resolve()
    result: dict = {
        "chapter": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
        "profile": sizes.chapter_profile,
        "device": str(device),
        "status": "started",
    }
    write_json(out_path, result)
    import nbclient
    import nbformat
    from nbclient import NotebookClient

    before = cache_files()
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=max(10, int(deadline - time.time())),
        kernel_name=nb.metadata.get("kernelspec", {}).get("name", "python3"),
        resources={"metadata": {"path": str(path.parent)}},
    )
    result["executor"] = f"nbclient {nbclient.__version__}"
    start = time.perf_counter()
    error = None
    try:
        client.execute()
    except Exception as exc:  # a failing cell: keep the notebook and the time to that cell
        error = f"{type(exc).__name__}: {str(exc)[-2000:]}"
    wall = time.perf_counter() - start
    executed = out_path.parent / f"chapter_{path.stem}.ipynb"
    nbformat.write(nb, executed)
    cells = []
    for i, cell in enumerate(nb.cells):
        timing = cell.get("metadata", {}).get("execution", {})
        t0, t1 = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
        if cell.cell_type == "code" and t0 and t1:
            seconds = (parse_time(t1) - parse_time(t0)).total_seconds()
            cells.append({"cell": i, "seconds": seconds, "first_line": "".join(cell.source).splitlines()[0][:80]})
    added = sorted(cache_files() - before)
    result.update(
        {
            "status": "failed" if error else "ok",
            "error": error,
            "wall_s": wall,
            "code_cells": sum(c.cell_type == "code" for c in nb.cells),
            "cells_timed_s": sum(c["seconds"] for c in cells),
            "slowest_cells": sorted(cells, key=lambda c: -c["seconds"])[:5],
            "cache_files_added": added,
            "cold_cache": bool(added),
            "executed_notebook": executed.name,
        }
    )
    write_json(out_path, result)
    print(f"  {result['chapter']} at the {sizes.chapter_profile} profile: {wall:.1f} s ({result['status']})")
    if error:
        raise RuntimeError(error)


# ----------------------------------------------------------------------------------------------
# Step 4: a paper-profile run, or the largest share of it that fits
# ----------------------------------------------------------------------------------------------


def cli_run(args, sizes: Sizes, device, env: str, dataset: str, steps: int | None, tag: str, work: Path, timeout):
    """``opcc-edu run`` in a subprocess; its results.json's timings and the wall time."""
    out = work / tag
    cmd = [sys.executable, "-m", "opcc_edu.cli", "--profile", sizes.paper_profile, "--no-progress"]
    if device.type == "cpu":
        cmd += ["--threads", str(args.threads)]
    cmd += ["run", env, dataset, "--out", str(out), "--no-cache", "--device", str(device)]
    if steps is not None:
        cmd += ["--train-steps", str(steps)]
    print(f"  $ {shlex.join(cmd)}", flush=True)
    start = time.perf_counter()
    proc = subprocess.run(cmd, timeout=max(1.0, timeout), cwd=str(ROOT))
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"opcc-edu run exited with status {proc.returncode}")
    found = glob.glob(str(out / "**" / "results.json"), recursive=True)
    r = json.loads(Path(found[0]).read_text())
    return {
        "command": shlex.join(["opcc-edu", *cmd[3:]]),
        "train_steps": steps,
        "wall_s": wall,
        "train_seconds": r["train_seconds"],
        "answer_seconds": r["answer_seconds"],
        "other_seconds": wall - r["train_seconds"] - r["answer_seconds"],
        "ensemble_size": r["ensemble_size"],
        "n_queries": r["n_queries"],
        "hidden_sizes": r.get("config", {}).get("hidden_sizes"),
        "ev_all": r.get("metrics", {}).get("ev", {}).get("all"),
    }


def extrapolate(runs: list[dict], full_steps: int) -> dict:
    """Training seconds of ``full_steps`` steps from runs of fewer: ``a + b * steps``.

    Two runs give the intercept ``a`` (set-up) and the seconds per step ``b``; one run (or two
    whose times do not grow with the steps) gives ``b`` = its seconds per step and ``a`` = 0,
    an upper bound.
    """
    first, last = runs[0], runs[-1]
    if len(runs) > 1 and last["train_steps"] > first["train_steps"] and last["train_seconds"] > first["train_seconds"]:
        b = (last["train_seconds"] - first["train_seconds"]) / (last["train_steps"] - first["train_steps"])
        a = first["train_seconds"] - b * first["train_steps"]
        how = "two runs: intercept a and seconds per step b"
    else:
        b, a = last["train_seconds"] / last["train_steps"], 0.0
        how = "one run: b = its seconds per step (an upper bound), a = 0"
    return {"seconds_per_step": b, "intercept_s": a, "training_s": a + b * full_steps, "fit": how}


def device_rates(out_dir: Path, ensemble_size: int) -> dict | None:
    """This run's throughputs as :func:`paper_scale_estimate.run_seconds` reads them."""
    rollout, training = read_json(out_dir / OUTPUTS["rollout"]), read_json(out_dir / OUTPUTS["training"])
    if not rollout or not training or not rollout.get("runs") or not training.get("runs"):
        return None
    with_h = [r for r in rollout["runs"] if "batched_full_horizon" in r] or rollout["runs"]
    roll = min(with_h, key=lambda r: (abs(r["M"] - ensemble_size), -r["M"]))
    train = min(training["runs"], key=lambda r: (abs(r["M"] - ensemble_size), -r["M"]))
    roll_rate = roll.get("batched_full_horizon", roll["designs"]["batched"])["member_steps_per_s_wall"]
    return {
        "training_samples_per_s": {"device": train["designs"]["batched"]["samples_per_s"]},
        "rollout_member_steps_per_s": {"device": roll_rate},
        "from": {"training_M": train["M"], "rollout_M": roll["M"]},
    }


def step_paper(args, sizes: Sizes, device, out_path: Path, deadline: float, work: Path) -> None:
    os.environ["OPCC_EDU_PROFILE"] = sizes.paper_profile
    from opcc_edu.config import get_profile, use_profile
    from opcc_edu.datasets import DEFAULT_DATASET, load_dataset

    profile = get_profile(sizes.paper_profile)
    env = args.paper_env
    dataset = DEFAULT_DATASET[env]
    full_steps = profile.dynamics_train_steps
    result: dict = {
        "env": env,
        "dataset": dataset,
        "profile": profile.name,
        "device": str(device),
        "full_train_steps": full_steps,
        "ensemble_size": profile.ensemble_size,
        "batch_size": profile.batch_size,
        "runs": [],
        "status": "started",
    }

    def left() -> float:
        return deadline - time.time()

    # the dataset first, timed on its own (the runs then read it from the cache)
    before = cache_files()
    start = time.perf_counter()
    with use_profile(profile.name):
        data = load_dataset(env, dataset, progress=False)
    result["dataset_build"] = {
        "transitions": int(len(data["observations"])),
        "seconds": time.perf_counter() - start,
        "generated": bool(cache_files() - before),
    }
    del data
    write_json(out_path, result)

    probe_steps = min(sizes.paper_probe_steps, full_steps)
    probe = cli_run(args, sizes, device, env, dataset, probe_steps, "probe", work, left())
    result["runs"].append(probe)
    write_json(out_path, result)

    # the longest run that fits: per-step time bounded above by the probe's
    per_step_bound = probe["train_seconds"] / probe_steps
    fixed = probe["answer_seconds"] + probe["other_seconds"]
    room = left() - fixed - 5.0
    steps = min(full_steps, int(room / per_step_bound)) if room > 0 else 0
    max_steps = args.paper_max_steps if args.paper_max_steps is not None else sizes.paper_max_steps
    capped = max_steps is not None and steps > max_steps
    steps = min(steps, max_steps) if capped else steps
    if steps > probe_steps:
        try:
            asked = None if steps == full_steps else steps  # the whole profile: no --train-steps
            main = cli_run(args, sizes, device, env, dataset, asked, "main", work, left())
            main["train_steps"] = steps
            result["runs"].append(main)
        except (RuntimeError, subprocess.SubprocessError) as exc:  # the probe still gives a rate
            result["main_run_error"] = f"{steps} steps: {type(exc).__name__}: {exc}"
    else:
        why = f"capped at {max_steps} steps" if capped else f"{steps} steps fit the time left"
        result["main_run_skipped"] = f"{why}, no more than the probe's {probe_steps}"

    fit = extrapolate(result["runs"], full_steps)
    last = result["runs"][-1]
    b, train_full = fit["seconds_per_step"], fit["training_s"]
    result["fraction_of_training"] = last["train_steps"] / full_steps
    result["measured_full_run"] = last["train_steps"] == full_steps
    result["rate"] = {
        "seconds_per_step": b,
        "train_steps_per_s": 1.0 / b,
        "member_samples_per_s": profile.ensemble_size * profile.batch_size / b,
        "intercept_s": fit["intercept_s"],
        "fit": fit["fit"],
    }
    result["extrapolated"] = {
        "training_s": train_full,
        "answer_s": last["answer_seconds"],
        "other_s": last["other_seconds"],
        "run_s": train_full + last["answer_seconds"] + last["other_seconds"],
        "dataset_build_s": result["dataset_build"]["seconds"],
    }
    result["extrapolated"]["run_with_dataset_s"] = result["extrapolated"]["run_s"] + result["dataset_build"]["seconds"]

    # paper_scale_estimate's method with this device's throughputs, and its committed CPU figures
    import paper_scale_estimate as pse

    rates = device_rates(out_path.parent, profile.ensemble_size)
    check: dict = {"method": "paper_scale_estimate.run_seconds with the rates of rollout.json and training.json"}
    if rates:
        predicted = pse.run_seconds(profile.name, rates, "device")
        check.update(
            {
                "rates": rates,
                "predicted_training_s": predicted["training"],
                "predicted_rollouts_s": predicted["rollouts"],
                "predicted_run_s": predicted["total"],
                "predicted_over_extrapolated_training": predicted["training"] / train_full,
            }
        )
    else:
        check["skipped"] = "rollout.json or training.json is missing"
    committed = read_json(BENCH / "results" / "paper_scale.json")
    if committed and profile.name == "paper":
        cpu = committed["paper_run_seconds"]
        check["committed_one_cpu_thread_run_s"] = {"cpu": cpu["cpu"]["total"], "wall": cpu["wall"]["total"]}
        check["speedup_vs_one_cpu_thread"] = {k: v["total"] / result["extrapolated"]["run_s"] for k, v in cpu.items()}
    result["estimate_check"] = check
    result["status"] = "ok"
    write_json(out_path, result)
    print(
        f"  {env} at the {profile.name} profile: {last['train_steps']} of {full_steps} steps in "
        f"{last['train_seconds']:.1f} s; full run extrapolated {result['extrapolated']['run_s']:.0f} s"
    )


# ----------------------------------------------------------------------------------------------
# The driver: steps in subprocesses, environment.json, summary.md
# ----------------------------------------------------------------------------------------------


def run_command(cmd: list[str]) -> str | None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=20, cwd=str(ROOT))
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def environment(args, sizes: Sizes) -> dict:
    import torch

    cuda = torch.cuda.is_available() and args.device == "cuda"
    import importlib.metadata

    versions = {}
    for name in ("numpy", "scipy", "pandas", "mujoco", "gymnasium", "gymnasium-robotics", "nbclient", "ipykernel"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    cpu = platform.processor()
    try:
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    has_git = run_command(["git", "rev-parse", "HEAD"]) is not None
    smi = run_command(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm", "--format=csv,noheader"]
    )
    return {
        "command": os.environ.get("OPCC_DEVICE_COMMAND") or shlex.join([sys.executable, *sys.argv]),
        "argv": sys.argv,
        "device": args.device,
        "device_name": torch.cuda.get_device_name() if cuda else cpu,
        "quick": args.quick or args.device == "cpu",
        "sizes": dataclasses.asdict(sizes),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "gpu_memory_bytes": torch.cuda.get_device_properties(0).total_memory if cuda else None,
        "nvidia_smi": smi,
        "driver": smi.split(",")[1].strip() if smi and "," in smi else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "packages": versions,
        "git_commit": args.commit or run_command(["git", "rev-parse", "HEAD"]),
        "git_dirty": bool(run_command(["git", "status", "--porcelain"])) if has_git else None,
        "opcc_edu_cache": os.environ.get("OPCC_EDU_CACHE"),
        "work": str(args.work),
        "env": {k: v for k, v in os.environ.items() if k.startswith(("OPCC_EDU_", "CUDA_VISIBLE", "OMP_NUM"))},
        "steps": {},
    }


def pump(stream, prefix: str, log, start: float) -> None:
    for line in iter(stream.readline, ""):
        text = f"[{prefix} +{time.perf_counter() - start:6.1f}s] {line.rstrip()}"
        print(text, flush=True)
        log.write(text + "\n")
        log.flush()


def run_step(name: str, args, deadline: float, budget: float, log) -> dict:
    timeout = min(budget, deadline - time.time() - RESERVE_S)
    record = {"budget_s": round(timeout, 1), "started": now_iso()}
    if timeout < 5:
        return {**record, "status": "skipped", "error": "no time left", "seconds": 0.0}
    cmd = [sys.executable, str(Path(__file__).resolve()), str(args.outdir), "--step", name, "--device", args.device]
    cmd += ["--deadline", f"{time.time() + timeout:.3f}", "--work", str(args.work), "--threads", str(args.threads)]
    cmd += ["--chapter", args.chapter, "--paper-env", args.paper_env] + (["--quick"] if args.quick else [])
    if args.paper_max_steps is not None:
        cmd += ["--paper-max-steps", str(args.paper_max_steps)]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    reader = threading.Thread(target=pump, args=(proc.stdout, name, log, start), daemon=True)
    reader.start()
    try:
        rc = proc.wait(timeout=timeout)
        status = "ok" if rc == 0 else "failed"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        rc, status = None, "timeout"
    reader.join(timeout=5)
    record.update({"status": status, "returncode": rc, "seconds": time.perf_counter() - start, "ended": now_iso()})
    if status != "ok":
        error = (args.work / f"{name}.error").read_text() if (args.work / f"{name}.error").exists() else None
        record["error"] = error or ("time budget exhausted" if status == "timeout" else f"exit status {rc}")
    return record


def child(args) -> int:
    """One step, in its own process."""
    sizes = QUICK if args.quick else FULL
    sys.path.insert(0, str(BENCH))
    if args.step != "chapter":  # the chapter draws its figures as a reader's kernel does
        os.environ.setdefault("MPLBACKEND", "Agg")
    import torch

    out_path = args.outdir / OUTPUTS[args.step]
    try:
        if args.device == "cpu":
            torch.set_num_threads(args.threads)
        elif not torch.cuda.is_available():
            raise RuntimeError("--device cuda: no CUDA device is visible")
        device = torch.device(args.device)
        if args.step == "rollout":
            step_rollout(args, sizes, device, out_path)
        elif args.step == "training":
            step_training(args, sizes, device, out_path)
        elif args.step == "chapter":
            step_chapter(args, sizes, device, out_path, args.deadline)
        else:
            step_paper(args, sizes, device, out_path, args.deadline, args.work)
    except BaseException as exc:
        (args.work / f"{args.step}.error").write_text(f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-3000:]}")
        raise
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path, help="where every file is written")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--quick", action="store_true", help="the small sizes (implied by --device cpu)")
    parser.add_argument("--skip", nargs="*", default=[], choices=STEPS, help="steps not to run")
    parser.add_argument("--chapter", default=DEFAULT_CHAPTER, help=f"chapter of step 3 (default {DEFAULT_CHAPTER})")
    parser.add_argument("--paper-env", default="maze2d-umaze", help="environment of step 4 (default maze2d-umaze)")
    parser.add_argument(
        "--paper-max-steps", type=int, default=None, help="most training steps of step 4's longer run (default: none)"
    )
    parser.add_argument("--budget-s", type=float, default=None, help="wall time of the whole run (default 470 s)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads with --device cpu (default 1)")
    parser.add_argument(
        "--work", type=Path, default=None, help="scratch folder, kept (default: a temporary one, removed at the end)"
    )
    parser.add_argument("--commit", default=None, help="git commit to record where the tree has no .git")
    parser.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)
    parser.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.quick = args.quick or args.device == "cpu"
    args.outdir = args.outdir.resolve()
    if args.step:
        return child(args)

    t0 = float(os.environ.get("OPCC_DEVICE_T0") or time.time())
    sizes = QUICK if args.quick else FULL
    deadline = t0 + (args.budget_s if args.budget_s is not None else sizes.total_budget_s)
    args.outdir.mkdir(parents=True, exist_ok=True)
    scratch = args.work is None  # a temporary folder of our own: removed at the end
    if scratch:
        import tempfile

        args.work = Path(tempfile.mkdtemp(prefix="opcc-device-"))
    args.work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("OPCC_EDU_CACHE", str(args.work / "cache"))
    if args.device == "cpu":
        os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.environ.setdefault("JUPYTER_RUNTIME_DIR", str(args.work / "jupyter"))
    env_path = args.outdir / "environment.json"
    info = environment(args, sizes)
    info["started"] = datetime.datetime.fromtimestamp(t0, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    info["budget_s"] = deadline - t0
    write_json(env_path, info)
    with open(args.outdir / "log.txt", "a") as log:
        log.write(f"{now_iso()} {info['command']} on {info['device_name']}\n")
        for name in STEPS:
            if name in args.skip:
                info["steps"][name] = {"status": "skipped", "error": "--skip", "seconds": 0.0}
            else:
                print(f"== {name}", flush=True)
                info["steps"][name] = run_step(name, args, deadline, sizes.budgets[name], log)
                done = info["steps"][name]
                print(f"== {name}: {done['status']} in {done['seconds']:.1f} s", flush=True)
            write_json(env_path, info)
    info["ended"] = now_iso()
    info["wall_s"] = time.time() - t0
    write_json(env_path, info)
    text = summarize(args.outdir)
    (args.outdir / "summary.md").write_text(text)
    print(text)
    if scratch:
        import shutil

        shutil.rmtree(args.work, ignore_errors=True)
    return 0 if all(s["status"] in ("ok", "skipped") for s in info["steps"].values()) else 1


# ----------------------------------------------------------------------------------------------
# summary.md
# ----------------------------------------------------------------------------------------------


def key_numbers(out_dir: Path) -> list[tuple[str, float]]:
    """(label, value) of every number summary.md reports, read from the JSON files."""
    rows: list[tuple[str, float]] = []
    rollout = read_json(out_dir / OUTPUTS["rollout"])
    for r in (rollout or {}).get("runs", []):
        for name, d in r["designs"].items():
            rows.append((f"rollout M={r['M']} {name}, member-steps/s", d["member_steps_per_s_wall"]))
        rows.append((f"rollout M={r['M']} gemm_floor, member-steps/s", r["gemm_floor"]["member_steps_per_s"]))
        if "batched_full_horizon" in r:
            f = r["batched_full_horizon"]
            rows.append((f"rollout M={r['M']} batched h={f['horizon']}, member-steps/s", f["member_steps_per_s_wall"]))
        for name, value in r["ratios"].items():
            rows.append((f"rollout M={r['M']} {name}", value))
    training = read_json(out_dir / OUTPUTS["training"])
    for r in (training or {}).get("runs", []):
        for name, d in r["designs"].items():
            rows.append((f"training M={r['M']} {name}, member-samples/s", d["samples_per_s"]))
        if "batched_vs_committed_cpu_wall" in r:
            label = f"training M={r['M']} batched vs the committed one-thread CPU"
            rows.append((label, r["batched_vs_committed_cpu_wall"]))
    chapter = read_json(out_dir / OUTPUTS["chapter"])
    if chapter and "wall_s" in chapter:
        rows.append((f"chapter {chapter['chapter']} ({chapter['profile']}), s", chapter["wall_s"]))
    paper = read_json(out_dir / OUTPUTS["paper"])
    if paper and "dataset_build" in paper:
        build = paper["dataset_build"]
        rows.append((f"paper step: dataset of {build['transitions']} transitions, s", build["seconds"]))
    for run in (paper or {}).get("runs", []):
        rows.append((f"paper step: run of {run['train_steps']} steps, wall s", run["wall_s"]))
        rows.append((f"paper step: run of {run['train_steps']} steps, training s", run["train_seconds"]))
    if paper and "extrapolated" in paper:
        rows.append(("paper step: share of the training run", paper["fraction_of_training"]))
        rows.append(("paper step: training member-samples/s", paper["rate"]["member_samples_per_s"]))
        rows.append(("paper step: full run extrapolated, s", paper["extrapolated"]["run_s"]))
        check = paper["estimate_check"]
        if "predicted_run_s" in check:
            rows.append(("paper step: estimate's method, run s", check["predicted_run_s"]))
            ratio = check["predicted_over_extrapolated_training"]
            rows.append(("paper step: estimate's training over the extrapolated", ratio))
        for basis, value in check.get("speedup_vs_one_cpu_thread", {}).items():
            rows.append((f"paper step: speed-up over one CPU thread ({basis} basis)", value))
    return rows


def targets(out_dir: Path) -> list[tuple[str, str, str]]:
    """(target, measured, verdict) of each target: met, NOT met, or not applicable and why."""
    env = read_json(out_dir / "environment.json") or {}
    on_gpu = env.get("device") == "cuda"
    rows = []
    rollout = read_json(out_dir / OUTPUTS["rollout"])
    runs = (rollout or {}).get("runs", [])
    for r in runs or [None]:
        if r is None:
            rows.append((f"batched >= {TARGET_VS_REFERENCE:g}x the reference design", "n/a", "not measured"))
            continue
        ratio = r["ratios"]["batched_vs_reference"]
        verdict = ("met" if ratio >= TARGET_VS_REFERENCE else "NOT met") if on_gpu else "n/a: not on a GPU"
        label = f"M = {r['M']}: batched >= {TARGET_VS_REFERENCE:g}x the reference design"
        rows.append((label, f"{fmt(ratio)}x", verdict))
    name = env.get("device_name") or ""
    big = [
        r
        for r in runs
        if r["M"] == TARGET_RATE_SIZES["M"]
        and r["queries"] == TARGET_RATE_SIZES["queries"]
        and r.get("batched_full_horizon", {}).get("horizon") == TARGET_RATE_SIZES["horizon"]
    ]
    label = f">= {TARGET_RATE:.0e} member-steps/s, M = 100, N = 1500, h = 50, H100-class GPU"
    if big:
        rate = big[0]["batched_full_horizon"]["member_steps_per_s_wall"]
        if not on_gpu or not any(k in name for k in H100_CLASS):
            verdict = f"n/a: measured on {name or 'an unknown device'}"
        else:
            verdict = "met" if rate >= TARGET_RATE else "NOT met"
        rows.append((label, fmt(rate), verdict))
    else:
        rows.append((label, "n/a", "not measured at these sizes"))
    chapter = read_json(out_dir / OUTPUTS["chapter"])
    label = f"classroom chapter within {TARGET_CHAPTER_S:g} s"
    if chapter and "wall_s" in chapter:
        if chapter["profile"] != "classroom":
            verdict = f"n/a: {chapter['profile']} profile"
        elif chapter["status"] != "ok":
            verdict = "NOT met (the chapter failed)"
        else:
            verdict = "met" if chapter["wall_s"] <= TARGET_CHAPTER_S else "NOT met"
        rows.append((label, f"{fmt(chapter['wall_s'])} s", verdict))
    else:
        rows.append((label, "n/a", "not measured"))
    return rows


def summarize(out_dir: Path) -> str:
    env = read_json(out_dir / "environment.json") or {}
    lines = [
        "# Device run (benchmarks/device/run.sh)",
        "",
        f"Device: {env.get('device_name')} ({env.get('device')}), driver {env.get('driver')}, "
        f"torch {env.get('torch')}, CUDA {env.get('cuda')}, Python {env.get('python')}, "
        f"{env.get('logical_cpus')} logical CPUs. "
        f"Commit {env.get('git_commit')}. Started {env.get('started')}, ended {env.get('ended')}, "
        f"{fmt(env.get('wall_s'))} s in all{' (quick sizes)' if env.get('quick') else ''}.",
        f"Command: `{env.get('command')}`",
        "",
        "## Steps",
        "",
        "| step | status | wall s | budget s | note |",
        "|---|---|---|---|---|",
    ]
    for name, s in env.get("steps", {}).items():
        note = (s.get("error") or "").strip().splitlines()
        lines.append(
            f"| {name} | {s['status']} | {fmt(s.get('seconds'))} | {fmt(s.get('budget_s'))} | "
            f"{note[0][:120].replace('|', '/') if note else ''} |"
        )
    lines += ["", "## Targets", "", "| target | measured | verdict |", "|---|---|---|"]
    lines += [f"| {t} | {m} | {v} |" for t, m, v in targets(out_dir)]
    lines += [
        "",
        "## Numbers",
        "",
        "Member-steps/s and member-samples/s are wall-clock rates on the device (the device synchronised before "
        "and after each timing); ratios divide two of them; the full paper-profile run is extrapolated linearly "
        "in training steps (paper_run.json says how).",
        "",
        "| quantity | value |",
        "|---|---|",
    ]
    lines += [f"| {label} | {fmt(value)} |" for label, value in key_numbers(out_dir)]
    paper = read_json(out_dir / OUTPUTS["paper"])
    if paper and "runs" in paper:
        lines += ["", "Paper step's commands:", ""] + [f"- `{r['command']}`" for r in paper["runs"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
