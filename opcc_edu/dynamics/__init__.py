"""Vectorised dynamics-model ensembles: layers, models, training and batched rollouts.

The baselines of the OPCC paper (Section 5) learn an ensemble of dynamics-and-reward models
from an offline dataset and simulate each policy inside every member. This package keeps
all M members in stacked tensors (weights of shape (M, in, out)) so that training and
rollouts never loop over members in Python:

* :mod:`~opcc_edu.dynamics.spec` -- :class:`ModelSpec` and the valid choices (no torch).
* :mod:`~opcc_edu.dynamics.layers` -- :class:`EnsembleLinear`, :class:`EnsembleMLP`.
* :mod:`~opcc_edu.dynamics.models` -- :class:`FeedForwardEnsemble`,
  :class:`AutoregressiveEnsemble`, :func:`build_ensemble`, :func:`save_ensemble`,
  :func:`load_ensemble`.
* :mod:`~opcc_edu.dynamics.training` -- :func:`train_dynamics`, :func:`bootstrap_indices`.
* :mod:`~opcc_edu.dynamics.rollout` -- :func:`return_curves` (the rollout) and :func:`rollout_values` (its scheduler).
* :mod:`~opcc_edu.dynamics.memory` -- up-front memory estimates and checks (no torch).

Only :mod:`~opcc_edu.dynamics.spec` is imported with the package; everything else (and
torch) on first use, so that a configuration can be validated without torch.
"""

from __future__ import annotations

from ..utils import lazy_exports
from .spec import ACTIVATION_NAMES, AR_TARGETS, MODEL_TYPES, TERMINATION_MODES, ModelSpec

_LAZY: dict[str, str] = {
    "EnsembleLinear": "layers",
    "EnsembleMLP": "layers",
    "AutoregressiveEnsemble": "models",
    "DynamicsEnsemble": "models",
    "FeedForwardEnsemble": "models",
    "build_ensemble": "models",
    "load_ensemble": "models",
    "save_ensemble": "models",
    "RolloutPlan": "rollout",
    "return_curves": "rollout",
    "rollout_values": "rollout",
    "TrainHistory": "training",
    "bootstrap_indices": "training",
    "train_dynamics": "training",
    "transition_arrays": "training",
    "validation_mse": "training",
    "InsufficientMemoryError": "memory",
    "check_memory": "memory",
    "rollout_bytes": "memory",
    "training_bytes": "memory",
}


__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


__all__ = ["ACTIVATION_NAMES", "AR_TARGETS", "MODEL_TYPES", "TERMINATION_MODES", "ModelSpec", *_LAZY]
