"""Benchmark of ground-truth labelling against baselines measured in the same run.

For each environment three rates, in environment steps per second, on one core:

* raw: one gymnasium environment under uniform random actions from the same start states and
  for the same horizon (stopping at termination) -- the simulator's own pace with no policy at
  all, the ceiling of any one-environment labeller (the start states matter: a fallen hopper
  has more contacts to solve than a standing one);
* replay: one gymnasium environment replaying the very actions of the batched run (recorded
  with :func:`~opcc_edu.simulate.simulate_trajectories`), no policy -- the simulator's pace on
  the same trajectories, since random actions and policy actions visit states of different
  cost (contacts);
* naive: one gymnasium environment, one query at a time, one policy call per step (what a
  straightforward labeller does);
* batched: :func:`opcc_edu.simulate.monte_carlo_returns` -- all queries stepped together in
  one :class:`~opcc_edu.simulate.BatchSimulator`, one batched policy forward per step.

The ratios batched / raw and batched / naive are printed and written to the results file.
Policies: the shipped ones when present, otherwise untrained actors of the same size (the cost
of a forward does not depend on the weights). The batched values are checked against the naive
loop on the benchmark's own queries before timing is trusted.

Usage::

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_ground_truth.py \
        --output benchmarks/results/ground_truth.md
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as stated in the results

import argparse
import copy
import platform
import time
from pathlib import Path

import numpy as np
import torch

from opcc_edu.envs import ENV_NAMES, get_spec, get_state, make_env, set_state
from opcc_edu.io import atomic_write_text
from opcc_edu.policies import Actor
from opcc_edu.simulate import monte_carlo_returns, simulate_trajectories

torch.set_num_threads(1)

import sys  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_record import provenance_record, write_json  # noqa: E402


def benchmark_policies(env_name: str) -> tuple[list[Actor], str]:
    try:
        from opcc_edu.policies import load_policies

        return load_policies(env_name), "shipped"
    except FileNotFoundError:
        spec = get_spec(env_name)
        torch.manual_seed(0)
        return [Actor(spec.obs_dim, spec.act_dim).eval() for _ in range(4)], "untrained"


def start_states(env_name: str, n: int, seed: int = 0) -> np.ndarray:
    """States visited by random play (reset after termination)."""
    env = make_env(env_name, seed=seed)
    rng = np.random.default_rng(seed)
    states = []
    while len(states) < n:
        for _ in range(5):
            _, _, terminated, truncated, _ = env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))
            if terminated or truncated:
                env.reset(seed=int(rng.integers(10**6)))
        states.append(get_state(env))
    env.close()
    return np.array(states)


def raw_steps(env_name, states, horizon, seed: int = 0) -> tuple[int, float]:
    """Uniform random actions from each start state: (steps taken, seconds)."""
    env = make_env(env_name, seed=seed)
    rng = np.random.default_rng(seed)
    actions = rng.uniform(-1, 1, (len(states), int(horizon.max())) + env.action_space.shape).astype(np.float32)
    steps = 0
    start = time.perf_counter()
    for i, state in enumerate(states):
        set_state(env, state)
        for t in range(int(horizon[i])):
            _, _, terminated, _, _ = env.step(actions[i, t])
            steps += 1
            if terminated:
                break
    elapsed = time.perf_counter() - start
    env.close()
    return steps, elapsed


def replay_steps(env_name, states, actions, valid) -> tuple[int, float]:
    """Replay recorded actions (N, H, A) from each start state: (steps taken, seconds)."""
    env = make_env(env_name, seed=0)
    steps = 0
    start = time.perf_counter()
    for i, state in enumerate(states):
        set_state(env, state)
        for action in actions[i, valid[i]]:
            env.step(action)
            steps += 1
    elapsed = time.perf_counter() - start
    env.close()
    return steps, elapsed


def naive_labels(env_name, states, policies, index, horizon, first_action) -> tuple[np.ndarray, int]:
    """One environment, one query at a time, one float64 policy call per step."""
    # float64 copies: the evaluation the batched code uses (see opcc_edu.simulate)
    doubles = [copy.deepcopy(p).double() for p in policies]
    env = make_env(env_name, seed=0)
    values, steps = np.zeros(len(states)), 0
    for i, state in enumerate(states):
        obs = set_state(env, state)
        for t in range(int(horizon[i])):
            if t == 0:
                action = first_action[i]
            else:
                with torch.no_grad():
                    action = doubles[index[i]](torch.from_numpy(obs)[None]).numpy()[0].astype(np.float32)
            obs, reward, terminated, _, _ = env.step(action)
            values[i] += reward
            steps += 1
            if terminated:
                break
    env.close()
    return values, steps


def run(env_names, n_queries: int, n_naive: int, horizon: int, repeats: int) -> list[dict]:
    rows = []
    for name in env_names:
        spec = get_spec(name)
        policies, kind = benchmark_policies(name)
        states = start_states(name, n_queries)
        rng = np.random.default_rng(1)
        index = rng.integers(0, len(policies), n_queries)
        first_action = rng.uniform(-1, 1, (n_queries, spec.act_dim)).astype(np.float32)
        horizons = np.full(n_queries, horizon)

        raw = max(np.divide(*raw_steps(name, states[:n_naive], horizons, seed=r)) for r in range(repeats))

        naive_time, naive_steps = np.inf, 0
        for _ in range(repeats):
            start = time.perf_counter()
            naive_values, naive_steps = naive_labels(name, states[:n_naive], policies, index, horizons, first_action)
            naive_time = min(naive_time, time.perf_counter() - start)

        batched_time = np.inf
        for _ in range(repeats):
            start = time.perf_counter()
            values = monte_carlo_returns(name, states, policies, index, horizons, first_action, progress=False)
            batched_time = min(batched_time, time.perf_counter() - start)
        if not np.array_equal(values[:n_naive, 0], naive_values):
            raise AssertionError(f"{name}: batched values differ from the naive loop")
        traj = simulate_trajectories(name, states, policies, index, horizons, first_action)
        batched_steps = int(traj.valid.sum())
        replay = max(
            np.divide(*replay_steps(name, states[:n_naive], traj.actions[:n_naive], traj.valid[:n_naive]))
            for _ in range(repeats)
        )

        row = {
            "env": name,
            "policies": kind,
            "queries": n_queries,
            "horizon": horizon,
            "raw_steps_per_s": raw,
            "replay_steps_per_s": replay,
            "naive_steps_per_s": naive_steps / naive_time,
            "batched_steps_per_s": batched_steps / batched_time,
        }
        row["batched_over_raw"] = row["batched_steps_per_s"] / raw
        row["batched_over_replay"] = row["batched_steps_per_s"] / replay
        row["batched_over_naive"] = row["batched_steps_per_s"] / row["naive_steps_per_s"]
        rows.append(row)
        print(
            f"{name:<15} raw {raw:>7.0f}  replay {replay:>7.0f}  naive {row['naive_steps_per_s']:>7.0f}  "
            f"batched {row['batched_steps_per_s']:>7.0f}  batched/raw {row['batched_over_raw']:>5.2f}  "
            f"batched/replay {row['batched_over_replay']:>5.2f}  batched/naive {row['batched_over_naive']:>5.2f}",
            flush=True,
        )
    return rows


def render(data: dict) -> str:
    """The report, from the raw record alone (``{"command", "config", "machine", "rows", ...}``)."""
    c, rows = data["config"], data["rows"]
    lines = [
        "# Ground-truth labelling throughput",
        "",
        f"Produced by `{data['command']}` at commit `{str(data['git_commit'])[:12]}` (raw numbers in "
        f"`ground_truth.json`), one core, {data['processor']}, Python {data['python']}.",
        "Rates are environment steps per second (best of the repeats); every rate of a row was measured",
        "in the same run from the same start states (random play) and horizon, stopping at termination.",
        "*raw*: one gymnasium environment, uniform random actions, no policy. *replay*: one environment",
        "replaying the batched run's own actions, no policy (the simulator's cost on the same states).",
        "*naive*: one",
        "environment, one query at a time, one policy call per step. *batched*: `monte_carlo_returns`,",
        "all queries in one `BatchSimulator`, one batched policy forward per step. The batched values",
        "equal the naive loop's exactly on the first queries (checked before timing).",
        f"Sizes: {c['queries']} queries in the batched run, {c['naive']} in the naive loop, horizon {c['horizon']}, "
        f"best of {c['repeats']} repeats.",
        "",
        "| env | policies | raw steps/s | replay steps/s | naive steps/s | batched steps/s "
        "| batched / raw | batched / replay | batched / naive |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['env']} | {r['policies']} | {r['raw_steps_per_s']:.0f} | {r['replay_steps_per_s']:.0f} | "
            f"{r['naive_steps_per_s']:.0f} | {r['batched_steps_per_s']:.0f} | {r['batched_over_raw']:.2f} | "
            f"{r['batched_over_replay']:.2f} | {r['batched_over_naive']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="*", default=list(ENV_NAMES), help="environments (default: all seven)")
    parser.add_argument("--queries", type=int, default=1024, help="queries in the batched run (default 1024)")
    parser.add_argument("--naive", type=int, default=60, help="queries in the naive loop (default 60)")
    parser.add_argument("--horizon", type=int, default=50, help="horizon of every query (default 50)")
    parser.add_argument("--repeats", type=int, default=2, help="timing repeats, best kept (default 2)")
    parser.add_argument("--output", default=None, help="write a markdown table here (and a .json beside it)")
    args = parser.parse_args()
    rows = run(args.envs, args.queries, args.naive, args.horizon, args.repeats)
    if args.output:
        path = Path(args.output)
        data = {
            **provenance_record(),
            "config": {k: v for k, v in vars(args).items() if k != "output"},
            "processor": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            "rows": rows,
        }
        write_json(path.with_suffix(".json"), data)
        atomic_write_text(path, render(data))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
