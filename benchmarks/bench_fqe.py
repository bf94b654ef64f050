"""FQE training throughput: the vectorised ensemble against a Python loop over members.

Both fit finite-horizon FQE for P = 4 policies x M members (Hopper's sizes, D = 11, A = 3,
two hidden layers of 64 SiLU units, H = 50 outputs, batch 256 per member, Adam) on the same
synthetic transitions:

* ``vectorized`` -- :func:`opcc_edu.baselines.fqe.train_fqe` with all P M networks as one
  :class:`~opcc_edu.dynamics.layers.EnsembleMLP`: one forward/backward and one Adam step per
  gradient step.
* ``member_loop`` -- the same function called once per (policy, member) with a single
  network, one after another: the same algorithm, written as a loop over members.

Throughput is member-samples per second, P M x batch x steps / seconds (training only: both
time the step loop, not the one pass of the policies over the next observations). Repeats are
interleaved and the best counts (the machine is shared).

Usage::

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_fqe.py --threads 1
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

from opcc_edu.baselines.fqe import FQEConfig, train_fqe
from opcc_edu.io import atomic_write_text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_record import provenance_record, write_json  # noqa: E402
from bench_rollout import RESULTS, machine, synthetic_transitions  # noqa: E402

D, A, H, HIDDEN = 11, 3, 50, (64, 64)


def dataset(t: int, seed: int = 0) -> dict[str, np.ndarray]:
    return synthetic_transitions(t, D, A, seed, reward_offset=1.0, terminal_rate=0.01)


class LinearPolicy(nn.Module):
    def __init__(self, seed: int):
        super().__init__()
        self.layer = nn.Linear(D, A)
        with torch.no_grad():
            self.layer.weight.copy_(
                torch.as_tensor(np.random.default_rng(seed).normal(size=(A, D)), dtype=torch.float32)
            )

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.layer(obs))


def run_vectorized(data, policies, m: int, steps: int, batch: int) -> float:
    config = FQEConfig(ensemble_size=m, hidden_sizes=HIDDEN, train_steps=steps, batch_size=batch)
    return train_fqe(data, policies, H, config, progress=False, device="cpu").info["train_seconds"]


def run_member_loop(data, policies, m: int, steps: int, batch: int) -> float:
    seconds = 0.0
    for policy in policies:
        for member in range(m):
            single = FQEConfig(ensemble_size=1, hidden_sizes=HIDDEN, train_steps=steps, batch_size=batch, seed=member)
            seconds += train_fqe(data, [policy], H, single, progress=False, device="cpu").info["train_seconds"]
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=10, help="members M per policy")
    parser.add_argument("--policies", type=int, default=4)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--transitions", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS / "fqe")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    data = dataset(args.transitions)
    policies = [LinearPolicy(seed) for seed in range(args.policies)]
    best = {"vectorized": np.inf, "member_loop": np.inf}
    designs = {"vectorized": run_vectorized, "member_loop": run_member_loop}
    start_load = os.getloadavg()
    for _ in range(args.repeats):
        for name, fn in designs.items():
            seconds = fn(data, policies, args.members, args.steps, args.batch_size)
            best[name] = min(best[name], seconds)
            print(f"  {name:<12} {seconds:6.2f}s", flush=True)
    samples = args.policies * args.members * args.batch_size * args.steps
    rate = {name: samples / seconds for name, seconds in best.items()}
    results = {
        **provenance_record(),
        "machine": {**machine(), "load_average_start": start_load, "load_average_end": os.getloadavg()},
        "config": {**vars(args), "out": str(args.out), "hidden_sizes": list(HIDDEN), "max_horizon": H},
        "samples_per_s": rate,
    }
    text = render(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out.with_suffix(".json"), results)
    atomic_write_text(args.out.with_suffix(".md"), text)
    print(text)
    return 0


def render(data: dict) -> str:
    """The report, from the raw record alone."""
    m, c, rate = data["machine"], data["config"], data["samples_per_s"]
    hidden = c["hidden_sizes"]
    command = [f"Command: `{data['command']}` (raw numbers in `fqe.json`).", ""] if data.get("command") else []
    return "\n".join(
        [
            "# FQE training throughput (benchmarks/bench_fqe.py)",
            "",
            f"Machine: {m['cpu']}, {m['logical_cpus']} logical CPUs, torch {m['torch']} with {c['threads']} "
            f"thread(s); load average at start {tuple(round(x, 2) for x in m['load_average_start'])} (shared "
            f"machine: best of {c['repeats']} interleaved repeats). No GPU on this machine: the GPU measurement "
            "is still open.",
            "",
            *command,
            f"P = {c['policies']} policies x M = {c['members']} members, D = {D}, A = {A}, {len(hidden)}x{hidden[0]} "
            f"SiLU, H = {c['max_horizon']} outputs, batch {c['batch_size']} per member, {c['steps']} gradient steps, "
            f"{c['transitions']:,} transitions; member-samples per second of the step loop.",
            "",
            "| design | samples/s |",
            "|---|---|",
            f"| vectorized (one EnsembleMLP of P M networks) | {rate['vectorized']:,.0f} |",
            f"| member loop (train_fqe per network) | {rate['member_loop']:,.0f} |",
            "",
            f"Speed-up of the vectorized design: {rate['vectorized'] / rate['member_loop']:.2f}x.",
            "",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
