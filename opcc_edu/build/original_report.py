"""How far today's simulators agree with the original benchmark's labels, and why they differ.

:func:`agreement` compares the original targets and values of one environment's released
queries with the same queries labelled again today (:func:`opcc_edu.build.original.relabel_original`):
the share of queries whose answer (the sign of ``value_b - value_a``) is unchanged, overall, by
horizon and by quartile of the original value gap, the correlation of the values and the median
``|Δ value| / h``. Three experiments test the causes found in the code:

* :func:`alive_bonus_values` -- gym's v2 Hopper and Walker2d paid the alive bonus on every step,
  the step of a fall included; gymnasium's v5 pays it only while healthy. Adding 1 to every side
  that ended in a fall gives the values v2's rule would have paid.
* :func:`friction_values` -- Walker2d-v5 sets both feet's friction to 1.9; v2 had 0.9 on the
  right foot. Relabelling with 0.9 there tests that change.
* :func:`perturbed_values` -- how much the answers move when every start state moves by 1e-9:
  a chaotic system amplifies any tiny numerical difference (such as a new MuJoCo version's),
  and answers at long horizons then disagree for no modelling reason.

:func:`agreement_table` and :func:`cause_table` format them for
``benchmarks/results/original_benchmark.md`` (``scripts/relabel_original_benchmark.py``).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..queries import QuerySet, query_policies, recompute_values
from ..simulate import simulate_trajectories
from ..simulate.rollout import _simulator


def agreement(original: QuerySet, relabelled: QuerySet) -> dict[str, Any]:
    """Agreement of two labellings of the same N queries (see the module docstring).

    Returns:
        ``{"n", "agreement", "by_horizon": {h: share}, "by_gap_quartile": [4 shares],
        "gap_quartile_edges", "correlation", "median_delta_per_step", "exact"}`` (quartiles of
        ``original``'s gap; correlation and deltas over both sides' 2N values).

    Raises:
        ValueError: the two sets do not hold the same queries (length or horizons differ).
    """
    if len(original) != len(relabelled) or not np.array_equal(original.horizon, relabelled.horizon):
        raise ValueError("original and relabelled must hold the same queries")
    same = original.target == relabelled.target
    gap = original.gap
    edges = np.quantile(gap, [0.25, 0.5, 0.75])
    quartile = np.searchsorted(edges, gap, side="right")
    values_o = np.concatenate([original.value_a, original.value_b])
    values_r = np.concatenate([relabelled.value_a, relabelled.value_b])
    horizon = np.concatenate([original.horizon, original.horizon])
    return {
        "n": len(original),
        "agreement": float(same.mean()),
        "by_horizon": {int(h): float(same[original.horizon == h].mean()) for h in original.horizons},
        "by_gap_quartile": [float(same[quartile == q].mean()) for q in range(4)],
        "gap_quartile_edges": [float(e) for e in edges],
        "correlation": float(np.corrcoef(values_o, values_r)[0, 1]),
        "median_delta_per_step": float(np.median(np.abs(values_o - values_r) / horizon)),
        "exact": float(np.mean(np.isclose(values_o, values_r, rtol=0.0, atol=1e-6))),
    }


def _targets(value_a: np.ndarray, value_b: np.ndarray) -> np.ndarray:
    return (value_a < value_b).astype(np.int8)


def _relabel(queries: QuerySet, states_a: np.ndarray | None = None, states_b: np.ndarray | None = None):
    """Today's values of ``queries``, optionally from other start states."""
    if states_a is None:
        return recompute_values(queries)
    return recompute_values(dataclasses.replace(queries, state_a=states_a, state_b=states_b))


def alive_bonus_values(queries: QuerySet) -> tuple[np.ndarray, np.ndarray]:
    """Today's values with v2's alive bonus on the step of a fall (1 more for each side that fell)."""
    out = []
    for side in ("a", "b"):
        traj = simulate_trajectories(
            queries.env_name,
            getattr(queries, f"state_{side}"),
            query_policies(queries),
            getattr(queries, f"policy_{side}") - 1,
            queries.horizon,
            getattr(queries, f"action_{side}"),
        )
        fell = traj.valid.sum(axis=1) < queries.horizon
        out.append(traj.returns + fell)
    return out[0], out[1]


def friction_values(queries: QuerySet, geom: str = "foot_geom", friction: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
    """Today's values with one geom's sliding friction set to ``friction`` (v2's right foot)."""
    import mujoco

    # The simulator the rollouts below will reuse: run_rows asks for min(batch size 1024, 2N) copies.
    sim = _simulator(queries.env_name, min(1024, 2 * len(queries)))
    index = mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_GEOM, geom)
    if index < 0:
        raise ValueError(f"{queries.env_name} has no geom {geom!r}")
    before = float(sim.model.geom_friction[index, 0])
    sim.model.geom_friction[index, 0] = friction
    try:
        return _relabel(queries)
    finally:
        sim.model.geom_friction[index, 0] = before


def perturbed_values(queries: QuerySet, scale: float = 1e-9, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Today's values from start states moved by uniform noise of size ``scale`` (positions and velocities)."""
    rng = np.random.default_rng(seed)
    noise = lambda s: s + rng.uniform(-scale, scale, size=s.shape)  # noqa: E731
    return _relabel(queries, noise(queries.state_a), noise(queries.state_b))


def cause_agreement(
    original: QuerySet, values: Callable[[QuerySet], tuple[np.ndarray, np.ndarray]], reference: QuerySet | None = None
) -> dict[str, Any]:
    """:func:`agreement` of ``reference`` (default: ``original``) with the values of one experiment."""
    value_a, value_b = values(original)
    alt = dataclasses.replace(original, value_a=value_a, value_b=value_b, target=_targets(value_a, value_b))
    return agreement(original if reference is None else reference, alt)


#: The experiments' names, as the report's "labels compared" column prints them.
MOVED_1E9 = "today vs starts moved by 1e-9 (today)"
MOVED_1E6 = "today vs starts moved by 1e-6 (today)"
TODAY = "original vs today"
ALIVE = "original vs today with v2's alive bonus"
FRICTION = "original vs today with v2's right-foot friction 0.9"


def cause_experiments(env_name: str, original: QuerySet, today: QuerySet) -> dict[str, dict[str, Any]]:
    """The experiments that test each cause of disagreement in one environment, in the report's
    order: ``{experiment name: agreement row}`` (:func:`agreement`, :func:`cause_agreement`).

    Start states moved by 1e-9 (every environment) and 1e-6 (HalfCheetah), original against today
    (locomotion), v2's alive bonus (Hopper, Walker2d) and v2's right-foot friction (Walker2d).
    """
    from ..envs import get_spec

    rows = {MOVED_1E9: cause_agreement(today, perturbed_values)}
    if env_name == "halfcheetah":
        rows[MOVED_1E6] = cause_agreement(today, lambda q: perturbed_values(q, scale=1e-6))
    if not get_spec(env_name).is_maze:
        rows[TODAY] = agreement(original, today)
    if env_name in ("hopper", "walker2d"):
        rows[ALIVE] = cause_agreement(today, alive_bonus_values, reference=original)
    if env_name == "walker2d":
        rows[FRICTION] = cause_agreement(today, friction_values, reference=original)
    return rows


def _percent(x: float) -> str:
    return f"{100 * x:.2f}%"


def _by_horizon(row: Mapping[str, Any], horizons: list[int]) -> list[str]:
    return [_percent(row["by_horizon"][h]) if h in row["by_horizon"] else "–" for h in horizons]


def agreement_table(rows: Mapping[str, Mapping[str, Any]]) -> str:
    """Markdown table of :func:`agreement` per environment."""
    horizons = sorted({h for row in rows.values() for h in row["by_horizon"]})
    head = ["environment", "queries", "agreement", *(f"h={h}" for h in horizons)]
    head += ["gap Q1", "Q2", "Q3", "Q4", "correlation", "median abs(Δ)/h", "values equal"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for env, row in rows.items():
        cells = [env, str(row["n"]), _percent(row["agreement"]), *_by_horizon(row, horizons)]
        cells += [_percent(q) for q in row["by_gap_quartile"]]
        cells += [f"{row['correlation']:.4f}", f"{row['median_delta_per_step']:.3f}", _percent(row["exact"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def find_original_runs(profile: str = "tiny", start: str | os.PathLike | None = None) -> Path | None:
    """The repository's committed answers to the original queries at a profile,
    ``results/original/<profile>``, searched from ``start`` (default: the working directory)
    upwards, then next to the package's source tree; ``None`` where there are none (a wheel)."""
    here = Path(start if start is not None else Path.cwd()).resolve()
    for folder in (here, *here.parents, Path(__file__).resolve().parents[2]):
        candidate = folder / "results" / "original" / profile
        if candidate.is_dir():
            return candidate
    return None


def load_original_runs(directory: str | os.PathLike) -> dict[str, dict[str, list[float]]]:
    """EV's AURCC and loss of every committed run on the original queries, by environment.

    Args:
        directory: a folder of ``opcc-edu run ENV --queries original`` outputs, one subfolder
            per seed (``seed0``, ``seed1``, ...), as ``results/original/run.sh`` writes them.

    Returns:
        ``{env: {"aurcc": [one per seed], "loss": [...], "seeds": [...]}}`` in seed order
        (a maze's runs, answered in its ``-d4rl-goal`` variant, under the maze's own name).
    """
    from ..envs import ENV_NAMES
    from ..queries import recipe_env

    rows: dict[str, dict[str, list[float]]] = {}
    seeds = sorted(Path(directory).glob("seed*"), key=lambda p: int(p.name[4:]))
    for env in ENV_NAMES:
        name = recipe_env(env, "original")
        for folder in seeds:
            for path in sorted(folder.glob(f"{name}/*/original-queries/results.json")):
                metrics = json.loads(path.read_text())["metrics"]["ev"]["all"]
                row = rows.setdefault(env, {"aurcc": [], "loss": [], "seeds": []})
                row["seeds"].append(int(folder.name[4:]))
                for key in ("aurcc", "loss"):
                    row[key].append(float(metrics[key]))
    return rows


def cause_table(causes: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """Markdown table of the experiments: ``{env: {experiment: agreement dict}}``."""
    horizons = sorted({h for exps in causes.values() for row in exps.values() for h in row["by_horizon"]})
    head = ["environment", "labels compared", "agreement", *(f"h={h}" for h in horizons), "median abs(Δ)/h"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    for env, experiments in causes.items():
        for name, row in experiments.items():
            cells = [env, name, _percent(row["agreement"]), *_by_horizon(row, horizons)]
            cells.append(f"{row['median_delta_per_step']:.4f}")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Our answers to the original queries: raw record -> rows -> tables
# --------------------------------------------------------------------------------------------
#: The answer tables' heading in ``original_benchmark.md`` (the profile follows it).
ANSWERS_HEADING = "## Our ensemble on the original queries"
#: Environments whose classroom device runs used the older clip box (``--clip transitions``).
OLDER_CLIP_BOX = ("hopper", "walker2d")


def find_original_answers(start: str | os.PathLike | None = None) -> Path | None:
    """The raw record of our answers to the original queries, ``original_benchmark.json``
    beside the benchmark reports (``benchmarks/results``), searched from ``start`` (default: the
    working directory) upwards, next to the package's source tree, then above
    ``$OPCC_EDU_RESULTS`` (a checkout's results store, as the Colab cell sets it); ``None``
    where there is none (a wheel alone)."""
    here = Path(start if start is not None else Path.cwd()).resolve()
    folders = [here, *here.parents, Path(__file__).resolve().parents[2]]
    if os.environ.get("OPCC_EDU_RESULTS"):  # a checkout's results store (as on Colab): its repository
        folders += list(Path(os.environ["OPCC_EDU_RESULTS"]).resolve().parents)
    for folder in folders:
        candidate = folder / "benchmarks" / "results" / "original_benchmark.json"
        if candidate.is_file():
            return candidate
    return None


def _classroom_runs(classroom: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [run for run in classroom["results"] if run.get("kind", "ensemble") != "heuristic"]


def answer_rows(
    data: Mapping[str, Any], profile: str = "tiny", classroom: Mapping[str, Any] | None = None
) -> dict[str, dict[str, Any]]:
    """Per environment, our EV ensembles' and the no-model rule's scores on the original queries.

    Args:
        data: the raw record ``benchmarks/original_benchmark.py`` writes (its ``runs`` are the
            tiny profile's; ``rule`` holds the rule at each profile's query subset, ``paper``
            the paper's cells).
        profile: ``"tiny"`` (the runs in ``data``) or ``"classroom"`` (the runs of ``classroom``).
        classroom: the classroom device record (``benchmarks/original_device/classroom_original.json``),
            needed for ``profile="classroom"``.

    Returns:
        ``{env: {"seeds", "aurcc", "loss" (one per seed, seed order), "n" (queries),
        "rule_loss", "rule_aurcc", "paper_aurcc", "paper_loss", "paper_aurcc_ci",
        "paper_loss_ci"}}`` in the order of ``data["envs"]``, environments without runs left out.
    """
    if profile == "classroom":
        if classroom is None:
            raise ValueError("the classroom rows need the classroom device record")
        runs = _classroom_runs(classroom)
    elif profile == "tiny":
        runs = list(data["runs"])
    else:
        raise ValueError(f"no runs at profile {profile!r}: tiny or classroom")
    rows: dict[str, dict[str, Any]] = {}
    for env in data["envs"]:
        mine = sorted((r for r in runs if r["env"] == env), key=lambda r: r["seed"])
        if not mine:
            continue
        ev = [r["metrics"]["ev"]["all"] for r in mine]
        rule = data["rule"][profile][env]
        paper = data["paper"][env]
        rows[env] = {
            "seeds": [int(r["seed"]) for r in mine],
            "aurcc": [float(m["aurcc"]) for m in ev],
            "loss": [float(m["loss"]) for m in ev],
            "n": int(mine[0]["n_queries"]),
            "rule_loss": float(rule["loss"]),
            "rule_aurcc": float(rule["aurcc"]),
            **{f"paper_{k}": float(v) for k, v in paper.items() if k in ("aurcc", "loss", "aurcc_ci", "loss_ci")},
        }
    return rows


def load_original_answers(
    profile: str = "tiny", path: str | os.PathLike | None = None
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Our EV ensembles' and the no-model rule's scores on the original queries, read from the
    stored record (:func:`find_original_answers`), and how those runs were made.

    Returns:
        ``(rows, runs)``: :func:`answer_rows` of the profile, and ``{"profile", "seeds",
        "ensemble_size", "train_steps", "dataset_size", "queries", "threads"}`` of its runs.

    Raises:
        FileNotFoundError: no record found (a wheel without the repository).
    """
    path = find_original_answers() if path is None else Path(path)
    if path is None or not Path(path).is_file():
        raise FileNotFoundError("no original_benchmark.json: run the package from its repository")
    data = json.loads(Path(path).read_text())
    classroom = None
    if profile == "classroom":
        classroom = json.loads((Path(path).parents[1] / "original_device" / "classroom_original.json").read_text())
    rows = answer_rows(data, profile, classroom)
    runs = (classroom or data)["results" if classroom else "runs"]
    first = next(r for r in runs if r.get("kind", "ensemble") != "heuristic")
    sizes = data["profiles"][profile]
    about = {
        "profile": profile,
        "seeds": sorted({s for row in rows.values() for s in row["seeds"]}),
        "ensemble_size": int(first["ensemble_size"] if classroom else first["config"]["ensemble_size"]),
        "train_steps": int(first["train_steps"] if classroom else first["config"]["train_steps"]),
        "dataset_size": int(sizes["dataset_size"]),
        "queries": int(sizes["queries_per_env"]),
        "threads": data.get("threads") if profile == "tiny" else None,
    }
    return rows, about


def answer_table(rows: Mapping[str, Mapping[str, Any]], older_box: tuple[str, ...] = ()) -> str:
    """Markdown table of :func:`answer_rows`: mean ± standard deviation over seeds."""
    head = "| environment | queries | seeds | EV AURCC (ours) | paper | EV loss (ours) | paper | no-model rule loss |"
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for env, row in rows.items():
        cells = {}
        for key in ("aurcc", "loss"):
            values = np.asarray(row[key], dtype=float)
            spread = f" ± {np.std(values):.3f}" if len(values) > 1 else ""
            cells[key] = f"{np.mean(values):.3f}{spread}"
        name = f"{env} (older clip box)" if env in older_box else env
        lines.append(
            f"| {name} | {row['n']} | {len(row['loss'])} | {cells['aurcc']} | {row['paper_aurcc']:.3f} | "
            f"{cells['loss']} | {row['paper_loss']:.3f} | {row['rule_loss']:.3f} |"
        )
    return "\n".join(lines)


def superseded_rule(data: Mapping[str, Any], classroom: Mapping[str, Any], tolerance: float = 5e-4) -> dict[str, float]:
    """``{env: loss}`` of the rule as the classroom device record holds it, where it differs from
    the rule recomputed in ``data`` (the device run scored an earlier version of the rule)."""
    out = {}
    for record in classroom.get("heuristic", []):
        env = record["env"]
        old = float(record["metrics"]["heuristic"]["all"]["loss"])
        new = data["rule"]["classroom"].get(env, {}).get("loss")
        if new is not None and abs(old - float(new)) > tolerance:
            out[env] = old
    return out
