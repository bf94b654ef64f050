"""PPO training (stable-baselines3, imported lazily) and export of the trained actor.

The query and behaviour policies are trained with PPO from stable-baselines3 (Schulman et al.,
2017; Raffin et al., 2021) and exported to :class:`~opcc_edu.policies.actor.Actor`.

* :class:`PPOConfig` / :func:`default_ppo_config` -- hyperparameters (constant schedules).
* :func:`train_ppo` -- the deterministic training entry point; saves an exported actor at each
  checkpoint step and can hand every collected transition to a callback (the datasets module
  builds D4RL's *medium-replay* from it).
* :func:`actor_from_sb3` -- export of a stable-baselines3 policy.

The Gaussian PPO policy acts through ``tanh``: the environment receives ``tanh(u)`` for the
sampled ``u``. The deterministic policy ``tanh(mean)`` is therefore exactly what ``Actor``
computes, with no clipping mismatch between training and export. Mazes train on the dense reward
of :mod:`opcc_edu.policies.shaping`.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..envs import get_spec, make_env, mujoco_handles
from ..io import load_tensors
from ..provenance import package_versions
from ..utils import check_positive_int, dataclass_from_dict, redirect_torch_caches
from .actor import OBS_CLIP, Actor, save_actor
from .shaping import MazeDistance

TransitionCallback = Callable[
    [np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], None
]
"""``callback(obs, action, reward, next_obs, terminated, truncated, qpos, qvel)``; see :func:`train_ppo`."""

TRAINING_PACKAGES: tuple[str, ...] = (
    "opcc_edu",
    "torch",
    "stable-baselines3",
    "gymnasium",
    "gymnasium-robotics",
    "mujoco",
    "numpy",
)
"""Packages whose versions a trained policy records (a different version may change the run)."""

RUN_FORMAT = 1
"""Version of the training recipe stored in checkpoints; cached runs of another version are not reused."""


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """Hyperparameters of :func:`train_ppo` (stable-baselines3 PPO with constant schedules).

    Constant learning rate and clip range make a run's first k steps independent of its total
    length, so a run stopped at a checkpoint is an exact prefix of the longer run.
    """

    n_envs: int = 4
    """Parallel environments (stepped in one process)."""
    n_steps: int = 512
    """Steps per environment per rollout; a rollout is ``n_envs * n_steps`` transitions."""
    batch_size: int = 128
    """Minibatch size of the PPO update."""
    n_epochs: int = 10
    """Passes over each rollout."""
    learning_rate: float = 3e-4
    """Adam step size (constant)."""
    gamma: float = 0.99
    """Discount used for training (evaluation is undiscounted)."""
    gae_lambda: float = 0.95
    """GAE parameter."""
    clip_range: float = 0.2
    """PPO ratio clipping (constant)."""
    ent_coef: float = 0.0
    """Entropy bonus."""
    max_grad_norm: float = 0.5
    """Gradient-norm clipping."""
    log_std_init: float = -0.5
    """Initial log standard deviation of the Gaussian before tanh."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Hidden layers of the actor (and of the separate critic)."""
    normalize_reward: bool = True
    """Scale rewards by a running return standard deviation (observations are always normalised)."""
    train_max_episode_steps: int | None = None
    """Episode limit during training (``None``: the Table 8 limit)."""

    @property
    def rollout_steps(self) -> int:
        """Transitions per rollout (checkpoints fall on multiples of it)."""
        return self.n_envs * self.n_steps

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (``hidden_sizes`` as a list)."""
        out = dataclasses.asdict(self)
        out["hidden_sizes"] = list(self.hidden_sizes)
        return out

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> PPOConfig:
        """The configuration stored by :meth:`to_dict`."""
        return dataclass_from_dict(cls, values)


def default_ppo_config(env_name: str) -> PPOConfig:
    """The PPO hyperparameters used for the shipped policies of ``env_name``."""
    spec = get_spec(env_name)
    if spec.is_maze:
        return PPOConfig(n_envs=8, n_steps=256, batch_size=256, gamma=0.99)
    return PPOConfig(n_envs=4, n_steps=512, batch_size=128)


def round_up_to_multiple(value: int, multiple: int) -> int:
    """The smallest multiple of ``multiple`` that is at least ``value`` (a rollout boundary)."""
    return int(math.ceil(value / multiple) * multiple)


def _make_training_env(env_name: str, config: PPOConfig) -> Callable[[], Any]:
    """A factory of one training environment: tanh actions, dense maze reward, episode statistics."""
    import gymnasium as gym
    from stable_baselines3.common.monitor import Monitor

    spec = get_spec(env_name)
    distance = MazeDistance(env_name) if spec.is_maze else None

    class TanhAction(gym.Wrapper):
        """The policy samples u; the environment receives tanh(u) in [-1, 1]^A.

        SB3 needs a bounded action space: |u| <= 20 changes tanh(u) by less than 1e-17."""

        def __init__(self, env):
            super().__init__(env)
            self.action_space = gym.spaces.Box(-20.0, 20.0, shape=env.action_space.shape, dtype=np.float32)

        def step(self, action):
            env_action = np.tanh(np.asarray(action, dtype=np.float32))
            obs, reward, terminated, truncated, info = self.env.step(env_action)
            info = dict(info, env_action=env_action, env_reward=float(reward))
            if distance is not None:
                reward = -distance(obs[:2])
            return obs, reward, terminated, truncated, info

    def factory():
        env = make_env(env_name, max_episode_steps=config.train_max_episode_steps)
        return Monitor(TanhAction(env))

    return factory


def _simulator_states(venv: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(qpos (n, nq), qvel (n, nv))`` float64 copies of the MuJoCo states of a DummyVecEnv's environments."""
    handles = [mujoco_handles(env) for env in venv.envs]
    return np.stack([data.qpos for _, data in handles]), np.stack([data.qvel for _, data in handles])


def _transition_recorder(venv: Any, callback: TransitionCallback) -> Any:
    """A VecEnv wrapper that reports every raw environment transition to ``callback``.

    The simulator state of each transition's observation is read when the actions are handed
    to the environments (``step_async``): before the step, and so before the automatic reset
    that follows an episode's end. Reading it changes nothing in the run.
    """
    from stable_baselines3.common.vec_env import VecEnvWrapper

    class TransitionRecorder(VecEnvWrapper):
        def reset(self):
            obs = self.venv.reset()
            self._last_obs = np.array(obs, copy=True)
            return obs

        def step_async(self, actions):
            self._states = _simulator_states(self.venv)
            self.venv.step_async(actions)

        def step_wait(self):
            obs, rewards, dones, infos = self.venv.step_wait()
            next_obs = np.array(obs, copy=True)
            truncated = np.zeros(len(dones), dtype=bool)
            for i, done in enumerate(dones):
                if done:
                    next_obs[i] = infos[i]["terminal_observation"]
                    truncated[i] = bool(infos[i].get("TimeLimit.truncated", False))
            terminated = np.asarray(dones, dtype=bool) & ~truncated
            actions = np.stack([info["env_action"] for info in infos])
            env_rewards = np.asarray([info["env_reward"] for info in infos], dtype=np.float64)
            callback(self._last_obs, actions, env_rewards, next_obs, terminated, truncated, *self._states)
            self._last_obs = np.array(obs, copy=True)
            return obs, rewards, dones, infos

    return TransitionRecorder(venv)


def actor_from_sb3(model: Any, vec_normalize: Any | None = None) -> Actor:
    """Export the deterministic policy of a stable-baselines3 PPO model to an :class:`Actor`.

    The model must use an MLP policy with tanh activations and separate actor/critic networks;
    the exported actor computes ``tanh(mean action)``, the action the training environments
    received for a zero-noise sample (they apply tanh, see :func:`train_ppo`).

    Args:
        model: a ``stable_baselines3.PPO`` (or its ``policy``).
        vec_normalize: the ``VecNormalize`` wrapper whose observation statistics the policy saw,
            or ``None`` for raw observations.

    Returns:
        An :class:`Actor` in eval mode on the CPU.
    """
    policy = getattr(model, "policy", model)
    extractor = getattr(policy, "mlp_extractor", None)
    if extractor is None or not hasattr(policy, "action_net"):
        raise ValueError(f"model must be an SB3 actor-critic with an MLP extractor, got {type(policy).__name__}")
    linears = [m for m in extractor.policy_net if isinstance(m, nn.Linear)]
    activations = [m for m in extractor.policy_net if not isinstance(m, nn.Linear)]
    if any(not isinstance(m, nn.Tanh) for m in activations):
        raise ValueError(f"the policy network must use tanh activations, got {[type(m).__name__ for m in activations]}")
    features = getattr(policy, "features_extractor", None)
    if features is not None and type(features).__name__ != "FlattenExtractor":
        raise ValueError(f"only the flatten features extractor is supported, got {type(features).__name__}")
    obs_dim = int(np.prod(policy.observation_space.shape))
    act_dim = int(policy.action_net.out_features)
    hidden = tuple(layer.out_features for layer in linears)
    normalized = vec_normalize is not None and vec_normalize.norm_obs
    clip = None
    if normalized:
        clip = float(vec_normalize.clip_obs) if np.isfinite(vec_normalize.clip_obs) else None
    # Constructing an Actor draws its initial weights from torch's global generator; exporting
    # in the middle of a run must not shift PPO's own random stream, or checkpoints would
    # change the run they record.
    with torch.random.fork_rng(devices=[]):
        actor = Actor(obs_dim, act_dim, hidden, obs_clip=clip)
    with torch.no_grad():
        for target, source in zip(actor.layers, [*linears, policy.action_net], strict=True):
            target.weight.copy_(source.weight.detach().cpu().float())
            target.bias.copy_(source.bias.detach().cpu().float())
        if normalized:
            rms = vec_normalize.obs_rms
            actor.obs_mean.copy_(torch.as_tensor(rms.mean, dtype=torch.float32))
            actor.obs_std.copy_(torch.as_tensor(np.sqrt(rms.var + vec_normalize.epsilon), dtype=torch.float32))
    return actor.eval()


def training_package_versions() -> dict[str, str]:
    """Versions of :data:`TRAINING_PACKAGES`, as recorded with every trained policy."""
    return package_versions(TRAINING_PACKAGES)


def _checkpoint_path(out_dir: Path, step: int) -> Path:
    return out_dir / f"step_{step:09d}.safetensors"


def _cached_checkpoints(
    out_dir: Path, env_name: str, seed: int, config: PPOConfig, steps: Sequence[int]
) -> list[Path] | None:
    """Checkpoint files of an identical earlier run for every step, or None if any is missing."""
    paths = []
    for step in steps:
        path = _checkpoint_path(out_dir, step)
        if not path.exists():
            return None
        try:
            _, meta = load_tensors(path)
        except (OSError, ValueError):
            return None
        same = (
            meta.get("env_name") == env_name
            and meta.get("seed") == seed
            and meta.get("ppo_config") == config.to_dict()
            and meta.get("run_format", 1) == RUN_FORMAT  # files predating the field are format 1
            and meta.get("train_step") == step
        )
        if not same:
            return None
        paths.append(path)
    return paths


def _rollout_steps(total_steps: int, checkpoint_steps: Sequence[int], rollout: int) -> tuple[int, list[int]]:
    """``total_steps`` and the checkpoint steps rounded up to rollouts; the total is a checkpoint."""
    total = round_up_to_multiple(check_positive_int(total_steps, "total_steps"), rollout)
    wanted = set()
    for step in checkpoint_steps:
        step = check_positive_int(step, "checkpoint_steps entry", minimum=0)
        if step > total:
            raise ValueError(f"checkpoint_steps entry {step} exceeds total_steps {total}")
        wanted.add(round_up_to_multiple(step, rollout))
    wanted.add(total)
    return total, sorted(wanted)


def _build_model(env_name: str, seed: int, config: PPOConfig, transition_callback: TransitionCallback | None):
    """The seeded SB3 PPO model and its normalised vector environment, logging nowhere."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.utils import set_random_seed
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    set_random_seed(seed)
    venv = DummyVecEnv([_make_training_env(env_name, config)] * config.n_envs)
    if transition_callback is not None:
        venv = _transition_recorder(venv, transition_callback)
    venv = VecNormalize(venv, norm_obs=True, norm_reward=config.normalize_reward, clip_obs=OBS_CLIP, gamma=config.gamma)
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=config.n_steps,
        batch_size=config.batch_size,
        n_epochs=config.n_epochs,
        learning_rate=config.learning_rate,
        gamma=config.gamma,
        gae_lambda=config.gae_lambda,
        clip_range=config.clip_range,
        ent_coef=config.ent_coef,
        max_grad_norm=config.max_grad_norm,
        policy_kwargs=dict(
            net_arch=dict(pi=list(config.hidden_sizes), vf=list(config.hidden_sizes)),
            activation_fn=nn.Tanh,
            log_std_init=config.log_std_init,
        ),
        seed=seed,
        device="cpu",
        verbose=0,
    )
    # SB3's default logger creates an SB3-<date> directory in the system temp dir even when it
    # writes nothing; a logger without outputs keeps training free of files.
    model.set_logger(Logger(folder=None, output_formats=[]))
    return model, venv


def train_ppo(
    env_name: str,
    seed: int,
    total_steps: int,
    checkpoint_steps: Sequence[int],
    out_dir: str | os.PathLike,
    progress: bool = True,
    transition_callback: TransitionCallback | None = None,
    config: PPOConfig | None = None,
    metadata: dict[str, Any] | None = None,
    reuse: bool = False,
) -> list[Path]:
    """Train a PPO policy and save an exported :class:`Actor` at each checkpoint step.
    (A recipe, read top to bottom.)

    Deterministic on the CPU given ``seed``: the same arguments give the same transitions and
    bit-identical weights. A checkpoint at step k is the policy after its updates on the first
    k transitions (k is rounded up to a multiple of the rollout size ``config.rollout_steps``,
    and so is ``total_steps``). Because every schedule is constant, ``train_ppo`` with
    ``total_steps=k`` reproduces the first k steps of a longer run exactly -- the datasets module
    relies on this to rebuild *medium-replay* with ``transition_callback``. Training writes no
    log files.

    Args:
        env_name: one of :data:`opcc_edu.envs.ENV_NAMES`.
        seed: training seed (PPO, environments, action sampling).
        total_steps: environment steps to train for.
        checkpoint_steps: steps at which to save the actor (0 = the untrained policy); the final
            policy is always saved.
        out_dir: directory receiving ``step_<k>.safetensors`` files.
        progress: show a tqdm progress bar.
        transition_callback: called after every vector step with numpy batches over the
            ``n_envs`` training environments: ``obs (n, D)``, ``action (n, A)`` (what the
            environment received, in [-1, 1]), ``reward (n,)`` (the environment's own reward:
            the sparse one for mazes), ``next_obs (n, D)`` (the true next observation, also at
            episode ends), ``terminated (n,)`` and ``truncated (n,)`` booleans, and the MuJoCo
            state of ``obs``: ``qpos (n, nq)`` and ``qvel (n, nv)`` (float64, read before the
            step and before any automatic reset; :func:`opcc_edu.envs.set_state` of
            ``concat(qpos, qvel)`` reproduces ``obs``).
        config: hyperparameters (default :func:`default_ppo_config`).
        metadata: extra JSON facts stored in every checkpoint.
        reuse: if ``out_dir`` already holds every requested checkpoint from a run with the same
            environment, seed and configuration (possibly a longer run: its first steps are this
            run's), return those files instead of training. Ignored with a transition callback.

    Returns:
        Paths of the saved checkpoints, in step order.
    """
    try:
        from stable_baselines3.common.callbacks import BaseCallback
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ImportError("train_ppo needs stable-baselines3: pip install 'opcc_edu[train]'") from exc
    from tqdm.auto import tqdm

    get_spec(env_name)
    redirect_torch_caches()
    seed = check_positive_int(seed, "seed", minimum=0)
    config = config or default_ppo_config(env_name)
    total, wanted = _rollout_steps(total_steps, checkpoint_steps, config.rollout_steps)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if reuse and transition_callback is None:
        cached = _cached_checkpoints(out_dir, env_name, seed, config, wanted)
        if cached is not None:
            return cached

    model, venv = _build_model(env_name, seed, config, transition_callback)
    base_meta = {
        "env_name": env_name,
        "seed": seed,
        "total_steps": total,
        "ppo_config": config.to_dict(),
        "run_format": RUN_FORMAT,
        "package_versions": training_package_versions(),
        **(metadata or {}),
    }
    saved: dict[int, Path] = {}

    def save(step: int) -> None:
        saved[step] = _checkpoint_path(out_dir, step)
        save_actor(saved[step], actor_from_sb3(model, venv), dict(base_meta, train_step=int(step)))

    bar = tqdm(total=total, desc=f"PPO {env_name} seed {seed}", unit="step", disable=not progress)

    class Checkpoints(BaseCallback):
        def _on_rollout_start(self) -> None:
            # Runs after the update on all transitions so far: the checkpoint "at step k".
            if self.num_timesteps in wanted and self.num_timesteps not in saved:
                save(self.num_timesteps)

        def _on_step(self) -> bool:
            bar.update(self.training_env.num_envs)
            return True

    try:
        model.learn(total_timesteps=total, callback=Checkpoints(), progress_bar=False)
    finally:
        bar.close()
    if total not in saved:
        save(total)
    venv.close()
    return list(saved.values())
