"""Answering a query set with a baseline: train or load the ensemble, estimate, score.

:func:`answer_queries` is the paper's baseline end to end (the ensemble cache, member values,
:class:`~opcc_edu.baselines.answers.Answers`); :func:`heuristic_as_answers` gives the no-model
rule's answers in the same type.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..confidence import resolve_confidences
from ..config import get_profile
from ..names import CONFIDENCES, DEFAULT_QUERY_RECIPE
from .answers import Answers
from .cache import get_or_train_ensemble
from .config import EnsembleConfig
from .estimate import answering_env, estimate_values, select_profile_queries

if TYPE_CHECKING:
    import torch

    from ..datasets import DatasetRecipe
    from ..dynamics import DynamicsEnsemble
    from ..envs import EnvSpec
    from ..queries import QuerySet


def answer_queries(
    env_name: str | EnvSpec,
    dataset_name: str | DatasetRecipe | None = None,
    config: EnsembleConfig | None = None,
    queries: QuerySet | None = None,
    policies: Sequence[Any] | None = None,
    dataset_size: int | None = None,
    dataset_seed: int = 0,
    runs: int | None = None,
    confidences: Sequence[str] = CONFIDENCES,
    k: int = 10,
    device: torch.device | str | None = None,
    cache: bool = True,
    model: DynamicsEnsemble | None = None,
    progress: bool = True,
    recipe: str = DEFAULT_QUERY_RECIPE,
) -> Answers:
    """Train (or load) an ensemble, estimate every query's values, predict and score. (A recipe, read top to bottom.)

    Args:
        env_name: environment, or its spec (:class:`~opcc_edu.baselines.task.Task` hands it down).
        dataset_name: dataset or its recipe (None: the environment's default).
        config: the baseline (None: :meth:`EnsembleConfig.from_profile`).
        queries: a :class:`~opcc_edu.queries.QuerySet` (None: the shipped set of ``recipe``,
            reduced to the profile's ``queries_per_env`` by :func:`select_profile_queries`).
        policies: query policies, index i = level i + 1 (None: the shipped ones).
        dataset_size: transitions (None: the profile's).
        dataset_seed: seed of the dataset.
        runs: Monte-Carlo runs per member (None: the profile's ``mc_runs``).
        confidences: confidence functions to score (of :data:`opcc_edu.names.CONFIDENCES`); an
            empty sequence estimates the values only (the ablation runner scores them itself).
        k: bins of CR_K.
        device: torch device.
        cache: use the ensemble cache.
        model: use this trained ensemble instead of training/loading one.
        progress: show progress bars.
        recipe: the recipe of the shipped set used when ``queries`` is None (``"paper"``, the
            default, or ``"hard"``).

    Returns:
        :class:`Answers`.
    """
    from ..datasets import resolve_dataset
    from ..envs import get_spec

    config = EnsembleConfig.from_profile() if config is None else config
    env = get_spec(env_name)
    dataset_name = resolve_dataset(env, dataset_name)
    confidences = resolve_confidences(confidences)
    if queries is None:
        from ..queries import load_queries

        queries = select_profile_queries(load_queries(env, recipe))
    env = answering_env(env, queries)
    runs = get_profile().mc_runs if runs is None else runs
    if model is None:
        model = get_or_train_ensemble(
            env,
            dataset_name,
            config,
            dataset_size=dataset_size,
            dataset_seed=dataset_seed,
            device=device,
            progress=progress,
            cache=cache,
        )
    info = getattr(model, "info", {})
    start = time.perf_counter()
    values_a, values_b = estimate_values(
        model, queries, policies, runs=runs, mixture=config.mixture, seed=config.seed, progress=progress
    )
    return Answers.from_values(
        env.name,
        getattr(dataset_name, "name", dataset_name),
        config,
        queries,
        values_a,
        values_b,
        confidences,
        k,
        started=start,
        train_seconds=float(info.get("train_seconds", 0.0)),
        cache_hit=bool(info.get("cache_hit", False)),
        model_path=info.get("path"),
    )


def heuristic_as_answers(queries: QuerySet, k: int = 10, rule: Any = None) -> Answers:
    """The no-model heuristic's answers (:mod:`opcc_edu.baselines.heuristic`) as :class:`Answers`.

    The rule has no members, so no member values are held (:attr:`Answers.values` is None); its
    predictions and confidences, under the confidence name ``"heuristic"``, are scored by the
    same metrics.

    Args:
        queries: N queries.
        k: bins of CR_K.
        rule: the rule's :class:`~opcc_edu.baselines.heuristic.HeuristicAnswers` to ``queries``
            when already computed (default: computed here).
    """
    from .heuristic import heuristic_answers, heuristic_metrics

    start = time.perf_counter()
    rule = heuristic_answers(queries) if rule is None else rule
    metrics = {"heuristic": heuristic_metrics(queries, k=k, answers=rule)}
    return Answers(
        env_name=queries.env_name,
        dataset_name="none",
        config=None,
        queries=queries,
        values=None,
        predictions={"heuristic": rule.prediction},
        confidences={"heuristic": rule.confidence},
        metrics=metrics,
        k=k,
        answer_seconds=time.perf_counter() - start,
    )
