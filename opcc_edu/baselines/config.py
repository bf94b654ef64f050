"""One baseline as data: :class:`EnsembleConfig` and the paper's defaults.

The field defaults of :class:`EnsembleConfig` are the paper's default model (Section 7) and
the only place it is declared: :data:`BASELINE_DEFAULTS` is read from them, and the
architecture of an ensemble (:class:`opcc_edu.dynamics.ModelSpec`) is built from a config by
:meth:`EnsembleConfig.model_spec`. This module imports neither torch nor the simulator.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..config import Profile, get_profile
from ..dynamics.spec import (
    DEFAULT_AR_TARGETS,
    DEFAULT_CLIP,
    MODEL_TYPES,
    REWARD_MODES,
    TERMINATION_MODES,
    ModelSpec,
    check_ar_targets,
    check_clip,
    fields_dict,
    legacy_fields,
)
from ..utils import check_choice, check_positive_int, dataclass_from_dict


@dataclasses.dataclass(frozen=True)
class EnsembleConfig:
    """One baseline: how the ensemble is built, trained and rolled out.

    The defaults are the paper's default model (Section 7: 100 deterministic feed-forward
    members, MBPO architecture, no prior, normalised inputs, clipping and the predefined
    termination function); :meth:`from_profile` takes the sizes from a profile instead.
    """

    ensemble_size: int = 100
    """Members M."""
    hidden_sizes: tuple[int, ...] = (200, 200, 200, 200)
    """Hidden widths of each member (MBPO: four layers of 200, SiLU)."""
    model_type: str = "ff"
    """``"ff"`` feed-forward Gaussian or ``"ar"`` autoregressive (Tables 7, 13)."""
    stochastic: bool = False
    """Sample from each member's Gaussian instead of using its mean (Tables 11, 12)."""
    prior_scale: float = 0.0
    """Randomized constant prior scale; 0 = no prior (Tables 6, 10)."""
    normalize: bool = True
    """Standardise model inputs with dataset statistics (Tables 14, 15)."""
    clip: str = DEFAULT_CLIP
    """Where rollouts clip predicted observations and rewards (:data:`opcc_edu.dynamics.spec.CLIP_BOXES`):
    ``"health"`` (default), ``"transitions"``, ``"observations"`` or ``"none"``; True and False,
    the older on/off values, mean ``"transitions"`` and ``"none"``."""
    termination: str = "predefined"
    """``"predefined"`` (the environment's function), ``"learned"`` or ``"none"``."""
    reward: str = "learned"
    """``"learned"`` (the paper: members predict the reward) or ``"predefined"`` (PETS: the
    environment's reward function of the predicted transition, :mod:`opcc_edu.rewards`)."""
    mixture: bool = False
    """Rollouts draw a random member per step (rollout-only: shares the trained model)."""
    train_steps: int = 50_000
    """Gradient steps of ensemble training."""
    batch_size: int = 256
    """Rows per member per gradient step."""
    lr: float = 1e-3
    """Adam learning rate."""
    seed: int = 0
    """Seeds initialisation, bootstrap, minibatches and rollout noise."""
    ar_targets: str = DEFAULT_AR_TARGETS
    """Training objective of the autoregressive model (``model_type="ar"``): ``"all"`` teaches
    every target dimension of every row (teacher forcing, the full autoregressive likelihood),
    ``"one"`` one random dimension per row (the objective of ensembles trained before the
    field existed); see :data:`opcc_edu.dynamics.spec.AR_TARGETS`. The feed-forward model
    takes the default only, and its dicts, cache keys and labels never show the field."""

    # Fields that only change how a trained ensemble is used, not the ensemble itself.
    _ROLLOUT_ONLY = ("mixture",)

    def __post_init__(self) -> None:
        check_positive_int(self.ensemble_size, "ensemble_size")
        if isinstance(self.hidden_sizes, int) or not self.hidden_sizes:
            raise ValueError(f"hidden_sizes must be a non-empty sequence of widths, got {self.hidden_sizes!r}")
        widths = tuple(check_positive_int(h, "hidden_sizes entry") for h in self.hidden_sizes)
        object.__setattr__(self, "hidden_sizes", widths)
        check_choice(self.model_type, MODEL_TYPES, "model_type")
        check_choice(self.termination, TERMINATION_MODES, "termination")
        check_choice(self.reward, REWARD_MODES, "reward")
        check_ar_targets(self.ar_targets, self.model_type)
        object.__setattr__(self, "clip", check_clip(self.clip))
        for name in ("stochastic", "normalize", "mixture"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not np.isfinite(self.prior_scale) or self.prior_scale < 0:
            raise ValueError(f"prior_scale must be a finite number >= 0, got {self.prior_scale!r}")
        check_positive_int(self.train_steps, "train_steps")
        check_positive_int(self.batch_size, "batch_size")
        if not (isinstance(self.lr, (int, float)) and 0 < self.lr < 1):
            raise ValueError(f"lr must be a number in (0, 1), got {self.lr!r}")
        check_positive_int(self.seed, "seed", minimum=0)
        if self.mixture and self.ensemble_size < 2:
            raise ValueError(f"mixture needs ensemble_size >= 2, got {self.ensemble_size}")

    @classmethod
    def from_profile(cls, profile: Profile | str | None = None, **overrides: Any) -> EnsembleConfig:
        """The default baseline at a profile's sizes (members, widths, steps, batch size).

        Args:
            profile: a :class:`~opcc_edu.config.Profile`, its name, or None for the active one.
            **overrides: any other field, e.g. ``prior_scale=5.0``.
        """
        prof = get_profile(profile)
        sizes = {
            "ensemble_size": prof.ensemble_size,
            "hidden_sizes": tuple(prof.hidden_sizes),
            "train_steps": prof.dynamics_train_steps,
            "batch_size": prof.batch_size,
        }
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - fields)
        if unknown:
            raise ValueError(f"unknown EnsembleConfig field(s) {unknown}; valid fields: {sorted(fields)}")
        return cls(**{**sizes, **overrides})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of every field, except ``reward`` at its default (``"learned"``) and
        ``ar_targets`` unless an autoregressive config uses ``"all"``
        (:func:`opcc_edu.dynamics.spec.fields_dict`): the cache keys, saved metadata and records
        of such configs are those of before the fields existed."""
        return fields_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EnsembleConfig:
        """The inverse of :meth:`to_dict`; unknown keys raise a ValueError listing the fields.
        An autoregressive dict without ``ar_targets`` means ``"one"``, the objective it was
        trained with (:func:`opcc_edu.dynamics.spec.legacy_fields`)."""
        return dataclass_from_dict(cls, legacy_fields(data))

    def model_spec(self, env_name: str) -> ModelSpec:
        """The architecture of this config's ensemble for an environment."""
        from ..envs import get_spec

        spec = get_spec(env_name)
        return ModelSpec(
            env_name=spec.name,
            obs_dim=spec.obs_dim,
            act_dim=spec.act_dim,
            ensemble_size=self.ensemble_size,
            hidden_sizes=self.hidden_sizes,
            model_type=self.model_type,
            stochastic=self.stochastic,
            prior_scale=float(self.prior_scale),
            normalize=self.normalize,
            clip=self.clip,
            termination=self.termination,
            reward=self.reward,
            ar_targets=self.ar_targets,
        )

    def training_fields(self) -> dict[str, Any]:
        """The fields that determine the trained weights (everything but rollout options)."""
        return {k: v for k, v in self.to_dict().items() if k not in self._ROLLOUT_ONLY}


#: The model choices of the paper's default baseline (Section 7) -- deterministic feed-forward
#: members without a randomized prior, normalized inputs, predictions clipped to the data's
#: bounds, the environment's predefined termination function, learned rewards, one member per
#: rollout -- read from the field defaults of :class:`EnsembleConfig`. Sizes (members, widths,
#: steps) are not here: they come from a profile.
BASELINE_DEFAULTS: dict[str, Any] = {
    f.name: f.default
    for f in dataclasses.fields(EnsembleConfig)
    if f.name in ("model_type", "stochastic", "prior_scale", "normalize", "clip", "termination", "reward", "mixture")
}

__all__ = ["BASELINE_DEFAULTS", "EnsembleConfig"]
