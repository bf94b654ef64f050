"""Query policies and behaviour policies: small MLP actors, PPO training, export, evaluation.

The OPCC benchmark compares four hand-picked policies of distinct quality per environment
(paper Section 4, step 1; their returns are in Table 9). Here they are trained with PPO from
stable-baselines3 (Schulman et al., 2017; Raffin et al., 2021) and exported to :class:`Actor`, a plain
torch module, so that *using* them needs neither stable-baselines3 nor pickle: weights are
safetensors files under ``opcc_edu/assets/policies/<env>/level<k>.safetensors``.

* :class:`Actor` -- ``obs (..., D) -> action (..., A)`` in [-1, 1]^A, deterministic: observation
  normalisation (the running statistics PPO trained with), a tanh MLP, a final tanh.
* :class:`StackedActors` -- P actors evaluated for N rows, each row with its own policy, in one
  batched computation (the Monte-Carlo ground truth steps thousands of queries at once).
* :func:`train_ppo` -- the deterministic training entry point; saves an exported actor at each
  checkpoint step and can hand every collected transition to a callback (the datasets module
  builds D4RL's *medium-replay* from it).
* :func:`evaluate_actor` -- mean return over episodes, stepping all episodes in lockstep.
* :func:`build_query_policies` / :func:`build_behavior_policies` -- the recipes behind
  ``opcc-edu build policies ENV``: train, evaluate every checkpoint on 20 episodes, pick four
  levels of distinct mean return (or the *medium* and *expert* behaviour policies).

Training details that differ from the original benchmark (documented, deliberate):

* The Gaussian PPO policy acts through ``tanh``: the environment receives ``tanh(u)`` for the
  sampled ``u``. The deterministic policy ``tanh(mean)`` is therefore exactly what
  :class:`Actor` computes, with no clipping mismatch between training and export.
* Mazes train on a dense reward, minus the shortest-path distance through free cells from the
  ball to the goal (:class:`MazeDistance`), and are evaluated on the benchmark's sparse reward.
  A straight-line distance would pull the ball into walls (the U-maze's goal is behind one).
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import math
import os
import shlex
import sys
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .envs import ENV_NAMES, LOCOMOTION_NAMES, get_spec, make_env
from .io import atomic_write_text, load_tensors, save_tensors
from .utils import cache_dir, check_choice, check_positive_int, dataclass_from_dict

POLICY_LEVELS: tuple[int, ...] = (1, 2, 3, 4)
"""Query-policy levels; level 1 is the best policy and 4 the worst (the order of Table 9)."""
BEHAVIOR_KINDS: tuple[str, ...] = ("medium", "expert")
"""Behaviour policies of the locomotion datasets (D4RL's recipe)."""
ASSETS_DIR = Path(__file__).resolve().parent / "assets"
POLICY_TABLE_FILE = "policy_table.json"
BEHAVIOR_FILE = "behavior.json"
EVAL_EPISODES = 20
"""Episodes per policy in the Table 9 analogue (the paper's count)."""
QUERY_POLICY_SEED = 0
"""Default training seed of the query policies."""
BEHAVIOR_SEED = 1
"""Default training seed of the behaviour policies (a different run from the query policies)."""
EVAL_SEED = 10_000
"""Evaluation episodes reset with seeds EVAL_SEED, EVAL_SEED + 1, ... (never a training seed)."""
OBS_CLIP = 10.0
"""Normalised observations are clipped to [-OBS_CLIP, OBS_CLIP], as during PPO training."""

TransitionCallback = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]


# --------------------------------------------------------------------------------------------
# The exported actor
# --------------------------------------------------------------------------------------------


class Actor(nn.Module):
    """A deterministic MLP policy with input normalisation and tanh-bounded actions.

    ``forward`` computes ``tanh(MLP(clip((obs - obs_mean) / obs_std, -c, c)))`` with tanh
    hidden activations, so actions always lie in [-1, 1]^A.

    Args:
        obs_dim: observation size D.
        act_dim: action size A.
        hidden_sizes: widths of the hidden layers.
        obs_clip: bound ``c`` applied to normalised observations (``None``: no clipping).
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden_sizes: Sequence[int] = (64, 64),
        obs_clip: float | None = OBS_CLIP,
    ):
        super().__init__()
        self.obs_dim = check_positive_int(obs_dim, "obs_dim")
        self.act_dim = check_positive_int(act_dim, "act_dim")
        self.hidden_sizes = tuple(check_positive_int(h, "hidden_sizes entry") for h in hidden_sizes)
        if obs_clip is not None and not (isinstance(obs_clip, (int, float)) and obs_clip > 0):
            raise ValueError(f"obs_clip must be a positive number or None, got {obs_clip!r}")
        self.obs_clip = None if obs_clip is None else float(obs_clip)
        sizes = (self.obs_dim, *self.hidden_sizes, self.act_dim)
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        self.register_buffer("obs_mean", torch.zeros(self.obs_dim))
        self.register_buffer("obs_std", torch.ones(self.obs_dim))

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        """Normalised (and clipped) observations: (..., D) -> (..., D)."""
        x = (obs - self.obs_mean) / self.obs_std
        return x if self.obs_clip is None else x.clamp(-self.obs_clip, self.obs_clip)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Actions for observations.

        Args:
            obs: (..., D) float32.

        Returns:
            (..., A) actions in [-1, 1].
        """
        if obs.shape[-1] != self.obs_dim:
            raise ValueError(f"obs must have last dimension obs_dim={self.obs_dim}, got shape {tuple(obs.shape)}")
        x = self.normalize(obs)
        for layer in self.layers[:-1]:
            x = torch.tanh(layer(x))
        return torch.tanh(self.layers[-1](x))

    @torch.no_grad()
    def act(self, obs: np.ndarray) -> np.ndarray:
        """NumPy convenience: (..., D) array -> (..., A) float32 actions."""
        tensor = torch.as_tensor(np.asarray(obs, dtype=np.float32))
        return self(tensor).numpy()

    def extra_repr(self) -> str:
        return f"obs_dim={self.obs_dim}, act_dim={self.act_dim}, hidden_sizes={self.hidden_sizes}, obs_clip={self.obs_clip}"


def save_actor(path: str | os.PathLike, actor: Actor, metadata: dict[str, Any] | None = None) -> Path:
    """Save an :class:`Actor` as safetensors (atomic, with a SHA-256 sidecar).

    Args:
        path: destination ``.safetensors`` file.
        actor: the actor.
        metadata: JSON-serialisable facts to keep with the weights (command, seed, returns...).
            The architecture is added under the key ``"architecture"``.

    Returns:
        The path written.
    """
    if not isinstance(actor, Actor):
        raise ValueError(f"actor must be an opcc_edu.policies.Actor, got {type(actor).__name__}")
    meta = dict(metadata or {})
    meta["architecture"] = {
        "obs_dim": actor.obs_dim,
        "act_dim": actor.act_dim,
        "hidden_sizes": list(actor.hidden_sizes),
        "obs_clip": actor.obs_clip,
    }
    return save_tensors(path, actor.state_dict(), meta)


def load_actor(path: str | os.PathLike) -> tuple[Actor, dict[str, Any]]:
    """Load an actor written by :func:`save_actor`.

    Returns:
        ``(actor, metadata)``; the actor is float32, on the CPU, in eval mode.

    Raises:
        FileNotFoundError: no such file.
        opcc_edu.io.CorruptFileError: checksum mismatch or unreadable file.
    """
    tensors, meta = load_tensors(path)
    arch = meta.get("architecture")
    if arch is None:
        raise ValueError(f"{path}: no 'architecture' metadata; was it written by save_actor?")
    with torch.random.fork_rng(devices=[]):  # loading must not disturb the caller's random stream
        actor = Actor(arch["obs_dim"], arch["act_dim"], tuple(arch["hidden_sizes"]), arch.get("obs_clip"))
    actor.load_state_dict({k: v.to(torch.float32) for k, v in tensors.items()})
    return actor.eval(), meta


class StackedActors(nn.Module):
    """P actors of one architecture evaluated together: row n uses actor ``index[n]``.

    The weights are stacked into (P, in, out) tensors. ``forward`` runs every actor on every
    row with one batched matrix product per layer and then gathers each row's own output: P
    times the arithmetic of a per-row gather, but no (N, in, out) weight copy and no Python loop
    over rows or policies. P is 4 for the benchmark, so this is the cheaper trade.

    Args:
        actors: a non-empty sequence of :class:`Actor` with equal dimensions, hidden sizes and
            observation clipping.
    """

    def __init__(self, actors: Sequence[Actor]):
        super().__init__()
        actors = list(actors)
        if not actors:
            raise ValueError("actors must be a non-empty sequence of Actor")
        first = actors[0]
        for i, actor in enumerate(actors):
            if not isinstance(actor, Actor):
                raise ValueError(f"actors[{i}] must be an Actor, got {type(actor).__name__}")
            if (actor.obs_dim, actor.act_dim, actor.hidden_sizes, actor.obs_clip) != (
                first.obs_dim,
                first.act_dim,
                first.hidden_sizes,
                first.obs_clip,
            ):
                raise ValueError(
                    f"actors[{i}] has architecture {actor.extra_repr()!r}, expected {first.extra_repr()!r} like actors[0]"
                )
        self.n_policies = len(actors)
        self.obs_dim, self.act_dim = first.obs_dim, first.act_dim
        self.hidden_sizes, self.obs_clip = first.hidden_sizes, first.obs_clip
        self.n_layers = len(first.layers)
        with torch.no_grad():
            self.register_buffer("obs_mean", torch.stack([a.obs_mean for a in actors]).float())  # (P, D)
            self.register_buffer("obs_std", torch.stack([a.obs_std for a in actors]).float())
            for k in range(self.n_layers):
                weight = torch.stack([a.layers[k].weight.t() for a in actors]).float().contiguous()  # (P, in, out)
                bias = torch.stack([a.layers[k].bias for a in actors]).float().unsqueeze(1)  # (P, 1, out)
                self.register_buffer(f"weight{k}", weight)
                self.register_buffer(f"bias{k}", bias)

    def forward(self, obs: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """Actions of the selected actor for every row.

        Args:
            obs: (N, D) float32 observations.
            index: (N,) long, entries in [0, P).

        Returns:
            (N, A) actions in [-1, 1].
        """
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            raise ValueError(f"obs must have shape (N, {self.obs_dim}), got {tuple(obs.shape)}")
        index = torch.as_tensor(index, device=obs.device).long()
        if index.shape != obs.shape[:1]:
            raise ValueError(f"index must have shape ({obs.shape[0]},), got {tuple(index.shape)}")
        if index.numel() and (int(index.min()) < 0 or int(index.max()) >= self.n_policies):
            raise ValueError(
                f"index entries must lie in [0, {self.n_policies}), got range [{int(index.min())}, {int(index.max())}]"
            )
        x = (obs.unsqueeze(0) - self.obs_mean.unsqueeze(1)) / self.obs_std.unsqueeze(1)  # (P, N, D)
        if self.obs_clip is not None:
            x = x.clamp(-self.obs_clip, self.obs_clip)
        for k in range(self.n_layers):
            x = torch.baddbmm(getattr(self, f"bias{k}"), x, getattr(self, f"weight{k}"))
            x = torch.tanh(x)  # hidden layers and the output layer both use tanh
        rows = torch.arange(obs.shape[0], device=obs.device)
        return x[index, rows]


# --------------------------------------------------------------------------------------------
# Maze dense reward
# --------------------------------------------------------------------------------------------


class MazeDistance:
    """Shortest-path distance to a maze's goal through free cells (the dense training reward).

    Cell-to-goal distances come from a breadth-first search over 4-connected free cells (one
    cell is one unit). A position inside cell c is ``min over c' in {c} + free neighbours of c
    of ||xy - centre(c')|| + dist(c')``: the straight-line distance within the goal's cell and
    an estimate that follows corridors elsewhere.

    Args:
        env_name: a maze name.
    """

    def __init__(self, env_name: str):
        spec = get_spec(env_name)
        if not spec.is_maze:
            raise ValueError(f"env_name must be a maze, got {env_name!r}")
        env = make_env(env_name)
        core = env.unwrapped
        self.maze = core.maze
        self.goal = np.asarray(core.goal, dtype=np.float64)
        env.close()
        layout = np.asarray(spec.maze_map)
        self.rows, self.cols = layout.shape
        self.free = layout == 0
        dist = np.full(layout.shape, np.inf)
        gr, gc = spec.goal_cell
        dist[gr, gc] = 0.0
        queue = deque([(gr, gc)])
        while queue:
            r, c = queue.popleft()
            for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                nr, nc = r + dr, c + dc
                if 0 <= nr < self.rows and 0 <= nc < self.cols and self.free[nr, nc] and dist[nr, nc] == np.inf:
                    dist[nr, nc] = dist[r, c] + 1.0
                    queue.append((nr, nc))
        self.cell_distance = dist
        self.centers = {
            (r, c): np.asarray(self.maze.cell_rowcol_to_xy(np.array([r, c])), dtype=np.float64)
            for r in range(self.rows)
            for c in range(self.cols)
        }

    def __call__(self, xy: np.ndarray) -> float:
        """Distance (m) from position ``xy`` (2,) to the goal along the maze."""
        xy = np.asarray(xy, dtype=np.float64)
        if np.linalg.norm(xy - self.goal) <= 0.5 + 1e-12:
            return float(np.linalg.norm(xy - self.goal))
        r, c = (int(v) for v in self.maze.cell_xy_to_rowcol(xy))
        best = np.inf
        for dr, dc in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
            nr, nc = r + dr, c + dc
            if 0 <= nr < self.rows and 0 <= nc < self.cols and self.free[nr, nc]:
                best = min(best, float(np.linalg.norm(xy - self.centers[(nr, nc)])) + self.cell_distance[nr, nc])
        if not np.isfinite(best):  # outside the grid (never for a valid state): fall back to a straight line
            best = float(np.linalg.norm(xy - self.goal))
        return best


# --------------------------------------------------------------------------------------------
# PPO training (stable-baselines3, imported lazily)
# --------------------------------------------------------------------------------------------


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
        out = dataclasses.asdict(self)
        out["hidden_sizes"] = list(self.hidden_sizes)
        return out

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> PPOConfig:
        return dataclass_from_dict(cls, values)


def default_ppo_config(env_name: str) -> PPOConfig:
    """The PPO hyperparameters used for the shipped policies of ``env_name``."""
    spec = get_spec(env_name)
    if spec.is_maze:
        return PPOConfig(n_envs=8, n_steps=256, batch_size=256, gamma=0.99)
    return PPOConfig(n_envs=4, n_steps=512, batch_size=128)


def _round_up(value: int, multiple: int) -> int:
    return int(math.ceil(value / multiple) * multiple)


def _make_training_env(env_name: str, config: PPOConfig):
    """One training environment: tanh actions, dense maze reward, episode statistics."""
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


def _transition_recorder(venv, callback: TransitionCallback):
    """A VecEnv wrapper that reports every raw environment transition to ``callback``."""
    from stable_baselines3.common.vec_env import VecEnvWrapper

    class TransitionRecorder(VecEnvWrapper):
        def reset(self):
            obs = self.venv.reset()
            self._last_obs = np.array(obs, copy=True)
            return obs

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
            callback(self._last_obs, actions, env_rewards, next_obs, terminated, truncated)
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
    clip = None
    if vec_normalize is not None and vec_normalize.norm_obs:
        clip = float(vec_normalize.clip_obs) if np.isfinite(vec_normalize.clip_obs) else None
    # Constructing an Actor draws its initial weights from torch's global generator; exporting
    # in the middle of a run must not shift PPO's own random stream, or checkpoints would
    # change the run they record.
    with torch.random.fork_rng(devices=[]):
        actor = Actor(obs_dim, act_dim, hidden, obs_clip=clip)
    with torch.no_grad():
        for target, source in zip(actor.layers, [*linears, policy.action_net]):
            target.weight.copy_(source.weight.detach().cpu().float())
            target.bias.copy_(source.bias.detach().cpu().float())
        if vec_normalize is not None and vec_normalize.norm_obs:
            rms = vec_normalize.obs_rms
            actor.obs_mean.copy_(torch.as_tensor(rms.mean, dtype=torch.float32))
            actor.obs_std.copy_(torch.as_tensor(np.sqrt(rms.var + vec_normalize.epsilon), dtype=torch.float32))
    return actor.eval()


def _package_versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for name in ("opcc_edu", "torch", "stable-baselines3", "gymnasium", "gymnasium-robotics", "mujoco", "numpy"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def _command_line() -> str:
    argv = list(sys.argv)
    if argv and argv[0].endswith("opcc-edu"):
        argv[0] = "opcc-edu"
    return shlex.join(argv)


RUN_FORMAT = 1
"""Version of the training recipe stored in checkpoints; cached runs of another version are not reused."""


def _cached_checkpoints(out_dir: Path, env_name: str, seed: int, config: PPOConfig, steps: Sequence[int]) -> list[Path] | None:
    """Checkpoint files of an identical earlier run for every step, or None if any is missing."""
    paths = []
    for step in steps:
        path = out_dir / f"step_{step:09d}.safetensors"
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

    Deterministic on the CPU given ``seed``: the same arguments give the same transitions and
    bit-identical weights. A checkpoint at step k is the policy after its updates on the first
    k transitions (k is rounded up to a multiple of the rollout size ``config.rollout_steps``,
    and so is ``total_steps``). Because every schedule is constant, ``train_ppo`` with
    ``total_steps=k`` reproduces the first k steps of a longer run exactly -- the datasets module
    relies on this to rebuild *medium-replay* with ``transition_callback``.

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
            episode ends), ``terminated (n,)`` and ``truncated (n,)`` booleans.
        config: hyperparameters (default :func:`default_ppo_config`).
        metadata: extra JSON facts stored in every checkpoint.
        reuse: if ``out_dir`` already holds every requested checkpoint from a run with the same
            environment, seed and configuration (possibly a longer run: its first steps are this
            run's), return those files instead of training. Ignored with a transition callback.

    Returns:
        Paths of the saved checkpoints, in step order.
    """
    try:
        from stable_baselines3 import PPO
        from stable_baselines3.common.callbacks import BaseCallback
        from stable_baselines3.common.utils import set_random_seed
        from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ImportError("train_ppo needs stable-baselines3: pip install 'opcc_edu[train]'") from exc
    from tqdm.auto import tqdm

    spec = get_spec(env_name)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    config = config or default_ppo_config(env_name)
    rollout = config.rollout_steps
    total = _round_up(check_positive_int(total_steps, "total_steps"), rollout)
    wanted = set()
    for step in checkpoint_steps:
        step = check_positive_int(step, "checkpoint_steps entry", minimum=0)
        if step > total:
            raise ValueError(f"checkpoint_steps entry {step} exceeds total_steps {total}")
        wanted.add(_round_up(step, rollout))
    wanted.add(total)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if reuse and transition_callback is None:
        cached = _cached_checkpoints(out_dir, env_name, int(seed), config, sorted(wanted))
        if cached is not None:
            return cached

    set_random_seed(int(seed))
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
        seed=int(seed),
        device="cpu",
        verbose=0,
    )
    base_meta = {
        "env_name": env_name,
        "seed": int(seed),
        "total_steps": total,
        "ppo_config": config.to_dict(),
        "run_format": RUN_FORMAT,
        "package_versions": _package_versions(),
        **(metadata or {}),
    }
    saved: list[Path] = []

    def save(step: int) -> None:
        actor = actor_from_sb3(model, venv)
        path = out_dir / f"step_{step:09d}.safetensors"
        save_actor(path, actor, dict(base_meta, train_step=int(step)))
        saved.append(path)

    bar = tqdm(total=total, desc=f"PPO {env_name} seed {seed}", unit="step", disable=not progress)

    class Checkpoints(BaseCallback):
        def _on_rollout_start(self) -> None:
            # Runs after the update on all transitions so far: the checkpoint "at step k".
            if self.num_timesteps in wanted and self.num_timesteps not in done_steps:
                done_steps.add(self.num_timesteps)
                save(self.num_timesteps)

        def _on_step(self) -> bool:
            bar.update(self.training_env.num_envs)
            return True

    done_steps: set[int] = set()
    try:
        model.learn(total_timesteps=total, callback=Checkpoints(), progress_bar=False)
    finally:
        bar.close()
    if total not in done_steps:
        save(total)
    venv.close()
    return saved


# --------------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------------


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
        raise ValueError(f"means must be a 1-D sequence of at least {len(POLICY_LEVELS)} values, got shape {means.shape}")
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


# --------------------------------------------------------------------------------------------
# Shipped assets: loading
# --------------------------------------------------------------------------------------------


def _policy_path(env_name: str, level: int, assets_dir: Path | None = None) -> Path:
    check_choice(level, POLICY_LEVELS, "level")
    return Path(assets_dir or ASSETS_DIR) / "policies" / env_name / f"level{level}.safetensors"


def load_policy(env_name: str, level: int) -> Actor:
    """The shipped query policy of ``env_name`` at ``level`` (1 = best, 4 = worst).

    Returns:
        An :class:`Actor` in eval mode, float32, on the CPU.
    """
    check_choice(env_name, ENV_NAMES, "env_name")
    path = _policy_path(env_name, level)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; build it with `opcc-edu build policies {env_name}`")
    return load_actor(path)[0]


def load_policies(env_name: str) -> list[Actor]:
    """The four query policies of ``env_name``; index i holds level i + 1."""
    return [load_policy(env_name, level) for level in POLICY_LEVELS]


def load_behavior_policy(env_name: str, kind: str, assets_dir: str | os.PathLike | None = None) -> Actor:
    """A behaviour policy of the locomotion datasets: ``kind`` in {"medium", "expert"}."""
    check_choice(env_name, LOCOMOTION_NAMES, "env_name (locomotion environments have behaviour policies)")
    check_choice(kind, BEHAVIOR_KINDS, "kind")
    path = Path(assets_dir or ASSETS_DIR) / "behavior" / env_name / f"{kind}.safetensors"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; build it with `opcc-edu build policies {env_name} --behavior`")
    return load_actor(path)[0]


def behavior_info(env_name: str | None = None, assets_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """Contents of ``assets/behavior/behavior.json`` (for one environment, or all).

    Each environment's entry holds the returns of its medium and expert policies, the training
    step of the medium checkpoint (``medium_step``) and ``train_ppo_args``: call
    ``train_ppo(**args, total_steps=medium_step, ...)`` to replay that run up to the checkpoint.
    """
    path = Path(assets_dir or ASSETS_DIR) / "behavior" / BEHAVIOR_FILE
    data = json.loads(path.read_text()) if path.exists() else {"environments": {}}
    if env_name is None:
        return data
    check_choice(env_name, LOCOMOTION_NAMES, "env_name")
    if env_name not in data["environments"]:
        raise FileNotFoundError(f"no behaviour policies for {env_name} in {path}; run `opcc-edu build policies {env_name} --behavior`")
    return data["environments"][env_name]


def behavior_train_args(env_name: str, assets_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """Keyword arguments of :func:`train_ppo` for the behaviour run of ``env_name`` (config as PPOConfig)."""
    args = dict(behavior_info(env_name, assets_dir)["train_ppo_args"])
    args["config"] = PPOConfig.from_dict(args["config"])
    return args


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

    Args:
        env_name: a locomotion environment.
        transition_callback: see :func:`train_ppo`.
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
    path = train_ppo(**args, checkpoint_steps=[], out_dir=out, progress=progress, transition_callback=transition_callback)[-1]
    if check_medium:
        replayed = load_actor(path)[0].state_dict()
        shipped = load_behavior_policy(env_name, "medium", assets_dir).state_dict()
        if not all(torch.equal(replayed[k], shipped[k]) for k in shipped):
            versions = json.dumps(info.get("package_versions", {}))
            raise RuntimeError(
                f"replaying the {env_name} behaviour run did not reproduce the shipped medium policy; "
                f"it was trained with {versions}, this is {json.dumps(_package_versions())}"
            )
    return path


def policy_table(env_name: str | None = None, assets_dir: str | os.PathLike | None = None):
    """The Table 9 analogue: mean and standard deviation of each query policy's return.

    Args:
        env_name: restrict to one environment (``None``: all that were built).
        assets_dir: read from another assets directory (tests).

    Returns:
        ``pandas.DataFrame`` with columns env, level, mean_return, std_return, episodes,
        train_step (returns over ``episodes`` evaluation episodes; sparse reward for mazes).
    """
    import pandas as pd

    path = Path(assets_dir or ASSETS_DIR) / "policies" / POLICY_TABLE_FILE
    data = json.loads(path.read_text()) if path.exists() else {"rows": []}
    columns = ["env", "level", "mean_return", "std_return", "episodes", "train_step"]
    frame = pd.DataFrame([{c: row[c] for c in columns} for row in data["rows"]], columns=columns)
    if env_name is not None:
        check_choice(env_name, ENV_NAMES, "env_name")
        frame = frame[frame["env"] == env_name]
    order = {name: i for i, name in enumerate(ENV_NAMES)}
    frame = frame.sort_values(["env", "level"], key=lambda s: s.map(order) if s.name == "env" else s)
    return frame.reset_index(drop=True)


PAPER_TABLE9: dict[str, tuple[tuple[float, float], ...]] = {
    "maze2d-open": ((122, 10), (104, 22), (18, 14), (4, 8)),
    "maze2d-umaze": ((245, 272), (203, 252), (256, 260), (258, 262)),
    "maze2d-medium": ((235, 35), (197, 58), (23, 73), (3, 9)),
    "maze2d-large": ((231, 268), (160, 201), (50, 76), (9, 9)),
    "halfcheetah": ((1168, 80), (1044, 112), (785, 303), (94, 40)),
    "hopper": ((1195, 794), (1466, 487), (1832, 560), (236, 1)),
    "walker2d": ((2506, 698), (811, 321), (387, 42), (162, 102)),
}
"""(mean, std) return of policies 1..4 in the original benchmark (Koul et al., Table 9; D4RL
environments on mujoco-py, so only the spread of quality is comparable, not the values)."""


def paper_policy_table(env_name: str | None = None):
    """The paper's Table 9 as a DataFrame with the columns of :func:`policy_table`
    (``train_step`` is missing: the paper does not report it)."""
    import pandas as pd

    rows = [
        {"env": env, "level": level, "mean_return": float(m), "std_return": float(sd), "episodes": EVAL_EPISODES}
        for env, cells in PAPER_TABLE9.items()
        for level, (m, sd) in zip(POLICY_LEVELS, cells)
    ]
    frame = pd.DataFrame(rows)
    if env_name is not None:
        check_choice(env_name, ENV_NAMES, "env_name")
        frame = frame[frame["env"] == env_name].reset_index(drop=True)
    return frame


def policy_table_records(assets_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """The raw JSON of the policy table (per-episode returns, seeds, commands, versions)."""
    path = Path(assets_dir or ASSETS_DIR) / "policies" / POLICY_TABLE_FILE
    return json.loads(path.read_text()) if path.exists() else {"rows": []}


# --------------------------------------------------------------------------------------------
# Building the shipped assets
# --------------------------------------------------------------------------------------------


@contextmanager
def _locked_json(path: Path, default: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Read-modify-write a JSON file under an exclusive lock (builds of several environments
    may run at once and must not lose each other's rows)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # The lock lives in the cache so that the package's assets directory stays clean.
    lock_path = cache_dir("locks") / (hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16] + ".lock")
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            data = json.loads(path.read_text()) if path.exists() else default
            yield data
            atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def checkpoint_schedule(total_steps: int, n_checkpoints: int, rollout_steps: int) -> list[int]:
    """Candidate checkpoint steps: the untrained policy, a few early geometric steps (where
    quality changes fastest) and an even grid up to ``total_steps``, on rollout boundaries."""
    total = _round_up(total_steps, rollout_steps)
    grid = np.linspace(0, total, n_checkpoints + 1)
    early = total * np.array([0.01, 0.02, 0.04])
    steps = {_round_up(int(s), rollout_steps) for s in np.concatenate([grid, early])}
    return sorted(s for s in steps if 0 <= s <= total)


def _schedule(total_steps: int, n_checkpoints: int, config: PPOConfig, stop_step: int | None) -> tuple[list[int], int]:
    """Candidate steps and the steps to train: the schedule of a ``total_steps`` run, cut at
    ``stop_step`` (a prefix of that run, exact because every PPO schedule is constant)."""
    steps = checkpoint_schedule(total_steps, n_checkpoints, config.rollout_steps)
    if stop_step is None:
        return steps, steps[-1]
    stop = _round_up(check_positive_int(stop_step, "stop_step"), config.rollout_steps)
    if stop > steps[-1]:
        raise ValueError(f"stop_step {stop_step} exceeds total_steps {total_steps}")
    return [s for s in steps if s < stop] + [stop], stop


def _evaluate_checkpoints(env_name: str, paths: Sequence[Path], episodes: int, seed: int, progress: bool):
    from tqdm.auto import tqdm

    results = []
    for path in tqdm(paths, desc=f"evaluate {env_name} checkpoints", disable=not progress):
        actor, meta = load_actor(path)
        returns = evaluate_actor(env_name, actor, episodes=episodes, seed=seed)
        results.append({"path": path, "train_step": int(meta["train_step"]), "returns": returns})
    return results


def _write_log(path: Path, header: str, results: Sequence[dict[str, Any]], marks: dict[int, str]) -> None:
    lines = [header, f"{'train_step':>10} {'mean':>10} {'std':>10}  chosen"]
    for i, r in enumerate(results):
        lines.append(f"{r['train_step']:>10} {r['returns'].mean():>10.2f} {r['returns'].std():>10.2f}  {marks.get(i, '')}")
    atomic_write_text(path, "\n".join(lines) + "\n")


def build_query_policies(
    env_name: str,
    total_steps: int,
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
) -> list[dict[str, Any]]:
    """Train one PPO run, evaluate its checkpoints and ship four of distinct quality.

    Writes ``<assets>/policies/<env>/level{1..4}.safetensors``, a candidate log
    ``<env>/training_log.txt`` and the environment's rows of ``policy_table.json``.

    Candidates are the checkpoints of :func:`checkpoint_schedule`. ``stop_step`` ends the run
    early (the candidates are the schedule's steps before it, plus ``stop_step``), and ``reuse``
    takes the checkpoints of an identical earlier run from ``work_dir`` instead of training.

    Returns:
        The four table rows (level 1 first).
    """
    check_choice(env_name, ENV_NAMES, "env_name")
    config = config or default_ppo_config(env_name)
    assets = Path(assets_dir or ASSETS_DIR)
    work = Path(work_dir) if work_dir else cache_dir("policy_runs", env_name, f"query_seed{seed}")
    command = _command_line()
    steps, total_steps = _schedule(total_steps, n_checkpoints, config, stop_step)
    paths = train_ppo(
        env_name, seed, total_steps, steps, work, progress=progress, config=config, metadata={"command": command}, reuse=reuse
    )
    results = _evaluate_checkpoints(env_name, paths, episodes, eval_seed, progress)
    chosen = select_levels([r["returns"].mean() for r in results])
    out_dir = assets / "policies" / env_name
    rows = []
    for level, index in zip(POLICY_LEVELS, chosen):
        r = results[index]
        actor, meta = load_actor(r["path"])
        row = {
            "env": env_name,
            "level": level,
            "mean_return": float(r["returns"].mean()),
            "std_return": float(r["returns"].std()),
            "episodes": int(episodes),
            "returns": [float(x) for x in r["returns"]],
            "eval_seed": int(eval_seed),
            "train_step": r["train_step"],
            "train_seed": int(seed),
            "total_steps": int(meta["total_steps"]),
            "command": command,
        }
        save_actor(out_dir / f"level{level}.safetensors", actor, dict(meta, **{k: row[k] for k in row if k != "returns"}))
        rows.append(row)
    _write_log(
        out_dir / "training_log.txt",
        f"# {command}\n# PPO seed {seed}, {episodes} evaluation episodes from seed {eval_seed}; "
        f"config {json.dumps(config.to_dict())}",
        results,
        {idx: f"level {lvl}" for lvl, idx in zip(POLICY_LEVELS, chosen)},
    )
    with _locked_json(assets / "policies" / POLICY_TABLE_FILE, {"rows": []}) as table:
        table["rows"] = [row for row in table["rows"] if row["env"] != env_name] + rows
        table["package_versions"] = _package_versions()
        table["description"] = (
            "Query policies of each environment: mean and standard deviation (ddof=0) of the undiscounted "
            "return over `episodes` evaluation episodes (sparse reward for mazes); episode i resets with "
            "seed eval_seed + i."
        )
    return rows


def build_behavior_policies(
    env_name: str,
    total_steps: int,
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
) -> dict[str, Any]:
    """Train the behaviour run of a locomotion environment and ship *medium* and *expert*.

    *expert* is the final policy; *medium* is the checkpoint whose mean return is closest to a
    third of the expert's among those up to the first checkpoint that reaches it (D4RL's recipe:
    training stopped early at about a third of the expert's return). ``behavior.json`` records both returns, the medium
    checkpoint's training step and the exact :func:`train_ppo` arguments.

    Returns:
        The environment's entry of ``behavior.json``.
    """
    check_choice(env_name, LOCOMOTION_NAMES, "env_name (behaviour policies exist for locomotion)")
    config = config or default_ppo_config(env_name)
    assets = Path(assets_dir or ASSETS_DIR)
    work = Path(work_dir) if work_dir else cache_dir("policy_runs", env_name, f"behavior_seed{seed}")
    command = _command_line()
    steps, total_steps = _schedule(total_steps, n_checkpoints, config, stop_step)
    paths = train_ppo(
        env_name, seed, total_steps, steps, work, progress=progress, config=config, metadata={"command": command}, reuse=reuse
    )
    results = _evaluate_checkpoints(env_name, paths, episodes, eval_seed, progress)
    expert = len(results) - 1
    if expert < 2:
        raise ValueError(f"the behaviour run needs checkpoints between the start and the end; got steps {steps}")
    # The untrained policy (step 0) is never "medium": medium-replay would be empty.
    means = [r["returns"].mean() for r in results[1:expert]]
    medium = 1 + select_medium(means, results[expert]["returns"].mean())
    out_dir = assets / "behavior" / env_name
    entry: dict[str, Any] = {
        "command": command,
        "seed": int(seed),
        "eval_seed": int(eval_seed),
        "episodes": int(episodes),
        "train_ppo_args": {
            "env_name": env_name,
            "seed": int(seed),
            "total_steps": int(results[expert]["train_step"]),
            "config": config.to_dict(),
        },
        "medium_step": results[medium]["train_step"],
        "expert_step": results[expert]["train_step"],
        "package_versions": _package_versions(),
    }
    for kind, index in (("medium", medium), ("expert", expert)):
        r = results[index]
        actor, meta = load_actor(r["path"])
        entry[f"{kind}_mean_return"] = float(r["returns"].mean())
        entry[f"{kind}_std_return"] = float(r["returns"].std())
        entry[f"{kind}_returns"] = [float(x) for x in r["returns"]]
        save_actor(out_dir / f"{kind}.safetensors", actor, dict(meta, kind=kind, mean_return=entry[f"{kind}_mean_return"]))
    _write_log(
        out_dir / "training_log.txt",
        f"# {command}\n# PPO seed {seed}, {episodes} evaluation episodes from seed {eval_seed}; "
        f"config {json.dumps(config.to_dict())}",
        results,
        {medium: "medium", expert: "expert"},
    )
    with _locked_json(assets / "behavior" / BEHAVIOR_FILE, {"environments": {}}) as data:
        data["environments"][env_name] = entry
        data["description"] = (
            "Behaviour policies of the locomotion datasets. medium_step: training step of the medium "
            "checkpoint; train_ppo(**train_ppo_args with total_steps=medium_step) replays the run up to it "
            "(constant schedules make it an exact prefix)."
        )
    return entry


# --------------------------------------------------------------------------------------------
# Command line and `opcc-edu info`
# --------------------------------------------------------------------------------------------


def add_build_parser(subparsers) -> None:
    """Register ``opcc-edu build policies ENV``."""
    p = subparsers.add_parser(
        "policies",
        help="train the query policies (or behaviour policies) of one environment with PPO",
        description="Train one PPO run, evaluate every checkpoint on 20 episodes and ship four query "
        "policies of distinct quality (paper Table 9), or with --behavior the medium and expert "
        "behaviour policies of a locomotion dataset. Deterministic given --seed.",
    )
    p.add_argument("env", choices=list(ENV_NAMES), help="environment")
    p.add_argument("--behavior", action="store_true", help="build the behaviour policies instead")
    p.add_argument("--steps", type=int, default=None, help="PPO environment steps (default: the profile's policy_train_steps)")
    p.add_argument("--seed", type=int, default=None, help=f"training seed (default {QUERY_POLICY_SEED}, behaviour {BEHAVIOR_SEED})")
    p.add_argument("--checkpoints", type=int, default=16, help="evenly spaced candidate checkpoints (default 16)")
    p.add_argument("--episodes", type=int, default=EVAL_EPISODES, help=f"evaluation episodes (default {EVAL_EPISODES})")
    p.add_argument("--assets-dir", default=None, help="write assets here instead of the package (for experiments)")
    p.add_argument("--work-dir", default=None, help="directory for all checkpoints (default: the cache)")
    p.add_argument(
        "--stop-at",
        type=int,
        default=None,
        help="end the run after this many steps; candidates are the --steps run's checkpoints before it",
    )
    p.add_argument("--no-reuse", action="store_true", help="retrain even if the work directory holds this run's checkpoints")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(handler=_build_handler)


def _build_handler(args) -> int:
    from .config import get_profile

    torch.set_num_threads(1)
    steps = args.steps if args.steps is not None else get_profile().policy_train_steps
    common = dict(
        total_steps=steps,
        n_checkpoints=check_positive_int(args.checkpoints, "--checkpoints"),
        episodes=check_positive_int(args.episodes, "--episodes"),
        assets_dir=args.assets_dir,
        work_dir=args.work_dir,
        stop_step=args.stop_at,
        reuse=not args.no_reuse,
        progress=not args.no_progress,
    )
    if args.behavior:
        entry = build_behavior_policies(args.env, seed=BEHAVIOR_SEED if args.seed is None else args.seed, **common)
        print(
            f"{args.env}: medium {entry['medium_mean_return']:.1f} (step {entry['medium_step']}), "
            f"expert {entry['expert_mean_return']:.1f} (step {entry['expert_step']})"
        )
    else:
        rows = build_query_policies(args.env, seed=QUERY_POLICY_SEED if args.seed is None else args.seed, **common)
        for row in rows:
            print(f"{args.env} level {row['level']}: {row['mean_return']:.1f} ± {row['std_return']:.1f} (step {row['train_step']})")
    return 0


def info_lines() -> list[str]:
    """Lines for ``opcc-edu info``: the Table 9 analogue and the behaviour policies."""
    table = policy_table()
    lines = [f"Query policies (paper Table 9 analogue; mean ± std return over {EVAL_EPISODES} episodes):"]
    lines.append(f"  {'env':<15}" + "".join(f"{'level ' + str(k):>19}" for k in POLICY_LEVELS))
    for name in ENV_NAMES:
        rows = table[table["env"] == name].set_index("level")
        cells = [
            f"{rows.loc[k, 'mean_return']:.1f} ± {rows.loc[k, 'std_return']:.1f}" if k in rows.index else "not built"
            for k in POLICY_LEVELS
        ]
        lines.append(f"  {name:<15}" + "".join(f"{c:>19}" for c in cells))
    behaviour = behavior_info()["environments"]
    lines.append("Behaviour policies of the locomotion datasets (medium / expert mean return):")
    for name in LOCOMOTION_NAMES:
        if name in behaviour:
            e = behaviour[name]
            lines.append(
                f"  {name:<15} medium {e['medium_mean_return']:>8.1f} (step {e['medium_step']}), "
                f"expert {e['expert_mean_return']:>8.1f} (step {e['expert_step']})"
            )
        else:
            lines.append(f"  {name:<15} not built")
    return lines
