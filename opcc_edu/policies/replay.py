"""Replaying the behaviour-policy training run: how D4RL's *medium-replay* data is rebuilt."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from ..utils import cache_dir, single_threaded
from .actor import load_actor
from .assets import behavior_info, behavior_train_args, load_behavior_policy
from .ppo import TransitionCallback, train_ppo, training_package_versions


def replay_behavior_run(
    env_name: str,
    transition_callback: TransitionCallback,
    until_step: int | None = None,
    out_dir: str | os.PathLike | None = None,
    progress: bool = True,
    assets_dir: str | os.PathLike | None = None,
) -> Path:
    """Re-run the behaviour-policy training of ``env_name``, reporting every transition.

    This is how D4RL's *medium-replay* data is rebuilt: every transition the training run
    collected up to the medium checkpoint. The run is deterministic and its schedules are
    constant, so stopping at ``until_step`` reproduces the original run's first steps exactly.
    It runs with one torch thread, as :func:`~opcc_edu.build.policies.build_behavior_policies`
    trained the original.

    Args:
        env_name: a locomotion environment.
        transition_callback: see :func:`~opcc_edu.policies.ppo.train_ppo`.
        until_step: stop after this many transitions (rounded up to a rollout); default the
            medium checkpoint's step, in which case the replayed policy is checked to equal the
            shipped *medium* weights.
        out_dir: where the replay's final checkpoint goes (default: the cache).
        progress: show a progress bar.
        assets_dir: read the behaviour metadata from another assets directory (tests).

    Returns:
        Path of the replay's final checkpoint.

    Raises:
        RuntimeError: the replay did not reproduce the shipped medium policy (for example a
            different stable-baselines3 or MuJoCo version changed the run).
    """
    info = behavior_info(env_name, assets_dir)
    args = behavior_train_args(env_name, assets_dir)
    check_medium = until_step is None
    args["total_steps"] = int(info["medium_step"] if until_step is None else until_step)
    out = Path(out_dir) if out_dir else cache_dir("policy_runs", env_name, f"behavior_replay_{args['total_steps']}")
    with single_threaded():  # as the behaviour run was trained
        path = train_ppo(
            **args, checkpoint_steps=[], out_dir=out, progress=progress, transition_callback=transition_callback
        )[-1]
    if check_medium:
        replayed = load_actor(path)[0].state_dict()
        shipped = load_behavior_policy(env_name, "medium", assets_dir).state_dict()
        if not all(torch.equal(replayed[k], shipped[k]) for k in shipped):
            versions = json.dumps(info.get("package_versions", {}))
            raise RuntimeError(
                f"replaying the {env_name} behaviour run did not reproduce the shipped medium policy; "
                f"it was trained with {versions}, this is {json.dumps(training_package_versions())}"
            )
    return path
