"""Building the shipped policies: train one PPO run, evaluate its checkpoints, ship a choice.

* :func:`build_query_policies` -- four query policies of distinct quality per environment
  (paper Section 4, step 1; the Table 9 analogue).
* :func:`build_behavior_policies` -- the *medium* and *expert* behaviour policies of a
  locomotion dataset (D4RL's recipe).

Both are deterministic given their seed: they train and evaluate with one torch thread
(:func:`~opcc_edu.policies.ppo.single_threaded`, as the shipped policies were built), record the
command, seeds, configuration and package versions with every file they write, and update their
environment's rows of the shared JSON tables under a lock (builds of several environments may
run at once).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from opcc_edu.build.evaluation import EVAL_EPISODES, EVAL_SEED, CheckpointReturns, evaluate_checkpoints

from ..config import Profile, get_profile
from ..envs import ENV_NAMES, LOCOMOTION_NAMES
from ..io import atomic_write_text, locked_json
from ..policies.actor import load_actor, save_actor
from ..policies.assets import ASSETS_DIR, BEHAVIOR_FILE, POLICY_LEVELS, POLICY_TABLE_FILE
from ..policies.ppo import PPOConfig, default_ppo_config, train_ppo, training_package_versions
from ..provenance import command_line
from ..utils import cache_dir, check_choice, check_positive_int, single_threaded
from .levels import checkpoint_plan, select_levels, select_medium

QUERY_POLICY_SEED = 0
"""Default training seed of the query policies."""
BEHAVIOR_SEED = 1
"""Default training seed of the behaviour policies (a different run from the query policies)."""


def _locked_json(path: Path, default: dict[str, Any]) -> Any:
    """Read-modify-write a JSON file under the package's lock (builds of several environments may
    run at once and must not lose each other's rows); the lock lives in the cache, so that the
    package's assets directory stays clean."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = cache_dir("locks") / (hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16] + ".lock")
    return locked_json(path, default, lock)


@dataclasses.dataclass(frozen=True)
class _Run:
    """A finished training run: its evaluated checkpoints and how it was made."""

    results: list[CheckpointReturns]
    steps: list[int]
    command: str
    config: PPOConfig
    seed: int
    episodes: int
    eval_seed: int

    def mean(self, index: int) -> float:
        return float(self.results[index].returns.mean())

    def header(self) -> str:
        return (
            f"# {self.command}\n# PPO seed {self.seed}, {self.episodes} evaluation episodes from seed "
            f"{self.eval_seed}; config {json.dumps(self.config.to_dict())}"
        )


def _train_and_evaluate(
    env_name: str,
    run_name: str,
    *,
    total_steps: int | None,
    seed: int,
    n_checkpoints: int,
    episodes: int,
    eval_seed: int,
    work_dir: str | os.PathLike | None,
    config: PPOConfig | None,
    stop_step: int | None,
    reuse: bool,
    progress: bool,
    profile: Profile | str | None,
) -> _Run:
    """Train (or reuse) the run's checkpoints and evaluate each on the same episodes."""
    config = config or default_ppo_config(env_name)
    if total_steps is None:
        total_steps = get_profile(profile).policy_train_steps
    work = Path(work_dir) if work_dir else cache_dir("policy_runs", env_name, f"{run_name}_seed{seed}")
    command = command_line()
    steps, total = checkpoint_plan(check_positive_int(total_steps, "total_steps"), n_checkpoints, config, stop_step)
    paths = train_ppo(
        env_name, seed, total, steps, work, progress=progress, config=config, metadata={"command": command}, reuse=reuse
    )
    results = evaluate_checkpoints(env_name, paths, check_positive_int(episodes, "episodes"), eval_seed, progress)
    return _Run(results, steps, command, config, int(seed), int(episodes), int(eval_seed))


def _write_log(path: Path, header: str, results: Sequence[CheckpointReturns], marks: Mapping[int, str]) -> None:
    lines = [header, f"{'train_step':>10} {'mean':>10} {'std':>10}  chosen"]
    for i, r in enumerate(results):
        lines.append(f"{r.train_step:>10} {r.returns.mean():>10.2f} {r.returns.std():>10.2f}  {marks.get(i, '')}")
    atomic_write_text(path, "\n".join(lines) + "\n")


#: Parameters of the two build functions passed unchanged to :func:`_train_and_evaluate`.
_RUN_ARGUMENTS = (
    "total_steps",
    "seed",
    "n_checkpoints",
    "episodes",
    "eval_seed",
    "work_dir",
    "config",
    "stop_step",
    "reuse",
    "progress",
    "profile",
)


def build_query_policies(
    env_name: str,
    total_steps: int | None = None,
    seed: int = QUERY_POLICY_SEED,
    n_checkpoints: int = 16,
    episodes: int = EVAL_EPISODES,
    eval_seed: int = EVAL_SEED,
    assets_dir: str | os.PathLike | None = None,
    work_dir: str | os.PathLike | None = None,
    config: PPOConfig | None = None,
    stop_step: int | None = None,
    reuse: bool = True,
    progress: bool = True,
    profile: Profile | str | None = None,
) -> list[dict[str, Any]]:
    """Train one PPO run, evaluate its checkpoints and ship four of distinct quality.

    Writes ``<assets>/policies/<env>/level{1..4}.safetensors``, a candidate log
    ``<env>/training_log.txt`` and the environment's rows of ``policy_table.json``.

    Candidates are the checkpoints of :func:`~opcc_edu.build.levels.checkpoint_schedule`.
    ``stop_step`` ends the run early (the candidates are the schedule's steps before it, plus
    ``stop_step``), and ``reuse`` takes the checkpoints of an identical earlier run from
    ``work_dir`` instead of training.

    Args:
        env_name: one of :data:`opcc_edu.envs.ENV_NAMES`.
        total_steps: PPO environment steps (``None``: the profile's ``policy_train_steps``).
        seed: training seed.
        n_checkpoints: intervals of the even grid of candidate checkpoints.
        episodes: evaluation episodes per candidate.
        eval_seed: seed of the first evaluation episode.
        assets_dir: write here instead of the package's assets.
        work_dir: directory for every checkpoint of the run (default: the cache).
        config: PPO hyperparameters (default :func:`~opcc_edu.policies.ppo.default_ppo_config`).
        stop_step: end the run after this many steps.
        reuse: reuse the checkpoints of an identical earlier run in ``work_dir``.
        progress: show progress bars.
        profile: the profile that gives the default ``total_steps`` (``None``: the active one).

    Returns:
        The four table rows (level 1 first).
    """
    check_choice(env_name, ENV_NAMES, "env_name")
    arguments = locals()  # the parameters, passed on unchanged
    with single_threaded():
        run = _train_and_evaluate(env_name, "query", **{name: arguments[name] for name in _RUN_ARGUMENTS})
    chosen = select_levels([run.mean(i) for i in range(len(run.results))])
    assets = Path(assets_dir or ASSETS_DIR)
    out_dir = assets / "policies" / env_name
    rows = []
    for level, index in zip(POLICY_LEVELS, chosen, strict=True):
        r = run.results[index]
        actor, meta = load_actor(r.path)
        row = {
            "env": env_name,
            "level": level,
            "mean_return": run.mean(index),
            "std_return": float(r.returns.std()),
            "episodes": run.episodes,
            "returns": [float(x) for x in r.returns],
            "eval_seed": run.eval_seed,
            "train_step": r.train_step,
            "train_seed": run.seed,
            "total_steps": int(meta["total_steps"]),
            "command": run.command,
        }
        facts = {k: value for k, value in row.items() if k != "returns"}
        save_actor(out_dir / f"level{level}.safetensors", actor, dict(meta, **facts))
        rows.append(row)
    marks = {index: f"level {level}" for level, index in zip(POLICY_LEVELS, chosen, strict=True)}
    _write_log(out_dir / "training_log.txt", run.header(), run.results, marks)
    with _locked_json(assets / "policies" / POLICY_TABLE_FILE, {"rows": []}) as table:
        table["rows"] = [row for row in table["rows"] if row["env"] != env_name] + rows
        table["package_versions"] = training_package_versions()
        table["description"] = (
            "Query policies of each environment: mean and standard deviation (ddof=0) of the undiscounted "
            "return over `episodes` evaluation episodes (sparse reward for mazes); episode i resets with "
            "seed eval_seed + i."
        )
    return rows


def build_behavior_policies(
    env_name: str,
    total_steps: int | None = None,
    seed: int = BEHAVIOR_SEED,
    n_checkpoints: int = 20,
    episodes: int = EVAL_EPISODES,
    eval_seed: int = EVAL_SEED,
    assets_dir: str | os.PathLike | None = None,
    work_dir: str | os.PathLike | None = None,
    config: PPOConfig | None = None,
    stop_step: int | None = None,
    reuse: bool = True,
    progress: bool = True,
    profile: Profile | str | None = None,
) -> dict[str, Any]:
    """Train the behaviour run of a locomotion environment and ship *medium* and *expert*.

    *expert* is the final policy; *medium* is the checkpoint whose mean return is closest to a
    third of the expert's among those up to the first checkpoint that reaches it (D4RL's recipe:
    training stopped early at about a third of the expert's return). ``behavior.json`` records
    both returns, the medium checkpoint's training step and the exact
    :func:`~opcc_edu.policies.ppo.train_ppo` arguments. The arguments are those of
    :func:`build_query_policies`; ``env_name`` must be a locomotion environment.

    Returns:
        The environment's entry of ``behavior.json``.
    """
    check_choice(env_name, LOCOMOTION_NAMES, "env_name (behaviour policies exist for locomotion)")
    arguments = locals()  # the parameters, passed on unchanged
    with single_threaded():
        run = _train_and_evaluate(env_name, "behavior", **{name: arguments[name] for name in _RUN_ARGUMENTS})
    expert = len(run.results) - 1
    if expert < 2:
        raise ValueError(f"the behaviour run needs checkpoints between the start and the end; got steps {run.steps}")
    # The untrained policy (step 0) is never "medium": medium-replay would be empty.
    medium = 1 + select_medium([run.mean(i) for i in range(1, expert)], run.mean(expert))
    entry: dict[str, Any] = {
        "command": run.command,
        "seed": run.seed,
        "eval_seed": run.eval_seed,
        "episodes": run.episodes,
        "train_ppo_args": {
            "env_name": env_name,
            "seed": run.seed,
            "total_steps": int(run.results[expert].train_step),
            "config": run.config.to_dict(),
        },
        "medium_step": run.results[medium].train_step,
        "expert_step": run.results[expert].train_step,
        "package_versions": training_package_versions(),
    }
    assets = Path(assets_dir or ASSETS_DIR)
    out_dir = assets / "behavior" / env_name
    for kind, index in (("medium", medium), ("expert", expert)):
        r = run.results[index]
        actor, meta = load_actor(r.path)
        entry[f"{kind}_mean_return"] = run.mean(index)
        entry[f"{kind}_std_return"] = float(r.returns.std())
        entry[f"{kind}_returns"] = [float(x) for x in r.returns]
        facts = dict(meta, kind=kind, mean_return=entry[f"{kind}_mean_return"])
        save_actor(out_dir / f"{kind}.safetensors", actor, facts)
    _write_log(out_dir / "training_log.txt", run.header(), run.results, {medium: "medium", expert: "expert"})
    with _locked_json(assets / "behavior" / BEHAVIOR_FILE, {"environments": {}}) as data:
        data["environments"][env_name] = entry
        data["description"] = (
            "Behaviour policies of the locomotion datasets. medium_step: training step of the medium "
            "checkpoint; train_ppo(**train_ppo_args with total_steps=medium_step) replays the run up to it "
            "(constant schedules make it an exact prefix)."
        )
    return entry


def describe_query_policies(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per level of :func:`build_query_policies`'s rows: mean ± std return and step."""
    return [
        f"{row['env']} level {row['level']}: {row['mean_return']:.1f} ± {row['std_return']:.1f} "
        f"(step {row['train_step']})"
        for row in rows
    ]


def describe_behavior_policies(entry: Mapping[str, Any]) -> str:
    """One line for :func:`build_behavior_policies`'s entry: medium and expert returns and steps."""
    return (
        f"{entry['train_ppo_args']['env_name']}: "
        f"medium {entry['medium_mean_return']:.1f} (step {entry['medium_step']}), "
        f"expert {entry['expert_mean_return']:.1f} (step {entry['expert_step']})"
    )
