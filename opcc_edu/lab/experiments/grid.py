"""Grids of runs: environments x datasets x seeds x configurations.

:func:`plan_ablation` expands an :class:`~opcc_edu.lab.experiments.registry.Ablation` into a
:class:`GridSpec` for a profile; :meth:`GridSpec.runs` lists its :class:`RunSpec` cells, each
named by a unique ``run_id``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...config import Profile, get_profile
from ...utils import check_choice
from .registry import Ablation, configuration_label, get_ablation

__all__ = ["RunSpec", "GridSpec", "run_slug", "default_datasets", "plan_ablation"]


def run_slug(environment: str, dataset: str, seed: int | str, configuration: str) -> str:
    """File-name form of a run id: ``env__dataset__seed<k>__configuration`` (``=`` -> ``-``,
    ``;`` -> ``+``)."""
    return "__".join((environment, dataset, f"seed{seed}", configuration.replace("=", "-").replace(";", "+")))


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One cell of a grid: train (or load) one ensemble and answer one query set."""

    environment: str
    dataset: str
    seed: int
    overrides: Mapping[str, Any]

    @property
    def configuration(self) -> str:
        """The canonical :func:`~opcc_edu.lab.experiments.registry.configuration_label`."""
        return configuration_label(self.overrides)

    @property
    def run_id(self) -> str:
        """Unique key ``env/dataset/seed<k>/configuration`` of the run."""
        return f"{self.environment}/{self.dataset}/seed{self.seed}/{self.configuration}"

    @property
    def slug(self) -> str:
        """File-name form of :attr:`run_id`."""
        return run_slug(self.environment, self.dataset, self.seed, self.configuration)


@dataclasses.dataclass(frozen=True)
class GridSpec:
    """Environments x datasets x seeds x configurations."""

    environments: tuple[str, ...]
    """Environment names."""
    datasets: Mapping[str, tuple[str, ...]]
    """Dataset names per environment."""
    seeds: tuple[int, ...]
    """Training seeds."""
    configurations: tuple[Mapping[str, Any], ...] = ({},)
    """Override dicts of :data:`~opcc_edu.lab.experiments.registry.BASELINE_DEFAULTS`, one per
    trained configuration."""

    def __post_init__(self) -> None:
        if not self.environments:
            raise ValueError("environments must name at least one environment")
        for env in self.environments:
            if not self.datasets.get(env):
                raise ValueError(f"datasets has no dataset for environment {env!r}")
        if not self.seeds:
            raise ValueError("seeds must hold at least one seed")
        if not self.configurations:
            raise ValueError("configurations must hold at least one override dict")
        for overrides in self.configurations:
            configuration_label(overrides)

    def runs(self) -> list[RunSpec]:
        """Every run, without duplicates; seeds outermost, so that an interrupted grid has
        already covered every environment, dataset and level with its first seeds."""
        out: list[RunSpec] = []
        seen: set[str] = set()
        for seed in self.seeds:
            for env in self.environments:
                for dataset in self.datasets[env]:
                    for overrides in self.configurations:
                        run = RunSpec(env, dataset, int(seed), dict(overrides))
                        if run.run_id not in seen:
                            seen.add(run.run_id)
                            out.append(run)
        return out

    def __len__(self) -> int:
        return len(self.runs())


def default_datasets(env_name: str, profile: Profile | str | None = None, all_types: bool = False) -> tuple[str, ...]:
    """Datasets a grid uses for ``env_name``.

    The paper averaged its ablations over the five locomotion datasets and used the ``1m`` maze
    data; the ``paper`` profile does the same. Smaller profiles use the environment's default
    dataset only, to stay affordable. ``all_types=True`` (the dataset-type ablation) returns
    every dataset name of the environment -- except maze prefixes that the profile's
    ``dataset_size`` cuts to the same length (in ``tiny`` the 100k and 1m prefixes are both
    20,000 transitions of one stream, hence identical): of those only the largest name stays.
    """
    from ...datasets import dataset_names, get_recipe, resolve_dataset

    profile = get_profile(profile)
    names = tuple(dataset_names(env_name))
    if not all_types:
        if profile.name == "paper":
            return ("1m",) if "1m" in names else names
        return (resolve_dataset(env_name),)
    kept: dict[Any, str] = {}
    for name in names:
        recipe = get_recipe(env_name, name)
        if getattr(recipe, "method", None) == "navigation":
            key: Any = ("navigation", min(int(recipe.max_size), int(profile.dataset_size)))
        else:
            key = name
        kept[key] = name  # a later (larger) prefix of the same length replaces the earlier one
    return tuple(kept.values())


def plan_ablation(
    name: str | Ablation,
    profile: Profile | str | None = None,
    environments: Sequence[str] | None = None,
    datasets: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    seeds: int | Sequence[int] | None = None,
) -> GridSpec:
    """Expand an ablation into the grid of runs it needs in a profile.

    Args:
        name: registry key of :data:`~opcc_edu.lab.experiments.registry.ABLATIONS` (or an
            :class:`~opcc_edu.lab.experiments.registry.Ablation`).
        profile: profile (object or name); the active one when ``None``.
        environments: environments; the profile's ``environments`` when ``None``.
        datasets: dataset names, or a dict of them per environment; :func:`default_datasets`
            when ``None``. A list applies to every environment that has the datasets; with
            ``environments=None`` the profile's environments without any of them are left
            out, while a named environment must have them all.
        seeds: a number of seeds (0..n-1) or explicit seeds; the profile's ``n_seeds`` when
            ``None``.

    Returns:
        The :class:`GridSpec`.

    Raises:
        ValueError: for an unknown ablation or environment, a dataset the environment does not
            have (naming its datasets), or a seed count below one.
    """
    from ...datasets import dataset_names
    from ...envs import ENV_NAMES

    ablation = get_ablation(name)
    profile = get_profile(profile)
    envs = tuple(environments) if environments is not None else tuple(profile.environments)
    for env in envs:
        check_choice(env, ENV_NAMES, "environment")
    if datasets is None:
        per_env = {env: default_datasets(env, profile, all_types=ablation.factor == "dataset") for env in envs}
    elif isinstance(datasets, Mapping):
        per_env = {env: tuple(datasets.get(env, ())) for env in envs}
    else:
        wanted = tuple(datasets)
        known = list(dict.fromkeys(name for env in envs for name in dataset_names(env)))
        for dataset in wanted:
            check_choice(dataset, known, "dataset")
        per_env = {env: tuple(d for d in wanted if d in dataset_names(env)) for env in envs}
        if environments is None:  # the profile's environments that have these datasets
            envs = tuple(env for env in envs if per_env[env])
            per_env = {env: per_env[env] for env in envs}
        else:
            per_env = {env: wanted for env in envs}  # each named environment must have them all
    for env, names in per_env.items():
        for dataset in names:
            check_choice(dataset, dataset_names(env), f"dataset of environment {env}")
    if seeds is None:
        seed_list = tuple(range(profile.n_seeds))
    elif isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ValueError(f"seeds must be a positive count or a list of seeds, got {seeds!r}")
        seed_list = tuple(range(int(seeds)))
    else:
        seed_list = tuple(int(s) for s in seeds)
    return GridSpec(envs, per_env, seed_list, ablation.configurations())
