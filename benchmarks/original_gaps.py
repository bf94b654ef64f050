"""Why our ensemble's EV loss on the ORIGINAL benchmark's queries differs from the paper's.

``benchmarks/results/original_benchmark.md`` sets our default ensemble (trained on this
package's generated data) beside the paper's Table 1/2 cell (trained on D4RL's data) on the
original benchmark's released queries. At the classroom profile four gaps exceed 0.05:
maze2d-open and maze2d-umaze (ours better), hopper and walker2d (ours worse). This script
collects the evidence behind each:

1. **Value-error decomposition** (``decompose``): for maze2d-open, maze2d-umaze, hopper and
   walker2d, the default ensemble of each seed (the runner's: ``get_or_train_ensemble`` on the
   environment's default dataset at the profile; a maze's original queries live in its
   ``-d4rl-goal`` variant) answers at most ``--max-queries`` original queries
   (``select_profile_queries``), and :func:`opcc_edu.lab.diagnose.decompose_value_error`
   splits its value error into reward, dynamics and termination parts. For Hopper and
   Walker2d it also records which query sides fall in the simulator before their horizon
   (by policy level), how long each member's own rollout of those sides lasts, and the value
   per step that the model and the simulator give them.
2. **Datasets** (``datasets``): Hopper and Walker2d ``medium`` at the profile's size (and at
   200k, the classroom size, where that file is already in the dataset cache): episode
   lengths, terminal transitions and which health condition failed, episode returns.
3. **D4RL's maze reward offset** (``mazes``): D4RL's maze2d datasets pay ``rewards[t]`` for
   ``observations[t]`` (the state before the step) while the environment and the queries'
   labels pay for the state after it. For each maze, the ``1m`` dataset of its ``-d4rl-goal``
   variant at the profile's size is copied with its rewards recomputed D4RL's way (same goal
   point and radius); the default ensemble is trained on both (seeds as given) and scored on
   the profile's original queries (EV loss and AURCC), next to the paper's cell. It also
   computes, from the simulator's own trajectories, the loss of a *perfect* model under each
   reward convention (a model-free bound on what the offset alone can cost).

Everything runs on the CPU unless ``--device`` says otherwise; training and rollouts are
seeded, so a CPU rerun gives the same numbers (GPU training does not, bit for bit).

Usage (writes ``benchmarks/results/original_gaps.json`` and ``.md``; about one minute on two
busy CPU cores at the tiny profile with the default ensembles already cached, a little more
without; the classroom rows come from the device run, ``benchmarks/original_device/gaps/``)::

    OPCC_EDU_PROFILE=tiny python benchmarks/original_gaps.py \
        --extra benchmarks/original_device/gaps/classroom_gaps.json

Seeds 0, 1, 2 by default. ``--parts`` runs a subset; ``--render`` only rewrites the markdown
from existing JSON files (``--json`` plus ``--extra``); ``--extra`` adds JSON files of other
runs to the markdown. The prose of the markdown quotes the numbers of these files; its
judgements (what explains each gap) were written for the results recorded there.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "original_gaps.json"
DEFAULT_MD = ROOT / "benchmarks" / "results" / "original_gaps.md"
CLASSROOM_JSON = ROOT / "benchmarks" / "original_device" / "classroom_original.json"
GAP_ENVS = ("maze2d-open", "maze2d-umaze", "hopper", "walker2d")
LOCOMOTION = ("hopper", "walker2d")
MAZES = ("maze2d-open", "maze2d-umaze", "maze2d-medium", "maze2d-large")
CLASSROOM_SIZE = 200_000

# D4RL's published numbers (see the markdown's "Sources"): episodes in the train split of
# TensorFlow Datasets' D4RL configs that the original benchmark used (d4rl:<env>-medium-v2).
D4RL_EPISODES = {
    "hopper": {
        "config": "d4rl_mujoco_hopper/v2-medium",
        "episodes": 2187,
        "url": "https://www.tensorflow.org/datasets/catalog/d4rl_mujoco_hopper",
        "file": "github.com/tensorflow/datasets docs/catalog/d4rl_mujoco_hopper.md "
        "(commit 57fd9380cb90c93131a82a98b056ee726ff734b4)",
    },
    "walker2d": {
        "config": "d4rl_mujoco_walker2d/v2-medium",
        "episodes": 1191,
        "url": "https://www.tensorflow.org/datasets/catalog/d4rl_mujoco_walker2d",
        "file": "github.com/tensorflow/datasets docs/catalog/d4rl_mujoco_walker2d.md (TFDS 1.2.0 catalog page)",
    },
}


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------
def _f(x) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def _paper_cell(env: str) -> dict[str, float]:
    from opcc_edu.envs import get_spec
    from opcc_edu.lab.experiments.paper import paper_results

    paper = paper_results()
    dataset = "1m" if get_spec(env).is_maze else "medium"
    cell = paper[(paper["table"].isin([1, 2])) & (paper["environment"] == env) & (paper["dataset"] == dataset)]
    return {m: float(cell[cell["metric"] == m]["mean"].iloc[0]) for m in ("aurcc", "loss")}


def _ev_scores(values_a, values_b, queries) -> dict[str, float]:
    from opcc_edu.scoring import score_values

    table = score_values(values_a, values_b, queries.target, queries.horizon, confidences=("ev",)).table()
    row = table["ev"]["all"]
    return {"loss": float(row["loss"]), "aurcc": float(row["aurcc"])}


class _StepCounter:
    """A model whose every step pays 1: its rollout value is the number of steps it lived
    (the terminating step included, as :func:`rollout_values` pays that step)."""

    def __init__(self, model):
        self._model = model
        self.ensemble_size, self.obs_dim, self.act_dim = model.ensemble_size, model.obs_dim, model.act_dim
        self.device = model.device
        self.net = getattr(model, "net", None)

    def step(self, obs, act, generator):
        import torch

        nxt, reward, done = self._model.step(obs, act, generator)
        return nxt, torch.ones_like(reward), done


def _model_steps(model, queries, policies, seed: int) -> np.ndarray:
    """(2N, M) steps each member's own rollout of each side lasts before the model's termination."""
    from opcc_edu.dynamics import rollout_values

    obs = np.concatenate([queries.obs_a, queries.obs_b]).astype(np.float32)
    first = np.concatenate([queries.action_a, queries.action_b]).astype(np.float32)
    level = np.concatenate([queries.policy_a, queries.policy_b]).astype(np.int64)
    horizon = np.concatenate([queries.horizon, queries.horizon])
    steps = rollout_values(
        _StepCounter(model), policies, obs, level - 1, horizon, first, 1.0, seed=seed, progress=False
    )
    return steps[..., 0]


# ----------------------------------------------------------------------------------------
# 1. value-error decomposition
# ----------------------------------------------------------------------------------------
def _fall_analysis(dec, queries, model_steps: np.ndarray) -> dict:
    """Falls of the simulator's trajectories and how the model values those sides."""
    n = len(queries)
    level = np.concatenate([queries.policy_a, queries.policy_b]).astype(int)
    h = dec.horizon.astype(float)
    fell = dec.true_steps < dec.horizon
    model_mean = dec.model.mean(1)
    true_term = dec.model_true_termination.mean(1) if dec.model_true_termination is not None else None
    model_fell = model_steps < dec.horizon[:, None]  # (2N, M)
    abs_err = np.abs(model_mean - dec.true)
    rows = []
    for lv in sorted(set(level.tolist())) + ["all"]:
        sel = np.ones_like(fell) if lv == "all" else level == lv
        for part, mask in (("falls", sel & fell), ("stays up", sel & ~fell)):
            if not mask.any():
                rows.append({"level": lv, "part": part, "sides": 0})
                continue
            rows.append(
                {
                    "level": lv,
                    "part": part,
                    "sides": int(mask.sum()),
                    "share_of_level": float(mask.sum() / max(sel.sum(), 1)),
                    "true_steps": float(dec.true_steps[mask].mean()),
                    "model_steps": float(model_steps[mask].mean()),
                    "model_falls": float(model_fell[mask].mean()),
                    "true_per_step": float((dec.true[mask] / h[mask]).mean()),
                    "model_per_step": float((model_mean[mask] / h[mask]).mean()),
                    "model_true_termination_per_step": (
                        None if true_term is None else float((true_term[mask] / h[mask]).mean())
                    ),
                    "bias_per_step": float(((model_mean[mask] - dec.true[mask]) / h[mask]).mean()),
                    "mae": float(abs_err[mask].mean()),
                }
            )
    # EV loss on queries where at least one side falls, and on the rest
    pred = (dec.model[:n] < dec.model[n:]).sum(1) * 2 >= dec.model.shape[1]
    wrong = pred.astype(int) != dec.target
    any_fall = fell[:n] | fell[n:]
    loss_split = {
        "queries_with_a_fall": int(any_fall.sum()),
        "loss_with_a_fall": _f(wrong[any_fall].mean()) if any_fall.any() else None,
        "loss_without_fall": _f(wrong[~any_fall].mean()) if (~any_fall).any() else None,
        "share_of_errors_with_a_fall": _f(wrong[any_fall].sum() / max(wrong.sum(), 1)),
        "share_of_abs_value_error_on_falling_sides": _f(abs_err[fell].sum() / max(abs_err.sum(), 1e-12)),
    }
    return {"rows": rows, "loss_split": loss_split}


HEALTH_BOUNDS = {
    # (dimension, low threshold or None, high threshold or None) of the health checks on observations
    "hopper": ((0, 0.7, None), (1, -0.2, 0.2)),
    "walker2d": ((0, 0.8, 2.0), (1, -1.0, 1.0)),
}


def query_trajectories(queries, policies):
    from opcc_edu.simulate.values import simulate_trajectories

    states = np.concatenate([queries.state_a, queries.state_b])
    first = np.concatenate([queries.action_a, queries.action_b])
    level = np.concatenate([queries.policy_a, queries.policy_b]).astype(np.int64)
    h = np.concatenate([queries.horizon, queries.horizon]).astype(np.int64)
    return simulate_trajectories(queries.env_name, states, policies, level - 1, h, first), level, h


def query_fall_causes(env: str, tr, level, h) -> dict:
    """Which health condition ends the simulator's trajectories of the query sides that fall, by level."""
    steps = tr.valid.sum(1)
    fell = steps < h
    last = tr.observations[np.arange(len(h)), steps]  # the observation after the last step
    out = {}
    for lv in sorted(set(level.tolist())):
        mask = fell & (level == lv)
        if not mask.any():
            out[str(lv)] = {"falls": 0}
            continue
        o = last[mask]
        if env == "hopper":
            causes = {"height <= 0.7": o[:, 0] <= 0.7, "|angle| >= 0.2": np.abs(o[:, 1]) >= 0.2}
        else:
            causes = {
                "height <= 0.8": o[:, 0] <= 0.8,
                "height >= 2.0": o[:, 0] >= 2.0,
                "angle outside (-1, 1)": (o[:, 1] <= -1.0) | (o[:, 1] >= 1.0),
            }
        out[str(lv)] = {"falls": int(mask.sum()), **{k: float(v.mean()) for k, v in causes.items()}}
    return out


def query_coverage(tr, level, h, dataset) -> dict:
    """How far the simulator's query states lie from the dataset: the distance of each visited
    observation to its nearest dataset observation, in units of the dataset's per-dimension
    standard deviation; the mean over a side's steps, then the median over sides."""
    from scipy.spatial import cKDTree

    data = np.asarray(dataset["next_observations"], np.float64)
    mu, sd = data.mean(0), np.maximum(data.std(0), 1e-8)
    tree = cKDTree((data - mu) / sd)
    steps = tr.valid.sum(1)
    fell = steps < h
    obs = tr.observations[:, 1:]  # after each step
    flat = obs[tr.valid]
    dist, _ = tree.query((flat - mu) / sd, k=1)
    per_side = np.zeros(len(h))
    row = np.repeat(np.arange(len(h)), steps)
    np.add.at(per_side, row, dist)
    per_side /= np.maximum(steps, 1)
    out = {}
    for lv in sorted(set(level.tolist())):
        for part, mask in (("falls", (level == lv) & fell), ("stays up", (level == lv) & ~fell)):
            out[f"{lv} {part}"] = _f(np.median(per_side[mask])) if mask.any() else None
    return out


def _copy_model(model, **changes):
    """The same members (same weights) under a spec with ``changes`` applied."""
    import dataclasses

    from opcc_edu.dynamics import build_ensemble

    copy = build_ensemble(dataclasses.replace(model.spec, **changes), init=False).to(model.device)
    copy.load_state_dict(model.state_dict())
    return copy.eval()


def clip_counterfactuals(env: str, model, queries, policies, seed: int, fell_sides: np.ndarray) -> dict:
    """The same trained members rolled out with (a) the default clip box (the dataset's bounds),
    (b) that box widened on the health-checked dimensions just past the environment's
    thresholds (so a predicted state can reach the termination region), (c) no clipping."""
    import torch

    from opcc_edu.baselines.estimate import estimate_values

    widened = _copy_model(model)
    low, high = widened.obs_low.clone(), widened.obs_high.clone()
    for dim, lo, hi in HEALTH_BOUNDS[env]:
        if lo is not None:
            low[dim] = torch.minimum(low[dim], torch.tensor(lo - 0.05, device=low.device))
        if hi is not None:
            high[dim] = torch.maximum(high[dim], torch.tensor(hi + 0.05, device=high.device))
    widened.obs_low.copy_(low)
    widened.obs_high.copy_(high)
    horizon = np.concatenate([queries.horizon, queries.horizon])
    level = np.concatenate([queries.policy_a, queries.policy_b])
    out = {}
    for name, m in (
        ("dataset bounds (default)", model),
        ("bounds widened past the health thresholds", widened),
        ("no clipping", _copy_model(model, clip="none")),
    ):
        va, vb = estimate_values(m, queries, policies, seed=seed, progress=False)
        steps = _model_steps(m, queries, policies, seed)
        falls = steps < horizon[:, None]
        four = fell_sides & (level == level.max())
        out[name] = {
            **_ev_scores(va, vb, queries),
            "members_fall_on_falling_sides": _f(falls[fell_sides].mean()) if fell_sides.any() else None,
            "members_fall_on_top_level_falling_sides": _f(falls[four].mean()) if four.any() else None,
            "members_fall_on_standing_sides": _f(falls[~fell_sides].mean()),
        }
    out["clip_box"] = {
        "low": [float(v) for v in model.obs_low[:2].cpu()],
        "high": [float(v) for v in model.obs_high[:2].cpu()],
    }
    return out


def run_decompose(envs, seeds, max_queries: int, device: str, log, flush=None) -> list[dict]:
    from opcc_edu.baselines import get_or_train_ensemble
    from opcc_edu.baselines.config import EnsembleConfig
    from opcc_edu.baselines.estimate import select_profile_queries
    from opcc_edu.datasets import load_dataset, resolve_dataset
    from opcc_edu.envs import get_spec
    from opcc_edu.lab.diagnose import decompose_value_error
    from opcc_edu.queries import load_queries, query_policies

    out = []
    for env in envs:
        queries = select_profile_queries(load_queries(env, "original"), n=max_queries)
        policies = query_policies(queries)
        variant = queries.env_name
        dataset_name = resolve_dataset(variant, None)
        dataset = load_dataset(variant, dataset_name, progress=False)
        loco = get_spec(variant).termination != "none"
        causes = coverage = tr = None
        if loco:
            tr, lv, hh = query_trajectories(queries, policies)
            causes = query_fall_causes(env, tr, lv, hh)
            coverage = query_coverage(tr, lv, hh, dataset)
        for seed in seeds:
            t0 = time.perf_counter()
            config = EnsembleConfig.from_profile(seed=seed)
            model = get_or_train_ensemble(variant, dataset_name, config, device=device, progress=False)
            dec = decompose_value_error(model, queries, policies, dataset=dataset, seed=config.seed)
            table = dec.table()
            rec = {
                "env": env,
                "env_name": variant,
                "dataset": dataset_name,
                "dataset_size": int(len(dataset["observations"])),
                "seed": seed,
                "n_queries": len(queries),
                "cache_hit": bool(model.info.get("cache_hit", False)),
                "shares": dec.shares(),
                "table": table.to_dict(orient="records"),
                "open_loop": {str(k): float(v) for k, v in dec.open_loop.items()},
                "one_step": None
                if dec.one_step is None
                else {
                    "obs_error_over_scale": float(
                        (dec.one_step["obs"] / np.maximum(dec.one_step["obs_scale"], 1e-12)).mean()
                    ),
                    "reward_error": float(dec.one_step["reward"]),
                    "reward_scale": float(dec.one_step["reward_scale"]),
                },
            }
            if get_spec(variant).is_maze:
                try:
                    rec["reward_map_sparse"] = dec.reward_map(dataset).error_share_in_sparse_patches(1e-3)
                except Exception as exc:  # noqa: BLE001 - a diagnostic extra, never fatal
                    rec["reward_map_sparse"] = {"error": repr(exc)}
            if dec.true_steps is not None and get_spec(variant).termination != "none":
                steps = _model_steps(model, queries, policies, config.seed)
                rec["falls"] = _fall_analysis(dec, queries, steps)
                rec["query_fall_causes"] = causes
                rec["coverage"] = coverage
                rec["clip"] = clip_counterfactuals(
                    env, model, queries, policies, config.seed, dec.true_steps < dec.horizon
                )
            rec["seconds"] = time.perf_counter() - t0
            all_model = [r for r in rec["table"] if r["subset"] == "all" and r["variant"].startswith("model (")]
            log(
                f"decompose {env} seed {seed}: EV loss {all_model[0]['ev_loss']:.3f}, "
                f"shares {json.dumps({k: round(v, 3) for k, v in rec['shares'].items()})}, {rec['seconds']:.1f}s"
            )
            out.append(rec)
            if flush is not None:
                flush(out)
    return out


# ----------------------------------------------------------------------------------------
# 2. locomotion datasets
# ----------------------------------------------------------------------------------------
def locomotion_stats(env: str, data) -> dict:
    from opcc_edu.datasets.format import episode_returns, episode_slices, summarize_dataset

    term = np.asarray(data["terminals"], bool)
    tout = np.asarray(data["timeouts"], bool)
    slices = episode_slices(data)
    lengths = np.array([s.stop - s.start for s in slices])
    end_term = np.array([term[s.stop - 1] for s in slices])
    end_tout = np.array([tout[s.stop - 1] and not term[s.stop - 1] for s in slices])
    complete = end_term | end_tout
    returns = episode_returns(data)
    nxt = np.asarray(data["next_observations"], np.float64)[term]
    if env == "hopper":
        causes = {
            "height <= 0.7": nxt[:, 0] <= 0.7,
            "|angle| >= 0.2": np.abs(nxt[:, 1]) >= 0.2,
            "|obs[1:]| >= 100 or non-finite": ~np.isfinite(nxt).all(1) | (np.abs(nxt[:, 1:]) >= 100).any(1),
        }
    else:
        causes = {
            "height <= 0.8": nxt[:, 0] <= 0.8,
            "height >= 2.0": nxt[:, 0] >= 2.0,
            "angle outside (-1, 1)": (nxt[:, 1] <= -1.0) | (nxt[:, 1] >= 1.0),
            "non-finite": ~np.isfinite(nxt).all(1),
        }
    explained = np.zeros(len(nxt), bool)
    for v in causes.values():
        explained |= v
    cause_share = {k: _f(v.mean()) if len(nxt) else None for k, v in causes.items()}
    cause_share["none of these (obs-based check)"] = _f((~explained).mean()) if len(nxt) else None
    lc = lengths[complete]
    both = np.concatenate([np.asarray(data["observations"]), np.asarray(data["next_observations"])])
    ranges = {
        "height": [float(both[:, 0].min()), float(both[:, 0].max())],
        "angle": [float(both[:, 1].min()), float(both[:, 1].max())],
    }
    return {
        "health_dim_ranges": ranges,
        "transitions": int(len(term)),
        "summary": summarize_dataset(data).as_dict(),
        "episodes": int(len(slices)),
        "complete_episodes": int(complete.sum()),
        "episodes_ending_in_fall": int(end_term.sum()),
        "episodes_ending_in_timeout": int(end_tout.sum()),
        "fall_share_of_complete_episodes": _f(end_term.sum() / max(complete.sum(), 1)),
        "terminal_share_of_transitions": float(term.mean()),
        "falls_per_1000_steps": float(1000 * term.sum() / max(len(term), 1)),
        "complete_length_mean": _f(lc.mean()) if lc.size else None,
        "complete_length_quantiles": {str(q): float(np.quantile(lc, q)) for q in (0.1, 0.25, 0.5, 0.75, 0.9)}
        if lc.size
        else {},
        "fall_length_mean": _f(lengths[end_term].mean()) if end_term.any() else None,
        "mean_return_complete": _f(returns[complete].mean()) if complete.any() else None,
        "mean_return_per_step": float(np.asarray(data["rewards"], np.float64).mean()),
        "terminal_causes": cause_share,
    }


def _cached(env: str, name: str, size: int) -> bool:
    from opcc_edu.datasets import cache_path, get_recipe, resolve_size, stream_id

    recipe = get_recipe(env, name)
    size = resolve_size(recipe, size)
    return cache_path(recipe, 0, size, stream_id(recipe, 0)).exists()


def run_datasets(log, envs=LOCOMOTION) -> list[dict]:
    from opcc_edu.config import get_profile
    from opcc_edu.datasets import load_dataset

    out = []
    sizes = sorted({get_profile().dataset_size, CLASSROOM_SIZE})
    for env in envs:
        for size in sizes:
            if size != get_profile().dataset_size and not _cached(env, "medium", size):
                log(f"datasets {env} medium {size}: not in the cache, skipped (generating it takes minutes)")
                continue
            data = load_dataset(env, "medium", size=size, progress=False)
            rec = {"env": env, "dataset": "medium", "size": size, **locomotion_stats(env, data)}
            log(
                f"datasets {env} medium n={size}: {rec['episodes']} episodes, {rec['episodes_ending_in_fall']} falls, "
                f"terminal share {rec['terminal_share_of_transitions']:.4f}, complete mean length "
                f"{rec['complete_length_mean']}"
            )
            out.append(rec)
    return out


# ----------------------------------------------------------------------------------------
# 3. mazes: D4RL's reward offset
# ----------------------------------------------------------------------------------------
def d4rl_rewards(data, variant: str) -> dict:
    """``data`` with rewards paid D4RL's way: for ``observations[t]`` (before the step)."""
    from opcc_edu.envs import GOAL_RADIUS, get_spec

    hit = np.linalg.norm(np.asarray(data["observations"])[:, :2] - get_spec(variant).goal_xy, axis=-1) <= GOAL_RADIUS
    return {**data, "rewards": hit.astype(np.asarray(data["rewards"]).dtype)}


def perfect_model_losses(queries, policies) -> dict:
    """EV loss of a perfect model under each reward convention, from the simulator's trajectories."""
    from opcc_edu.envs import GOAL_RADIUS, get_spec
    from opcc_edu.simulate.values import simulate_trajectories

    n = len(queries)
    spec = get_spec(queries.env_name)
    states = np.concatenate([queries.state_a, queries.state_b])
    first = np.concatenate([queries.action_a, queries.action_b])
    level = np.concatenate([queries.policy_a, queries.policy_b]).astype(np.int64)
    h = np.concatenate([queries.horizon, queries.horizon]).astype(np.int64)
    tr = simulate_trajectories(queries.env_name, states, policies, level - 1, h, first)
    after = np.where(tr.valid, tr.rewards, 0.0).sum(1)  # the environment's convention
    f0 = (np.linalg.norm(tr.observations[:, 0, :2] - spec.goal_xy, axis=-1) <= GOAL_RADIUS).astype(float)
    fh = tr.rewards[np.arange(2 * n), h - 1]
    before = after + f0 - fh  # sum of f(s_t), t = 0..h-1
    gap_before = np.abs(before[:n] - before[n:])
    return {
        "queries": n,
        "simulated_equals_label": float(
            np.mean(np.abs(after - np.concatenate([queries.value_a, queries.value_b])) < 1e-6)
        ),
        "loss_after_convention": float(np.mean((after[:n] < after[n:]).astype(int) != queries.target)),
        "loss_before_convention": float(np.mean((before[:n] < before[n:]).astype(int) != queries.target)),
        "sides_valued_differently": float(np.mean(before != after)),
        "ties_before_convention": float(np.mean(gap_before == 0)),
        "min_label_gap": float(np.min(np.abs(queries.value_a - queries.value_b))),
        "sides_starting_in_goal": float(f0.mean()),
    }


def maze_dataset_stats(data, d4rl) -> dict:
    ours = np.asarray(data["rewards"]) > 0
    theirs = np.asarray(d4rl["rewards"]) > 0
    return {
        "transitions": int(len(ours)),
        "rewarded_share_after_step": float(ours.mean()),
        "rewarded_share_before_step": float(theirs.mean()),
        "rows_that_differ": float(np.mean(ours != theirs)),
        "entering_goal_rows": float(np.mean(ours & ~theirs)),
        "leaving_goal_rows": float(np.mean(~ours & theirs)),
    }


def run_mazes(mazes, seeds, device: str, log, flush=None) -> list[dict]:
    from opcc_edu.baselines import get_or_train_ensemble
    from opcc_edu.baselines.config import EnsembleConfig
    from opcc_edu.baselines.estimate import estimate_values, select_profile_queries
    from opcc_edu.baselines.training import train_ensemble
    from opcc_edu.config import get_profile
    from opcc_edu.datasets import load_dataset
    from opcc_edu.envs import d4rl_goal_env
    from opcc_edu.queries import load_queries, query_policies

    profile = get_profile()
    out = []
    for maze in mazes:
        t_env = time.perf_counter()
        variant = d4rl_goal_env(maze)
        queries = select_profile_queries(load_queries(maze, "original"))
        policies = query_policies(queries)
        data = load_dataset(variant, "1m", progress=False)
        d4rl = d4rl_rewards(data, variant)
        rec = {
            "env": maze,
            "env_name": variant,
            "dataset": "1m",
            "dataset_size": int(len(data["observations"])),
            "n_queries": len(queries),
            "paper": _paper_cell(maze),
            "dataset_stats": maze_dataset_stats(data, d4rl),
            "perfect_model": perfect_model_losses(queries, policies),
            "runs": [],
        }
        true = np.concatenate([queries.value_a, queries.value_b])
        for seed in seeds:
            config = EnsembleConfig.from_profile(seed=seed)
            for convention in ("after step (ours)", "before step (D4RL)"):
                t0 = time.perf_counter()
                if convention.startswith("after"):
                    model = get_or_train_ensemble(variant, "1m", config, device=device, progress=False)
                    trained = not model.info.get("cache_hit", False)
                else:
                    model, _ = train_ensemble(d4rl, config, variant, device=device, progress=False)
                    trained = True
                t_train = time.perf_counter() - t0
                va, vb = estimate_values(
                    model,
                    queries,
                    policies,
                    runs=profile.mc_runs,
                    mixture=config.mixture,
                    seed=config.seed,
                    progress=False,
                )
                scores = _ev_scores(va, vb, queries)
                est = np.concatenate([va, vb]).mean(1)
                run = {
                    "seed": seed,
                    "rewards": convention,
                    **scores,
                    "value_mae": float(np.abs(est - true).mean()),
                    "value_bias": float((est - true).mean()),
                    "trained_here": bool(trained),
                    "seconds": time.perf_counter() - t0,
                    "train_seconds": t_train,
                }
                rec["runs"].append(run)
                log(
                    f"mazes {maze} seed {seed} {convention}: EV loss {scores['loss']:.3f} AURCC {scores['aurcc']:.3f} "
                    f"|err| {run['value_mae']:.2f} ({run['seconds']:.1f}s)"
                )
                if flush is not None:
                    flush(out + [rec])
        rec["seconds"] = time.perf_counter() - t_env
        out.append(rec)
    return out


# ----------------------------------------------------------------------------------------
# markdown
# ----------------------------------------------------------------------------------------
def _ms(values) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{np.mean(values):.3f} ± {np.std(values):.3f}"


def _classroom_losses() -> dict[str, list[float]]:
    if not CLASSROOM_JSON.exists():
        return {}
    data = json.loads(CLASSROOM_JSON.read_text())
    out: dict[str, list[float]] = {}
    for run in data.get("results", []):
        out.setdefault(run["env"], []).append(run["metrics"]["ev"]["all"]["loss"])
    return out


def _decomp_table(records: list[dict], env: str) -> list[str]:
    recs = [r for r in records if r["env"] == env]
    if not recs:
        return []
    lines = [
        f"Value-error decomposition ({recs[0]['n_queries']} queries, {len(recs)} seeds, "
        f"{recs[0]['dataset']} at {recs[0]['dataset_size']:,} transitions; mean ± sd over seeds):",
        "",
        "| variant | mean abs(value error) | bias | EV loss |",
        "|---|---:|---:|---:|",
    ]
    variants = [r["variant"] for r in recs[0]["table"] if r["subset"] == "all"]
    for v in variants:
        rows = [next(x for x in r["table"] if x["variant"] == v and x["subset"] == "all") for r in recs]
        lines.append(
            f"| {v} | {_ms([x['mae'] for x in rows])} | {_ms([x['bias'] for x in rows])} | "
            f"{_ms([x['ev_loss'] for x in rows])} |"
        )
    sh = [r["shares"] for r in recs]
    lines += [
        "",
        f"Mean abs(value error) of the model {_ms([s['total'] for s in sh])}; its reward part "
        f"{_ms([s['reward'] for s in sh])}, its dynamics part {_ms([s['dynamics'] for s in sh])} "
        "(`ValueErrorDecomposition.shares()`: the two parts add up to the signed error, so their absolute values "
        "bound it).",
    ]
    return lines


def _falls_table(records: list[dict], env: str) -> list[str]:
    recs = [r for r in records if r["env"] == env and "falls" in r]
    if not recs:
        return []
    lines = [
        "",
        "Query sides by policy level: those whose simulator trajectory falls before the horizon, and the rest "
        "(values per step of the side's horizon; model = member mean; 'model, true stop' = the model's own "
        "rollout cut where the simulator's stopped; mean ± sd over seeds):",
        "",
        "| level | part | sides | share | true steps | model steps | members that fall | true / step | model / step "
        "| model, true stop / step |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    base = recs[0]["falls"]["rows"]
    for i, row in enumerate(base):
        rows = [r["falls"]["rows"][i] for r in recs]
        if row["sides"] == 0:
            lines.append(f"| {row['level']} | {row['part']} | 0 | 0 | – | – | – | – | – | – |")
            continue
        lines.append(
            f"| {row['level']} | {row['part']} | {row['sides']} | {row['share_of_level']:.2f} | "
            f"{row['true_steps']:.1f} | {_ms([x['model_steps'] for x in rows])} | "
            f"{_ms([x['model_falls'] for x in rows])} | "
            f"{row['true_per_step']:.3f} | {_ms([x['model_per_step'] for x in rows])} | "
            f"{_ms([x['model_true_termination_per_step'] for x in rows])} |"
        )
    causes = recs[0].get("query_fall_causes") or {}
    if causes:
        parts = []
        for lv, c in causes.items():
            if c.get("falls"):
                cs = ", ".join(f"{k} {v:.2f}" for k, v in c.items() if k != "falls")
                parts.append(f"level {lv} ({c['falls']} falls): {cs}")
        lines += ["", "What ends the falling sides in the simulator (share of those falls): " + "; ".join(parts) + "."]
    ls = [r["falls"]["loss_split"] for r in recs]
    lines += [
        "",
        f"Queries with at least one falling side: {ls[0]['queries_with_a_fall']} of {recs[0]['n_queries']}; "
        f"EV loss on them {_ms([x['loss_with_a_fall'] for x in ls])}, on the others "
        f"{_ms([x['loss_without_fall'] for x in ls])}; "
        f"share of all wrong answers that are on them {_ms([x['share_of_errors_with_a_fall'] for x in ls])}; "
        "share of the total abs(value error) on falling sides "
        f"{_ms([x['share_of_abs_value_error_on_falling_sides'] for x in ls])}.",
    ]
    return lines


def _clip_table(records: list[dict], env: str) -> list[str]:
    recs = [r for r in records if r["env"] == env and "clip" in r]
    if not recs:
        return []
    names = [k for k in recs[0]["clip"] if k != "clip_box"]
    box = recs[0]["clip"]["clip_box"]
    lines = [
        "",
        f"The same trained members under other clip boxes (the model clips each predicted observation to the "
        f"dataset's bounds: height [{box['low'][0]:.3f}, {box['high'][0]:.3f}], angle [{box['low'][1]:.3f}, "
        f"{box['high'][1]:.3f}] for seed {recs[0]['seed']}; mean ± sd over seeds):",
        "",
        "| clip box | EV loss | EV AURCC | members that fall, on sides that fall | on the top level's sides that "
        "fall | on sides that stay up |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in names:
        rows = [r["clip"][name] for r in recs]
        lines.append(
            f"| {name} | {_ms([x['loss'] for x in rows])} | {_ms([x['aurcc'] for x in rows])} | "
            f"{_ms([x['members_fall_on_falling_sides'] for x in rows])} | "
            f"{_ms([x['members_fall_on_top_level_falling_sides'] for x in rows])} | "
            f"{_ms([x['members_fall_on_standing_sides'] for x in rows])} |"
        )
    cov = recs[0].get("coverage")
    if cov:
        lines += [
            "",
            "Distance of the simulator's query states to the nearest dataset observation (per-dimension standard "
            "deviations; mean over a side's steps, median over sides): "
            + "; ".join(f"level {k}: {v:.2f}" for k, v in cov.items() if v is not None)
            + ".",
        ]
    return lines


def _dataset_table(datasets: list[dict]) -> list[str]:
    if not datasets:
        return []
    lines = [
        "| environment | transitions | episodes (complete) | end in a fall | falls / 1000 steps | complete length: "
        "mean | 10% | 50% | 90% | mean return (complete) | reward / step |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for d in datasets:
        q = d["complete_length_quantiles"]
        lines.append(
            f"| {d['env']} medium (ours) | {d['transitions']:,} | {d['episodes']} ({d['complete_episodes']}) | "
            f"{d['episodes_ending_in_fall']} ({100 * (d['fall_share_of_complete_episodes'] or 0):.0f}%) | "
            f"{d['falls_per_1000_steps']:.2f} | {d['complete_length_mean'] or float('nan'):.0f} | "
            f"{q.get('0.1', float('nan')):.0f} | {q.get('0.5', float('nan')):.0f} | {q.get('0.9', float('nan')):.0f} | "
            f"{d['mean_return_complete'] or float('nan'):.0f} | {d['mean_return_per_step']:.3f} |"
        )
    for env, ref in D4RL_EPISODES.items():
        lines.append(
            f"| {env}-medium-v2 (D4RL) | 1,000,000 (assumed) | {ref['episodes']:,} | – | – | "
            f"{1_000_000 / ref['episodes']:.0f} (derived) | – | – | – | – | – |"
        )
    lines += [
        "",
        "Which health condition failed on the terminal transitions (share of terminals; a transition can fail "
        "several):",
        "",
    ]
    for d in datasets:
        causes = ", ".join(f"{k}: {v:.2f}" for k, v in d["terminal_causes"].items() if v is not None)
        lines.append(f"* {d['env']} medium, {d['transitions']:,} transitions: {causes or 'no terminal transitions'}")
    lines += ["", "Range of the health-checked observations over the dataset (observations and next observations):", ""]
    for d in datasets:
        r = d["health_dim_ranges"]
        lines.append(
            f"* {d['env']} medium, {d['transitions']:,} transitions: height [{r['height'][0]:.3f}, "
            f"{r['height'][1]:.3f}], "
            f"torso angle [{r['angle'][0]:.3f}, {r['angle'][1]:.3f}]"
        )
    return lines


def _maze_table(mazes: list[dict], label: str) -> list[str]:
    if not mazes:
        return []
    lines = [
        f"Ensembles trained on our `1m` data (rewards after the step) and on the same data with D4RL's rewards "
        f"(before the step), {label}:",
        "",
        "| maze | queries | transitions | seeds | rewards | EV loss | EV AURCC | mean abs(value error) | paper loss "
        "| paper AURCC |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for m in mazes:
        for conv in ("after step (ours)", "before step (D4RL)"):
            runs = [r for r in m["runs"] if r["rewards"] == conv]
            lines.append(
                f"| {m['env']} | {m['n_queries']} | {m['dataset_size']:,} | {len(runs)} | {conv} | "
                f"{_ms([r['loss'] for r in runs])} | {_ms([r['aurcc'] for r in runs])} | "
                f"{_ms([r['value_mae'] for r in runs])} | "
                f"{m['paper']['loss']:.3f} | {m['paper']['aurcc']:.3f} |"
            )
    lines += [
        "",
        "| maze | rewarded rows, after step | before step | rows that differ | perfect model's loss, after | before "
        "| sides valued differently | smallest label gap | sides starting in the goal disc |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in mazes:
        s, p = m["dataset_stats"], m["perfect_model"]
        lines.append(
            f"| {m['env']} | {s['rewarded_share_after_step']:.4f} | {s['rewarded_share_before_step']:.4f} | "
            f"{s['rows_that_differ']:.4f} | {p['loss_after_convention']:.3f} | {p['loss_before_convention']:.3f} | "
            f"{p['sides_valued_differently']:.2f} | {p['min_label_gap']:.0f} | {p['sides_starting_in_goal']:.2f} |"
        )
    return lines


def _m(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def _fmt(x, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


class _View:
    """Means over seeds of the numbers the prose quotes, for one run (record)."""

    def __init__(self, rec: dict):
        self.rec = rec
        self.profile, self.device = rec["profile"], rec["device"]

    def dec(self, env: str) -> list[dict]:
        return [r for r in self.rec.get("decompose", []) if r["env"] == env]

    def ev(self, env: str, variant_prefix: str, subset: str = "all") -> float | None:
        vals = []
        for r in self.dec(env):
            for row in r["table"]:
                if row["subset"] == subset and row["variant"].startswith(variant_prefix):
                    vals.append(row["ev_loss"])
        return _m(vals)

    def share(self, env: str, key: str) -> float | None:
        return _m([r["shares"][key] for r in self.dec(env)])

    def clip(self, env: str, name_prefix: str, key: str = "loss") -> float | None:
        vals = []
        for r in self.dec(env):
            for name, row in r.get("clip", {}).items():
                if name.startswith(name_prefix):
                    vals.append(row[key])
        return _m(vals)

    def falls(self, env: str, level, part: str, key: str) -> float | None:
        vals = []
        for r in self.dec(env):
            for row in r.get("falls", {}).get("rows", []):
                if str(row["level"]) == str(level) and row["part"] == part and row.get("sides"):
                    vals.append(row[key])
        return _m(vals)

    def loss_split(self, env: str, key: str) -> float | None:
        return _m([r["falls"]["loss_split"][key] for r in self.dec(env) if "falls" in r])

    def causes(self, env: str) -> dict:
        for r in self.dec(env):
            if r.get("query_fall_causes"):
                return r["query_fall_causes"]
        return {}

    def maze(self, env: str) -> dict | None:
        return next((m for m in self.rec.get("mazes", []) if m["env"] == env), None)

    def maze_loss(self, env: str, convention_prefix: str, key: str = "loss") -> float | None:
        m = self.maze(env)
        if m is None:
            return None
        return _m([r[key] for r in m["runs"] if r["rewards"].startswith(convention_prefix)])


def _maze_section(env: str, views: list[_View], classroom: dict) -> list[str]:
    lines = [
        "| run | queries | EV loss, our rewards (after the step) | EV loss, D4RL's rewards (before the step) | "
        "AURCC, ours | AURCC, D4RL's | perfect model, D4RL's rewards | paper loss |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    bound = None
    for v in views:
        m = v.maze(env)
        if m is None:
            continue
        bound = m["perfect_model"]
        lines.append(
            f"| {v.profile}, {len(v.rec['seeds'])} seeds, {v.device} | {m['n_queries']} | "
            f"{_ms([r['loss'] for r in m['runs'] if r['rewards'].startswith('after')])} | "
            f"{_ms([r['loss'] for r in m['runs'] if r['rewards'].startswith('before')])} | "
            f"{_ms([r['aurcc'] for r in m['runs'] if r['rewards'].startswith('after')])} | "
            f"{_ms([r['aurcc'] for r in m['runs'] if r['rewards'].startswith('before')])} | "
            f"{m['perfect_model']['loss_before_convention']:.3f} | {m['paper']['loss']:.3f} |"
        )
    cls = next((v for v in views if v.profile == "classroom"), None)
    tiny = next((v for v in views if v.profile == "tiny"), None)
    text = []
    if bound is not None:
        text.append(
            "**The reward offset does not explain it.** A side's value under D4RL's convention differs from its "
            "label by "
            "f(s_0) - f(s_h), at most one step in the goal disc, and the smallest value gap between the two sides of "
            "an "
            f"original {env} query is {bound['min_label_gap']:.0f} steps; so even a perfect model trained on D4RL's "
            "rewards "
            f"answers every query right (loss {bound['loss_before_convention']:.3f}; "
            f"{100 * bound['sides_valued_differently']:.0f}% of the sides change value by one step)."
        )
    if cls is not None and cls.maze(env):
        text.append(
            f"Trained on the same classroom-size data with D4RL's rewards, the ensemble's loss is "
            f"{_fmt(cls.maze_loss(env, 'before'))} against {_fmt(cls.maze_loss(env, 'after'))} with ours "
            f"(paper {_paper_cell(env)['loss']:.3f})."
        )
    if tiny is not None and tiny.maze(env):
        text.append(
            f"At the tiny profile the two are also close ({_fmt(tiny.maze_loss(env, 'before'))} and "
            f"{_fmt(tiny.maze_loss(env, 'after'))}); there the model itself is weak (its value error is "
            f"{_fmt(tiny.share(env, 'total'), 1)} steps on average, {_fmt(tiny.share(env, 'reward'), 1)} of it from "
            "the "
            f"learned reward)."
        )
    if cls is not None and cls.dec(env):
        text.append(
            f"At the classroom profile our ensemble's mean abs(value error) is {_fmt(cls.share(env, 'total'), 1)} "
            "steps, "
            f"nearly all of it the learned reward ({_fmt(cls.share(env, 'reward'), 1)}; dynamics "
            f"{_fmt(cls.share(env, 'dynamics'), 1)}); it underestimates both sides alike and answers "
            f"{100 * (1 - (cls.ev(env, 'model (') or 0)):.1f}% of the 300 decomposed queries right."
        )
    text.append(
        "**What does explain the gap is not established here.** The setting differs from the paper's in the dataset "
        "only, "
        "and the reward convention is now ruled out as the cause. Differences not tested here: D4RL's data itself (the "
        "original benchmark used `d4rl:maze2d-open-v0` for the open maze and the `-v1` datasets for the others; the "
        "`1m` "
        "cell is D4RL's whole dataset, ours is capped at 200,000 transitions at the classroom profile) and the paper's "
        "training (its ensemble and step counts are the paper profile's, not the classroom's). How sure: sure that the "
        "offset is not the cause (a bound and a direct test agree); no evidence on the rest."
    )
    return [" ".join(text), ""] + lines


def _loco_section(env: str, views: list[_View]) -> list[str]:
    cls = next((v for v in views if v.profile == "classroom" and v.dec(env)), None)
    tiny = next((v for v in views if v.profile == "tiny" and v.dec(env)), None)
    top = 4
    lines = [
        "| run | EV loss (model) | simulator's termination | clip box widened past the health thresholds | no "
        "clipping | "
        "learned reward on true states | level-4 sides that fall | members that fall on them | their value per "
        "step: true | model |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for v in (tiny, cls):
        if v is None:
            continue
        lines.append(
            f"| {v.profile}, {len(v.rec['seeds'])} seeds, {v.device} | {_fmt(v.ev(env, 'model ('))} | "
            f"{_fmt(v.ev(env, 'model, the simulator'))} | {_fmt(v.clip(env, 'bounds widened'))} | "
            f"{_fmt(v.clip(env, 'no clipping'))} | "
            f"{_fmt(v.ev(env, 'learned reward on true'))} | {_fmt(v.falls(env, top, 'falls', 'share_of_level'), 2)} | "
            f"{_fmt(v.falls(env, top, 'falls', 'model_falls'), 2)} | "
            f"{_fmt(v.falls(env, top, 'falls', 'true_per_step'), 2)} | "
            f"{_fmt(v.falls(env, top, 'falls', 'model_per_step'), 2)} |"
        )
    text = []
    if env == "hopper" and cls is not None:
        c4 = cls.causes(env).get(str(top), {})
        sets = [d for v in views for d in v.rec.get("datasets", []) if d["env"] == env]
        lo = min(d["health_dim_ranges"]["angle"][0] for d in sets) if sets else None
        hi = max(d["health_dim_ranges"]["angle"][1] for d in sets) if sets else None
        angle = f"[{lo:.3f}, {hi:.3f}]" if sets else "(range not computed)"
        text += [
            f"**Explained: the model cannot predict the level-{top} policy's falls.** In the simulator "
            f"{100 * (cls.falls(env, top, 'falls', 'share_of_level') or 0):.0f}% of the level-{top} query sides fall "
            "before "
            f"their horizon (after {_fmt(cls.falls(env, top, 'falls', 'true_steps'), 1)} steps on average), and "
            f"{100 * c4.get('|angle| >= 0.2', 0):.0f}% of those falls are the torso angle leaving (-0.2, 0.2). Our "
            "`medium` "
            "data does not lack falls (see the datasets section: almost every episode ends in one), but every one of "
            "its "
            f"falls is the height dropping below 0.7, and its torso angle never leaves {angle}. The model clips each "
            "predicted observation to the dataset's bounds and applies the termination rule to the clipped "
            "observation "
            f"(`DynamicsEnsemble.step`), so an angle fall is impossible in its rollouts. At the classroom profile only "
            f"{100 * (cls.falls(env, top, 'falls', 'model_falls') or 0):.0f}% of the member rollouts of those sides "
            "fall; "
            f"the model keeps them alive for {_fmt(cls.falls(env, top, 'falls', 'model_steps'), 1)} steps instead of "
            f"{_fmt(cls.falls(env, top, 'falls', 'true_steps'), 1)} and values them at "
            f"{_fmt(cls.falls(env, top, 'falls', 'model_per_step'), 2)} per step of the horizon against "
            f"{_fmt(cls.falls(env, top, 'falls', 'true_per_step'), 2)} in the simulator (cut where the simulator "
            "stops, its "
            f"rollouts are worth {_fmt(cls.falls(env, top, 'falls', 'model_true_termination_per_step'), 2)}).",
            f"The EV loss on queries with a falling side is {_fmt(cls.loss_split(env, 'loss_with_a_fall'))} against "
            f"{_fmt(cls.loss_split(env, 'loss_without_fall'))} on the rest. With the same trained weights, stopping "
            "each "
            f"rollout where the simulator stopped lowers the loss from {_fmt(cls.ev(env, 'model ('))} to "
            f"{_fmt(cls.ev(env, 'model, the simulator'))}, and merely widening the clip box past the health thresholds "
            f"(so the rule can fire) lowers it to {_fmt(cls.clip(env, 'bounds widened'))}, below the paper's "
            f"{_paper_cell(env)['loss']:.3f} (these numbers are on the 300 decomposed queries; the benchmark's 1,500 "
            "gave "
            f"0.444). The tiny profile shows the same, less strongly: its weaker model still lets "
            f"{100 * (tiny.falls(env, top, 'falls', 'model_falls') or 0) if tiny else 0:.0f}% of those rollouts fall "
            f"(through the height), consistent with the classroom loss being the higher one.",
            "How sure: sure of the mechanism and that it accounts for our excess loss (direct counterfactuals on the "
            "same "
            "weights, three seeds, both profiles). Why the paper's model did not suffer from it is not established: it "
            "would have only if D4RL's data also never showed an angle fall and the paper's code also clipped before "
            "terminating; neither was checked here (D4RL's arrays were not available).",
        ]
    if env == "walker2d" and cls is not None:
        text += [
            "**Not explained by falls or termination.** Only "
            f"{100 * (cls.falls(env, 'all', 'falls', 'share_of_level') or 0):.0f}% "
            f"of the query sides fall in the simulator, the queries with a falling side hold "
            f"{100 * (cls.loss_split(env, 'share_of_errors_with_a_fall') or 0):.0f}% of the wrong answers, and "
            "stopping the "
            "model's rollouts where the simulator stopped lowers the classroom loss only from "
            f"{_fmt(cls.ev(env, 'model ('))} "
            f"to {_fmt(cls.ev(env, 'model, the simulator'))}. Unlike Hopper, widening the clip box makes it worse "
            f"({_fmt(cls.clip(env, 'bounds widened'))}; no clipping {_fmt(cls.clip(env, 'no clipping'))}). The "
            "learned reward "
            "alone, paid along the simulator's trajectories, would answer with loss "
            f"{_fmt(cls.ev(env, 'learned reward on true'))}; "
            f"the error lies in the learned dynamics (mean abs(value error) {_fmt(cls.share(env, 'total'), 1)}, of "
            "which "
            f"{_fmt(cls.share(env, 'dynamics'), 1)} dynamics and {_fmt(cls.share(env, 'reward'), 1)} reward) on sides "
            "that "
            f"stay up.",
            "The datasets differ: our walker2d `medium` episodes are shorter than D4RL's (mean complete length below, "
            "against about 840 steps derived from D4RL's episode count) and almost all end in a fall, so its states "
            "are "
            "those of a less stable walker. That this difference causes the loss gap is a candidate explanation, not a "
            "tested one. How sure: sure that termination and the reward offset are not the main cause; the rest is "
            "open.",
        ]
    return [" ".join(text[:1]), ""] + ([" ".join(text[1:]), ""] if len(text) > 1 else []) + lines


def render(records: list[dict]) -> str:
    """The markdown from one or more result records (the main run first)."""
    views = [_View(r) for r in records]
    classroom = _classroom_losses()
    lines = [
        "# Why our EV loss on the original queries differs from the paper's",
        "",
        "Written by `python benchmarks/original_gaps.py` (raw numbers in `original_gaps.json`; the classroom-profile "
        "numbers come from one device run, `benchmarks/original_device/gaps/classroom_gaps.json`, read with "
        "`--extra`). The gaps are the classroom rows of `original_benchmark.md`: our default ensemble trained on this "
        "package's data against the paper's Table 1/2 cell trained on D4RL's, on the original queries and targets.",
        "",
        "**The default has moved since.** These runs clipped rollouts to the box of the data's observations and "
        "next observations, the default of their time, called 'default' below. Hopper's gap, explained here, led "
        "the package to a default box that reaches the termination rule's health limits (`--clip health`); "
        "`locomotion_clip.md` measures all four boxes on these queries, and `original_benchmark.md` has the "
        "current default's answers.",
        "",
        "| environment | ours, classroom (3 seeds, 1,500 queries) | paper | what explains it | how sure |",
        "|---|---:|---:|---|---|",
        f"| maze2d-open | {_ms(classroom.get('maze2d-open', []))} | {_paper_cell('maze2d-open')['loss']:.3f} | not "
        "D4RL's reward offset (ruled out); otherwise open | offset ruled out: sure |",
        f"| maze2d-umaze | {_ms(classroom.get('maze2d-umaze', []))} | {_paper_cell('maze2d-umaze')['loss']:.3f} | "
        "not D4RL's reward offset (ruled out); otherwise open | offset ruled out: sure |",
        f"| hopper | {_ms(classroom.get('hopper', []))} | {_paper_cell('hopper')['loss']:.3f} | the model cannot "
        "terminate on the torso angle (clip box from our data + termination after clipping), so it overvalues the "
        "level-4 sides that fall | mechanism: sure; why the paper escaped it: open |",
        f"| walker2d | {_ms(classroom.get('walker2d', []))} | {_paper_cell('walker2d')['loss']:.3f} | not "
        "termination, not the clip box; dynamics error on sides that stay up; datasets differ | open |",
        "",
    ]
    for env in GAP_ENVS:
        lines += [f"## {env}", ""]
        lines += _maze_section(env, views, classroom) if env.startswith("maze") else _loco_section(env, views)
        lines.append("")
    lines += ["## The datasets", ""]
    seen, datasets = set(), []
    for rec in records:
        for d in rec.get("datasets", []):
            if (d["env"], d["size"]) not in seen:
                seen.add((d["env"], d["size"]))
                datasets.append(d)
    lines += [
        "Our locomotion `medium` data beside D4RL's `-medium-v2` (the original benchmark's). The 200,000-transition "
        "hopper file gives identical statistics whether generated here or on the device.",
        "",
    ]
    lines += _dataset_table(datasets)
    lines += ["", "### Sources of D4RL's numbers", ""]
    for env, ref in D4RL_EPISODES.items():
        lines.append(
            f"* {env}: TensorFlow Datasets catalog, config `{ref['config']}`, `'train'` split: "
            f"{ref['episodes']:,} episodes ({ref['url']}; read in {ref['file']})."
        )
    lines += [
        "* The original benchmark trained on `d4rl:hopper-medium-v2` and `d4rl:walker2d-medium-v2` "
        "(`opcc/config.py` of github.com/koulanurag/opcc).",
        "* 1,000,000 transitions per D4RL medium dataset is assumed, not read from a source here; the "
        "derived mean episode length is 1,000,000 / episodes. No source found here gave D4RL's falls, "
        "their causes or the range of its torso angle.",
        "* D4RL's maze reward convention: github.com/Farama-Foundation/D4RL/issues/194 (\"maze2d rewards field is "
        "wrong\": `rewards[t]` is whether `observations[t]` is within 0.5 of the goal) and D4RL's "
        "`scripts/generation/relabel_maze2d_rewards.py`. The original benchmark's maze datasets were "
        "`d4rl:maze2d-open-v0` and `d4rl:maze2d-{umaze,medium,large}-v1` (`opcc/config.py`).",
        "",
        "## Detailed tables",
        "",
        "Means ± standard deviations over seeds. Value errors are in the queries' return units (steps in the goal disc "
        "for the mazes).",
        "",
    ]
    for env in GAP_ENVS:
        lines += [f"### {env}", ""]
        for v in views:
            decomp = v.rec.get("decompose", [])
            if any(r["env"] == env for r in decomp):
                lines += [f"**Profile {v.profile}, {v.device}.**", ""]
                lines += _decomp_table(decomp, env)
                lines += _falls_table(decomp, env)
                lines += _clip_table(decomp, env)
                lines.append("")
            ms = [m for m in v.rec.get("mazes", []) if m["env"] == env]
            if ms:
                lines += _maze_table(ms, f"profile {v.profile}, {v.device}") + [""]
    lines += ["### The reward offset on the other mazes", ""]
    for v in views:
        ms = [m for m in v.rec.get("mazes", []) if m["env"] not in GAP_ENVS]
        if ms:
            lines += _maze_table(ms, f"profile {v.profile}, {v.device}") + [""]
    lines += ["## Setup", ""]
    for rec in records:
        lines.append(
            f"* {rec['profile']} profile, seeds {', '.join(map(str, rec['seeds']))}, on {rec['device']} "
            f"(torch {rec['torch']}, Python {rec['python']}), {rec['wall_seconds']:.0f} s: `{rec['command']}`."
        )
    lines += [
        "* Decompositions use at most 300 original queries per environment (`select_profile_queries(..., n=300)`); the "
        "reward-offset test uses the profile's query subset (tiny 300, classroom 1,500; maze2d-large has 121).",
        "* GPU training is not bit-for-bit reproducible; the CPU run is (rerun: same numbers).",
    ]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["decompose", "datasets", "mazes"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--envs", nargs="+", default=list(GAP_ENVS), help="environments to decompose")
    parser.add_argument("--mazes", nargs="+", default=list(MAZES), help="mazes for the reward-offset test")
    parser.add_argument("--max-queries", type=int, default=300)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=str(DEFAULT_JSON))
    parser.add_argument("--md", default=str(DEFAULT_MD))
    parser.add_argument("--no-md", action="store_true")
    parser.add_argument("--extra", nargs="*", default=[], help="more result JSON files for the markdown")
    parser.add_argument("--render", action="store_true", help="only rewrite the markdown from --json (+ --extra)")
    args = parser.parse_args(argv)

    if args.render:
        records = [json.loads(Path(p).read_text()) for p in [args.json, *args.extra]]
        Path(args.md).write_text(render(records))
        print(f"wrote {args.md}")
        return 0

    import torch

    torch.set_num_threads(args.threads)
    from opcc_edu.config import get_profile

    t_start = time.perf_counter()

    def log(line: str) -> None:
        print(f"{time.perf_counter() - t_start:8.1f}s {line}", flush=True)

    record = {
        "what": "evidence behind the gaps between our ensemble and the paper on the original queries",
        "command": " ".join(shlex.quote(a) for a in ["python", *sys.argv]),
        "profile": get_profile().name,
        "seeds": args.seeds,
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else f"cpu ({os.cpu_count()} cores)",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    log(f"profile {record['profile']}, parts {args.parts}, seeds {args.seeds}, device {record['device']}")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)

    def flush() -> None:
        record["wall_seconds"] = time.perf_counter() - t_start
        out.write_text(json.dumps(record, indent=1) + "\n")

    if "datasets" in args.parts:
        record["datasets"] = run_datasets(log, [e for e in args.envs if e in LOCOMOTION])
        flush()

    def keep(key):
        def save(part):
            record[key] = list(part)
            flush()

        return save

    if "decompose" in args.parts:
        record["decompose"] = run_decompose(
            args.envs, args.seeds, args.max_queries, args.device, log, keep("decompose")
        )
        flush()
    if "mazes" in args.parts:
        record["mazes"] = run_mazes(args.mazes, args.seeds, args.device, log, keep("mazes"))
        flush()
    flush()
    log(f"wrote {out}")
    if not args.no_md:
        records = [record] + [json.loads(Path(p).read_text()) for p in args.extra]
        Path(args.md).write_text(render(records))
        log(f"wrote {args.md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
