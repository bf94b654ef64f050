"""The baselines as data: :class:`EnsembleConfig`, :class:`FQEConfig` and the paper's defaults.

What both configurations share -- members, widths, training steps, batch size, learning rate,
seed -- is declared once, in :class:`TrainingConfig`, with one :meth:`~TrainingConfig.from_profile`,
one :meth:`~TrainingConfig.to_dict` and one :meth:`~TrainingConfig.from_dict`. The field
defaults of :class:`EnsembleConfig` (those of its architecture, declared once in
:class:`opcc_edu.dynamics.spec.Architecture`) are the paper's default model (Section 7):
:data:`BASELINE_DEFAULTS` is read from them, and the architecture of an ensemble
(:class:`opcc_edu.dynamics.ModelSpec`) is built from a config by :meth:`EnsembleConfig.model_spec`.
This module imports neither torch nor the simulator.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np

from ..config import Profile, get_profile
from ..dynamics.spec import Architecture, Members, ModelSpec, architecture_of, fields_dict, legacy_fields
from ..utils import check_positive_int, dataclass_from_dict

T = TypeVar("T", bound="TrainingConfig")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainingConfig(Members):
    """What every baseline with networks shares: its :class:`~opcc_edu.dynamics.spec.Members`
    and how they are trained. :class:`EnsembleConfig` and :class:`FQEConfig` extend it, so these
    six fields, their checks and their serialisation exist once."""

    train_steps: int = 50_000
    """Gradient steps (every member takes each one)."""
    batch_size: int = 256
    """Rows per member per gradient step."""
    lr: float = 1e-3
    """Adam learning rate."""
    seed: int = 0
    """Seeds initialisation, bootstrap, minibatches (and an ensemble's rollout noise)."""

    # Training steps per dynamics training step of a profile (:meth:`from_profile`).
    _PROFILE_STEPS = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_int(self.train_steps, "train_steps")
        check_positive_int(self.batch_size, "batch_size")
        if not (isinstance(self.lr, (int, float)) and 0 < self.lr < 1):
            raise ValueError(f"lr must be a number in (0, 1), got {self.lr!r}")
        check_positive_int(self.seed, "seed", minimum=0)

    @classmethod
    def from_profile(cls: type[T], profile: Profile | str | None = None, **overrides: Any) -> T:
        """The defaults at a profile's sizes: its members, widths and batch size, and its dynamics
        training steps (times 4 for FQE, which fits H outputs that depend on each other in a chain).

        Args:
            profile: a :class:`~opcc_edu.config.Profile`, its name, or None for the active one.
            **overrides: any other field, e.g. ``prior_scale=5.0``.
        """
        prof = get_profile(profile)
        sizes = {
            "ensemble_size": prof.ensemble_size,
            "hidden_sizes": tuple(prof.hidden_sizes),
            "train_steps": cls._PROFILE_STEPS * prof.dynamics_train_steps,
            "batch_size": prof.batch_size,
        }
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - fields)
        if unknown:
            raise ValueError(f"unknown {cls.__name__} field(s) {unknown}; valid fields: {sorted(fields)}")
        return cls(**{**sizes, **overrides})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of every field, except ``reward`` at its default (``"learned"``) and
        ``ar_targets`` unless an autoregressive config uses ``"all"``
        (:func:`opcc_edu.dynamics.spec.fields_dict`): the cache keys, saved metadata and records
        of such configs are those of before the fields existed."""
        return fields_dict(self)

    @classmethod
    def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
        """The inverse of :meth:`to_dict`; unknown keys raise a ValueError listing the fields.
        An autoregressive dict without ``ar_targets`` means ``"one"``, the objective it was
        trained with (:func:`opcc_edu.dynamics.spec.legacy_fields`)."""
        return dataclass_from_dict(cls, legacy_fields(data))


@dataclasses.dataclass(frozen=True, kw_only=True)
class EnsembleConfig(TrainingConfig, Architecture):
    """One baseline: how the ensemble is built (:class:`~opcc_edu.dynamics.spec.Architecture`,
    whose defaults are the paper's default model, Section 7: 100 deterministic feed-forward
    members, MBPO architecture, no prior, normalised inputs, clipping and the predefined
    termination function), trained (:class:`TrainingConfig`) and rolled out;
    :meth:`from_profile` takes the sizes from a profile instead.
    """

    mixture: bool = False
    """Rollouts draw a random member per step (rollout-only: shares the trained model)."""

    # Fields that only change how a trained ensemble is used, not the ensemble itself.
    _ROLLOUT_ONLY = ("mixture",)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.mixture, (bool, np.bool_)):
            raise ValueError(f"mixture must be True or False, got {self.mixture!r}")
        if self.mixture and self.ensemble_size < 2:
            raise ValueError(f"mixture needs ensemble_size >= 2, got {self.ensemble_size}")

    def model_spec(self, env_name: Any) -> ModelSpec:
        """The architecture of this config's ensemble for an environment (a name or its spec)."""
        from ..envs import get_spec

        spec = get_spec(env_name)
        return ModelSpec(env_name=spec.name, obs_dim=spec.obs_dim, act_dim=spec.act_dim, **architecture_of(self))

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


@dataclasses.dataclass(frozen=True, kw_only=True)
class FQEConfig(TrainingConfig):
    """How the FQE ensemble (:mod:`opcc_edu.baselines.fqe`) is built and trained: M bootstrap
    members per query policy, each a Q-network of SiLU layers; Adam's learning rate falls
    linearly to 0 over training. :meth:`from_profile` takes the sizes from a profile."""

    hidden_sizes: tuple[int, ...] = (256, 256)
    """Hidden widths of each member's Q-network."""
    train_steps: int = 20_000
    """Gradient steps (every member takes each one)."""
    bootstrap: bool = True
    """Each member fits its own resample (with replacement) of the transitions; False: all fit
    the whole dataset and differ only by initialisation and minibatches."""

    _PROFILE_STEPS = 4

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.bootstrap, (bool, np.bool_)):
            raise ValueError(f"bootstrap must be True or False, got {self.bootstrap!r}")


__all__ = ["BASELINE_DEFAULTS", "EnsembleConfig", "FQEConfig", "TrainingConfig"]
