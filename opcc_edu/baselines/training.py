"""Training the ensemble of one baseline, with an up-front memory check."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from ..dynamics import build_ensemble, train_dynamics
from ..dynamics.memory import check_memory, training_bytes
from ..utils import get_device
from .config import EnsembleConfig

if TYPE_CHECKING:
    import torch

    from ..dynamics import DynamicsEnsemble, TrainHistory
    from ..envs import EnvSpec


def check_training_memory(
    config: EnsembleConfig, env_name: str | EnvSpec, transitions: int, device: torch.device | str | None = None
) -> None:
    """Raise :class:`~opcc_edu.dynamics.memory.InsufficientMemoryError` (a MemoryError and a
    ValueError) when training ``config`` on ``transitions`` rows clearly cannot fit ``device``.

    Nothing is allocated: the estimate comes from the sizes alone
    (:func:`opcc_edu.dynamics.memory.training_bytes`).
    """
    spec = config.model_spec(env_name)
    check_memory(
        training_bytes(spec, int(transitions), config.batch_size),
        get_device(device),
        f"training a {config.ensemble_size}-member ensemble on {int(transitions)} transitions",
        f"ensemble_size (now {config.ensemble_size}), hidden_sizes, batch_size or dataset_size",
    )


def train_ensemble(
    dataset: Mapping[str, np.ndarray],
    config: EnsembleConfig,
    env_name: str | EnvSpec,
    device: torch.device | str | None = None,
    progress: bool = True,
) -> tuple[DynamicsEnsemble, TrainHistory]:
    """Build and train the ensemble of ``config`` on a D4RL-format dataset.

    Args:
        dataset: ``observations`` (T, D), ``actions`` (T, A), ``rewards`` (T,),
            ``next_observations`` (T, D), ``terminals`` (T,).
        config: the baseline.
        env_name: environment of the data (sizes, termination function), or its spec.
        device: torch device (default: CUDA when available).
        progress: show a progress bar.

    Returns:
        ``(model in eval mode, history)``.

    Raises:
        InsufficientMemoryError: the ensemble clearly cannot be trained in the free memory
            (checked before anything is allocated).
    """
    from ..envs import get_spec

    env = get_spec(env_name)
    check_training_memory(config, env, len(dataset["observations"]), device)
    model = build_ensemble(config.model_spec(env), seed=config.seed, env=env)
    history = train_dynamics(
        model,
        dataset,
        steps=config.train_steps,
        batch_size=config.batch_size,
        lr=config.lr,
        seed=config.seed,
        device=device,
        progress=progress,
    )
    return model, history
