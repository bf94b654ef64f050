"""Vectorised dynamics-model ensembles: layers, models, training and batched rollouts.

The baselines of the OPCC paper (Section 5) learn an ensemble of dynamics-and-reward models
from an offline dataset and simulate each policy inside every member. This package keeps
all M members in stacked tensors (weights of shape (M, in, out)) so that training and
rollouts never loop over members in Python:

* :mod:`~opcc_edu.dynamics.layers` -- :class:`EnsembleLinear`, :class:`EnsembleMLP`.
* :mod:`~opcc_edu.dynamics.models` -- :class:`ModelSpec`, :class:`FeedForwardEnsemble`,
  :class:`AutoregressiveEnsemble`, :func:`build_ensemble`, :func:`save_ensemble`,
  :func:`load_ensemble`.
* :mod:`~opcc_edu.dynamics.training` -- :func:`train_dynamics`, :func:`bootstrap_indices`.
* :mod:`~opcc_edu.dynamics.rollout` -- :func:`rollout_values`.
"""

from .layers import EnsembleLinear, EnsembleMLP
from .models import (
    MODEL_TYPES,
    TERMINATION_MODES,
    AutoregressiveEnsemble,
    DynamicsEnsemble,
    FeedForwardEnsemble,
    ModelSpec,
    build_ensemble,
    load_ensemble,
    save_ensemble,
)
from .rollout import RolloutPlan, rollout_values
from .training import TrainHistory, bootstrap_indices, train_dynamics, transition_arrays, validation_mse

__all__ = [
    "EnsembleLinear",
    "EnsembleMLP",
    "MODEL_TYPES",
    "TERMINATION_MODES",
    "AutoregressiveEnsemble",
    "DynamicsEnsemble",
    "FeedForwardEnsemble",
    "ModelSpec",
    "build_ensemble",
    "load_ensemble",
    "save_ensemble",
    "RolloutPlan",
    "rollout_values",
    "TrainHistory",
    "bootstrap_indices",
    "train_dynamics",
    "transition_arrays",
    "validation_mse",
]
