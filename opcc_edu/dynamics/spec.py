"""The architecture of an ensemble, as data: :class:`ModelSpec` and the valid choices.

This module imports neither torch nor the simulator, so configurations can be built,
validated, compared and stored without them. :class:`ModelSpec` has no defaults for the
choices a baseline makes (members, widths, model type, noise, prior, normalisation,
clipping, termination): a spec is always built from a complete configuration, normally
:meth:`opcc_edu.baselines.EnsembleConfig.model_spec`, which holds the paper's defaults. The
reward mode defaults to the paper's learned reward, which is also what a spec saved before the
field existed means.
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
ACTIVATION_NAMES: tuple[str, ...] = ("silu", "relu", "tanh")
"""Hidden activations by name (MBPO uses SiLU, also called swish)."""


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """Everything needed to rebuild an ensemble's architecture (saved next to its weights)."""

    env_name: str
    """Environment the model imitates (selects the predefined termination function)."""
    obs_dim: int
    """Observation size D."""
    act_dim: int
    """Action size A."""
    ensemble_size: int
    """Members M."""
    hidden_sizes: tuple[int, ...]
    """Hidden widths of every member."""
    model_type: str
    """``"ff"`` (feed-forward Gaussian) or ``"ar"`` (autoregressive)."""
    stochastic: bool
    """Sample next observations and rewards (Gaussian) instead of using the mean."""
    prior_scale: float
    """Scale of the randomized constant prior added to the output; 0 disables it."""
    normalize: bool
    """Standardise the inputs ``concat(obs, action)`` with dataset statistics."""
    clip: bool
    """Clip predicted observations and rewards to the dataset's bounds."""
    termination: str
    """``"predefined"``, ``"learned"`` or ``"none"`` (see :data:`TERMINATION_MODES`)."""
    activation: str = "silu"
    """Hidden activation (MBPO: SiLU)."""
    reward: str = DEFAULT_REWARD_MODE
    """``"learned"`` or ``"predefined"`` (see :data:`REWARD_MODES`): in predefined mode the last
    target column is the reward feature and :meth:`DynamicsEnsemble.step` applies the
    environment's reward function."""

    def __post_init__(self) -> None:
        check_positive_int(self.obs_dim, "obs_dim")
        check_positive_int(self.act_dim, "act_dim")
        check_positive_int(self.ensemble_size, "ensemble_size")
        check_choice(self.model_type, MODEL_TYPES, "model_type")
        check_choice(self.termination, TERMINATION_MODES, "termination")
        check_choice(self.activation, ACTIVATION_NAMES, "activation")
        check_choice(self.reward, REWARD_MODES, "reward")
        if isinstance(self.hidden_sizes, int) or not self.hidden_sizes:
            raise ValueError(f"hidden_sizes must name at least one hidden layer, got {self.hidden_sizes!r}")
        for h in self.hidden_sizes:
            check_positive_int(h, "hidden_sizes entry")
        if not np.isfinite(self.prior_scale) or self.prior_scale < 0:
            raise ValueError(f"prior_scale must be a finite number >= 0, got {self.prior_scale!r}")
        object.__setattr__(self, "hidden_sizes", tuple(int(h) for h in self.hidden_sizes))

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
        """JSON-ready dict of every field, except ``reward`` at its default (``"learned"``): the
        spec saved with an ensemble is then the same as before the field existed."""
        return fields_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSpec:
        """The inverse of :meth:`to_dict` (a dict without ``reward`` means ``"learned"``)."""
        return dataclass_from_dict(cls, data)


def fields_dict(obj: Any) -> dict[str, Any]:
    """JSON-ready dict of a dataclass's fields (tuples as lists), without ``reward`` when it
    has its default value :data:`DEFAULT_REWARD_MODE` (shared by :class:`ModelSpec` and
    :class:`opcc_edu.baselines.EnsembleConfig`, whose dicts name cache files and records)."""
    out = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if f.name == "reward" and value == DEFAULT_REWARD_MODE:
            continue
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out
