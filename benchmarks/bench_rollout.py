"""Rollout throughput of the batched ensemble against the designs it replaces and the GEMM floor.

Measured in one process, on the same inputs (locomotion-sized: D = 17, A = 6; MBPO model of
four hidden layers of 200 SiLU units; four 2x64 tanh policies; N = 1500 queries, i.e. 3000
query sides; horizon 50), for M = 10 and M = 100 members. Throughput is in member-steps per
second: one member advancing one query side by one step.

Designs:

* ``reference`` -- the public OPCC code's design: a Python loop over M separate float64
  ``nn.Module`` members, batches of 128 query sides, rewards and termination copied to the
  host every step.
* ``member_loop`` -- a Python loop over M float32 members, each on all 3000 sides at once
  (large GEMMs, no host copies).
* ``naive_bmm`` -- :func:`opcc_edu.dynamics.rollout_values` with one chunk holding every
  member and side (a plain batched matmul over huge activations).
* ``batched`` -- :func:`opcc_edu.dynamics.rollout_values` as shipped (chunks sized to a cache
  budget).
* ``gemm_floor`` -- not a rollout: the dense ``torch.mm`` FLOP rate for the same layer shapes
  (model and policy), the best over several row counts, converted to member-steps per second.
  A rollout cannot beat it with the same arithmetic.

Each design is timed over ``--timed-steps`` steps (throughput is the same at every step of a
fixed-size batch), repeated ``--repeats`` times interleaved with the other designs; the best
repeat counts (the machine is shared, and interference only ever slows a run down). Both wall
time and process CPU time are recorded. One full horizon-50 run of ``batched`` checks that the
short timing is representative.

Usage::

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_rollout.py --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from opcc_edu.baselines import EnsembleConfig
from opcc_edu.dynamics import build_ensemble, rollout_values
from opcc_edu.envs import termination_fn
from opcc_edu.io import atomic_write_text

D, A, HIDDEN, POLICY_HIDDEN, POLICIES = 17, 6, (200, 200, 200, 200), (64, 64), 4
RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "load_average_start": os.getloadavg(),
    }


def synthetic_transitions(
    t: int, d: int, a: int, seed: int = 0, reward_offset: float = 0.0, terminal_rate: float = 0.0
) -> dict[str, np.ndarray]:
    """``t`` D4RL-format transitions of a smooth random system (the training benchmarks' data).

    Observations are standard normal, actions uniform in [-1, 1], the next observation
    ``obs + tanh([obs, act] @ W)``, the reward ``reward_offset + next_obs[:, 0]``, and a
    transition is terminal with probability ``terminal_rate``.
    """
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(t, d)).astype(np.float32)
    act = rng.uniform(-1, 1, (t, a)).astype(np.float32)
    w = rng.normal(scale=0.1, size=(d + a, d)).astype(np.float32)
    nxt = obs + np.tanh(np.concatenate([obs, act], 1) @ w)
    terminals = rng.uniform(size=t) < terminal_rate if terminal_rate > 0 else np.zeros(t, bool)
    return {
        "observations": obs,
        "actions": act,
        "next_observations": nxt,
        "rewards": (reward_offset + nxt[:, 0]).astype(np.float32),
        "terminals": terminals,
    }


def make_policies(dtype=torch.float32) -> list[nn.Module]:
    gen = torch.Generator().manual_seed(1)
    out = []
    for _ in range(POLICIES):
        sizes = (D, *POLICY_HIDDEN, A)
        layers: list[nn.Module] = []
        for a, b in zip(sizes[:-1], sizes[1:], strict=True):
            lin = nn.Linear(a, b)
            with torch.no_grad():
                lin.weight.copy_(torch.randn(b, a, generator=gen) / np.sqrt(a))
            layers += [lin, nn.Tanh()]
        out.append(nn.Sequential(*layers).to(dtype).eval())
    return out


def member_modules(model, dtype) -> list[nn.Module]:
    """The ensemble's members as separate nn.Sequential modules (same weights)."""
    members = []
    for m in range(model.ensemble_size):
        layers: list[nn.Module] = []
        for i, layer in enumerate(model.net.layers):
            layers.append(layer.member(m))
            if i < len(model.net.layers) - 1:
                layers.append(nn.SiLU())
        members.append(nn.Sequential(*layers).to(dtype).eval())
    return members


class Inputs:
    def __init__(self, n_sides: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.obs = rng.normal(size=(n_sides, D)).astype(np.float32)
        self.first = rng.uniform(-1, 1, (n_sides, A)).astype(np.float32)
        self.policy = rng.integers(0, POLICIES, n_sides)


def run_reference(model, members64, policies64, inputs: Inputs, steps: int, batch: int = 128) -> None:
    """The public reference's design (re-implemented): loop over batches, then members."""
    term = termination_fn("halfcheetah")
    stats = [t.double() for t in (model.input_mean, model.input_std, model.target_mean, model.target_std)]
    with torch.no_grad():
        for s in range(0, len(inputs.obs), batch):
            obs0 = torch.as_tensor(inputs.obs[s : s + batch], dtype=torch.float64)
            first = torch.as_tensor(inputs.first[s : s + batch], dtype=torch.float64)
            pol = inputs.policy[s : s + batch]
            for member in members64:
                obs = obs0.clone()
                total = np.zeros(len(obs))
                alive = np.ones(len(obs), dtype=bool)
                for t in range(steps):
                    if t == 0:
                        act = first
                    else:
                        act = torch.empty(len(obs), A, dtype=torch.float64)
                        for p in range(POLICIES):
                            rows = np.flatnonzero(pol == p)
                            if len(rows):
                                act[rows] = policies64[p](obs[rows])
                    x = (torch.cat([obs, act], 1) - stats[0]) / stats[1]
                    out = member(x)[:, : D + 1] * stats[3] + stats[2]
                    obs = obs + out[:, :D]
                    reward = out[:, D].cpu().numpy()  # host copy every step
                    done = term(obs).cpu().numpy()
                    total += reward * alive
                    alive &= ~done


def run_member_loop(model, members32, policies, inputs: Inputs, steps: int) -> None:
    """A Python loop over float32 members, each simulating every side at once."""
    order = np.argsort(inputs.policy, kind="stable")
    obs0 = torch.as_tensor(inputs.obs[order])
    first = torch.as_tensor(inputs.first[order])
    pol = inputs.policy[order]
    bounds = np.searchsorted(pol, np.arange(POLICIES + 1))
    term = termination_fn("halfcheetah")
    mean, std, tmean, tstd = model.input_mean, model.input_std, model.target_mean, model.target_std
    with torch.inference_mode():
        for member in members32:
            obs = obs0
            total = torch.zeros(len(obs))
            alive = torch.ones(len(obs), dtype=torch.bool)
            for t in range(steps):
                if t == 0:
                    act = first
                else:
                    act = torch.empty(len(obs), A)
                    for p in range(POLICIES):
                        act[bounds[p] : bounds[p + 1]] = policies[p](obs[bounds[p] : bounds[p + 1]])
                out = member((torch.cat([obs, act], 1) - mean) / std) * tstd + tmean
                obs = obs + out[:, :D]
                total += torch.where(alive, out[:, D], 0.0)
                alive &= ~term(obs)


def run_batched(model, policies, inputs: Inputs, steps: int, whole: bool = False):
    kwargs = {"chunk_rows": len(inputs.obs), "member_block": model.ensemble_size} if whole else {}
    return rollout_values(
        model,
        policies,
        inputs.obs,
        inputs.policy,
        np.full(len(inputs.obs), steps),
        inputs.first,
        progress=False,
        return_plan=True,
        **kwargs,
    )


def gemm_floor(model, policies, rows_options=(2048, 8192, 32768)) -> dict:
    """Dense-GEMM time per member-step: sum over the model's and a policy's layer shapes of the
    best ``torch.mm`` time per row (each shape timed at several row counts)."""
    shapes = [(layer.in_features, layer.out_features) for layer in model.net.layers]
    shapes += [(m.in_features, m.out_features) for m in policies[0] if isinstance(m, nn.Linear)]
    per_row = per_row_cpu = 0.0
    detail = []
    flops = 0
    for a, b in shapes:
        w = torch.randn(a, b)
        best = best_cpu = np.inf
        for rows in rows_options:
            x = torch.randn(rows, a)
            torch.mm(x, w)
            for _ in range(3):
                t, c = time.perf_counter(), time.process_time()
                for _ in range(5):
                    torch.mm(x, w)
                best = min(best, (time.perf_counter() - t) / 5 / rows)
                best_cpu = min(best_cpu, (time.process_time() - c) / 5 / rows)
        per_row += best
        per_row_cpu += best_cpu
        flops += 2 * a * b
        detail.append({"shape": [a, b], "gflops": 2 * a * b / best / 1e9})
    return {
        "member_steps_per_s": 1.0 / per_row,
        "member_steps_per_s_cpu": 1.0 / per_row_cpu,
        "flops_per_member_step": flops,
        "gflops_effective": flops / per_row / 1e9,
        "layers": detail,
    }


def timed(fn) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def bench_members(
    m: int, n_sides: int, timed_steps: int, ref_steps: int, repeats: int, horizon: int, skip_reference: bool
) -> dict:
    spec = EnsembleConfig(ensemble_size=m, hidden_sizes=HIDDEN).model_spec("halfcheetah")  # the paper's default model
    assert (spec.obs_dim, spec.act_dim) == (D, A)
    model = build_ensemble(spec, seed=0).eval()
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(1000, D))
    act = rng.uniform(-1, 1, (1000, A))
    model.set_statistics(obs, act, obs + 0.01 * rng.normal(size=obs.shape), rng.normal(size=1000))
    inputs = Inputs(n_sides)
    policies = make_policies()
    policies64 = make_policies(torch.float64)
    members32 = member_modules(model, torch.float32)
    members64 = member_modules(model, torch.float64)

    designs = {
        "member_loop": (lambda: run_member_loop(model, members32, policies, inputs, timed_steps), timed_steps),
        "naive_bmm": (lambda: run_batched(model, policies, inputs, timed_steps, whole=True), timed_steps),
        "batched": (lambda: run_batched(model, policies, inputs, timed_steps), timed_steps),
    }
    if not skip_reference:
        designs["reference"] = (lambda: run_reference(model, members64, policies64, inputs, ref_steps), ref_steps)
    best = {name: [np.inf, np.inf] for name in designs}
    floor: dict = {}
    for _ in range(repeats):
        for name, (fn, _) in designs.items():
            wall, cpu = timed(fn)
            best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]
            print(f"  M={m:<4} {name:<12} wall {wall:7.2f}s cpu {cpu:7.2f}s", flush=True)
        # the floor is timed in every round too, so that it sees the same machine load
        this = gemm_floor(model, policies)
        if not floor or this["member_steps_per_s"] > floor["member_steps_per_s"]:
            floor = {
                **this,
                "member_steps_per_s_cpu": max(this["member_steps_per_s_cpu"], floor.get("member_steps_per_s_cpu", 0.0)),
            }
        else:
            floor["member_steps_per_s_cpu"] = max(floor["member_steps_per_s_cpu"], this["member_steps_per_s_cpu"])
    out = {"M": m, "sides": n_sides, "timed_steps": timed_steps, "reference_steps": ref_steps, "designs": {}}
    for name, (_, steps) in designs.items():
        member_steps = m * n_sides * steps
        out["designs"][name] = {
            "member_steps_per_s_wall": member_steps / best[name][0],
            "member_steps_per_s_cpu": member_steps / best[name][1],
            "seconds_wall": best[name][0],
        }
    out["gemm_floor"] = floor
    _, plan = run_batched(model, policies, inputs, timed_steps)
    out["batched_plan"] = {
        "chunks": len(plan.chunks),
        "rows_per_chunk": plan.chunks[0][0],
        "member_block": plan.member_block,
    }
    if horizon:
        wall, cpu = timed(lambda: run_batched(model, policies, inputs, horizon))
        out["batched_full_horizon"] = {
            "horizon": horizon,
            "member_steps_per_s_wall": m * n_sides * horizon / wall,
            "member_steps_per_s_cpu": m * n_sides * horizon / cpu,
        }
    return out


def summarize(results: dict) -> str:
    lines = [
        "# Rollout throughput (benchmarks/bench_rollout.py)",
        "",
        f"Machine: {results['machine']['cpu']}, {results['machine']['logical_cpus']} logical CPUs, "
        f"torch {results['machine']['torch']} with {results['machine']['torch_threads']} thread(s); "
        f"load average at start {tuple(round(x, 2) for x in results['machine']['load_average_start'])} "
        "(the machine is shared: best of interleaved repeats).",
        *(
            [f"Command: `{results['command']}` at commit `{str(results.get('git_commit'))[:12]}`."]
            if results.get("command")
            else []
        ),
        "GPU: the measurement is still open (no GPU on this machine). Its targets: at least 30x the "
        "reference design on the same GPU in the same run, and at least 1e8 member-steps/s on an H100-class "
        "GPU for M = 100, N = 1500, h = 50 and this model, with the largest (N, M) that fits. Without a GPU, "
        "tests/core/test_device_clean.py checks the GPU path: no host synchronisation in the step loop (counted "
        "per call, whatever the horizon) and chunks sized to half the device's free memory. The GPU "
        "measurement is prepared: `bash benchmarks/device/run.sh OUTDIR --device cuda` (at most 8 minutes; "
        "benchmarks/device/README.md) times these designs and the GEMM floor on the GPU in one run, for M = 10 "
        "and 100, and reports each target as met or not; its numbers are pending its first run on a GPU.",
        "",
        f"Setup: D = {D}, A = {A}, model 4x200 SiLU (MBPO), {POLICIES} policies 2x64 tanh, "
        f"{results['config']['sides']} query sides (N = {results['config']['sides'] // 2} queries), "
        "throughput in member-steps per second (M members x sides x steps / seconds).",
        "",
        "| M | design | member-steps/s (wall) | member-steps/s (CPU time) | vs reference (wall) "
        "| vs member loop (wall) | share of GEMM floor (wall) | share of GEMM floor (CPU time) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results["runs"]:
        floor = r["gemm_floor"]["member_steps_per_s"]
        ref = r["designs"].get("reference", {}).get("member_steps_per_s_wall")
        loop = r["designs"]["member_loop"]["member_steps_per_s_wall"]
        floor_cpu = r["gemm_floor"]["member_steps_per_s_cpu"]
        for name, d in r["designs"].items():
            w = d["member_steps_per_s_wall"]
            lines.append(
                f"| {r['M']} | {name} | {w / 1e6:.3f} M | {d['member_steps_per_s_cpu'] / 1e6:.3f} M | "
                f"{(w / ref if ref else float('nan')):.2f}x | {w / loop:.2f}x | {w / floor:.0%} | "
                f"{d['member_steps_per_s_cpu'] / floor_cpu:.0%} |"
            )
        lines.append(
            f"| {r['M']} | gemm_floor | {floor / 1e6:.3f} M | {floor_cpu / 1e6:.3f} M | | | 100% "
            f"({r['gemm_floor']['gflops_effective']:.0f} GFLOP/s) | 100% |"
        )
        if "batched_full_horizon" in r:
            f = r["batched_full_horizon"]
            lines.append(
                f"| {r['M']} | batched, full h = {f['horizon']} | {f['member_steps_per_s_wall'] / 1e6:.3f} M | "
                f"{f['member_steps_per_s_cpu'] / 1e6:.3f} M | | | {f['member_steps_per_s_wall'] / floor:.0%} | "
                f"{f['member_steps_per_s_cpu'] / floor_cpu:.0%} |"
            )
    load = results["machine"]
    lines += [
        "",
        "Reading the numbers: the machine was shared during the run (load average "
        f"{load['load_average_start'][0]:.1f} at the start and {load.get('load_average_end', [float('nan')])[0]:.1f} "
        f"at the end, on {load['logical_cpus']} logical CPUs). Wall-clock throughput then depends on how "
        "often the process was descheduled, and the GEMM floor, timed in short bursts, catches "
        "quiet moments more easily than a rollout of several seconds; the process CPU time is "
        "the fairer basis for the ratios. `naive_bmm` is the same batched code with one chunk "
        "holding every member and side: its activations leave the caches, which is what the "
        "chunking to a memory budget recovers.",
        "",
        "Targets (CPU): at least 2x the reference, at least the member loop, at least 70% of the GEMM floor.",
    ]
    for r in results["runs"]:
        d = r["designs"]
        floor = r["gemm_floor"]["member_steps_per_s"]
        b = d["batched"]["member_steps_per_s_wall"]
        checks = []
        if "reference" in d:
            ref = d["reference"]["member_steps_per_s_wall"]
            checks.append(f"{b / ref:.1f}x reference ({'met' if b >= 2 * ref else 'NOT met'})")
        loop = d["member_loop"]["member_steps_per_s_wall"]
        checks.append(f"{b / loop:.2f}x member loop ({'met' if b >= loop else 'NOT met'})")
        checks.append(f"{b / floor:.0%} of the GEMM floor ({'met' if b >= 0.7 * floor else 'NOT met'})")
        bc, fc = d["batched"]["member_steps_per_s_cpu"], r["gemm_floor"]["member_steps_per_s_cpu"]
        checks.append(
            f"in CPU time {bc / d['member_loop']['member_steps_per_s_cpu']:.2f}x member loop "
            f"and {bc / fc:.0%} of the floor"
        )
        lines.append(f"- M = {r['M']}: " + "; ".join(checks) + ".")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--queries", type=int, default=1500, help="queries N (2N sides)")
    parser.add_argument("--timed-steps", type=int, default=10)
    parser.add_argument("--reference-steps", type=int, default=3)
    parser.add_argument("--horizon", type=int, default=50, help="one full-horizon batched run (0: skip)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS / "rollout")
    parser.add_argument("--summarize-only", action="store_true", help="rewrite OUT.md from OUT.json, measure nothing")
    args = parser.parse_args(argv)
    if args.summarize_only:
        text = summarize(json.loads(args.out.with_suffix(".json").read_text()))
        atomic_write_text(args.out.with_suffix(".md"), text)
        print(text)
        return 0
    torch.set_num_threads(args.threads)
    from bench_record import provenance_record

    results = {
        **provenance_record(),
        "machine": machine(),
        "config": {**vars(args), "out": str(args.out), "sides": 2 * args.queries},
        "runs": [],
    }
    for m in args.members:
        results["runs"].append(
            bench_members(
                m,
                2 * args.queries,
                args.timed_steps,
                args.reference_steps,
                args.repeats,
                args.horizon,
                args.skip_reference,
            )
        )
    results["machine"]["load_average_end"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out.with_suffix(".json"), json.dumps(results, indent=2) + "\n")
    text = summarize(results)
    atomic_write_text(args.out.with_suffix(".md"), text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
