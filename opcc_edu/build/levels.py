"""Choosing policies of distinct quality from the checkpoints of one training run.

* :func:`checkpoint_schedule` / :func:`checkpoint_plan` -- which checkpoints are candidates.
* :func:`select_levels` -- four query policies of distinct mean return (paper Section 4, step 1).
* :func:`select_medium` -- the *medium* behaviour policy (D4RL's early-stopping recipe).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..policies.assets import POLICY_LEVELS
from ..policies.ppo import PPOConfig, round_up_to_multiple
from ..utils import check_positive_int


def checkpoint_schedule(total_steps: int, n_checkpoints: int, rollout_steps: int) -> list[int]:
    """Candidate checkpoint steps: the untrained policy, a few early geometric steps (where
    quality changes fastest) and an even grid up to ``total_steps``, on rollout boundaries.

    Args:
        total_steps: environment steps of the run.
        n_checkpoints: intervals of the even grid.
        rollout_steps: transitions per PPO rollout (:attr:`PPOConfig.rollout_steps`).

    Returns:
        Sorted distinct steps from 0 to ``total_steps`` rounded up to a rollout.
    """
    check_positive_int(n_checkpoints, "n_checkpoints")
    total = round_up_to_multiple(total_steps, rollout_steps)
    grid = np.linspace(0, total, n_checkpoints + 1)
    early = total * np.array([0.01, 0.02, 0.04])
    steps = {round_up_to_multiple(int(s), rollout_steps) for s in np.concatenate([grid, early])}
    return sorted(s for s in steps if 0 <= s <= total)


def checkpoint_plan(
    total_steps: int, n_checkpoints: int, config: PPOConfig, stop_step: int | None = None
) -> tuple[list[int], int]:
    """Candidate steps and the steps to train: the schedule of a ``total_steps`` run, cut at
    ``stop_step`` (a prefix of that run, exact because every PPO schedule is constant).

    Returns:
        ``(candidate_steps, steps_to_train)``; the last candidate is ``steps_to_train``.
    """
    steps = checkpoint_schedule(total_steps, n_checkpoints, config.rollout_steps)
    if stop_step is None:
        return steps, steps[-1]
    stop = round_up_to_multiple(check_positive_int(stop_step, "stop_step"), config.rollout_steps)
    if stop > steps[-1]:
        raise ValueError(f"stop_step {stop_step} exceeds total_steps {total_steps}")
    return [s for s in steps if s < stop] + [stop], stop


def select_levels(means: Sequence[float]) -> list[int]:
    """Pick four candidates of distinct quality from their mean returns.

    Level 1 is the best candidate and level 4 the worst; levels 2 and 3 are the unused
    candidates closest to 2/3 and 1/3 of the way from the worst to the best mean.

    Args:
        means: (C,) mean return of each candidate, C >= 4.

    Returns:
        Candidate indices for levels 1, 2, 3, 4.
    """
    means = np.asarray(means, dtype=np.float64)
    if means.ndim != 1 or means.size < len(POLICY_LEVELS):
        raise ValueError(
            f"means must be a 1-D sequence of at least {len(POLICY_LEVELS)} values, got shape {means.shape}"
        )
    best, worst = int(np.argmax(means)), int(np.argmin(means))
    if best == worst:
        raise ValueError("all candidates have the same mean return; no distinct levels exist")
    chosen = [best]
    for fraction in (2 / 3, 1 / 3):
        target = means[worst] + fraction * (means[best] - means[worst])
        order = np.argsort(np.abs(means - target), kind="stable")
        chosen.append(int(next(i for i in order if i not in chosen and i != worst)))
    chosen.append(worst)
    return chosen


def select_medium(means: Sequence[float], expert_mean: float) -> int:
    """Pick the *medium* behaviour checkpoint: about a third of the expert's return.

    Early stopping, as D4RL made its medium policies: only checkpoints up to the first one that
    reaches a third of the expert's return count (a later dip of an unstable run is no medium
    policy, and would make medium-replay most of the run); among them the closest wins.

    Args:
        means: (C,) mean returns of the checkpoints before the expert, in training order.
        expert_mean: the expert's mean return.

    Returns:
        Index into ``means``.
    """
    means = np.asarray(means, dtype=np.float64)
    if means.ndim != 1 or means.size == 0:
        raise ValueError(f"means must be a non-empty 1-D sequence, got shape {means.shape}")
    target = float(expert_mean) / 3.0
    reached = np.flatnonzero(means >= target)
    last = int(reached[0]) if reached.size else means.size - 1
    return int(np.argmin(np.abs(means[: last + 1] - target)))
