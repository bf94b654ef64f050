"""Locomotion data (D4RL's Gym-MuJoCo recipes) generated in batches of environments.

* :func:`generate_policy_dataset` -- B environments stepped together; one batched forward of a
  behaviour policy (or uniform random actions) per step. Used for *random*, *medium* and
  *expert*.
* :func:`generate_replay_dataset` -- *medium-replay*: replays the behaviour policy's PPO
  training run (deterministic on the CPU) up to the medium checkpoint and records every
  transition it collected, with the simulator state of each observation.

Both collect B parallel streams of episodes and lay the episodes out one after another in the
order they finished (then the unfinished ones, stream by stream), so the arrays are in D4RL's
format: each episode contiguous, ended by a terminal (the environment terminated) or a timeout
(the 1000-step limit, or the cut at the requested size).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import numpy as np

from ..envs import get_spec, make_env, mujoco_handles
from ..utils import check_positive_int
from .format import REQUIRED_KEYS

Policy = Callable[..., object]
"""A behaviour policy: ``policy(obs (B, D) float32 tensor) -> actions (B, A)`` in [-1, 1]."""


class EpisodeAssembler:
    """Collects B lock-step streams of transitions and lays their episodes out contiguously.

    Args:
        n_streams: number of streams B.
        n_steps: number of lock-step steps S that will be added.
        shapes: key -> per-transition shape, e.g. ``{"observations": (D,), "rewards": ()}``.
    """

    def __init__(self, n_streams: int, n_steps: int, shapes: dict[str, tuple[int, ...]]):
        self.n_streams = n_streams
        self.n_steps = n_steps
        self.buffers = {key: np.zeros((n_steps, n_streams) + tuple(shape), np.float32) for key, shape in shapes.items()}
        self.terminated = np.zeros((n_steps, n_streams), bool)
        self.truncated = np.zeros((n_steps, n_streams), bool)
        self._start = np.zeros(n_streams, dtype=np.int64)
        self._segments: list[tuple[int, int, int]] = []  # (stream, start, end) of finished episodes
        self.step = 0

    def add(self, arrays: dict[str, np.ndarray], terminated: np.ndarray, truncated: np.ndarray) -> None:
        """Add one lock-step step: each array has shape (B, ...); flags (B,)."""
        if self.step >= self.n_steps:
            raise ValueError(f"EpisodeAssembler holds {self.n_steps} steps; no room for another")
        t = self.step
        for key, value in arrays.items():
            self.buffers[key][t] = value
        self.terminated[t] = terminated
        self.truncated[t] = truncated
        for k in np.flatnonzero(np.asarray(terminated) | np.asarray(truncated)):
            self._segments.append((int(k), int(self._start[k]), t + 1))
            self._start[k] = t + 1
        self.step += 1

    def finish(self, size: int) -> dict[str, np.ndarray]:
        """The first ``size`` transitions in episode order, as a D4RL dict (float32 / bool)."""
        steps, b = self.step, self.n_streams
        segments = list(self._segments)
        for k in range(b):
            if self._start[k] < steps:
                segments.append((k, int(self._start[k]), steps))
        index_parts = [np.arange(start, end, dtype=np.int64) * b + k for k, start, end in segments]
        order = np.concatenate(index_parts) if index_parts else np.zeros(0, np.int64)
        if size > order.size:
            raise ValueError(f"size {size} exceeds the {order.size} transitions collected")
        order = order[:size]
        segment_ends = np.cumsum([len(p) for p in index_parts]) - 1
        data = {key: value.reshape((steps * b,) + value.shape[2:])[order] for key, value in self.buffers.items()}
        terminals = self.terminated.reshape(-1)[order]
        timeouts = self.truncated.reshape(-1)[order] & ~terminals
        # Every episode boundary that is not a termination is a cut: flag it as a timeout.
        ends = segment_ends[segment_ends < size]
        timeouts[ends] |= ~terminals[ends]
        if size and not terminals[-1]:
            timeouts[-1] = True
        data["terminals"] = terminals
        data["timeouts"] = timeouts
        return data


_ORDER = (*REQUIRED_KEYS, "infos/qpos", "infos/qvel")


def _ordered(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {key: np.ascontiguousarray(data[key]) for key in _ORDER if key in data}


def generate_policy_dataset(
    env_name: str,
    size: int,
    seed: int = 0,
    policy: Policy | None = None,
    action_noise: float = 0.0,
    n_streams: int = 8,
    salt: int = 0,
    progress: bool = True,
) -> dict[str, np.ndarray]:
    """Roll a behaviour policy (or uniform random actions) in B environments at once. (A recipe, read top to bottom.)

    Args:
        env_name: a locomotion environment.
        size: number of transitions T.
        seed: stream k seeds its environment resets and its action noise from
            ``numpy.random.SeedSequence([seed, salt, k])``.
        policy: maps a float32 tensor of observations (B, D) to actions (B, A) in [-1, 1]
            (an :class:`opcc_edu.policies.Actor`); ``None`` draws actions uniformly from
            [-1, 1]^A (the *random* recipe).
        action_noise: standard deviation of Gaussian noise added to the policy's action
            before clipping (behaviour data of a stochastic policy, as D4RL's SAC data was).
        n_streams: number B of environments stepped together (part of the recipe).
        salt: distinguishes recipes that share a seed (random, medium and expert draw
            different start states).
        progress: show a tqdm progress bar.

    Returns:
        A D4RL-format dict of T transitions.
    """
    import torch
    from tqdm.auto import tqdm

    spec = get_spec(env_name)
    size = check_positive_int(size, "size")
    n_streams = check_positive_int(n_streams, "n_streams")
    if action_noise < 0:
        raise ValueError(f"action_noise must be >= 0, got {action_noise!r}")
    steps = math.ceil(size / n_streams)
    rngs = [np.random.default_rng(np.random.SeedSequence([int(seed), int(salt), k])) for k in range(n_streams)]
    envs = [make_env(env_name) for _ in range(n_streams)]
    handles = [mujoco_handles(env) for env in envs]
    obs = np.stack([env.reset(seed=int(rng.integers(2**31)))[0] for env, rng in zip(envs, rngs, strict=False)])
    nq, nv = handles[0][0].nq, handles[0][0].nv
    assembler = EpisodeAssembler(
        n_streams,
        steps,
        {
            "observations": (spec.obs_dim,),
            "actions": (spec.act_dim,),
            "rewards": (),
            "next_observations": (spec.obs_dim,),
            "infos/qpos": (nq,),
            "infos/qvel": (nv,),
        },
    )
    next_obs = np.zeros_like(obs)
    rewards = np.zeros(n_streams)
    terminated = np.zeros(n_streams, bool)
    truncated = np.zeros(n_streams, bool)
    bar = tqdm(total=steps * n_streams, disable=not progress, desc=f"{env_name} data", unit="step")
    for _ in range(steps):
        if policy is None:
            action = np.stack([rng.uniform(-1.0, 1.0, size=spec.act_dim) for rng in rngs])
        else:
            with torch.no_grad():
                action = np.asarray(policy(torch.as_tensor(obs, dtype=torch.float32)), dtype=np.float64)
            if action_noise > 0:
                action = action + np.stack([rng.normal(0.0, action_noise, size=spec.act_dim) for rng in rngs])
        # Stored and executed actions are the same float32 numbers.
        action = np.clip(action, -1.0, 1.0).astype(np.float32)
        qpos = np.stack([data.qpos for _, data in handles])
        qvel = np.stack([data.qvel for _, data in handles])
        for k, env in enumerate(envs):
            nxt, reward, term, trunc, _ = env.step(action[k])
            next_obs[k], rewards[k], terminated[k], truncated[k] = nxt, reward, term, trunc
        assembler.add(
            {
                "observations": obs,
                "actions": action,
                "rewards": rewards,
                "next_observations": next_obs,
                "infos/qpos": qpos,
                "infos/qvel": qvel,
            },
            terminated,
            truncated,
        )
        obs = next_obs.copy()
        for k in np.flatnonzero(terminated | truncated):
            obs[k] = envs[k].reset()[0]
        bar.update(n_streams)
    bar.close()
    for env in envs:
        env.close()
    return _ordered(assembler.finish(size))


def generate_replay_dataset(
    env_name: str,
    size: int,
    train_args: dict,
    progress: bool = True,
    work_dir: str | os.PathLike | None = None,
) -> dict[str, np.ndarray]:
    """*medium-replay*: every transition of the behaviour training run, up to ``size`` of them.
    (A recipe, read top to bottom.)

    The behaviour run is re-executed with :func:`opcc_edu.policies.train_ppo` (deterministic on
    the CPU for a given seed, with constant schedules, so a shorter run is an exact prefix of
    the original one) for just enough steps to collect ``size`` transitions.

    Args:
        env_name: a locomotion environment.
        size: number of transitions T (at most the medium checkpoint's training step).
        train_args: keyword arguments of ``train_ppo`` for the behaviour run (see
            :func:`opcc_edu.policies.behavior_train_args`); ``total_steps`` is replaced.
        progress: show a tqdm progress bar.
        work_dir: where the replay's (unused) checkpoints go; a temporary directory by default.

    Returns:
        A D4RL-format dict of T transitions in the order the training run finished its episodes,
        with ``infos/qpos``/``infos/qvel``: the simulator state of each observation, read from
        the training environments before each step (:func:`opcc_edu.policies.train_ppo`'s
        transition callback).
    """
    import tempfile

    from ..policies import train_ppo

    spec = get_spec(env_name)
    size = check_positive_int(size, "size")
    config = train_args["config"]
    n_envs = int(config.n_envs)
    steps = math.ceil(size / n_envs)
    env = make_env(env_name)
    model = mujoco_handles(env)[0]
    nq, nv = model.nq, model.nv
    env.close()
    assembler = EpisodeAssembler(
        n_envs,
        # train_ppo rounds its length up to whole rollouts.
        math.ceil(size / config.rollout_steps) * config.n_steps,
        {
            "observations": (spec.obs_dim,),
            "actions": (spec.act_dim,),
            "rewards": (),
            "next_observations": (spec.obs_dim,),
            "infos/qpos": (nq,),
            "infos/qvel": (nv,),
        },
    )

    def record(obs, action, reward, next_obs, terminated, truncated, qpos, qvel) -> None:
        if assembler.step < assembler.n_steps:
            assembler.add(
                {
                    "observations": obs,
                    "actions": action,
                    "rewards": reward,
                    "next_observations": next_obs,
                    "infos/qpos": qpos,
                    "infos/qvel": qvel,
                },
                terminated,
                truncated,
            )

    args = {
        key: value for key, value in train_args.items() if key not in ("total_steps", "checkpoint_steps", "out_dir")
    }
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        train_ppo(
            **args,
            total_steps=steps * n_envs,
            checkpoint_steps=[],
            out_dir=tmp,
            progress=progress,
            transition_callback=record,
        )
    return _ordered(assembler.finish(size))
