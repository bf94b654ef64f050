"""Candidate fixes for the mazes' learned reward, measured apart from the dynamics.

The answer-quality benchmark (``bench_answer_quality.py``) finds that on maze2d-umaze the
learned reward, not the learned dynamics, holds the EV loss above its target: paying the true
reward on the model's states passes, paying the learned reward on the simulator's states does
not, and most of the reward error lies in 0.2 m patches that hold about 0.4% of the data. The
candidates measured here:

* a reward head that can represent the goal's sharp boundary: a Bernoulli output (a logit
  trained with binary cross-entropy, read out as its sigmoid) instead of the paper's Gaussian
  regression output;
* wider data: the navigation recipe's action noise raised from D4RL's 0.5 to 1.0, so that the
  ball strays further from the cell centres;
* the reward of the *next* state: a network of the next observation alone, ``s' -> r``, instead
  of the paper's ``(s, a) -> r``. The maze's reward depends on the next position only, so this
  network has a disc in the plane to learn rather than a disc composed with one step of the
  dynamics (in a model's rollout it would be paid on the predicted next state);
* a longer fit (4x the profile's steps), and early stopping on a held-out tenth of the data
  (the best of the snapshots taken every 100 steps, as MBPO keeps each member's best).

Training a whole ensemble per variant would mix the reward with the dynamics. This script
isolates the reward part, which is what the decomposition blames: it trains one reward network
of a member's shape (the profile's hidden widths, SiLU, Adam at the baseline's learning rate,
the profile's steps and batch size, inputs ``concat(obs, action)`` standardised) on the
profile's dataset, and pays its reward on the simulator's own query trajectories (the variant
"learned reward on true states" of :func:`opcc_edu.lab.diagnose.decompose_value_error`).
The Gaussian head's prediction is clipped to the data's reward bounds, as the ensemble clips
it. Every number comes from the same fixed, horizon-stratified subset of 300 queries per set
that the answer-quality benchmark decomposes.

``python benchmarks/bench_reward_fit.py [--profile classroom] [--seeds 3] [ENV ...]`` writes
``benchmarks/results/reward_fit_<profile>.md``.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

from opcc_edu.io import atomic_write_text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_record import provenance_record, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results"
SUBSET = 300
"""Queries per set (the answer-quality benchmark's decomposed subset)."""
NOISE = {"recipe": 0.5, "wider": 1.0}
"""Navigation datasets: the shipped recipe's action noise (D4RL's), and a wider one."""
VARIANTS = (
    # name, data, head, inputs, step multiplier, early stopping
    ("paper: (s, a) -> r, Gaussian", "recipe", "gaussian", "obs_action", 1, False),
    ("Bernoulli head", "recipe", "bernoulli", "obs_action", 1, False),
    ("wider data", "wider", "gaussian", "obs_action", 1, False),
    ("wider data, Bernoulli head", "wider", "bernoulli", "obs_action", 1, False),
    ("s' -> r", "recipe", "gaussian", "next_obs", 1, False),
    ("s' -> r, Bernoulli head", "recipe", "bernoulli", "next_obs", 1, False),
    ("s' -> r, wider data", "wider", "gaussian", "next_obs", 1, False),
    ("4x steps", "recipe", "gaussian", "obs_action", 4, False),
    ("early stopping", "recipe", "gaussian", "obs_action", 1, True),
)
"""The variants of the reward fit: the first is the paper's baseline reward."""


def _trajectories(env: str, recipe: str, profile: str):
    from opcc_edu.baselines.estimate import select_profile_queries
    from opcc_edu.config import use_profile
    from opcc_edu.policies import load_policies
    from opcc_edu.queries import load_queries
    from opcc_edu.simulate.values import simulate_trajectories

    with use_profile(profile):
        queries = select_profile_queries(select_profile_queries(load_queries(env, recipe)), SUBSET, seed=0)
    cat = np.concatenate
    trajectories = simulate_trajectories(
        env,
        cat([queries.state_a, queries.state_b]),
        load_policies(env),
        cat([queries.policy_a, queries.policy_b]).astype(np.int64) - 1,
        cat([queries.horizon, queries.horizon]),
        cat([queries.action_a, queries.action_b]),
    )
    return queries, trajectories


def _inputs(inputs: str, obs: np.ndarray, act: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
    if inputs == "obs_action":
        return np.concatenate([obs, act], axis=1).astype(np.float64)
    return np.asarray(next_obs, dtype=np.float64)


def _fit(data, head: str, inputs: str, seed: int, widths, steps: int, batch: int, early_stop: bool):
    """A reward network trained on ``data``: returns a function (obs, act, next_obs) -> reward."""
    import copy

    import torch

    x = _inputs(inputs, data["observations"], data["actions"], data["next_observations"])
    y = data["rewards"].astype(np.float64)
    mu, sd = x.mean(0), x.std(0) + 1e-8
    if head == "gaussian":
        y_mean, y_std = y.mean(), y.std() + 1e-8
        target = (y - y_mean) / y_std
    else:
        target = y
    torch.manual_seed(seed)
    layers, width = [], x.shape[1]
    for h in widths:
        layers += [torch.nn.Linear(width, h), torch.nn.SiLU()]
        width = h
    net = torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))
    if head == "bernoulli":  # start at the data's reward rate (prior-bias initialisation)
        rate = float(np.clip(y.mean(), 1e-4, 1 - 1e-4))
        torch.nn.init.constant_(net[-1].bias, np.log(rate / (1 - rate)))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    xt = torch.as_tensor((x - mu) / sd, dtype=torch.float32)
    yt = torch.as_tensor(target, dtype=torch.float32)
    generator = torch.Generator().manual_seed(seed)
    train = torch.arange(len(xt))
    if early_stop:  # a seeded tenth held out; the best snapshot on it is kept
        order = torch.randperm(len(xt), generator=generator)
        held, train = order[: len(xt) // 10], order[len(xt) // 10 :]

    def loss_of(out, y_rows):
        if head == "gaussian":
            return (out - y_rows).square().mean()
        return torch.nn.functional.binary_cross_entropy_with_logits(out, y_rows)

    best, best_state = float("inf"), None
    for step in range(steps):
        i = train[torch.randint(len(train), (batch,), generator=generator)]
        loss = loss_of(net(xt[i]).squeeze(-1), yt[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if early_stop and (step + 1) % 100 == 0:
            with torch.no_grad():
                held_loss = float(loss_of(net(xt[held]).squeeze(-1), yt[held]))
            if held_loss < best:
                best, best_state = held_loss, copy.deepcopy(net.state_dict())
    if best_state is not None:
        net.load_state_dict(best_state)

    def predict(obs: np.ndarray, act: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
        inp = torch.as_tensor((_inputs(inputs, obs, act, next_obs) - mu) / sd, dtype=torch.float32)
        with torch.no_grad():
            out = net(inp).squeeze(-1).double().numpy()
        if head == "gaussian":
            return np.clip(out * y_std + y_mean, y.min(), y.max())
        return 1.0 / (1.0 + np.exp(-out))

    return predict


def _score(predict, queries, trajectories) -> dict[str, float]:
    valid = trajectories.valid
    rows, steps = valid.shape
    obs = np.nan_to_num(trajectories.observations[:, :-1]).reshape(rows * steps, -1)
    act = np.nan_to_num(trajectories.actions).reshape(rows * steps, -1).astype(np.float64)
    nxt = np.nan_to_num(trajectories.observations[:, 1:]).reshape(rows * steps, -1)
    reward = predict(obs, act, nxt).reshape(rows, steps)
    true = np.nan_to_num(trajectories.rewards)
    values = np.where(valid, reward, 0.0).sum(1)
    n = len(queries)
    wrong = (values[:n] < values[n:]).astype(np.int64) != np.asarray(queries.target)
    same = np.asarray(queries.same_state, dtype=bool)
    return {
        "step_error": float(np.abs(reward - true)[valid].mean()),
        "ev_loss": float(wrong.mean()),
        "same_state": float(wrong[same].mean()) if same.any() else float("nan"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("envs", nargs="*", default=["maze2d-umaze"])
    parser.add_argument("--profile", default="classroom")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args(argv)

    import torch

    from opcc_edu.config import get_profile
    from opcc_edu.datasets.maze import generate_maze_dataset
    from opcc_edu.envs import get_spec

    for env in args.envs:
        if not get_spec(env).is_maze:
            parser.error(f"ENV must be a maze environment (its reward is 0 or 1), got {env!r}")
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    torch.set_num_threads(2)
    prof = get_profile(args.profile)
    started = time.perf_counter()
    cells = []
    for env in args.envs:
        sets = {recipe: _trajectories(env, recipe, args.profile) for recipe in ("paper", "hard")}
        datasets = {
            name: generate_maze_dataset(env, prof.dataset_size, seed=0, action_noise=noise, progress=False)
            for name, noise in NOISE.items()
        }
        for name, data_name, head, inputs, mult, early_stop in VARIANTS:
            scores = {recipe: [] for recipe in sets}
            for seed in range(args.seeds):
                predict = _fit(
                    datasets[data_name],
                    head,
                    inputs,
                    seed,
                    prof.hidden_sizes,
                    mult * prof.dynamics_train_steps,
                    prof.batch_size,
                    early_stop,
                )
                for recipe, (queries, trajectories) in sets.items():
                    scores[recipe].append({k: float(v) for k, v in _score(predict, queries, trajectories).items()})
            for recipe, runs in scores.items():
                cells.append(
                    {
                        "env": env,
                        "recipe": recipe,
                        "variant": name,
                        "data": data_name,
                        "same_state_queries": int(np.sum(sets[recipe][0].same_state)),
                        "seeds": runs,
                    }
                )
                print(_row(cells[-1]), flush=True)
    record = {
        **provenance_record(),
        "profile": args.profile,
        "envs": list(args.envs),
        "seeds": args.seeds,
        "sizes": {
            "hidden_sizes": list(prof.hidden_sizes),
            "dynamics_train_steps": prof.dynamics_train_steps,
            "batch_size": prof.batch_size,
            "dataset_size": prof.dataset_size,
            "subset": SUBSET,
        },
        "wall_seconds": time.perf_counter() - started,
        "platform_machine": platform.machine(),
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "cells": cells,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"reward_fit_{args.profile}.md"
    write_json(path.with_suffix(".json"), record)
    atomic_write_text(path, render(record))
    print(f"wrote {path}")
    return 0


def _row(cell: dict) -> str:
    from opcc_edu.metrics import format_mean_ci, mean_confidence_interval

    texts = [
        format_mean_ci(*mean_confidence_interval([r[key] for r in cell["seeds"]]))
        for key in ("step_error", "ev_loss", "same_state")
    ]
    texts[-1] += f" ({cell['same_state_queries']})"
    return f"| {cell['env']} | {cell['recipe']} | {cell['variant']} | {cell['data']} | " + " | ".join(texts) + " |"


def render(data: dict) -> str:
    """The report, from the raw record alone (per environment the paper set's rows, then the hard set's)."""
    z, seeds = data["sizes"], data["seeds"]
    lines = [
        f"# Learned maze reward: head, inputs, data and fit length ({data['profile']} profile)",
        "",
        f"Written by `{data['command']}` at commit `{str(data['git_commit'])[:12]}` (raw numbers in "
        f"`reward_fit_{data['profile']}.json`). One reward network per cell and seed, of a member's shape "
        f"({'x'.join(str(h) for h in z['hidden_sizes'])}, {z['dynamics_train_steps']} steps of "
        f"{z['batch_size']} rows), trained on {z['dataset_size']:,} navigation transitions (dataset seed 0) "
        "and paid on the simulator's own query trajectories (the decomposition's *learned reward on "
        f"true states*), on the fixed subset of {z['subset']} queries per set. Cells: mean ± 95% t-interval "
        f"over seeds 0..{seeds - 1} (network seeds; the data is the same).",
        "",
        "Data: `recipe` is the shipped navigation recipe (action noise 0.5, D4RL's), `wider` the same "
        f"with action noise 1.0. The same-state column gives, in brackets, how many of the {z['subset']} queries "
        "start both sides from one state: where they are few its interval means little.",
        "",
        "| environment | queries | variant | data | step reward error | EV loss | same-state EV loss (queries) |",
        "|---|---|---|---|---|---|---|",
    ]
    for env in data["envs"]:
        for recipe in ("paper", "hard"):
            lines += [_row(c) for c in data["cells"] if c["env"] == env and c["recipe"] == recipe]
    lines += [
        "",
        f"{data['wall_seconds']:.0f} s on {data['platform_machine']}, {data['threads']} threads; "
        f"Python {data['python']}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
