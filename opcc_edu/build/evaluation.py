"""Policy evaluation: undiscounted returns of a deterministic actor, all episodes in lockstep."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from opcc_edu.envs import get_spec, make_env
from opcc_edu.policies.actor import Actor, load_actor
from opcc_edu.utils import check_positive_int

EVAL_EPISODES = 20
"""Episodes per policy in the Table 9 analogue (the paper's count)."""
EVAL_SEED = 10_000
"""Evaluation episodes reset with seeds EVAL_SEED, EVAL_SEED + 1, ... (never a training seed)."""


def evaluate_actor(
    env_name: str,
    actor: Actor,
    episodes: int = EVAL_EPISODES,
    seed: int = EVAL_SEED,
    progress: bool = False,
) -> np.ndarray:
    """Undiscounted episode returns of a deterministic actor (sparse reward for mazes).

    All episodes are stepped in lockstep with one batched actor call per step; episode i is
    reset with seed ``seed + i``, so returns are reproducible and the first k of them do not
    depend on ``episodes``.

    Args:
        env_name: environment name.
        actor: the policy.
        episodes: number of episodes E.
        seed: seed of the first episode.
        progress: show a progress bar over time steps.

    Returns:
        (E,) float64 returns.
    """
    from tqdm.auto import tqdm

    spec = get_spec(env_name)
    episodes = check_positive_int(episodes, "episodes")
    envs = [make_env(env_name) for _ in range(episodes)]
    obs = np.stack([env.reset(seed=int(seed) + i)[0] for i, env in enumerate(envs)])
    returns = np.zeros(episodes)
    alive = np.ones(episodes, dtype=bool)
    actor = actor.eval()
    with torch.no_grad():
        for _ in tqdm(range(spec.max_episode_steps), desc=f"evaluate {env_name}", disable=not progress):
            idx = np.flatnonzero(alive)
            if idx.size == 0:
                break
            actions = actor(torch.as_tensor(obs[idx], dtype=torch.float32)).numpy()
            for j, i in enumerate(idx):
                next_obs, reward, terminated, truncated, _ = envs[i].step(actions[j])
                returns[i] += reward
                obs[i] = next_obs
                if terminated or truncated:
                    alive[i] = False
    for env in envs:
        env.close()
    return returns


@dataclasses.dataclass(frozen=True)
class CheckpointReturns:
    """The evaluation of one training checkpoint."""

    path: Path
    """The checkpoint's ``.safetensors`` file."""
    train_step: int
    """Environment steps of training behind it."""
    returns: np.ndarray
    """(E,) undiscounted episode returns."""


def evaluate_checkpoints(
    env_name: str,
    paths: Sequence[str | os.PathLike],
    episodes: int = EVAL_EPISODES,
    seed: int = EVAL_SEED,
    progress: bool = False,
) -> list[CheckpointReturns]:
    """Evaluate every checkpoint written by :func:`~opcc_edu.policies.ppo.train_ppo`.

    Args:
        env_name: environment name.
        paths: checkpoint files, in training order.
        episodes: evaluation episodes per checkpoint.
        seed: seed of the first episode (the same episodes for every checkpoint).
        progress: show a progress bar over checkpoints.

    Returns:
        One :class:`CheckpointReturns` per path, in the order given.
    """
    from tqdm.auto import tqdm

    results = []
    for path in tqdm(paths, desc=f"evaluate {env_name} checkpoints", disable=not progress):
        actor, meta = load_actor(path)
        returns = evaluate_actor(env_name, actor, episodes=episodes, seed=seed)
        results.append(CheckpointReturns(Path(path), int(meta["train_step"]), returns))
    return results
