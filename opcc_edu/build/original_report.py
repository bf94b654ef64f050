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
