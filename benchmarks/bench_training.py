"""Training throughput of the stacked ensemble against a Python loop over separate members.

Both train M = 20 locomotion-sized members (D = 17, A = 6, four hidden layers of 200 SiLU
units, deterministic MSE, batch 256 per member, Adam) on the same synthetic transitions:

* ``batched`` -- :func:`opcc_edu.dynamics.train_dynamics`: one stacked forward/backward and
  one Adam step for all members per gradient step.
* ``member_loop`` -- M separate ``nn.Sequential`` members, each with its own Adam, trained one
  after another inside every gradient step (the usual way to write an ensemble).

Throughput is member-samples per second: M x batch x steps / seconds. Repeats are interleaved
and the best counts (the machine is shared). Both wall time and process CPU time are recorded.

Usage::

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_training.py --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from opcc_edu.baselines import EnsembleConfig
from opcc_edu.dynamics import build_ensemble, train_dynamics

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rollout import RESULTS, machine  # noqa: E402

D, A, HIDDEN = 17, 6, (200, 200, 200, 200)


def dataset(t: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(t, D)).astype(np.float32)
    act = rng.uniform(-1, 1, (t, A)).astype(np.float32)
    w = rng.normal(scale=0.1, size=(D + A, D)).astype(np.float32)
    nxt = obs + np.tanh(np.concatenate([obs, act], 1) @ w)
    return {
        "observations": obs,
        "actions": act,
        "next_observations": nxt,
        "rewards": nxt[:, 0].copy(),
        "terminals": np.zeros(t, bool),
    }


def run_batched(data, m: int, steps: int, batch: int) -> float:
    spec = EnsembleConfig(ensemble_size=m, hidden_sizes=HIDDEN, termination="none").model_spec("halfcheetah")
    model = build_ensemble(spec, seed=0)
    start = time.perf_counter()
    train_dynamics(model, data, steps=steps, batch_size=batch, seed=0, holdout_fraction=0.0, progress=False)
    return time.perf_counter() - start


def run_member_loop(data, m: int, steps: int, batch: int) -> float:
    """Separate members with separate optimisers, each on its own bootstrap sample."""
    gen = torch.Generator().manual_seed(0)
    obs = torch.as_tensor(data["observations"])
    inputs = torch.cat([obs, torch.as_tensor(data["actions"])], 1)
    targets = torch.cat(
        [torch.as_tensor(data["next_observations"]) - obs, torch.as_tensor(data["rewards"])[:, None]], 1
    )
    mean, std = inputs.mean(0), inputs.std(0)
    tmean, tstd = targets.mean(0), targets.std(0)
    members, optimizers = [], []
    for _ in range(m):
        sizes = (D + A, *HIDDEN, D + 1)
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            layers.append(nn.Linear(a, b))
            if i < len(sizes) - 2:
                layers.append(nn.SiLU())
        net = nn.Sequential(*layers)
        members.append(net)
        optimizers.append(torch.optim.Adam(net.parameters(), lr=1e-3))
    boot = torch.randint(len(obs), (m, len(obs)), generator=gen)
    start = time.perf_counter()
    for _ in range(steps):
        for i, (net, opt) in enumerate(zip(members, optimizers, strict=True)):
            idx = boot[i, torch.randint(len(obs), (batch,), generator=gen)]
            pred = net((inputs[idx] - mean) / std)
            loss = (pred - (targets[idx] - tmean) / tstd).square().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=20)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--transitions", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS / "training")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    data = dataset(args.transitions)
    best = {"batched": [np.inf, np.inf], "member_loop": [np.inf, np.inf]}
    designs = {"batched": run_batched, "member_loop": run_member_loop}
    for _ in range(args.repeats):
        for name, fn in designs.items():
            c = time.process_time()
            wall = fn(data, args.members, args.steps, args.batch_size)
            cpu = time.process_time() - c  # includes set-up (small next to the steps)
            best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]
            print(f"  {name:<12} wall {wall:6.2f}s cpu {cpu:6.2f}s", flush=True)
    samples = args.members * args.batch_size * args.steps
    results = {
        "machine": {**machine(), "load_average_end": os.getloadavg()},
        "config": {**vars(args), "out": str(args.out)},
        "samples_per_s_wall": {k: samples / v[0] for k, v in best.items()},
        "samples_per_s_cpu": {k: samples / v[1] for k, v in best.items()},
    }
    wall, cpu = results["samples_per_s_wall"], results["samples_per_s_cpu"]
    text = "\n".join(
        [
            "# Training throughput (benchmarks/bench_training.py)",
            "",
            f"Machine: {results['machine']['cpu']}, {results['machine']['logical_cpus']} logical CPUs, torch "
            f"{results['machine']['torch']} with {results['machine']['torch_threads']} thread(s); "
            "load average at start "
            f"{tuple(round(x, 2) for x in results['machine']['load_average_start'])} (shared machine: best of "
            f"{args.repeats} interleaved repeats). GPU: the measurement is still open (no GPU on this machine); "
            "tests/test_device_clean.py checks without one that the step loop never waits for the device.",
            "",
            f"M = {args.members} members, D = {D}, A = {A}, 4x200 SiLU, batch {args.batch_size} per member, "
            f"{args.steps} gradient steps; member-samples per second.",
            "",
            "| design | samples/s (wall) | samples/s (CPU time) |",
            "|---|---|---|",
            f"| batched (train_dynamics) | {wall['batched']:,.0f} | {cpu['batched']:,.0f} |",
            f"| member loop | {wall['member_loop']:,.0f} | {cpu['member_loop']:,.0f} |",
            "",
            f"Speed-up of the batched design: {wall['batched'] / wall['member_loop']:.2f}x (wall), "
            f"{cpu['batched'] / cpu['member_loop']:.2f}x (CPU time).",
            "",
        ]
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
