"""Dynamics-and-reward model ensembles: feed-forward Gaussian and autoregressive.

Every model here predicts, for each member m, the change of observation and the reward of a
transition: the target of size K = D + 1 is ``concat(next_obs - obs, reward)``. In
predefined-reward mode (``spec.reward == "predefined"``) the last column is instead the reward
feature the observations lack (:func:`opcc_edu.rewards.dataset_reward_feature`) and
:meth:`DynamicsEnsemble.step` computes the reward with the environment's reward function. Targets are
standardised with dataset statistics before training (so that velocities and positions weigh
alike in the loss) and mapped back at prediction time; inputs ``concat(obs, action)`` are
standardised too when ``normalize`` is on.

* :class:`FeedForwardEnsemble` -- the MBPO model (Janner et al. 2019): an MLP that outputs the
  mean and, in stochastic mode, a softly bounded log-variance of a diagonal Gaussian.
* :class:`AutoregressiveEnsemble` -- Zhang et al. (2021): the target is produced one dimension
  at a time, each conditioned on the dimensions already produced.

Both may add a randomized constant prior (Osband et al. 2018): a frozen, randomly initialised
network of the same architecture whose output, times ``prior_scale``, is added to the trained
network's output.

Shapes: M members, B rows per member, D observation size, A action size, K = D + 1.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..io import load_tensors, save_tensors
from ..utils import get_device
from .layers import EnsembleMLP
from .spec import ModelSpec

if TYPE_CHECKING:
    from ..envs import EnvSpec

LOGVAR_MAX_INIT = 0.5
LOGVAR_MIN_INIT = -10.0
LOGVAR_BOUND_PENALTY = 0.01
"""Weight of the penalty that keeps the learned log-variance bounds tight (PETS/MBPO)."""


def clip_box(
    mode: str, env_name: str | EnvSpec, observations: torch.Tensor, next_observations: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The box ``(low (D,), high (D,))`` a rollout clips predicted observations to.

    Args:
        mode: one of :data:`~opcc_edu.dynamics.spec.CLIP_BOXES`.
        env_name: the environment, whose health limits widen the ``"health"`` box.
        observations, next_observations: (T, D) the data's transitions.

    Returns:
        ``(-inf, inf)`` for ``"none"``; the observations' range for ``"observations"``; the
        range of observations and next observations for ``"transitions"``; that range
        reaching each of :func:`opcc_edu.envs.health_limits` for ``"health"``.
    """
    if mode == "none":
        d = observations.shape[-1]
        return torch.full((d,), -torch.inf, dtype=observations.dtype), torch.full(
            (d,), torch.inf, dtype=observations.dtype
        )
    both = observations if mode == "observations" else torch.cat([observations, next_observations])
    low, high = both.min(0).values, both.max(0).values
    if mode == "health":
        from ..envs import health_limits

        for dim, lo, hi in health_limits(env_name):
            if lo is not None:
                low[dim] = min(float(low[dim]), lo)
            if hi is not None:
                high[dim] = max(float(high[dim]), hi)
    return low, high


class DynamicsEnsemble(nn.Module):
    """Common machinery of the ensembles: statistics, priors, clipping, termination.

    Subclasses define :meth:`forward` (standardised prediction for training), :meth:`loss`
    and :meth:`_sample_target` (one standardised target per row, used by :meth:`step`).
    """

    # Parameter/buffer name prefixes whose tensors carry the member axis first.
    _MEMBER_PREFIXES: tuple[str, ...] = ("net.", "prior.", "max_logvar", "min_logvar")

    def __init__(
        self,
        spec: ModelSpec,
        in_features: int,
        out_features: int,
        generator: torch.Generator | None = None,
        init: bool = True,
        env: EnvSpec | None = None,
    ):
        super().__init__()
        self.spec = spec
        if env is not None and env.name != spec.env_name:
            raise ValueError(f"env is {env.name!r} but the model imitates {spec.env_name!r}")
        # The environment, whose termination rule, reward and health limits the model uses: the
        # spec handed down by the caller, or (a model loaded from a file) its name, looked up here.
        self._env = spec.env_name if env is None else env
        m, d, a, k = spec.ensemble_size, spec.obs_dim, spec.act_dim, spec.target_dim
        self.net = EnsembleMLP(m, in_features, spec.hidden_sizes, out_features, spec.activation, generator, init)
        if spec.prior_scale > 0:
            self.prior = EnsembleMLP(m, in_features, spec.hidden_sizes, out_features, spec.activation, generator, init)
            self.prior.requires_grad_(False)
        else:
            self.prior = None
        if spec.stochastic:
            self.max_logvar = nn.Parameter(torch.full((m, 1, k), LOGVAR_MAX_INIT))
            self.min_logvar = nn.Parameter(torch.full((m, 1, k), LOGVAR_MIN_INIT))
        else:
            self.max_logvar = self.min_logvar = None
        self.register_buffer("input_mean", torch.zeros(d + a))
        self.register_buffer("input_std", torch.ones(d + a))
        self.register_buffer("target_mean", torch.zeros(k))
        self.register_buffer("target_std", torch.ones(k))
        self.register_buffer("obs_low", torch.full((d,), -torch.inf))
        self.register_buffer("obs_high", torch.full((d,), torch.inf))
        self.register_buffer("reward_low", torch.tensor(-torch.inf))
        self.register_buffer("reward_high", torch.tensor(torch.inf))
        self._termination_fn = None
        if spec.termination == "predefined":
            from ..envs import termination_fn

            self._termination_fn = termination_fn(self._env)
        self._reward_fn = None
        if spec.reward == "predefined":
            from ..rewards import reward_fn

            self._reward_fn = reward_fn(spec.env_name)

    # ----------------------------------------------------------------------------------------
    @property
    def ensemble_size(self) -> int:
        return self.spec.ensemble_size

    @property
    def obs_dim(self) -> int:
        return self.spec.obs_dim

    @property
    def act_dim(self) -> int:
        return self.spec.act_dim

    @property
    def device(self) -> torch.device:
        return self.input_mean.device

    def set_statistics(
        self,
        observations: np.ndarray | torch.Tensor,
        actions: np.ndarray | torch.Tensor,
        next_observations: np.ndarray | torch.Tensor,
        rewards: np.ndarray | torch.Tensor,
    ) -> None:
        """Fit normalisers and the clip box (:func:`clip_box`) to a dataset (shared by all members).

        Args:
            observations: (T, D).
            actions: (T, A).
            next_observations: (T, D).
            rewards: (T,) the last target column: rewards, or the reward feature in
                predefined-reward mode (whose bounds then clip the predicted feature).
        """
        obs, act, nxt, rew = (
            torch.as_tensor(np.asarray(x), dtype=torch.float64)
            for x in (observations, actions, next_observations, rewards)
        )
        inputs = torch.cat([obs, act], dim=-1)
        targets = torch.cat([nxt - obs, rew[:, None]], dim=-1)
        with torch.no_grad():
            if self.spec.normalize:
                self.input_mean.copy_(inputs.mean(0))
                self.input_std.copy_(_safe_std(inputs))
            self.target_mean.copy_(targets.mean(0))
            self.target_std.copy_(_safe_std(targets))
            low, high = clip_box(self.spec.clip, self._env, obs, nxt)
            self.obs_low.copy_(low)
            self.obs_high.copy_(high)
            self.reward_low.copy_(rew.min())
            self.reward_high.copy_(rew.max())

    # ----------------------------------------------------------------------------------------
    def _inputs(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        """Standardised ``concat(obs, act)``: (M, B, D), (M, B, A) -> (M, B, D + A)."""
        return (torch.cat([obs, act], dim=-1) - self.input_mean) / self.input_std

    def _raw(self, x: torch.Tensor) -> torch.Tensor:
        """Network output plus the scaled constant prior: (M, B, in) -> (M, B, out)."""
        out = self.net(x)
        if self.prior is not None:
            with torch.no_grad():
                prior = self.prior(x)
            out = out + self.spec.prior_scale * prior
        return out

    def _bound_logvar(self, raw: torch.Tensor) -> torch.Tensor:
        """Soft bounds: stays in (min_logvar, max_logvar) with gradients everywhere."""
        logvar = self.max_logvar - F.softplus(self.max_logvar - raw)
        return self.min_logvar + F.softplus(logvar - self.min_logvar)

    def _logvar_penalty(self) -> torch.Tensor:
        return LOGVAR_BOUND_PENALTY * (self.max_logvar.sum() - self.min_logvar.sum()) / self.ensemble_size

    def _termination(self, next_obs: torch.Tensor, logit: torch.Tensor | None) -> torch.Tensor:
        if self.spec.termination == "predefined":
            return self._termination_fn(next_obs)
        if self.spec.termination == "learned":
            return logit > 0
        return torch.zeros(next_obs.shape[:-1], dtype=torch.bool, device=next_obs.device)

    @torch.no_grad()
    def step(
        self, obs: torch.Tensor, act: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One model transition for every member and row.

        Args:
            obs: (M, B, D) float32 observations; ``obs[m]`` is simulated by member ``m``.
            act: (M, B, A) float32 actions.
            generator: torch generator on the model's device (stochastic models only).

        Returns:
            ``(next_obs (M, B, D), reward (M, B), done (M, B) bool)``; clipped to the clip
            box (unless ``clip`` is ``"none"``); ``done`` from the termination mode, read on the
            clipped observation. In
            predefined-reward mode ``reward`` is the environment's reward function of
            ``(obs, act, next_obs, predicted feature)``, after clipping.
        """
        target, logit = self._sample_target(obs, act, generator)
        target = target * self.target_std + self.target_mean
        d = self.obs_dim
        next_obs = obs + target[..., :d]
        reward = target[..., d]
        if self.spec.clip != "none":
            next_obs = torch.maximum(torch.minimum(next_obs, self.obs_high), self.obs_low)
            reward = reward.clamp(self.reward_low, self.reward_high)
        if self._reward_fn is not None:
            reward = self._reward_fn(obs, act, next_obs, reward)
        return next_obs, reward, self._termination(next_obs, logit)

    @torch.no_grad()
    def predict_mean(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        """Each member's mean prediction in data units, before clipping: (M, B, K).

        Entries ``[..., :D]`` are the predicted observation changes, ``[..., D]`` the reward
        (the reward feature in predefined-reward mode).
        (For the autoregressive model, each dimension is conditioned on the earlier means.)
        The spread of this tensor over members is the ensemble's disagreement.
        """
        target, _ = self._sample_target(obs, act, None, sample=False)
        return target * self.target_std + self.target_mean

    def _sample_target(self, obs, act, generator, sample: bool = True):  # pragma: no cover - abstract
        """One standardised target per row (a sample when stochastic and ``sample``, else
        the mean) and the termination logit (or None)."""
        raise NotImplementedError

    def loss(
        self, obs: torch.Tensor, act: torch.Tensor, target: torch.Tensor, terminal: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:  # pragma: no cover - abstract
        raise NotImplementedError

    def flops_per_step(self) -> int:
        """FLOPs one member spends on one row per :meth:`step` (matmuls only)."""
        passes = self.spec.target_dim if self.spec.model_type == "ar" else 1
        nets = 2 if self.prior is not None else 1
        return passes * nets * self.net.flops_per_row()

    # ----------------------------------------------------------------------------------------
    def select_members(self, members: Sequence[int] | slice) -> DynamicsEnsemble:
        """A new ensemble made of some members (copies), e.g. ``slice(0, 10)`` for a prefix.

        The members of an ensemble are exchangeable, so the first m members of a large
        ensemble are an ensemble of size m: one 100-member training run serves every
        ensemble size up to 100.
        """
        index = (
            torch.arange(self.ensemble_size)[members]
            if isinstance(members, slice)
            else torch.as_tensor(list(members), dtype=torch.long)
        )
        if index.numel() == 0 or int(index.min()) < 0 or int(index.max()) >= self.ensemble_size:
            raise ValueError(f"members must select at least one of the {self.ensemble_size} members, got {members!r}")
        spec = dataclasses.replace(self.spec, ensemble_size=int(index.numel()))
        new = build_ensemble(spec, init=False, env=None if isinstance(self._env, str) else self._env).to(self.device)
        state = {}
        for key, value in self.state_dict().items():
            state[key] = value[index.to(value.device)] if key.startswith(self._MEMBER_PREFIXES) else value
        new.load_state_dict(state)
        return new


def _safe_std(x: torch.Tensor) -> torch.Tensor:
    # Constant columns (e.g. a reward that is always 0 in a small dataset) get std 1 so that
    # standardising never divides by zero.
    std = x.std(0)
    return torch.where(std < 1e-6, torch.ones_like(std), std)


class FeedForwardEnsemble(DynamicsEnsemble):
    """MBPO's feed-forward Gaussian model, M members at once.

    Output layout per row: K means, then K raw log-variances when stochastic, then one
    termination logit when termination is learned.
    """

    def __init__(self, spec: ModelSpec, generator: torch.Generator | None = None, init: bool = True, env=None):
        super().__init__(spec, spec.in_features, spec.out_features, generator, init, env)

    def forward(
        self, obs: torch.Tensor, act: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """Standardised prediction.

        Args:
            obs: (M, B, D).
            act: (M, B, A).

        Returns:
            ``(mean (M, B, K), logvar (M, B, K) or None, termination_logit (M, B) or None)``.
        """
        raw = self._raw(self._inputs(obs, act))
        k = self.spec.target_dim
        mean = raw[..., :k]
        logvar = self._bound_logvar(raw[..., k : 2 * k]) if self.spec.stochastic else None
        logit = raw[..., -1] if self.spec.termination == "learned" else None
        return mean, logvar, logit

    def loss(
        self, obs: torch.Tensor, act: torch.Tensor, target: torch.Tensor, terminal: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Training loss, summed over members (each member's loss is a mean over its rows).

        Deterministic: mean squared error. Stochastic: Gaussian negative log-likelihood (up to
        a constant) plus the log-variance bound penalty. Learned termination adds a binary
        cross-entropy term.

        Args:
            obs: (M, B, D).
            act: (M, B, A).
            target: (M, B, K) standardised targets.
            terminal: (M, B) float 0/1 (needed only for learned termination).

        Returns:
            ``(loss, mse (M,))`` -- the scalar to minimise and each member's standardised MSE.
        """
        mean, logvar, logit = self(obs, act)
        err = (mean - target).square()
        mse = err.mean(dim=(1, 2))
        if logvar is None:
            total = mse.sum()
        else:
            total = ((err * torch.exp(-logvar) + logvar).mean(dim=(1, 2))).sum() + self._logvar_penalty()
        if logit is not None:
            total = total + F.binary_cross_entropy_with_logits(logit, terminal, reduction="none").mean(1).sum()
        return total, mse.detach()

    def _sample_target(self, obs, act, generator, sample: bool = True):
        mean, logvar, logit = self(obs, act)
        if logvar is None or not sample:
            return mean, logit
        noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        return mean + noise * torch.exp(0.5 * logvar), logit


class AutoregressiveEnsemble(DynamicsEnsemble):
    """Autoregressive model (Zhang et al. 2021): one target dimension at a time.

    One network per member is shared by all K dimensions: its input is
    ``concat(standardised obs and action, y * mask_k, onehot(k))`` where ``mask_k`` keeps the
    dimensions before ``k``; it outputs the mean (and raw log-variance when stochastic) of
    dimension ``k``, plus a termination logit when termination is learned. A rollout step costs
    K forward passes, each feeding the dimension just produced into the next.

    Training budget. The model's likelihood is the product over dimensions of the conditional
    densities, so its maximum-likelihood loss sums over all K dimensions. With
    ``spec.ar_targets == "all"`` (the default) every row of a minibatch is expanded into K
    teacher-forced rows, one per dimension, each conditioned on the true earlier dimensions;
    the loss is the mean of the K per-dimension losses, on the scale of the feed-forward
    model's mean over dimensions. The budget is chosen to match the feed-forward model per
    output dimension: the same gradient steps, rows per step and learning rate, so each output
    dimension gets one target per row and step in both models. A step then costs about K times
    a feed-forward step (K network passes per row instead of one, done in one batch). With
    ``ar_targets == "one"`` a row teaches a single random dimension instead -- an unbiased
    estimate of the same loss at the feed-forward model's cost per step, but with 1/K of the
    targets per output dimension, which left the model far behind the feed-forward one at an
    equal number of steps.
    """

    def __init__(self, spec: ModelSpec, generator: torch.Generator | None = None, init: bool = True, env=None):
        super().__init__(spec, spec.in_features, spec.out_features, generator, init, env)
        self.register_buffer("_eye", torch.eye(spec.target_dim), persistent=False)

    def _conditioned(self, base: torch.Tensor, prev: torch.Tensor, dim: torch.Tensor) -> torch.Tensor:
        """Network input for target dimensions ``dim`` (M, B) long given earlier values ``prev``."""
        k = self.spec.target_dim
        mask = (torch.arange(k, device=base.device) < dim[..., None]).to(base.dtype)
        return torch.cat([base, prev * mask, self._eye[dim]], dim=-1)

    def forward(
        self, obs: torch.Tensor, act: torch.Tensor, prev: torch.Tensor, dim: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """Standardised prediction of one target dimension per row.

        Args:
            obs: (M, B, D).
            act: (M, B, A).
            prev: (M, B, K) standardised target values; only entries before ``dim`` are used.
            dim: (M, B) long, the dimension each row predicts.

        Returns:
            ``(mean (M, B), logvar (M, B) or None, termination_logit (M, B) or None)``.
        """
        raw = self._raw(self._conditioned(self._inputs(obs, act), prev, dim))
        return self._split(raw, dim)

    def _split(self, raw: torch.Tensor, dim: torch.Tensor):
        mean = raw[..., 0]
        logvar = None
        if self.spec.stochastic:
            # Bounds are per target dimension: pick each row's pair.
            lo = self.min_logvar.expand(-1, dim.shape[1], -1).gather(-1, dim[..., None])[..., 0]
            hi = self.max_logvar.expand(-1, dim.shape[1], -1).gather(-1, dim[..., None])[..., 0]
            v = hi - F.softplus(hi - raw[..., 1])
            logvar = lo + F.softplus(v - lo)
        logit = raw[..., -1] if self.spec.termination == "learned" else None
        return mean, logvar, logit

    def loss(
        self,
        obs: torch.Tensor,
        act: torch.Tensor,
        target: torch.Tensor,
        terminal: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced training loss, summed over members (see the class docs).

        ``spec.ar_targets == "all"``: the mean over the K target dimensions of each dimension's
        loss, every row conditioned on its true earlier dimensions -- the per-dimension terms
        of :meth:`FeedForwardEnsemble.loss` (squared error, or Gaussian negative log-likelihood
        plus the log-variance bound penalty; plus the termination cross-entropy of each
        dimension's pass when termination is learned). ``"one"``: the same terms for one
        random dimension per row (drawn from ``generator``).

        Args and returns as :meth:`FeedForwardEnsemble.loss`; ``mse`` is over the dimensions
        taught (all of them, or the sampled ones).
        """
        m, b, k = target.shape
        if self.spec.ar_targets == "one":
            dim = torch.randint(k, (m, b), generator=generator, device=target.device)
            mean, logvar, logit = self(obs, act, target, dim)
            y = target.gather(-1, dim[..., None])[..., 0]
        else:
            # Row r of the batch becomes rows r*K + j, j = 0..K-1, each predicting dimension j.
            dim = torch.arange(k, device=target.device).repeat(m, b)
            base = self._inputs(obs, act).repeat_interleave(k, dim=1)
            x = self._conditioned(base, target.repeat_interleave(k, dim=1), dim)
            mean, logvar, logit = self._split(self._raw(x), dim)
            y = target.reshape(m, b * k)
            if terminal is not None:
                terminal = terminal.repeat_interleave(k, dim=1)
        err = (mean - y).square()
        mse = err.mean(1)
        if logvar is None:
            total = mse.sum()
        else:
            total = (err * torch.exp(-logvar) + logvar).mean(1).sum() + self._logvar_penalty()
        if logit is not None:
            total = total + F.binary_cross_entropy_with_logits(logit, terminal, reduction="none").mean(1).sum()
        return total, mse.detach()

    def _sample_target(self, obs, act, generator, sample: bool = True):
        m, b = obs.shape[:2]
        k = self.spec.target_dim
        base = self._inputs(obs, act)
        out = torch.zeros(m, b, k, device=obs.device, dtype=obs.dtype)
        logit = None
        for j in range(k):  # sequential by construction: dimension j needs dimensions < j
            dim = torch.full((m, b), j, device=obs.device, dtype=torch.long)
            mean, logvar, logit = self._split(self._raw(self._conditioned(base, out, dim)), dim)
            if logvar is not None and sample:
                noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
                mean = mean + noise * torch.exp(0.5 * logvar)
            out[..., j] = mean
        return out, logit


def build_ensemble(
    spec: ModelSpec, seed: int | None = None, init: bool = True, env: EnvSpec | None = None
) -> DynamicsEnsemble:
    """Create an untrained ensemble for ``spec`` (weights drawn from ``seed`` when given;
    ``init=False`` skips drawing them, for a model whose weights are loaded next). ``env``: the
    environment's spec, whose termination rule and health limits the model uses (None: looked up
    by ``spec.env_name``)."""
    generator = None if seed is None else torch.Generator().manual_seed(int(seed))
    if spec.model_type == "ff":
        return FeedForwardEnsemble(spec, generator, init, env)
    return AutoregressiveEnsemble(spec, generator, init, env)


def save_ensemble(path: str | Path, model: DynamicsEnsemble, metadata: dict[str, Any] | None = None) -> Path:
    """Save weights and statistics as safetensors; the spec and ``metadata`` go in its header."""
    meta = {"spec": model.spec.to_dict(), "metadata": dict(metadata or {})}
    json.dumps(meta)  # fail early on metadata that cannot be stored
    return save_tensors(path, model.state_dict(), meta)


def load_ensemble(
    path: str | Path, device: Any = None, env: EnvSpec | None = None
) -> tuple[DynamicsEnsemble, dict[str, Any]]:
    """Load an ensemble written by :func:`save_ensemble`: ``(model in eval mode, metadata)``
    (``env``: the environment's spec when the caller holds it, see :func:`build_ensemble`)."""
    tensors, meta = load_tensors(path)
    if "spec" not in meta:
        raise ValueError(f"{path} is not a saved dynamics ensemble (no 'spec' in its metadata)")
    model = build_ensemble(ModelSpec.from_dict(meta["spec"]), init=False, env=env)
    model.load_state_dict(tensors)
    return model.to(get_device(device)).eval(), meta.get("metadata", {})
