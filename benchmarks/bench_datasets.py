"""Benchmark of dataset generation and coverage against baselines measured in the same run.

* Generation throughput (transitions per second) is compared with the raw step rate of one
  environment driven by uniform random actions: the ratio says how much of the simulator's
  own speed the recipe keeps (controller, batched policy forward, bookkeeping).
* Batched policy inference (one forward for B environments per step) is compared with one
  forward per environment per step.
* Query-to-dataset distances with scipy's cKDTree are compared with a blocked brute-force
  nearest-neighbour search (both exact, checked to agree) in 6 (maze) and 23 (HalfCheetah)
  dimensions.

Usage::

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_datasets.py \
        --output benchmarks/results/datasets.md
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as stated in the results

import argparse
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from opcc_edu.datasets.coverage import nearest_distances
from opcc_edu.datasets.locomotion import generate_policy_dataset
from opcc_edu.datasets.maze import generate_maze_dataset
from opcc_edu.envs import get_spec, make_env
from opcc_edu.io import atomic_write_text
from opcc_edu.policies import Actor

torch.set_num_threads(1)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_record import provenance_record, write_json  # noqa: E402


def best_times(functions: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Smallest wall time of each function over ``repeats`` interleaved rounds.

    Interleaving (every function once per round) exposes all of them to the same background
    load, so their ratios stay meaningful on a shared machine.
    """
    times: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(repeats):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            times[name].append(time.perf_counter() - start)
    return {name: min(values) for name, values in times.items()}


def raw_steps(env_name: str, steps: int) -> None:
    """One environment, uniform random actions, reset at episode ends: the simulator's own pace."""
    env = make_env(env_name, seed=0)
    rng = np.random.default_rng(0)
    act_dim = get_spec(env_name).act_dim
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(rng.uniform(-1, 1, act_dim).astype(np.float32))
        if terminated or truncated:
            env.reset()


def unbatched_policy_steps(env_name: str, steps: int, actor: Actor, n_envs: int) -> None:
    """B environments, one policy forward per environment per step (the naive loop)."""
    envs = [make_env(env_name, seed=k) for k in range(n_envs)]
    obs = [env.reset(seed=k)[0] for k, env in enumerate(envs)]
    for _ in range(steps // n_envs):
        for k, env in enumerate(envs):
            with torch.no_grad():
                action = actor(torch.as_tensor(obs[k], dtype=torch.float32)[None])[0].numpy()
            obs[k], _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                obs[k] = env.reset()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000, help="transitions per measurement")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", type=Path, default=None, help="write a markdown table here")
    args = parser.parse_args()
    n, repeats = args.steps, args.repeats

    maze, loco = "maze2d-medium", "halfcheetah"
    spec = get_spec(loco)
    torch.manual_seed(0)
    actor = Actor(spec.obs_dim, spec.act_dim).eval()
    t = best_times(
        {
            "maze raw": lambda: raw_steps(maze, n),
            "maze recipe": lambda: generate_maze_dataset(maze, n, seed=0, progress=False),
            "loco raw": lambda: raw_steps(loco, n),
            "loco random": lambda: generate_policy_dataset(loco, n, seed=0, progress=False),
            "loco policy": lambda: generate_policy_dataset(
                loco, n, seed=0, policy=actor, action_noise=0.1, progress=False
            ),
            "loco naive": lambda: unbatched_policy_steps(loco, n, actor, 8),
        },
        repeats,
    )
    coverage = []
    # Coverage: cKDTree vs blocked brute force, 1,500 queries (the paper's count per environment).
    for env_name, data in (
        (maze, generate_maze_dataset(maze, n, seed=0, progress=False)),
        (loco, generate_policy_dataset(loco, n, seed=0, progress=False)),
    ):
        points = np.concatenate([data["observations"], data["actions"]], 1).astype(np.float64)
        rng = np.random.default_rng(0)
        queries = points[rng.choice(n, 1500)] + rng.normal(0, 0.5, (1500, points.shape[1])) * points.std(0)
        tree_d = nearest_distances(queries, points, method="kdtree")[0]
        brute_d = nearest_distances(queries, points, method="brute")[0]
        np.testing.assert_allclose(tree_d, brute_d, rtol=1e-9, atol=1e-12)
        times = best_times(
            {
                "brute": lambda q=queries, p=points: nearest_distances(q, p, method="brute"),
                "kdtree": lambda q=queries, p=points: nearest_distances(q, p, method="kdtree"),
            },
            repeats,
        )
        coverage.append({"env": env_name, "k": int(points.shape[1]), "queries": 1500, **times})
    try:
        machine = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:  # pragma: no cover
        machine = platform.processor()
    record = {
        **provenance_record(),
        "config": {"steps": n, "repeats": repeats},
        "envs": {"maze": maze, "locomotion": loco},
        "seconds": t,
        "coverage": coverage,
        "versions_line": f"python {sys.version.split()[0]}, numpy {np.__version__}, torch {torch.__version__}",
        "lscpu": machine,
    }
    width = max(len(r[0]) for r in rows(record))
    for name, seconds, note in rows(record):
        print(f"{name:<{width}}  {seconds:8.3f} s  {note}")
    if args.output is not None:
        write_json(args.output.with_suffix(".json"), record)
        atomic_write_text(args.output, render(record))


def rows(data: dict) -> list[tuple[str, float, str]]:
    """``(what, seconds, rate or ratio)`` of the report, every ratio against a baseline of the same run."""
    n, t = data["config"]["steps"], data["seconds"]
    maze, loco = data["envs"]["maze"], data["envs"]["locomotion"]

    def rate(seconds: float) -> float:
        return n / seconds

    out: list[tuple[str, float, str]] = []
    t_raw, t_gen = t["maze raw"], t["maze recipe"]
    out.append((f"{maze}: raw env.step, random actions (baseline)", t_raw, f"{rate(t_raw):,.0f} steps/s"))
    out.append(
        (
            f"{maze}: navigation recipe, 8 streams",
            t_gen,
            f"{rate(t_gen):,.0f} transitions/s = {t_raw / t_gen:.2f} x raw",
        )
    )
    t_raw, t_random, t_policy, t_naive = t["loco raw"], t["loco random"], t["loco policy"], t["loco naive"]
    out.append((f"{loco}: raw env.step, random actions (baseline)", t_raw, f"{rate(t_raw):,.0f} steps/s"))
    out.append(
        (
            f"{loco}: random recipe, 8 envs",
            t_random,
            f"{rate(t_random):,.0f} transitions/s = {t_raw / t_random:.2f} x raw",
        )
    )
    out.append(
        (
            f"{loco}: policy recipe, 8 envs, one batched forward per step",
            t_policy,
            f"{rate(t_policy):,.0f} transitions/s = {t_raw / t_policy:.2f} x raw",
        )
    )
    out.append(
        (
            f"{loco}: 8 envs, one forward per env per step (naive)",
            t_naive,
            f"{rate(t_naive):,.0f} steps/s; batched is {t_naive / t_policy:.2f}x faster",
        )
    )
    for c in data["coverage"]:
        out.append(
            (
                f"coverage {c['env']} (K = {c['k']}), brute force, {c['queries']:,} queries x {n:,} pairs (baseline)",
                c["brute"],
                "1",
            )
        )
        out.append(
            (f"coverage {c['env']} (K = {c['k']}), cKDTree", c["kdtree"], f"speed-up {c['brute'] / c['kdtree']:.2f}x")
        )
    return out


def render(data: dict) -> str:
    """The report, from the raw record alone."""
    c = data["config"]
    lines = [
        "# Datasets benchmark",
        "",
        f"Produced by `{data['command']}` at commit `{str(data['git_commit'])[:12]}` (best of "
        f"{c['repeats']} interleaved rounds, one CPU thread, {c['steps']:,} transitions per measurement; raw seconds "
        "in `datasets.json`). Ratios are against baselines measured in the same run; absolute seconds depend on the "
        "machine.",
        "",
        "| what | seconds | rate / ratio |",
        "|---|---:|---|",
        *[f"| {name} | {seconds:.3f} | {note} |" for name, seconds, note in rows(data)],
        "",
        "## Machine",
        "",
        "```",
        data["versions_line"],
        data["lscpu"],
        "```",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
