"""The dataset recipes of the benchmark (paper Table 8, D4RL's dataset types).

========================  =============================================================  =========
name                      recipe                                                         D4RL size
========================  =============================================================  =========
mazes: 1k, 10k, 100k, 1m  waypoint navigation between random goals (one stream; prefixes)  1e3..1e6
random                    uniform random actions                                         1M
medium                    the medium behaviour policy (about 1/3 of expert return)       1M
expert                    the fully trained behaviour policy                             1M
medium-replay             every transition of the behaviour run up to the medium policy  as run
medium-expert             medium followed by expert (half each)                          2M
========================  =============================================================  =========

``size=None`` means the active profile's ``dataset_size`` capped by the recipe's size, so the
``tiny`` profile uses at most 20k transitions and ``paper`` the D4RL sizes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Profile, get_profile
from ..envs import ENV_NAMES, EnvSpec, base_env_name, get_spec
from ..utils import check_choice, check_positive_int
from .format import concatenate_datasets
from .maze import goal_rewards

DATA_FORMAT_VERSION = 1
"""Bumped whenever a recipe or the stored layout changes; part of every cache key. (Not bumped
when medium-replay gained the simulator states ``infos/qpos``/``infos/qvel``: its transitions
stayed byte for byte the same, so neither it nor an ensemble trained on it changed identity,
and :func:`opcc_edu.datasets.cache.read_cached` regenerates a cached file without the states.)"""

DATASET_NAMES: dict[str, tuple[str, ...]] = {
    "maze": ("1k", "10k", "100k", "1m"),
    "locomotion": ("random", "medium", "medium-replay", "expert", "medium-expert"),
}
"""Dataset names per environment kind (:attr:`opcc_edu.envs.EnvSpec.kind`)."""

DEFAULT_DATASET: dict[str, str] = {name: ("1m" if get_spec(name).is_maze else "medium") for name in ENV_NAMES}
"""The dataset each environment uses when none is named (the paper's maze data is "1m")."""

MAZE_SIZES: dict[str, int] = {"1k": 1_000, "10k": 10_000, "100k": 100_000, "1m": 1_000_000}
D4RL_SIZE = 1_000_000
"""Transitions of D4RL's random, medium and expert datasets."""

BEHAVIOR_ACTION_NOISE = 0.02
"""Gaussian noise (standard deviation) added to behaviour actions: D4RL recorded stochastic SAC
policies, the exported actors here are deterministic. Kept small so that the data's returns stay
close to the behaviour policies' evaluated returns: at 0.1 the hopper expert fell in most
episodes and its data's mean return dropped to about the medium policy's."""


def dataset_names(env_name: str | EnvSpec) -> tuple[str, ...]:
    """The dataset names of an environment (mazes: sizes; locomotion: D4RL types)."""
    return DATASET_NAMES[get_spec(env_name).kind]


def resolve_dataset(env_name: str | EnvSpec, name: str | None = None) -> str:
    """The dataset ``name`` of ``env_name``, or the environment's default when None.

    The one place a default dataset is chosen (:data:`DEFAULT_DATASET`): the command line and
    :func:`opcc_edu.baselines.run_end_to_end` resolve once and pass the name on. A given name is
    returned as it is: it may label transitions passed in directly; loading checks it
    (:func:`get_recipe`).

    Raises:
        ValueError: an unknown environment (the message lists the valid ones).
    """
    return DEFAULT_DATASET[base_env_name(env_name)] if name is None else name


@dataclasses.dataclass(frozen=True)
class DatasetRecipe:
    """How one named dataset of one environment is produced."""

    env_name: str
    """Environment."""
    name: str
    """Dataset name (see :data:`DATASET_NAMES`)."""
    method: str
    """``navigation``, ``uniform``, ``behavior``, ``replay`` or ``mixture``."""
    max_size: int | None
    """Largest size (D4RL's); ``None`` for medium-replay, whose size the behaviour run sets."""
    description: str
    """One line for listings."""
    behavior: str | None = None
    """Behaviour policy kind (``medium``/``expert``) for the ``behavior`` method."""
    action_noise: float = 0.0
    """Gaussian action noise (standard deviation, before clipping to [-1, 1])."""
    n_streams: int = 8
    """Environments stepped together; changing it changes the data."""
    salt: int = 0
    """Separates the random streams of recipes that share a seed."""
    parts: tuple[str, ...] = ()
    """Datasets concatenated by the ``mixture`` method."""

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["parts"] = list(self.parts)
        return out

    def stream_fields(self) -> dict[str, Any]:
        """The fields that determine the generated transitions (the cache key's recipe part).

        Maze sizes share one navigation stream, so their name is left out: a smaller maze
        dataset is a prefix of a larger one and can be cut from it.
        """
        fields = {k: v for k, v in self.to_dict().items() if k not in ("description", "max_size")}
        if self.method == "navigation":
            fields.pop("name")
        return fields


def get_recipe(env_name: str | EnvSpec, name: str | DatasetRecipe) -> DatasetRecipe:
    """The recipe of a named dataset; ValueError lists the valid names for the environment.

    A recipe is returned as it is (one resolved at the boundary, :class:`opcc_edu.task.Task`).
    """
    if isinstance(name, DatasetRecipe):
        return name
    spec = get_spec(env_name)
    env_name = spec.name
    check_choice(name, dataset_names(spec), f"dataset name for {env_name}")
    if spec.is_maze:
        return DatasetRecipe(
            env_name,
            name,
            "navigation",
            MAZE_SIZES[name],
            f"waypoint navigation between random goal cells, first {MAZE_SIZES[name]:,} transitions of the stream",
            action_noise=0.5,
        )
    if name == "random":
        return DatasetRecipe(env_name, name, "uniform", D4RL_SIZE, "uniform random actions", salt=0)
    if name in ("medium", "expert"):
        return DatasetRecipe(
            env_name,
            name,
            "behavior",
            D4RL_SIZE,
            f"the {name} behaviour policy with N(0, {BEHAVIOR_ACTION_NOISE}^2) action noise",
            behavior=name,
            action_noise=BEHAVIOR_ACTION_NOISE,
            salt=1 if name == "medium" else 2,
        )
    if name == "medium-replay":
        return DatasetRecipe(
            env_name, name, "replay", None, "every transition of the behaviour run up to the medium policy"
        )
    return DatasetRecipe(
        env_name, name, "mixture", 2 * D4RL_SIZE, "medium followed by expert, half each", parts=("medium", "expert")
    )


def behavior_weights_path(env_name: str, kind: str) -> Path:
    """Where the behaviour policy weights of an environment are shipped."""
    return Path(__file__).resolve().parent.parent / "assets" / "behavior" / env_name / f"{kind}.safetensors"


def recipe_fingerprint(recipe: DatasetRecipe) -> dict[str, Any]:
    """Everything outside the recipe that the data depends on (behaviour weights, training run)."""
    if recipe.method == "behavior":
        path = behavior_weights_path(recipe.env_name, recipe.behavior)
        if not path.exists():
            raise FileNotFoundError(
                f"{path} is missing: the {recipe.behavior} behaviour policy of {recipe.env_name} is not "
                f"built; run `opcc-edu build policies {recipe.env_name} --behavior`"
            )
        return {"behavior_sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    if recipe.method == "replay":
        from ..policies import behavior_info

        info = behavior_info(recipe.env_name)
        return {"train_ppo_args": info["train_ppo_args"], "medium_step": int(info["medium_step"])}
    return {}


def max_size(recipe: DatasetRecipe) -> int:
    """The recipe's largest size (for medium-replay: the medium checkpoint's training step)."""
    if recipe.max_size is not None:
        return recipe.max_size
    from ..policies import behavior_info

    return int(behavior_info(recipe.env_name)["medium_step"])


def resolve_size(recipe: DatasetRecipe, size: int | None, profile: Profile | str | None = None) -> int:
    """``size``, or ``profile``'s ``dataset_size`` (the active profile's when None) capped by
    the recipe, checked."""
    cap = max_size(recipe)
    if size is None:
        return min(get_profile(profile).dataset_size, cap)
    size = check_positive_int(size, "size")
    if size > cap:
        raise ValueError(f"size {size} exceeds the {cap} transitions of {recipe.env_name} {recipe.name!r}")
    return size


def mixture_sizes(size: int, n_parts: int) -> list[int]:
    """Split ``size`` into ``n_parts`` near-equal sizes, earlier parts taking the remainder."""
    base, extra = divmod(size, n_parts)
    return [base + (1 if i < extra else 0) for i in range(n_parts)]


def stream_id(recipe: DatasetRecipe, seed: int) -> str:
    """Hash of (recipe stream fields, external fingerprint, seed, format version)."""
    payload = {
        "recipe": recipe.stream_fields(),
        "fingerprint": recipe_fingerprint(recipe),
        "seed": int(seed),
        "format_version": DATA_FORMAT_VERSION,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def generate_dataset(
    env_name: str,
    name: str,
    size: int | None = None,
    seed: int = 0,
    progress: bool = True,
) -> dict[str, np.ndarray]:
    """Generate a named dataset from scratch (no cache; :func:`load_dataset` caches).

    Args:
        env_name: one of :data:`opcc_edu.envs.ENV_NAMES` or a maze's ``-d4rl-goal`` variant.
        name: one of :func:`dataset_names` ``(env_name)``.
        size: transitions T; ``None`` uses the active profile (capped by the recipe).
        seed: random seed; the same arguments always give the same arrays on one machine.
            medium-replay ignores it (it is the record of the one behaviour training run).
        progress: show a tqdm progress bar.

    Returns:
        The D4RL-format dict.
    """
    recipe = get_recipe(env_name, name)
    size = resolve_size(recipe, size)
    seed = check_positive_int(seed, "seed", minimum=0)
    if base_env_name(env_name) != env_name:  # a -d4rl-goal variant: its maze's data, rewards recomputed
        return goal_rewards(generate_dataset(base_env_name(env_name), name, size, seed, progress), env_name)
    if recipe.method == "navigation":
        from .maze import generate_maze_dataset

        return generate_maze_dataset(
            env_name, size, seed, n_streams=recipe.n_streams, action_noise=recipe.action_noise, progress=progress
        )
    if recipe.method in ("uniform", "behavior"):
        from .locomotion import generate_policy_dataset

        policy = None
        if recipe.method == "behavior":
            from ..policies import load_behavior_policy

            policy = load_behavior_policy(env_name, recipe.behavior)
        return generate_policy_dataset(
            env_name,
            size,
            seed,
            policy=policy,
            action_noise=recipe.action_noise,
            n_streams=recipe.n_streams,
            salt=recipe.salt,
            progress=progress,
        )
    if recipe.method == "replay":
        from ..policies import behavior_train_args
        from .locomotion import generate_replay_dataset

        # The record of one training run: the behaviour run's own seed fixes it, `seed` does not.
        return generate_replay_dataset(env_name, size, behavior_train_args(env_name), progress=progress)
    parts = [
        generate_dataset(env_name, part, n, seed, progress)
        for part, n in zip(recipe.parts, mixture_sizes(size, len(recipe.parts)), strict=False)
    ]
    return concatenate_datasets(parts)
