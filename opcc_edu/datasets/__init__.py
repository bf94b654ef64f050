"""Offline datasets in D4RL's format for every benchmark environment.

The OPCC benchmark (paper Section 4, Table 8) pairs each environment with D4RL datasets: the
maze2d navigation data ("1m", with 1k/10k/100k prefixes) and the Gym-MuJoCo types random,
medium, medium-replay, expert and medium-expert. D4RL's files cannot be fetched or imported on
current Python, so this package regenerates the same kinds of data locally (deterministically
from a seed, cached) and also reads real D4RL/Minari files when a user has them.

* :func:`load_dataset` -- the entry point: generate or load from the cache.
* :mod:`.format` -- the dict-of-arrays format, episodes and summary statistics.
* :mod:`.recipes` -- names, sizes and how each dataset is produced.
* :mod:`.maze` / :mod:`.locomotion` -- the generators.
* :mod:`.cache` -- where files live and how corrupt ones are detected and replaced.
* :mod:`.real` -- D4RL hdf5 and Minari loaders.
* :mod:`.coverage` -- query-to-dataset distances and visitation plots.
"""

from __future__ import annotations

import numpy as np

from ..envs import EnvSpec, base_spec, get_spec
from ..utils import check_positive_int
from .cache import (
    CachedDataset,
    cache_path,
    clear_cache,
    dataset_cache_dir,
    list_cached,
    prefix_from_cache,
    read_cached,
    write_cached,
)
from .coverage import (
    CoverageResult,
    coverage_table,
    pooled_dataset,
    query_dataset_distances,
    visitation_histogram,
)
from .format import (
    DatasetSummary,
    concatenate_datasets,
    continuity_error,
    episode_returns,
    iterate_episodes,
    summarize_dataset,
    take_prefix,
    validate_dataset,
)
from .maze import goal_rewards
from .real import d4rl_maze_to_env_frame, load_d4rl_hdf5, load_minari, save_d4rl_hdf5
from .recipes import (
    DATA_FORMAT_VERSION,
    DATASET_NAMES,
    DEFAULT_DATASET,
    DatasetRecipe,
    dataset_names,
    generate_dataset,
    get_recipe,
    mixture_sizes,
    resolve_dataset,
    resolve_size,
    stream_id,
)


def load_dataset(
    env_name: str | EnvSpec,
    name: str | DatasetRecipe | None = None,
    size: int | None = None,
    seed: int = 0,
    progress: bool = True,
    cache: bool = True,
) -> dict[str, np.ndarray]:
    """A named offline dataset of an environment, generated on first use and then cached.

    Args:
        env_name: one of :data:`opcc_edu.envs.ENV_NAMES`, or a maze's ``-d4rl-goal`` variant
            (its maze's data, rewards recomputed for its goal point, cached under its own name).
        name: mazes ``"1k"``, ``"10k"``, ``"100k"``, ``"1m"``; locomotion ``"random"``,
            ``"medium"``, ``"medium-replay"``, ``"expert"``, ``"medium-expert"``
            (``None``: :data:`DEFAULT_DATASET` of the environment).
        size: transitions T; ``None`` means the active profile's ``dataset_size`` capped by the
            recipe (so ``"1k"`` always has at most 1000).
        seed: random seed of the data (medium-replay has none and ignores it).
        progress: show a tqdm progress bar while generating.
        cache: read and write the cache (``False`` always generates and writes nothing, not
            even the cache folder).

    Returns:
        D4RL's dict: ``observations`` (T, D), ``actions`` (T, A), ``rewards`` (T,),
        ``next_observations`` (T, D) float32; ``terminals``, ``timeouts`` (T,) bool;
        ``infos/qpos``, ``infos/qvel`` float32 (every recipe; medium-replay's come from the
        replayed training run's environments); mazes add ``infos/goal``.

    Raises:
        ValueError: unknown environment or dataset name, or a size beyond the recipe's.
        FileNotFoundError: a locomotion behaviour policy has not been built.
    """
    spec = get_spec(env_name)
    recipe = get_recipe(spec, resolve_dataset(spec, name))
    size = resolve_size(recipe, size)
    seed = check_positive_int(seed, "seed", minimum=0)
    if recipe.method == "replay":
        seed = 0
    if recipe.method == "mixture":
        parts = [
            load_dataset(spec, part, n, seed, progress, cache)
            for part, n in zip(recipe.parts, mixture_sizes(size, len(recipe.parts)), strict=True)
        ]
        return concatenate_datasets(parts)
    if not cache:
        return generate_dataset(spec.name, recipe.name, size, seed, progress)
    stream = stream_id(recipe, seed)
    path = cache_path(recipe, seed, size, stream)
    data = read_cached(path, spec, size, stream)
    if data is not None:
        return data
    if recipe.method == "navigation":
        data = prefix_from_cache(recipe, seed, size, stream)
    base, extra = base_spec(spec), {}
    if base is not spec:  # a -d4rl-goal variant: its maze's data, rewards recomputed for its goal point
        data = goal_rewards(load_dataset(base, recipe.name, size, seed, progress), spec) if data is None else data
        extra["rewards_recomputed"] = {"base_env": base.name, "goal_xy": spec.goal_xy.tolist()}
    if data is None:
        data = generate_dataset(spec.name, recipe.name, size, seed, progress)
    write_cached(path, data, recipe, seed, stream, **extra)
    return data


def dataset_summary(env_name: str, name: str | None = None, size: int | None = None, seed: int = 0) -> DatasetSummary:
    """:func:`summarize_dataset` of :func:`load_dataset` (generating it if needed)."""
    return summarize_dataset(load_dataset(env_name, name, size, seed, progress=False))


__all__ = [
    "DATA_FORMAT_VERSION",
    "DATASET_NAMES",
    "DEFAULT_DATASET",
    "CachedDataset",
    "CoverageResult",
    "DatasetRecipe",
    "DatasetSummary",
    "cache_path",
    "clear_cache",
    "concatenate_datasets",
    "continuity_error",
    "coverage_table",
    "d4rl_maze_to_env_frame",
    "dataset_cache_dir",
    "dataset_names",
    "dataset_summary",
    "episode_returns",
    "generate_dataset",
    "get_recipe",
    "iterate_episodes",
    "list_cached",
    "load_d4rl_hdf5",
    "load_dataset",
    "load_minari",
    "mixture_sizes",
    "pooled_dataset",
    "query_dataset_distances",
    "resolve_dataset",
    "resolve_size",
    "save_d4rl_hdf5",
    "summarize_dataset",
    "take_prefix",
    "validate_dataset",
    "visitation_histogram",
    "write_cached",
]
