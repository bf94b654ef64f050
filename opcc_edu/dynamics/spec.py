"""The architecture of an ensemble, as data: :class:`Architecture`, :class:`ModelSpec` and the
valid choices.

This module imports neither torch nor the simulator, so configurations can be built,
validated, compared and stored without them. :class:`Architecture` declares the choices a
baseline makes (members, widths, model type, noise, prior, normalisation, clipping,
termination, reward, objective) once, with the paper's defaults; :class:`ModelSpec` adds the
environment's sizes, and :class:`opcc_edu.baselines.EnsembleConfig` the training. The
reward mode defaults to the paper's learned reward, which is also what a spec saved before the
field existed means. The autoregressive training objective (:data:`AR_TARGETS`) defaults to
every target dimension per row; a saved autoregressive spec without the field was trained on
one random dimension per row, and reads back so (:func:`legacy_fields`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..utils import check_choice, check_positive_int, dataclass_from_dict

MODEL_TYPES: tuple[str, ...] = ("ff", "ar")
"""Base models: feed-forward Gaussian (``"ff"``) or autoregressive (``"ar"``)."""
TERMINATION_MODES: tuple[str, ...] = ("predefined", "learned", "none")
"""How model rollouts decide termination: the environment's predefined function
(:func:`opcc_edu.envs.termination_fn`), a learned classifier head, or never."""
REWARD_MODES: tuple[str, ...] = ("learned", "predefined")
"""Where model rollouts take rewards from: the members' learned reward (the paper), or the
environment's reward function applied to the predicted transitions (PETS,
:func:`opcc_edu.rewards.reward_fn`). In predefined mode the members learn, in the reward's
place, the reward feature that observations lack (:data:`opcc_edu.rewards.REWARD_FEATURES`:
x velocity for locomotion); maze rewards need none, so there the column stays the reward and
rollouts ignore it."""
DEFAULT_REWARD_MODE = "learned"
"""The paper's choice; a dict of a spec or config leaves ``reward`` out at this value, so that
keys and files of configurations without the field stay as they were."""
CLIP_BOXES: tuple[str, ...] = ("none", "observations", "transitions", "health")
"""Where a model rollout clips each predicted observation (and, unless ``"none"``, each
predicted reward to the data's reward range):

* ``"none"``: nowhere;
* ``"observations"``: the box of the data's observations (the reference code's bounds);
* ``"transitions"``: the box of the data's observations and next observations;
* ``"health"``: the ``"transitions"`` box, widened on the height and torso angle to the
  environment's health limits (:data:`opcc_edu.envs.HEALTH_LIMITS`), so that a clipped
  prediction can reach every state where the predefined termination rule ends an episode.
  Without a termination rule (mazes, HalfCheetah) it is the ``"transitions"`` box.

Data of healthy states only (D4RL's observations, or a dataset whose falls are all of one
kind) give boxes that lie inside the healthy region; a rollout clipped to such a box can never
fall the way the data never fell, and overvalues policies that do. Dicts write the two boxes
of the older on/off field as ``true`` and ``false`` (:func:`clip_text`), and read them back
through :func:`legacy_fields`."""
DEFAULT_CLIP = "health"
"""The default clip box. Of the four boxes it is the only one under which the predefined
termination rule can detect every fall it defines while predictions stay inside the data's range
elsewhere: the other boxes either hide falls the data never showed (Hopper's ``medium`` data
never tilts past 0.135, so a ``"transitions"`` box keeps every rollout's torso upright) or drop
the guard rail altogether (``"none"``, under which HalfCheetah's predictions run away and its
loss and AURCC are far higher).
``benchmarks/results/locomotion_clip.md`` measures all four on the original benchmark's queries;
the chapter on dynamics ensembles explains the choice and the clipping lesson shows its cost on
Walker2d, whose rollouts drift further inside the wider box."""
_CLIP_BOOLS = {"transitions": True, "none": False}


def clip_text(value: str) -> str:
    """How a clip box is written in dicts, cache keys and labels: ``true``/``false`` for the two
    boxes of the older on/off field (so their files and labels stay as they were), else the name."""
    value = check_choice(value, CLIP_BOXES, "clip")
    return _CLIP_BOOLS.get(value, value)


ACTIVATION_NAMES: tuple[str, ...] = ("silu", "relu", "tanh")
"""Hidden activations by name (MBPO uses SiLU, also called swish)."""
AR_TARGETS: tuple[str, ...] = ("all", "one")
"""What one training row of the autoregressive model teaches: ``"all"`` -- every target
dimension, each conditioned on the true earlier ones (teacher forcing): the full
autoregressive log-likelihood, the same number of targets per output dimension and step as the
feed-forward model; ``"one"`` -- one dimension drawn at random per row (an unbiased estimate of
the same loss with 1/K of its targets, at the feed-forward model's cost per step)."""
DEFAULT_AR_TARGETS = "all"
"""The default training objective of the autoregressive model."""
LEGACY_AR_TARGETS = "one"
"""What an autoregressive spec or config dict without ``ar_targets`` means: the objective of
the ensembles trained before the field existed. Dicts leave ``ar_targets`` out at this value
(and always for the feed-forward model, which it does not concern), so those ensembles keep
their cache keys and labels while the default objective gets new ones."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Members:
    """How many networks an ensemble has and how wide they are, declared once for every ensemble
    of the package (:class:`Architecture`, :class:`opcc_edu.baselines.TrainingConfig`)."""

    ensemble_size: int = 100
    """Members M."""
    hidden_sizes: tuple[int, ...] = (200, 200, 200, 200)
    """Hidden widths of each member (MBPO: four layers of 200, SiLU)."""

    def __post_init__(self) -> None:
        check_positive_int(self.ensemble_size, "ensemble_size")
        if isinstance(self.hidden_sizes, int) or not self.hidden_sizes:
            raise ValueError(f"hidden_sizes must be a non-empty sequence of widths, got {self.hidden_sizes!r}")
        widths = tuple(check_positive_int(h, "hidden_sizes entry") for h in self.hidden_sizes)
        object.__setattr__(self, "hidden_sizes", widths)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Architecture(Members):
    """The choices that make an ensemble, declared once, with the paper's defaults (Section 7).

    :class:`ModelSpec` (what a saved model records) and
    :class:`opcc_edu.baselines.EnsembleConfig` (a baseline) both extend it, so a new architecture
    setting is one field here: both carry it, both validate it, and
    :meth:`~opcc_edu.baselines.EnsembleConfig.model_spec` copies it (:func:`architecture_of`).
    """

    model_type: str = "ff"
    """``"ff"`` feed-forward Gaussian or ``"ar"`` autoregressive (Tables 7, 13)."""
    stochastic: bool = False
    """Sample from each member's Gaussian instead of using its mean (Tables 11, 12)."""
    prior_scale: float = 0.0
    """Randomized constant prior scale; 0 = no prior (Tables 6, 10)."""
    normalize: bool = True
    """Standardise the inputs ``concat(obs, action)`` with dataset statistics (Tables 14, 15)."""
    clip: str = DEFAULT_CLIP
    """Where rollouts clip predicted observations and rewards (:data:`CLIP_BOXES`)."""
    termination: str = "predefined"
    """``"predefined"`` (the environment's function), ``"learned"`` or ``"none"``
    (:data:`TERMINATION_MODES`)."""
    reward: str = DEFAULT_REWARD_MODE
    """``"learned"`` (the paper: members predict the reward) or ``"predefined"`` (PETS: the
    environment's reward function of the predicted transition, :data:`REWARD_MODES`)."""
    ar_targets: str = DEFAULT_AR_TARGETS
    """Training objective of the autoregressive model (:data:`AR_TARGETS`); the feed-forward model
    takes the default only, and its dicts, cache keys and labels never show the field."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice(self.model_type, MODEL_TYPES, "model_type")
        check_choice(self.clip, CLIP_BOXES, "clip")
        check_choice(self.termination, TERMINATION_MODES, "termination")
        check_choice(self.reward, REWARD_MODES, "reward")
        check_ar_targets(self.ar_targets, self.model_type)
        for name in ("stochastic", "normalize"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not np.isfinite(self.prior_scale) or self.prior_scale < 0:
            raise ValueError(f"prior_scale must be a finite number >= 0, got {self.prior_scale!r}")


ARCHITECTURE_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Architecture))
"""The fields of :class:`Architecture`, in order."""


def architecture_of(obj: Architecture) -> dict[str, Any]:
    """The :class:`Architecture` fields of a spec or config, as keyword arguments."""
    return {name: getattr(obj, name) for name in ARCHITECTURE_FIELDS}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelSpec(Architecture):
    """Everything needed to rebuild an ensemble's architecture (saved next to its weights):
    the :class:`Architecture` and the environment's sizes."""

    env_name: str
    """Environment the model imitates (selects the predefined termination function)."""
    obs_dim: int
    """Observation size D."""
    act_dim: int
    """Action size A."""
    activation: str = "silu"
    """Hidden activation (MBPO: SiLU)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_int(self.obs_dim, "obs_dim")
        check_positive_int(self.act_dim, "act_dim")
        check_choice(self.activation, ACTIVATION_NAMES, "activation")
        object.__setattr__(self, "prior_scale", float(self.prior_scale))

    @property
    def target_dim(self) -> int:
        """K = D + 1: observation change and reward (the reward feature in predefined-reward mode)."""
        return self.obs_dim + 1

    @property
    def in_features(self) -> int:
        """Input width of one member's network: ``concat(obs, action)``, and for the
        autoregressive model also the masked earlier targets and a one-hot of the dimension."""
        base = self.obs_dim + self.act_dim
        return base if self.model_type == "ff" else base + 2 * self.target_dim

    @property
    def out_features(self) -> int:
        """Output width of one member's network: means (and raw log-variances when
        stochastic) of all K targets (feed-forward) or of one (autoregressive), plus a
        termination logit when termination is learned."""
        per_target = 2 if self.stochastic else 1
        heads = per_target * self.target_dim if self.model_type == "ff" else per_target
        return heads + (1 if self.termination == "learned" else 0)

    def parameter_count(self) -> int:
        """Trainable numbers of the whole ensemble (all members, without the frozen prior)."""
        widths = (self.in_features, *self.hidden_sizes, self.out_features)
        per_member = sum(i * o + o for i, o in zip(widths[:-1], widths[1:], strict=True))
        logvar = 2 * self.target_dim if self.stochastic else 0
        return self.ensemble_size * (per_member + logvar)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of every field, except ``reward`` at its default (``"learned"``) and
        ``ar_targets`` unless an autoregressive model uses ``"all"`` (see :func:`fields_dict`):
        the spec saved with an ensemble is then the same as before those fields existed."""
        return fields_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSpec:
        """The inverse of :meth:`to_dict` (a dict without ``reward`` means ``"learned"``; an
        autoregressive one without ``ar_targets`` means ``"one"``, see :func:`legacy_fields`)."""
        return dataclass_from_dict(cls, legacy_fields(data))


def check_ar_targets(ar_targets: Any, model_type: str) -> str:
    """Return ``ar_targets`` if it is one of :data:`AR_TARGETS` and fits ``model_type``.

    Raises:
        ValueError: naming ``ar_targets`` and the valid choices, or saying that the
            feed-forward model takes only the default.
    """
    check_choice(ar_targets, AR_TARGETS, "ar_targets")
    if model_type != "ar" and ar_targets != DEFAULT_AR_TARGETS:
        raise ValueError(
            f"ar_targets={ar_targets!r} applies to the autoregressive model only (model_type='ar'); "
            f"model_type={model_type!r} takes the default {DEFAULT_AR_TARGETS!r}"
        )
    return ar_targets


def legacy_fields(data: Any) -> dict[str, Any]:
    """A spec or config dict as the live classes read it: the one upgrade of older files.

    ``clip`` ``true`` or ``false``, the older on/off field, is the ``"transitions"`` or
    ``"none"`` box. An autoregressive dict without ``ar_targets`` was written before the field
    existed, when the model was trained on one random target dimension per row: it means
    :data:`LEGACY_AR_TARGETS`. Other missing fields take their defaults.
    """
    data = dict(data)
    if isinstance(data.get("clip"), (bool, np.bool_)):
        data["clip"] = {v: k for k, v in _CLIP_BOOLS.items()}[bool(data["clip"])]
    if data.get("model_type") == "ar" and "ar_targets" not in data:
        data["ar_targets"] = LEGACY_AR_TARGETS
    return data


def fields_dict(obj: Any) -> dict[str, Any]:
    """JSON-ready dict of a dataclass's fields (tuples as lists), shared by :class:`ModelSpec`
    and :class:`opcc_edu.baselines.EnsembleConfig`, whose dicts name cache files and records.

    Two fields are left out where the dicts of before they existed must stay the same:
    ``reward`` at its default :data:`DEFAULT_REWARD_MODE`, and ``ar_targets`` except for an
    autoregressive model with a value other than :data:`LEGACY_AR_TARGETS` -- so feed-forward
    dicts never show it, a one-dimension autoregressive ensemble keeps its old dict, and one
    trained on every dimension gets a dict (and a cache key and label) of its own.
    """
    out = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if f.name == "reward" and value == DEFAULT_REWARD_MODE:
            continue
        if f.name == "ar_targets" and (obj.model_type != "ar" or value == LEGACY_AR_TARGETS):
            continue
        if f.name == "clip":
            value = clip_text(value)
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out
