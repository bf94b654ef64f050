"""What the paper's scale costs, read from the benchmark results stored with the repository.

The book's page on running at the paper's scale states no number of its own: every one comes
from here, at build time. The numbers are read from the benchmark reports beside the package's
source (``benchmarks/results``): the cost estimate of one paper-size run and of every ablation
(``paper_scale.json``) and one small grid timed on each executor (``executors.json``); the sizes
of a run and of a grid come from the ``paper`` profile and :func:`plan_ablation`.

Each ``*_numbers`` function returns the page's numbers as text, by name, ready for
:func:`glue_numbers`; the tables are :class:`opcc_edu.display.Table`.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config import get_profile
from ..display import Table
from .experiments import plan_ablation

__all__ = [
    "find_benchmark_results",
    "load_benchmark",
    "span",
    "setting_numbers",
    "one_run",
    "run_table",
    "ablation_costs",
    "cost_table",
    "sweep_time",
    "cost_numbers",
    "executor_seconds",
    "executor_numbers",
    "glue_numbers",
]

BASES = ("cpu", "wall")  # the low (process CPU time) and the high (wall time) basis of an estimate


def find_benchmark_results(start: str | os.PathLike | None = None) -> Path:
    """The repository's ``benchmarks/results`` folder, searched from ``start`` (default: the
    working directory) upwards, next to the package's source tree, then above
    ``$OPCC_EDU_RESULTS`` (a checkout's results store, as the Colab cell sets it).

    Raises:
        FileNotFoundError: when there is none (a package installed from a wheel ships none).
    """
    here = Path(start if start is not None else Path.cwd()).resolve()
    folders = [here, *here.parents, Path(__file__).resolve().parents[2]]
    if os.environ.get("OPCC_EDU_RESULTS"):
        folders += list(Path(os.environ["OPCC_EDU_RESULTS"]).resolve().parents)
    for folder in folders:
        candidate = folder / "benchmarks" / "results"
        if (candidate / "paper_scale.json").is_file():
            return candidate
    raise FileNotFoundError(
        f"no benchmarks/results folder with paper_scale.json above {here} or beside the package: "
        "run from a checkout of the repository (a package installed from a wheel ships no results)"
    )


def load_benchmark(name: str, start: str | os.PathLike | None = None) -> dict[str, Any]:
    """The benchmark report ``<name>.json`` (e.g. ``"paper_scale"``) of :func:`find_benchmark_results`."""
    return json.loads((find_benchmark_results(start) / f"{name}.json").read_text())


def span(low: float, high: float, digits: int | None = None) -> str:
    """``"low–high"``: ``digits`` decimals (default: none from 10 up, one below), one number when
    both read the same."""
    digits = (0 if low >= 10 else 1) if digits is None else digits
    low_text, high_text = f"{low:,.{digits}f}", f"{high:,.{digits}f}"
    return low_text if low_text == high_text else f"{low_text}–{high_text}"


def _pair(values: Mapping[str, float], scale: float = 1.0) -> tuple[float, float]:
    return values["cpu"] / scale, values["wall"] / scale


def setting_numbers() -> dict[str, str]:
    """The sizes of one paper-size run and of one ablation's grid of runs (the ``paper`` profile,
    the grid of ``horizon``, whose only level is the default configuration), the retries a
    sweep grants a failed run by default and the most memory a GPU run's rollout chunk takes."""
    from ..dynamics.rollout import DEFAULT_GPU_BUDGET  # loads torch
    from .experiments import run_grid

    paper, grid = get_profile("paper"), plan_ablation("horizon", "paper")
    mazes = [env for env in grid.environments if env.startswith("maze2d")]
    tasks = [env for env in grid.environments if env not in mazes]
    return {
        "members": f"{paper.ensemble_size:,}",
        "layers": f"{len(paper.hidden_sizes)}",
        "units": "/".join(f"{width}" for width in dict.fromkeys(paper.hidden_sizes)),
        "steps": f"{paper.dynamics_train_steps:,}",
        "transitions": f"{paper.dataset_size:,}",
        "mazes": f"{len(mazes)}",
        "tasks": f"{len(tasks)}",
        "task_datasets": "/".join(dict.fromkeys(f"{len(grid.datasets[env])}" for env in tasks)),
        "seeds": f"{len(grid.seeds)}",
        "retries": f"{inspect.signature(run_grid).parameters['retries'].default}",
        "gpu_chunk": f"{DEFAULT_GPU_BUDGET / 2**30:g} GiB",
    }


def one_run(start: str | os.PathLike | None = None) -> dict[str, Any]:
    """One paper-size run on one CPU thread: ``training``, ``rollouts``, ``total`` as (low, high)
    seconds; ``queries`` answered, every one rolled to ``horizon``; ``ar_rows``, the rows an
    autoregressive model trains on per row of a minibatch."""
    data = load_benchmark("paper_scale", start)
    run, ar = data["paper_run_seconds"], data["paper_run_seconds_autoregressive"]
    horizon = data["inputs"]["horizon_upper_bound"]
    sides = run["cpu"]["member_steps"] // (get_profile("paper").ensemble_size * horizon)
    return {
        **{part: (run["cpu"][part], run["wall"][part]) for part in ("training", "rollouts", "total")},
        "queries": sides // 2,
        "horizon": horizon,
        "ar_rows": ar["cpu"]["samples"] // run["cpu"]["samples"],
    }


def _hours(seconds: tuple[float, float]) -> tuple[float, float]:
    return seconds[0] / 3600, seconds[1] / 3600


def run_table(start: str | os.PathLike | None = None) -> Table:
    """The time of one paper-size run on one CPU thread: training, rollouts, the whole run."""
    run = one_run(start)
    rollouts = f"rollouts of its {run['queries']:,} queries (feed-forward model, h = {run['horizon']} for every query)"
    rows = [
        ["training one paper-size ensemble", f"{span(*_hours(run['training']), 2)} h"],
        [rollouts, f"{span(*run['rollouts'], 0)} s"],
        ["one run", f"{span(*_hours(run['total']))} h"],
    ]
    return Table(["", "one CPU thread"], rows)


def _longest_run(row: Mapping[str, Any]) -> tuple[float, float]:
    """Hours of an ablation's longest run (one round of runs): its wall time on the fewest slots
    estimated over the rounds they take."""
    slots = min(row["wall_hours"], key=int)
    return _pair(row["wall_hours"][slots], math.ceil(row["runs"] / int(slots)))


def ablation_costs(start: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """Per ablation, as estimated: ``ablation``, ``title``, ``levels``, ``runs``, ``core_hours``,
    ``longest_run`` (hours) and ``wall_hours`` on the most one-core ``slots`` estimated, each
    (low, high)."""
    data = load_benchmark("paper_scale", start)
    return [
        {
            "ablation": row["ablation"],
            "title": row["title"],
            "levels": row["levels"],
            "runs": row["runs"],
            "core_hours": _pair(row["core_hours"]),
            "longest_run": _longest_run(row),
            "slots": (slots := max(row["wall_hours"], key=int)),
            "wall_hours": _pair(row["wall_hours"][slots]),
        }
        for row in data["ablations"]
    ]


def _label(titles: list[str]) -> str:
    words = [title[:1].lower() + title[1:] for title in titles]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def cost_table(start: str | os.PathLike | None = None) -> Table:
    """Runs, core-hours and wall time of each ablation (those of equal cost on one row, fewest
    runs first), and of every ablation together."""
    run, costs, data = one_run(start), ablation_costs(start), load_benchmark("paper_scale", start)
    groups: dict[tuple, list[str]] = {}
    for row in costs:
        slower = row["longest_run"][0] > 1.01 * run["total"][0] / 3600  # an autoregressive level
        key = (row["runs"], slower, span(*row["core_hours"]), f"{span(*row['wall_hours'])} h")
        groups.setdefault(key, []).append(row["title"])
    note = f" (its autoregressive level trains on {run['ar_rows']} rows per minibatch row)"
    rows = [
        [_label(names) + note * slower, f"{runs:,}", core, wall]
        for (runs, slower, core, wall), names in sorted(groups.items())
    ]
    every = "every ablation together, distinct runs, feed-forward runs only"
    rows.append([every, f"{data['distinct_runs']:,}", span(*_pair(data["distinct_core_hours"])), ""])
    return Table(["ablation", "runs", "core-hours", f"wall time on {costs[0]['slots']} one-core slots"], rows)


def sweep_time(ablation: str, slots: int, start: str | os.PathLike | None = None) -> dict[str, Any]:
    """One ablation on ``slots`` one-core slots: ``runs``, ``rounds`` of runs one after another,
    ``run_hours`` of one round (its longest run) and ``hours`` in all, each (low, high)."""
    row = next(row for row in ablation_costs(start) if row["ablation"] == ablation)
    rounds = math.ceil(row["runs"] / slots)
    low, high = row["longest_run"]
    return {"runs": row["runs"], "rounds": rounds, "run_hours": (low, high), "hours": (rounds * low, rounds * high)}


def cost_numbers(start: str | os.PathLike | None = None) -> dict[str, str]:
    """The estimate's numbers the page's text states: each ablation's runs and levels
    (``runs_<ablation>``, ``levels_<ablation>``, dashes as underscores), the distinct runs of
    every ablation (``runs_all``), and the check of the method on runs of the laptop-size profile
    (``predicted`` seconds, ``measured_runs``, their ``measured_median`` seconds)."""
    data = load_benchmark("paper_scale", start)
    check = data["classroom_check"]
    names = {row["ablation"]: row["ablation"].replace("-", "_") for row in data["ablations"]}
    return {
        **{f"runs_{names[row['ablation']]}": f"{row['runs']:,}" for row in data["ablations"]},
        **{f"levels_{names[row['ablation']]}": f"{row['levels']}" for row in data["ablations"]},
        "runs_all": f"{data['distinct_runs']:,}",
        "predicted": span(*_pair(check["predicted_seconds"]), 0),
        "measured_runs": f"{check['measured_seconds']['runs']}",
        "measured_median": f"{check['measured_seconds']['median']:.0f}",
    }


def executor_seconds(start: str | os.PathLike | None = None) -> dict[str, Any]:
    """One small grid timed on each executor: ``runs``, the machine's ``cores`` and one-minute
    ``load`` at the start; seconds ``in_process``, in ``workers`` local ``processes`` and on a local
    ``ray`` cluster of ``ray_cpus``."""
    data = load_benchmark("executors", start)
    seconds = data["seconds"]
    processes = next(name for name in seconds if "local processes" in name)
    ray = next(name for name in seconds if name.startswith("ray"))
    return {
        "runs": data["runs"],
        "cores": data["machine"]["logical_cpus"],
        "load": data["machine"]["load_average_start"][0],
        "in_process": seconds["in-process"],
        "processes": seconds[processes],
        "workers": int(re.search(r"\d+", processes).group()),
        "ray": seconds[ray],
        "ray_cpus": int(re.search(r"(\d+) CPUs", ray).group(1)),
    }


def executor_numbers(start: str | os.PathLike | None = None) -> dict[str, str]:
    """:func:`executor_seconds` as the page's text states it (``ex_<key>``; seconds to 0.1 s)."""
    timed = executor_seconds(start)
    return {f"ex_{key}": f"{value:.1f}" if isinstance(value, float) else f"{value}" for key, value in timed.items()}


def glue_numbers(numbers: Mapping[str, str]) -> None:
    """Glue each number under its name for the page's text (myst-nb's ``glue``, nothing shown);
    where myst-nb is not installed (on Colab), print them."""
    try:
        from myst_nb import glue
    except ImportError:
        glue = None
    for name, text in numbers.items():
        if glue is None:
            print(f"{name} = {text}")
        else:
            glue(name, text, display=False)
