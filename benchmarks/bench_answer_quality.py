"""Answer quality of the paper's baseline against its targets, with the error decomposed.

Two stages, so the expensive part runs once and in the background:

``python benchmarks/bench_answer_quality.py run [--profile classroom] [--seeds 3] [ENV ...]``
    For each environment and seed: train (or load from the cache) the default ensemble of the
    profile, then, on the ``paper`` and the ``hard`` query sets, decompose the value error
    (:func:`opcc_edu.lab.diagnose.decompose_value_error`: learned reward on true states,
    true reward on model states, one-step and open-loop error) and record the no-model
    heuristic's answers. Everything is written to ``.bench-cache/answer_quality/`` (not
    committed: it holds every member's value of every query side). Training time and the
    time of the first (cold-cache) answer pass are recorded per seed.

``python benchmarks/bench_answer_quality.py report [--profile classroom]``
    Scores every recorded run with :func:`opcc_edu.metrics.evaluate` for EV, PCI and U-PCI,
    aggregates seeds as mean ± 95% t-interval, checks each target of the answer-quality
    issue and writes ``benchmarks/results/answer_quality_<profile>.md``. Paper values are read
    from ``opcc_edu/assets/paper_results.csv`` (Tables 1 and 2), never typed in.

``--train-steps N`` (both stages) trains the ensembles for N gradient steps instead of the
profile's, all else default: its runs go to ``.bench-cache/answer_quality/<profile>-steps<N>/``
and its report to ``answer_quality_<profile>-steps<N>.md``, so a longer fit is measured beside
the default without mixing with it.

``--dataset NAME`` (run stage) measures another dataset of the environments named (the
locomotion targets name random, medium and expert), cached as
``<env>__<dataset>__seed<S>__<recipe>``. The report adds one paper-set row and one target per
dataset and a table of the hard sets on other datasets; every other section reads each
environment's default dataset. ``--redo`` recomputes recorded runs (the ensembles come from the
cache; the first run's training time is kept).

The variant "true reward on model states" is what ``reward="predefined"`` computes on the
mazes (same trained weights: the maze model's reward column is not used in that mode).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_record import full_command, provenance_record, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".bench-cache" / "answer_quality"
OUT = ROOT / "benchmarks" / "results"
MAZES = ("maze2d-open", "maze2d-umaze", "maze2d-medium", "maze2d-large")
LOCOMOTION = ("halfcheetah", "hopper", "walker2d")
RECIPES = ("paper", "hard")
DECOMPOSE = 300
"""Queries per set (a fixed, horizon-stratified subset) whose value error is decomposed."""
SPARSE = 1e-3
"""A maze patch (0.2 m square) is sparse when it holds at most this share of the dataset."""


def _label(profile: str, train_steps: int | None) -> str:
    return profile if train_steps is None else f"{profile}-steps{train_steps}"


def _stem(label: str, env: str, seed: int, recipe: str, dataset: str | None = None) -> Path:
    """Cache stem of one run; the dataset appears in the name only when it is not the default."""
    from opcc_edu.datasets import DEFAULT_DATASET

    tag = "" if dataset in (None, DEFAULT_DATASET[env]) else f"__{dataset}"
    return CACHE / label / f"{env}{tag}__seed{seed}__{recipe}"


def run(
    profile: str,
    envs: list[str],
    seeds: int,
    dataset: str | None,
    train_steps: int | None = None,
    redo: bool = False,
) -> None:
    import torch

    from opcc_edu.baselines import EnsembleConfig
    from opcc_edu.baselines.cache import get_or_train_ensemble
    from opcc_edu.baselines.estimate import estimate_values, select_profile_queries
    from opcc_edu.baselines.heuristic import heuristic_answers
    from opcc_edu.config import use_profile
    from opcc_edu.datasets import DEFAULT_DATASET, dataset_names, load_dataset
    from opcc_edu.lab.diagnose import decompose_value_error
    from opcc_edu.queries import load_queries

    if dataset is not None:
        for env in envs:
            if dataset not in dataset_names(env):
                raise SystemExit(
                    f"--dataset {dataset!r} is not a dataset of {env}; valid choices: {', '.join(dataset_names(env))}"
                )
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))  # 2 unless told otherwise
    label = _label(profile, train_steps)
    overrides = {} if train_steps is None else {"train_steps": train_steps}
    with use_profile(profile):
        for env in envs:
            name = dataset or DEFAULT_DATASET[env]
            t0 = time.perf_counter()
            data = load_dataset(env, name, progress=False)
            data_seconds = time.perf_counter() - t0
            for seed in range(seeds):
                old_meta = {}
                for r in RECIPES:
                    path = _stem(label, env, seed, r, name).with_suffix(".json")
                    if path.exists():
                        old_meta = json.loads(path.read_text())
                if old_meta and redo:
                    print(f"{env} seed {seed}: recorded, recomputing (--redo)", flush=True)
                elif all((_stem(label, env, seed, r, name).with_suffix(".json")).exists() for r in RECIPES):
                    print(f"{env} seed {seed}: done already", flush=True)
                    continue
                config = EnsembleConfig.from_profile(seed=seed, **overrides)
                t0 = time.perf_counter()
                model = get_or_train_ensemble(env, name, config, progress=False)
                load_seconds = time.perf_counter() - t0
                for recipe in RECIPES:
                    queries = select_profile_queries(load_queries(env, recipe))
                    t0 = time.perf_counter()
                    values_a, values_b = estimate_values(model, queries, seed=seed, progress=False)
                    answer_seconds = time.perf_counter() - t0
                    # The decomposition replays every side in the simulator and twice more in the
                    # model: a fixed subset of DECOMPOSE queries keeps it affordable on a CPU.
                    subset = select_profile_queries(queries, DECOMPOSE, seed=0)
                    t0 = time.perf_counter()
                    dec = decompose_value_error(model, subset, dataset=data, seed=seed)
                    decompose_seconds = time.perf_counter() - t0
                    heuristic = heuristic_answers(queries)
                    stem = _stem(label, env, seed, recipe, name)
                    stem.parent.mkdir(parents=True, exist_ok=True)
                    arrays = {
                        "model": np.concatenate([values_a, values_b]).astype(np.float32),
                        "target": np.asarray(queries.target, dtype=np.int64),
                        "horizon": np.concatenate([queries.horizon, queries.horizon]),
                        "same_state": np.concatenate([queries.same_state, queries.same_state]),
                        "heuristic": np.asarray(heuristic.prediction, dtype=np.int64),
                        "sub_model": dec.model.astype(np.float32),
                        "learned_on_true": dec.model_reward_true_states.astype(np.float32),
                        "sub_true": dec.true,
                        "sub_target": dec.target,
                        "sub_same_state": dec.same_state,
                    }
                    if dec.true_reward_model_states is not None:
                        arrays["true_on_model"] = dec.true_reward_model_states.astype(np.float32)
                    if dec.model_true_termination is not None:
                        arrays["true_termination"] = dec.model_true_termination.astype(np.float32)
                        arrays["sub_true_steps"] = dec.true_steps
                    np.savez_compressed(stem.with_suffix(".npz"), **arrays)
                    meta = {
                        "env": env,
                        "dataset": name,
                        "seed": seed,
                        "recipe": recipe,
                        "profile": profile,
                        "train_steps": config.train_steps,
                        "n_queries": len(queries),
                        "cache_hit": bool(model.info.get("cache_hit", False)),
                        "train_seconds": float(model.info.get("train_seconds", 0.0)),
                        "redone": bool(old_meta and redo),
                        "load_or_train_seconds": load_seconds,
                        "dataset_seconds": data_seconds,
                        "answer_seconds": answer_seconds,
                        "decompose_seconds": decompose_seconds,
                        "decompose_queries": len(subset),
                        "shares": dec.shares(),
                        "one_step": {k: np.asarray(v).tolist() for k, v in (dec.one_step or {}).items()},
                        "open_loop": dec.open_loop,
                        # Where the learned reward is wrong (mazes): the query steps, dataset
                        # transitions and reward error in patches holding <= 0.1% of the data each.
                        "sparse_patches": (
                            dec.reward_map(dataset=data).error_share_in_sparse_patches(SPARSE)
                            if dec.step_xy is not None
                            else None
                        ),
                        "machine": f"{platform.machine()}, {torch.get_num_threads()} threads",
                        "command": full_command(["python", *sys.argv]),
                    }
                    if old_meta and redo and meta["cache_hit"]:
                        # a recomputation loads the ensemble the first run trained: keep that
                        # run's (cold) training time, which is what the report's column shows
                        meta["cache_hit"] = old_meta["cache_hit"]
                        meta["train_seconds"] = old_meta["train_seconds"]
                    stem.with_suffix(".json").write_text(json.dumps(meta, indent=1))
                    print(
                        f"{env} ({name}) seed {seed} {recipe}: EV loss "
                        f"{np.mean((values_a.mean(1) < values_b.mean(1)) != queries.target):.3f}"
                        f" train {meta['train_seconds']:.0f}s answer {answer_seconds:.0f}s"
                        f" decompose {decompose_seconds:.0f}s",
                        flush=True,
                    )


# ----------------------------------------------------------------------------------------------
def _scores(arr: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    from opcc_edu.confidence import compute_confidence
    from opcc_edu.metrics import evaluate

    n = len(arr["target"])
    out = {}
    for name in ("ev", "pci", "upci"):
        pred, conf = compute_confidence(name, arr["model"][:n].astype(np.float64), arr["model"][n:].astype(np.float64))
        out[name] = evaluate(pred, arr["target"], conf)
    return out


def _ev_loss(values: np.ndarray, target: np.ndarray, mask: np.ndarray | None = None) -> float:
    from opcc_edu.confidence import compute_confidence

    n = len(target)
    pred, _ = compute_confidence("ev", values[:n].astype(np.float64), values[n:].astype(np.float64))
    mask = np.ones(n, bool) if mask is None else mask
    return float((pred[mask] != target[mask]).mean())


def _sub_loss(arr: dict[str, np.ndarray], variant: str, same_state: bool = False) -> float:
    """EV loss of one decomposition variant on the decomposed subset (its same-state part)."""
    n = len(arr["sub_target"])
    return _ev_loss(arr[variant], arr["sub_target"], arr["sub_same_state"][:n] if same_state else None)


def _paper_value(table: int, env: str, dataset: str, metric: str = "loss") -> float | None:
    from opcc_edu.lab.experiments import paper_results

    rows = paper_results()
    rows = rows[
        (rows["table"] == table)
        & (rows["environment"] == env)
        & (rows["dataset"] == dataset)
        & (rows["metric"] == metric)
    ]
    return float(rows["mean"].iloc[0]) if len(rows) else None


def _held_back(
    what: str,
    ev: float,
    true_reward: list[float],
    learned_on_true: list[float],
    bound: float,
    true_termination: list[float] | None = None,
) -> str:
    """One sentence: which learned part holds a missed target back, from the decomposed subset."""
    text = f"{what}: EV loss {ev:.3f} on the decomposed subset (bound {bound:.3f})"
    if ev <= bound:
        text += " -- the subset itself is within the bound, so the miss of the mean lies outside it"
    if true_reward:
        tr = float(np.mean(true_reward))
        text += f"; {tr:.3f} with the true reward paid on the model's states"
        if tr <= bound:
            text += " (within the bound: the learned reward holds it back, the learned dynamics would pass)"
        else:
            text += " (still above the bound: the learned dynamics hold it back too)"
    lt = float(np.mean(learned_on_true))
    text += f"; {lt:.3f} with the learned reward paid on the simulator's states"
    if not true_reward and lt <= bound:
        text += " (within the bound: the learned reward would pass, so the learned dynamics hold it back)"
    elif not true_reward:
        text += " (above the bound too)"
    if true_termination:
        tt = float(np.mean(true_termination))
        text += f"; {tt:.3f} with the model's rollouts stopped where the simulator's stopped"
        text += (
            " (within the bound: the model's missing or false terminations hold it back)"
            if tt <= bound
            else " (still above the bound: the model's states and rewards before the end hold it back too)"
        )
    return text + "."


SCORED = ("aurcc", "loss", "expected_aurcc", "selective_gain", "auroc")
"""The scores of :func:`opcc_edu.metrics.evaluate` the report shows, kept per run and confidence."""


def _derive(arr: dict[str, np.ndarray]) -> dict[str, object]:
    """Every number the report reads from one run's arrays (member values of every query side):
    losses of EV and of the decomposition's variants, the heuristic's loss, and the scores."""
    n = len(arr["target"])
    sub_same = bool(arr["sub_same_state"].any())

    def sub(variant: str, same_state: bool = False) -> float | None:
        if variant not in arr or (same_state and not sub_same):
            return None
        return _sub_loss(arr, variant, same_state)

    scores = _scores(arr)
    return {
        "ev_loss": _ev_loss(arr["model"], arr["target"]),
        "heuristic_loss": float(np.mean(arr["heuristic"] != arr["target"])),
        "sub_ev": _sub_loss(arr, "sub_model"),
        "learned_on_true": _sub_loss(arr, "learned_on_true"),
        "true_on_model": sub("true_on_model"),
        "true_termination": sub("true_termination"),
        "same_state_ev": (
            _ev_loss(arr["model"], arr["target"], arr["same_state"][:n]) if arr["same_state"].any() else None
        ),
        "same_true_on_model": sub("true_on_model", same_state=True),
        "same_true_termination": sub("true_termination", same_state=True),
        "scores": {name: {k: float(s[k]) for k in SCORED if k in s} for name, s in scores.items()},
    }


def collect(profile: str, train_steps: int | None = None) -> dict:
    """The raw record of the report: per recorded run its metadata and :func:`_derive`'s numbers,
    the paper's values it is set against, and how the record was made."""
    from opcc_edu.config import get_profile

    label = _label(profile, train_steps)
    runs, paper = [], {}
    for path in sorted((CACHE / label).glob("*.json")):
        meta = json.loads(path.read_text())
        with np.load(path.with_suffix(".npz")) as npz:
            arr = {k: npz[k] for k in npz.files}
        runs.append({"meta": meta, "derived": _derive(arr)})
        table = 2 if meta["env"] in MAZES else 1
        paper[f"{meta['env']}/{meta['dataset']}"] = _paper_value(table, meta["env"], meta["dataset"])
    if not runs:
        raise SystemExit(f"no recorded runs under {CACHE / label}; run the 'run' stage first")
    return {
        **provenance_record(),
        "profile": profile,
        "train_steps": train_steps,
        "profile_train_steps": get_profile(profile).dynamics_train_steps,
        "decompose": DECOMPOSE,
        "sparse": SPARSE,
        "paper": paper,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "runs": runs,
    }


def report(profile: str, train_steps: int | None = None) -> Path:
    """Collect the recorded runs into ``answer_quality_<label>.json`` and render its report."""
    from opcc_edu.io import atomic_write_text

    record = collect(profile, train_steps)
    out = OUT / f"answer_quality_{_label(profile, train_steps)}.md"
    OUT.mkdir(parents=True, exist_ok=True)
    write_json(out.with_suffix(".json"), record)
    atomic_write_text(out, render(record))
    print(out.read_text())
    return out


def render(record: dict) -> str:
    """The report, from the raw record alone (:func:`collect`); it computes nothing but means,
    intervals and the targets' comparisons."""
    from opcc_edu.datasets import DEFAULT_DATASET
    from opcc_edu.metrics import format_mean_ci, mean_confidence_interval

    profile, train_steps = record["profile"], record["train_steps"]
    # runs: the default dataset of each environment, every section; other / other_hard: another
    # dataset's paper set (one more row of the paper-set table and one more target) and hard set
    # (a table of its own).
    runs: dict[tuple[str, str], list[tuple[dict, dict]]] = {}
    other: dict[tuple[str, str], list[tuple[dict, dict]]] = {}
    other_hard: dict[tuple[str, str], list[tuple[dict, dict]]] = {}
    for run in record["runs"]:
        meta, d = run["meta"], run["derived"]
        if meta["dataset"] == DEFAULT_DATASET[meta["env"]]:
            runs.setdefault((meta["env"], meta["recipe"]), []).append((meta, d))
        elif meta["recipe"] == "paper":
            other.setdefault((meta["env"], meta["dataset"]), []).append((meta, d))
        else:
            other_hard.setdefault((meta["env"], meta["dataset"]), []).append((meta, d))

    metas = [run["meta"] for run in record["runs"]]

    def ci(values: list[float]) -> str:
        return format_mean_ci(*mean_confidence_interval(np.asarray(values, dtype=float)))

    def given(entries: list[tuple[dict, dict]], key: str) -> list[float]:
        return [d[key] for _, d in entries if d[key] is not None]

    lines = [
        f"# Answer quality of the default baseline ({profile} profile"
        + ("" if train_steps is None else f", {train_steps:,} training steps")
        + ")",
        "",
        "Written by `python benchmarks/bench_answer_quality.py report --profile "
        f"{profile}"
        + ("" if train_steps is None else f" --train-steps {train_steps}")
        + "` from runs recorded by its `run` stage (seeds 0..S-1, the profile's default "
        "ensemble, EV unless named"
        + (
            ""
            if train_steps is None
            else f", trained for {train_steps:,} gradient steps instead of the profile's "
            f"{record['profile_train_steps']:,}"
        )
        + "). Cells are mean ± 95% t-interval over seeds.",
        "",
        f"Raw numbers: `answer_quality_{_label(profile, train_steps)}.json` (per run its losses, scores "
        f"and decomposition; report at commit `{str(record['git_commit'])[:12]}`). Runs recorded by: "
        + "; ".join(f"`{c}`" for c in sorted({m.get("command") or "(not recorded)" for m in metas}))
        + ".",
        "",
    ]
    envs = sorted({env for env, _ in runs}, key=lambda e: (e not in MAZES, e))
    seeds_seen = {env: sorted({m["seed"] for m, _ in runs.get((env, "paper"), [])}) for env in envs}
    lines += [f"Seeds per environment: {', '.join(f'{e} {len(s)}' for e, s in seeds_seen.items())}."]
    if other:
        lines += [
            "Other datasets (seeds; the paper and hard sets): "
            + ", ".join(f"{e} {d} {len(v)}" for (e, d), v in sorted(other.items()))
            + ". Every other section reads the default dataset of each environment "
            "(mazes 1m, locomotion medium)."
        ]
    lines += [""]

    # --- paper sets ------------------------------------------------------------------------
    lines += [
        "## Paper-recipe query sets",
        "",
        "| environment | EV loss | paper (Table 1/2) | target | met | heuristic | EV loss, decomposed subset | "
        "true reward on model states | learned reward on true states | simulator's termination on model rollouts |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    held: list[str] = []
    paper_rows = [(env, runs.get((env, "paper"), [])) for env in envs]
    paper_rows += [(env, other[(env, d)]) for env, d in sorted(other, key=lambda k: (k[0] not in MAZES, k))]
    paper_rows.sort(key=lambda row: (row[0] not in MAZES, row[0]))
    for env, entries in paper_rows:
        if not entries:
            continue
        dataset = entries[0][0]["dataset"]
        paper = record["paper"][f"{env}/{dataset}"]
        margin = 0.03 if env in MAZES else 0.05
        ev, sub_ev, lt = given(entries, "ev_loss"), given(entries, "sub_ev"), given(entries, "learned_on_true")
        tr, tt = given(entries, "true_on_model"), given(entries, "true_termination")
        heur = given(entries, "heuristic_loss")
        target = None if paper is None else paper + margin
        met = "—" if target is None else ("yes" if np.mean(ev) <= target else "no")
        verdicts.append((f"paper set, {env} ({dataset}): EV loss ≤ paper + {margin}", met))
        if met == "no":
            held.append(_held_back(f"paper set, {env} ({dataset})", np.mean(sub_ev), tr, lt, target, tt))
        lines.append(
            f"| {env} ({dataset}) | {ci(ev)} | {paper if paper is not None else 'n/a'} | "
            f"{'n/a' if target is None else f'{target:.3f}'} | {met} | {ci(heur)} | {ci(sub_ev)} | "
            f"{ci(tr) if tr else 'n/a'} | {ci(lt)} | {ci(tt) if tt else 'n/a'} |"
        )

    # --- hard sets -------------------------------------------------------------------------
    lines += [
        "",
        "## Hard query sets",
        "",
        "| environment | EV loss | heuristic | EV below heuristic by ≥ 0.05 | same-state EV loss | "
        "same-state, true reward on model states (subset) | same-state, simulator's termination (subset) |",
        "|---|---|---|---|---|---|---|",
    ]
    for env in envs:
        entries = runs.get((env, "hard"), [])
        if not entries:
            continue
        ev, heur = given(entries, "ev_loss"), given(entries, "heuristic_loss")
        gap_met = "yes" if np.mean(heur) - np.mean(ev) >= 0.05 else "no"
        if gap_met == "no":
            sub, lt_all = given(entries, "sub_ev"), given(entries, "learned_on_true")
            tr_all, tt_all = given(entries, "true_on_model"), given(entries, "true_termination")
            held.append(_held_back(f"hard set, {env}", np.mean(sub), tr_all, lt_all, np.mean(heur) - 0.05, tt_all))
        verdicts.append((f"hard set, {env}: EV ≥ 0.05 below the heuristic", gap_met))
        same = given(entries, "same_state_ev")
        same_tr, same_tt = given(entries, "same_true_on_model"), given(entries, "same_true_termination")
        if env in MAZES and same:
            verdicts.append((f"hard set, {env}: same-state EV loss ≤ 0.30", "yes" if np.mean(same) <= 0.30 else "no"))
        lines.append(
            f"| {env} | {ci(ev)} | {ci(heur)} | {gap_met} | {ci(same) if same else 'n/a'} | "
            f"{ci(same_tr) if same_tr else 'n/a'} | {ci(same_tt) if same_tt else 'n/a'} |"
        )

    if other_hard:
        lines += [
            "",
            "Hard sets answered by ensembles trained on other datasets (no target; the same queries, "
            "the same heuristic):",
            "",
            "| environment | dataset | seeds | EV loss | heuristic | same-state EV loss | "
            "same-state, simulator's termination (subset) |",
            "|---|---|---|---|---|---|---|",
        ]
        for (env, dataset), entries in sorted(other_hard.items()):
            ev, heur = given(entries, "ev_loss"), given(entries, "heuristic_loss")
            same, same_tt = given(entries, "same_state_ev"), given(entries, "same_true_termination")
            lines.append(
                f"| {env} | {dataset} | {len(entries)} | {ci(ev)} | {ci(heur)} | {ci(same)} | "
                f"{ci(same_tt) if same_tt else 'n/a'} |"
            )

    # --- selective gain ---------------------------------------------------------------------
    lines += ["", "## Confidence: the paper's AURCC and the tie-fair selective gain (paper sets)", ""]
    probe = runs[next(iter(runs))][0][1]["scores"]["ev"]
    has_gain = "selective_gain" in probe
    header = "| environment | confidence | AURCC | loss |"
    if has_gain:
        header += " expected AURCC | selective gain | AUROC |"
    lines += [header, "|" + "---|" * (header.count("|") - 1)]
    gain_envs = 0
    for env in envs:
        entries = runs.get((env, "paper"), [])
        if not entries:
            continue
        scored = [d["scores"] for _, d in entries]
        best_ok = False
        for name in ("ev", "pci", "upci"):
            aurcc = ci([s[name]["aurcc"] for s in scored])
            row = f"| {env} | {name.upper()} | {aurcc} | {ci([s[name]['loss'] for s in scored])} |"
            if has_gain:
                gains = [s[name]["selective_gain"] for s in scored]
                mean, half = mean_confidence_interval(np.asarray(gains))
                best_ok |= bool(mean >= 0.3 and not np.isnan(half) and mean - half > 0)
                row += (
                    f" {ci([s[name]['expected_aurcc'] for s in scored])} | {ci(gains)} |"
                    f" {ci([s[name]['auroc'] for s in scored])} |"
                )
            lines.append(row)
        gain_envs += int(best_ok)
    if has_gain:
        claim = f"selective gain ≥ 0.3 with interval above 0 in ≥ 6 of 7 environments ({gain_envs} here)"
        verdicts.append((claim, "yes" if gain_envs >= 6 else "no"))

    # --- decomposition and timing -------------------------------------------------------------
    lines += [
        "",
        "## Where the value error comes from (paper sets, mean over seeds)",
        "",
        "Decomposed subset: a fixed, horizon-stratified subset of "
        f"{record['decompose']} queries per set. Errors are in return units (sum of rewards over the horizon).",
        "",
        "| environment | mean abs value error | reward part | dynamics part | one-step obs error / scale | "
        "one-step reward error / scale | open-loop error at 10 / 50 steps | train s (cold) | answer s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for env in envs:
        entries = runs.get((env, "paper"), [])
        if not entries:
            continue
        metas = [m for m, _ in entries]
        share = {k: np.mean([m["shares"][k] for m in metas]) for k in ("total", "reward", "dynamics")}
        one = metas[0]["one_step"]
        scale = np.maximum(np.asarray(one["obs_scale"]), 1e-12) if one else None
        obs_ratio = float(np.mean(np.asarray(one["obs"]) / scale)) if one else float("nan")
        rew_ratio = one["reward"] / max(one["reward_scale"], 1e-12) if one else float("nan")
        ol = metas[0]["open_loop"]
        cold = [m["train_seconds"] for m in metas if not m["cache_hit"]]
        lines.append(
            f"| {env} | {share['total']:.2f} | {share['reward']:.2f} | {share['dynamics']:.2f} | {obs_ratio:.2f} | "
            f"{rew_ratio:.2f} | {ol.get('10', float('nan')):.3f} / {ol.get('50', float('nan')):.3f} | "
            f"{np.mean(cold) if cold else float('nan'):.0f} | {np.mean([m['decompose_seconds'] for m in metas]):.0f} |"
        )

    # --- where the learned reward is wrong (mazes) ---------------------------------------------
    sparse_rows = []
    for env in envs:
        for recipe in RECIPES:
            recorded = [m["sparse_patches"] for m, _ in runs.get((env, recipe), []) if m.get("sparse_patches")]
            if recorded:
                keys = ("data_share", "step_share", "error_share")
                mean = {k: float(np.mean([r[k] for r in recorded])) for k in keys}
                sparse_rows.append(
                    f"| {env} | {recipe} | {len(recorded)} | {mean['data_share']:.2%} | {mean['step_share']:.0%} | "
                    f"{mean['error_share']:.0%} |"
                )
    if sparse_rows:
        lines += [
            "",
            "## Where the learned reward is wrong (mazes, decomposed subset)",
            "",
            "`ValueErrorDecomposition.reward_map` bins every simulator step of the query trajectories "
            "into 0.2 m patches by the position the reward is paid for. A patch is sparse when it holds "
            f"at most {record['sparse']:.1%} of the model's dataset. Columns: the sparse patches' share of the "
            "dataset, of the query steps, and of the total |learned - true reward| (mean over the "
            "seeds that recorded it).",
            "",
            "| environment | queries | seeds | dataset share | query-step share | reward-error share |",
            "|---|---|---|---|---|---|",
            *sparse_rows,
        ]

    if held:
        lines += ["", "## What holds the missed targets back", ""]
        lines += [f"- {line}" for line in held]
    lines += ["", "## Targets", "", "| target | met |", "|---|---|"]
    lines += [f"| {t} | {m} |" for t, m in verdicts]
    lines += ["", f"Python {record['python']}, {record['platform']}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="stage", required=True)
    r = sub.add_parser("run")
    r.add_argument("envs", nargs="*", default=[*MAZES, *LOCOMOTION])
    r.add_argument("--profile", default="classroom")
    r.add_argument("--seeds", type=int, default=3)
    r.add_argument("--dataset", default=None)
    r.add_argument(
        "--redo",
        action="store_true",
        help="recompute recorded runs (the ensembles come from the cache; the first training time is kept)",
    )
    p = sub.add_parser("report")
    p.add_argument("--profile", default="classroom")
    for stage in (r, p):
        stage.add_argument("--train-steps", type=int, default=None, help="gradient steps (default: the profile's)")
    args = parser.parse_args(argv)
    if args.train_steps is not None and args.train_steps < 1:
        parser.error(f"--train-steps must be >= 1, got {args.train_steps}")
    if args.stage == "run":
        run(args.profile, args.envs, args.seeds, args.dataset, args.train_steps, args.redo)
    else:
        report(args.profile, args.train_steps)


if __name__ == "__main__":
    main()
