"""The ensemble cache: one file per (environment, dataset, training configuration).

A trained ensemble is stored as safetensors under
``<cache>/ensembles/<env>/<dataset>/ensemble-<digest>.safetensors``. The digest hashes
:func:`ensemble_cache_key`: everything the trained weights depend on -- the cache format, the
environment, the dataset's identity (:func:`dataset_identity`) and the training fields of the
config. Change any of them and the cache misses, so a stale ensemble is never reused.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..dynamics import load_ensemble
from ..io import CorruptFileError
from ..utils import cache_dir, check_positive_int, get_device
from .config import EnsembleConfig
from .training import check_training_memory, train_ensemble

if TYPE_CHECKING:
    import torch

    from ..datasets import DatasetRecipe
    from ..dynamics import DynamicsEnsemble
    from ..envs import EnvSpec

CACHE_FORMAT = 2
"""Bumped when a change makes cached ensembles stale (2: the key names the dataset's identity)."""

TRAINING_ARRAYS: tuple[str, ...] = ("observations", "actions", "rewards", "next_observations", "terminals")
"""Arrays of a dataset that training reads (the content hash of a given dataset covers these)."""
PREDEFINED_REWARD_ARRAYS: tuple[str, ...] = ("timeouts", "infos/qpos")
"""Arrays that training also reads in predefined-reward mode (episode ends and simulator
positions give the reward feature); the content hash covers them for such configs only."""


def dataset_identity(
    env_name: str | EnvSpec,
    dataset_name: str | DatasetRecipe,
    dataset_size: int | None = None,
    dataset_seed: int = 0,
    dataset: Mapping[str, np.ndarray] | None = None,
    arrays: tuple[str, ...] = TRAINING_ARRAYS,
) -> dict[str, Any]:
    """What identifies the transitions an ensemble is trained on, as a JSON-ready dict.

    A named dataset (``dataset`` None) is identified by its recipe, as
    :func:`opcc_edu.datasets.load_dataset` produces it: name, size, seed, the generator's
    format version, the recipe's stream fields, what the data depends on outside the recipe
    (the behaviour policy's SHA-256, the behaviour run) and the resulting stream id; a mixture
    lists the identity of each part. Given arrays are identified by their content: SHA-256 of
    ``arrays`` (dtype, shape and bytes).

    Args:
        env_name: environment (a name or its spec).
        dataset_name: dataset name or recipe (for given arrays, only a label).
        dataset_size: transitions (None: the active profile's, capped by the recipe); ignored
            for given arrays.
        dataset_seed: seed of the dataset.
        dataset: the transitions themselves, or None for the named dataset.
        arrays: the keys of ``dataset`` that training reads (default :data:`TRAINING_ARRAYS`).
    """
    from ..datasets import recipes

    if dataset is not None:
        digest = hashlib.sha256()
        for key in arrays:
            if key in dataset:
                array = np.ascontiguousarray(dataset[key])
                digest.update(f"{key}:{array.dtype.str}:{array.shape}".encode())
                digest.update(array.tobytes())
        label = getattr(dataset_name, "name", dataset_name)
        return {"name": label, "size": int(len(dataset["observations"])), "sha256": digest.hexdigest()}
    recipe = recipes.get_recipe(env_name, dataset_name)
    size = recipes.resolve_size(recipe, dataset_size)
    seed = check_positive_int(dataset_seed, "dataset_seed", minimum=0)
    if recipe.method == "replay":
        seed = 0  # the record of one training run: load_dataset ignores the seed
    identity: dict[str, Any] = {
        "name": recipe.name,
        "size": int(size),
        "seed": int(seed),
        "format_version": recipes.DATA_FORMAT_VERSION,
    }
    if recipe.method == "mixture":
        sizes = recipes.mixture_sizes(size, len(recipe.parts))
        identity["parts"] = [
            dataset_identity(env_name, part, n, seed) for part, n in zip(recipe.parts, sizes, strict=True)
        ]
        return identity
    identity["recipe"] = recipe.stream_fields()
    identity["fingerprint"] = recipes.recipe_fingerprint(recipe)
    identity["stream"] = recipes.stream_id(recipe, seed)
    return identity


def ensemble_cache_key(
    env_name: str | EnvSpec,
    dataset_name: str | DatasetRecipe,
    config: EnsembleConfig,
    dataset_size: int | None = None,
    dataset_seed: int = 0,
    dataset: Mapping[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """The dict whose hash names an ensemble's cache file (print it to see why a cache missed).

    Args as :func:`dataset_identity`, plus ``config`` (only its training fields count: a
    rollout-only field such as ``mixture`` reuses the trained ensemble).
    """
    from ..envs import get_spec

    arrays = TRAINING_ARRAYS + (PREDEFINED_REWARD_ARRAYS if config.reward == "predefined" else ())
    return {
        "format": CACHE_FORMAT,
        "env": get_spec(env_name).name,
        "dataset": dataset_identity(env_name, dataset_name, dataset_size, dataset_seed, dataset, arrays),
        "config": config.training_fields(),
    }


def ensemble_cache_path(
    env_name: str,
    dataset_name: str,
    config: EnsembleConfig,
    dataset_size: int | None = None,
    dataset_seed: int = 0,
    dataset: Mapping[str, np.ndarray] | None = None,
) -> Path:
    """Cache file of the ensemble trained with ``config`` on one dataset.

    The file name is the first 16 hex digits of the SHA-256 of :func:`ensemble_cache_key`.
    """
    key = ensemble_cache_key(env_name, dataset_name, config, dataset_size, dataset_seed, dataset)
    return _key_path(env_name, dataset_name, key)


def _key_path(env_name: str, dataset_name: str, key: Mapping[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir("ensembles", env_name, dataset_name, create=False) / f"ensemble-{digest}.safetensors"


def get_or_train_ensemble(
    env_name: str | EnvSpec,
    dataset_name: str | DatasetRecipe | None = None,
    config: EnsembleConfig | None = None,
    dataset_size: int | None = None,
    dataset_seed: int = 0,
    device: torch.device | str | None = None,
    progress: bool = True,
    cache: bool = True,
    dataset: Mapping[str, np.ndarray] | None = None,
) -> DynamicsEnsemble:
    """Load the ensemble of ``config`` from the cache, or train and cache it. (A recipe, read top to bottom.)

    Args:
        env_name: environment, or its spec (:class:`opcc_edu.baselines.Task` hands the spec down).
        dataset_name: dataset of :func:`opcc_edu.datasets.load_dataset`, or its recipe (None:
            the environment's default).
        config: the baseline (None: :meth:`EnsembleConfig.from_profile`).
        dataset_size: transitions (None: the active profile's, capped by the recipe).
        dataset_seed: seed of the dataset.
        device: torch device for the returned model.
        progress: show progress bars.
        cache: read and write the cache (``False`` always trains and stores nothing).
        dataset: train on these transitions instead of loading ``dataset_name`` (the cache
            key then hashes their content; ``dataset_name`` is only a label).

    Returns:
        The model in eval mode. Its attribute ``info`` (a dict) says whether it came from the
        cache (``cache_hit``), where it is stored (``path``) and how long training took
        (``train_seconds``, 0 for a cache hit), with the training history when trained.

    Raises:
        InsufficientMemoryError: training clearly cannot fit the device's free memory
            (checked before the dataset is loaded).
        ValueError: ``config.reward == "predefined"`` on given locomotion transitions without
            simulator states (``infos/qpos``); every named dataset records them.
    """
    from ..datasets import get_recipe, resolve_dataset, resolve_size
    from ..envs import get_spec

    config = EnsembleConfig.from_profile() if config is None else config
    env = get_spec(env_name)
    env_name, recipe = env.name, resolve_dataset(env, dataset_name)
    if dataset is None:
        recipe = get_recipe(env, recipe)
        dataset_size = resolve_size(recipe, dataset_size)
        no_states = False  # every named dataset records simulator states
    else:
        dataset_size = len(dataset["observations"])
        no_states = "infos/qpos" not in dataset
    dataset_name = getattr(recipe, "name", recipe)
    if config.reward == "predefined" and no_states:
        from ..rewards import REWARD_FEATURES, missing_states_error

        if REWARD_FEATURES[env_name] is not None:
            raise missing_states_error(env_name, dataset_name)
    key = ensemble_cache_key(env, recipe, config, dataset_size, dataset_seed, dataset)
    path = _key_path(env_name, dataset_name, key)
    device = get_device(device)
    if cache and path.exists():
        try:
            model, meta = load_ensemble(path, device=device, env=env)
        except (CorruptFileError, ValueError, RuntimeError) as exc:
            warnings.warn(f"cached ensemble {path} is unusable ({exc}); training it again", stacklevel=2)
        else:
            model.info = {"cache_hit": True, "path": str(path), "train_seconds": 0.0, "trained": meta}
            return model
    check_training_memory(config, env, dataset_size, device)
    if dataset is None:
        from ..datasets import load_dataset

        dataset = load_dataset(env, recipe, size=dataset_size, seed=dataset_seed, progress=progress)
    start = time.perf_counter()
    model, history = train_ensemble(dataset, config, env, device=device, progress=progress)
    seconds = time.perf_counter() - start
    meta = {
        "env_name": env_name,
        "dataset": dataset_name,
        "dataset_size": int(dataset_size),
        "dataset_seed": int(dataset_seed),
        "config": config.to_dict(),
        "train_seconds": seconds,
        "final_train_loss": history.train_loss[-1],
        "final_val_mse": history.final_val_mse.tolist(),
        "cache_key": key,
    }
    if cache:
        from ..dynamics import save_ensemble

        save_ensemble(path, model, meta)
    model.info = {
        "cache_hit": False,
        "path": str(path) if cache else None,
        "train_seconds": seconds,
        "trained": meta,
        "history": history,
    }
    return model
