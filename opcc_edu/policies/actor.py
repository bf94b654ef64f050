"""The exported policy: a deterministic tanh MLP with input normalisation, saved as safetensors.

* :class:`Actor` -- ``obs (..., D) -> action (..., A)`` in [-1, 1]^A: observation normalisation
  (the running statistics PPO trained with), a tanh MLP, a final tanh.
* :class:`StackedActors` -- P actors evaluated for N rows, each row with its own policy, in one
  batched computation (the Monte-Carlo ground truth steps thousands of queries at once).
* :func:`save_actor` / :func:`load_actor` -- safetensors weights with JSON metadata.

Using a policy needs neither stable-baselines3 nor pickle: only torch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..io import load_tensors, save_tensors
from ..utils import check_positive_int

OBS_CLIP = 10.0
"""Normalised observations are clipped to [-OBS_CLIP, OBS_CLIP], as during PPO training."""


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
        self, obs_dim: int, act_dim: int, hidden_sizes: Sequence[int] = (64, 64), obs_clip: float | None = OBS_CLIP
    ):
        super().__init__()
        self.obs_dim = check_positive_int(obs_dim, "obs_dim")
        self.act_dim = check_positive_int(act_dim, "act_dim")
        self.hidden_sizes = tuple(check_positive_int(h, "hidden_sizes entry") for h in hidden_sizes)
        if obs_clip is not None and not (isinstance(obs_clip, (int, float)) and obs_clip > 0):
            raise ValueError(f"obs_clip must be a positive number or None, got {obs_clip!r}")
        self.obs_clip = None if obs_clip is None else float(obs_clip)
        sizes = (self.obs_dim, *self.hidden_sizes, self.act_dim)
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in pairwise(sizes))
        self.register_buffer("obs_mean", torch.zeros(self.obs_dim))
        self.register_buffer("obs_std", torch.ones(self.obs_dim))

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        """Normalised (and clipped) observations: (..., D) -> (..., D)."""
        x = ((obs - self.obs_mean) / self.obs_std).to(obs.dtype)
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
        return (
            f"obs_dim={self.obs_dim}, act_dim={self.act_dim}, "
            f"hidden_sizes={self.hidden_sizes}, obs_clip={self.obs_clip}"
        )


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
        ``(actor, metadata)``; the actor is float32, on the CPU, in eval mode (its normalisation
        float64 when the file stores it so).

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
    if tensors["obs_mean"].dtype == torch.float64:  # a frame shift float32 would round (the original mazes)
        actor.obs_mean, actor.obs_std = actor.obs_mean.double(), actor.obs_std.double()
    actor.load_state_dict(tensors)
    return actor.eval(), meta


def _architecture(actor: Actor) -> tuple[int, int, tuple[int, ...], float | None]:
    return actor.obs_dim, actor.act_dim, actor.hidden_sizes, actor.obs_clip


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
            if _architecture(actor) != _architecture(first):
                raise ValueError(
                    f"actors[{i}] has architecture {actor.extra_repr()!r}, "
                    f"expected {first.extra_repr()!r} like actors[0]"
                )
        self.n_policies = len(actors)
        self.obs_dim, self.act_dim = first.obs_dim, first.act_dim
        self.hidden_sizes, self.obs_clip = first.hidden_sizes, first.obs_clip
        self.n_layers = len(first.layers)
        with torch.no_grad():
            wide = any(a.obs_mean.dtype == torch.float64 for a in actors)
            norm = torch.float64 if wide else torch.float32
            self.register_buffer("obs_mean", torch.stack([a.obs_mean for a in actors]).to(norm))  # (P, D)
            self.register_buffer("obs_std", torch.stack([a.obs_std for a in actors]).to(norm))
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
        x = ((obs.unsqueeze(0) - self.obs_mean.unsqueeze(1)) / self.obs_std.unsqueeze(1)).to(obs.dtype)  # (P, N, D)
        if self.obs_clip is not None:
            x = x.clamp(-self.obs_clip, self.obs_clip)
        for k in range(self.n_layers):
            x = torch.baddbmm(getattr(self, f"bias{k}"), x, getattr(self, f"weight{k}"))
            x = torch.tanh(x)  # hidden layers and the output layer both use tanh
        rows = torch.arange(obs.shape[0], device=obs.device)
        return x[index, rows]
