"""Answer functions: what one run's baseline says about a query set, and its scores.

An :data:`AnswerFunction` is the expensive part of a run: ``answer(run, progress)`` returns the
run's (N, M) member values as :class:`~opcc_edu.scoring.MemberValues` (the dynamics ensemble, FQE)
or, for a baseline without members (the no-model heuristic), its scored answers as
:class:`~opcc_edu.scoring.Scores`. :func:`baseline_answer_function` trains or loads the baseline's
ensemble; :func:`synthetic_answer_function` is an instant stand-in for exercising the runner.
:func:`score_run` turns either into the rows of the results table through
:mod:`opcc_edu.scoring`, the one place answers are scored.

Member values cross a process boundary (a worker, a Ray task) and are stored in a results
directory, so a run returns the plain arrays of ``MemberValues``, not a
:class:`opcc_edu.baselines.Answers` (which holds the query set and the model's configuration, for
use in one process). The ensemble answer function asks for values only, and the run is scored
once, here.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ...baselines import fqe as fqe_baseline
from ...baselines.estimate import select_profile_queries
from ...confidence import synthetic_ensemble
from ...config import Profile, get_profile
from ...names import CONFIDENCES, DEFAULT_QUERY_RECIPE, METRICS, TIE_FAIR_METRICS
from ...scoring import MemberValues, Scores, score_answers
from .grid import RunSpec
from .registry import BASELINE_DEFAULTS, ensemble_count_levels

if TYPE_CHECKING:
    from ...baselines.answers import Answers

__all__ = [
    "AnswerFunction",
    "SCORE_KEYS",
    "score_run",
    "synthetic_answer_function",
    "baseline_answer_function",
    "heuristic_answer_function",
    "run_ensemble_config",
    "run_sizes",
]

#: Keys of one row of :func:`score_run` (the scored columns of ``results.csv``): the paper's
#: metrics, then the tie-fair ones (:data:`opcc_edu.names.TIE_FAIR_METRICS`).
SCORE_KEYS: tuple[str, ...] = (
    "horizon",
    "confidence",
    "ensemble_count",
    "ensemble_size",
    *METRICS,
    *TIE_FAIR_METRICS,
    "n",
)


#: ``answer(run, progress) -> MemberValues | Scores``: the expensive part of a run.
AnswerFunction = Callable[[RunSpec, bool], "MemberValues | Scores"]


def score_run(
    values: MemberValues | Scores,
    confidences: Sequence[str] = CONFIDENCES,
    ensemble_counts: Sequence[int] | None = None,
    k: int = 10,
) -> list[dict[str, Any]]:
    """Score one run into the rows of the results table.

    Member values: every confidence function x (all queries and each horizon) x ensemble prefix,
    scored by :func:`opcc_edu.scoring.score_values`; a baseline's :class:`~opcc_edu.scoring.Scores`
    (the no-model heuristic's) as they are. Each row keeps the keys of :data:`SCORE_KEYS`.

    Args:
        values: the run's member values, or its scores (then ``confidences``,
            ``ensemble_counts`` and ``k`` were fixed when they were scored).
        confidences: keys of :data:`opcc_edu.confidence.CONFIDENCE_FUNCTIONS`.
        ensemble_counts: prefix sizes m < M; the counts of
            :func:`~opcc_edu.lab.experiments.registry.ensemble_count_levels` of M when ``None``.
        k: bins of CR_K.

    Returns:
        One dict per scored subset: horizon, confidence, ensemble_count, ensemble_size, the
        metrics of :data:`opcc_edu.names.METRICS` and :data:`opcc_edu.names.TIE_FAIR_METRICS`,
        and ``n``.
    """
    if isinstance(values, Scores):
        scores = values
    else:
        if ensemble_counts is None:
            ensemble_counts = [count for count, _ in ensemble_count_levels(values.ensemble_size)]
        scores = values.score(confidences, tuple(ensemble_counts), k=k)
    return [{key: row[key] for key in SCORE_KEYS} for row in scores.rows]


def heuristic_answer_function(profile: Profile | str | None = None, queries: str | None = None) -> AnswerFunction:
    """The no-model heuristic as an answer function (:mod:`opcc_edu.baselines.heuristic`).

    It learns nothing from data: the run's dataset, seed and configuration do not change its
    answers, which are scored under the confidence name ``"heuristic"``.

    Args:
        profile: profile whose ``queries_per_env`` selects the queries (as for the ensemble).
        queries: the query sets' recipe (default: :data:`opcc_edu.names.DEFAULT_QUERY_RECIPE`).

    Returns:
        An :data:`AnswerFunction`.
    """
    recipe = DEFAULT_QUERY_RECIPE if queries is None else queries

    def answer(run: RunSpec, progress: bool = True) -> MemberValues:
        from ...baselines.heuristic import heuristic_answers
        from ...queries import load_queries

        start = time.perf_counter()
        query_set = select_profile_queries(
            load_queries(run.environment, recipe), n=get_profile(profile).queries_per_env
        )
        rule = heuristic_answers(query_set)
        scores = score_answers({"heuristic": (rule.prediction, rule.confidence)}, query_set.target, query_set.horizon)
        scores.info = {"seconds": time.perf_counter() - start, "baseline": "heuristic", "rule": rule.rule}
        scores.info.update(_query_provenance(run.environment, recipe))
        return scores

    return answer


def synthetic_answer_function(
    n_queries: int = 300,
    ensemble_size: int = 10,
    horizons: Sequence[int] = (10, 20, 30, 40, 50),
) -> AnswerFunction:
    """An instant stand-in for training: member values from
    :func:`opcc_edu.confidence.synthetic_ensemble`, one query set per (environment, dataset,
    seed), with model error growing with the horizon.

    It ignores the configuration's overrides -- synthetic values know nothing about priors or
    model types -- so it is for exercising the runner (grids, resumption, aggregation,
    reports) in a second, not for conclusions about the baselines.

    Args:
        n_queries: queries N per run, split evenly over ``horizons``.
        ensemble_size: members M.
        horizons: query horizons.

    Returns:
        An :data:`AnswerFunction`.
    """
    import zlib

    horizons = tuple(int(h) for h in horizons)
    if not horizons:
        raise ValueError("horizons must hold at least one horizon")
    per_h = max(1, int(n_queries) // len(horizons))

    def answer(run: RunSpec, progress: bool = True) -> MemberValues:
        base = zlib.crc32(f"{run.environment}/{run.dataset}/{run.seed}".encode())
        parts = [
            synthetic_ensemble(per_h, ensemble_size, seed=base + h, difficulty_range=(0.2 * h, 4.0 * h))
            for h in horizons
        ]
        return MemberValues(
            np.concatenate([p.values_a for p in parts]),
            np.concatenate([p.values_b for p in parts]),
            np.concatenate([p.target for p in parts]),
            np.repeat(np.asarray(horizons), per_h),
            info={"synthetic": True},
        )

    return answer


def _baselines_module() -> Any:
    try:
        from ... import baselines
    except ImportError as exc:
        raise ImportError(
            "the default answer function needs opcc_edu.baselines (dynamics ensembles and "
            "rollouts); pass answer_fn= to run without it"
        ) from exc
    return baselines


def baseline_answer_function(
    profile: Profile | str | None = None, queries: str | None = None, **answer_kwargs: Any
) -> AnswerFunction:
    """The real answer function: train or load an ensemble, estimate every query's values.

    Builds the baseline's ``EnsembleConfig`` from the profile,
    :data:`~opcc_edu.lab.experiments.registry.BASELINE_DEFAULTS`, the run's overrides and its seed,
    and calls :func:`opcc_edu.baselines.answer_queries` (which trains through the ensemble
    cache).

    Args:
        profile: profile whose sizes (members, widths, steps, query count) are used; the active
            one when ``None`` (read when a run starts).
        queries: the query sets' recipe (default: :data:`opcc_edu.names.DEFAULT_QUERY_RECIPE`).
        **answer_kwargs: passed on to ``answer_queries`` (e.g. ``device``).

    Returns:
        An :data:`AnswerFunction`.
    """

    recipe = DEFAULT_QUERY_RECIPE if queries is None else queries

    def answer(run: RunSpec, progress: bool = True) -> MemberValues:
        baselines = _baselines_module()
        active = get_profile(profile)
        config = run_ensemble_config(run, active)
        sizes = run_sizes(run, active, recipe)
        start = time.perf_counter()
        answers = baselines.answer_queries(
            run.environment,
            run.dataset,
            config=config,
            progress=progress,
            recipe=recipe,
            confidences=(),  # values only: the run is scored once, by score_run
            **{**sizes, **answer_kwargs},
        )
        values = _values_from_answers(answers)
        values.info.setdefault("seconds", time.perf_counter() - start)
        values.info["transitions"] = int(sizes["dataset_size"])
        values.info.update(_query_provenance(run.environment, recipe))
        return values

    return answer


def fqe_answer_function(
    profile: Profile | str | None = None, queries: str | None = None, **answer_kwargs: Any
) -> AnswerFunction:
    """The model-free baseline: bootstrapped finite-horizon FQE on the run's dataset and seed.

    The run's environment, dataset, seed and query set are those the ensemble baseline answers,
    so the two compare on the same data, seeds and queries. Sizes come from
    :meth:`opcc_edu.baselines.fqe.FQEConfig.from_profile`; of the run's overrides those that are
    fields of ``FQEConfig`` apply (``ensemble_size``, ``train_steps``, ...); the others configure
    dynamics models and are recorded in the run's info as ``ignored_overrides``.

    Args:
        profile: profile whose sizes and query count are used (the active one when ``None``).
        queries: the query sets' recipe (default: :data:`opcc_edu.names.DEFAULT_QUERY_RECIPE`).
        **answer_kwargs: passed on to :func:`opcc_edu.baselines.fqe.answer_queries_fqe` (e.g. ``device``).

    Returns:
        An :data:`AnswerFunction`.
    """
    recipe = DEFAULT_QUERY_RECIPE if queries is None else queries

    def answer(run: RunSpec, progress: bool = True) -> MemberValues:
        active = get_profile(profile)
        fields = {f.name for f in dataclasses.fields(fqe_baseline.FQEConfig)} - {"seed"}
        overrides = dict(run.overrides)
        sizes = {key: overrides.pop(key) for key in sorted(fields & set(overrides))}
        config = fqe_baseline.FQEConfig.from_profile(active, seed=run.seed, **sizes)
        data = run_sizes(run, active, recipe)
        start = time.perf_counter()
        answers = fqe_baseline.answer_queries_fqe(  # looked up at call time (tests replace it)
            run.environment,
            run.dataset,
            config,
            queries=data["queries"],
            progress=progress,
            confidences=(),  # values only: the run is scored once, by score_run
            **{"dataset_size": data["dataset_size"], **answer_kwargs},
        )
        values = _values_from_answers(answers)
        values.info.update(
            {"seconds": time.perf_counter() - start, "baseline": "fqe", "transitions": int(data["dataset_size"])}
        )
        if overrides:
            values.info["ignored_overrides"] = sorted(overrides)
        values.info.update(_query_provenance(run.environment, recipe))
        return values

    return answer


def _query_provenance(env_name: str, recipe: str) -> dict[str, Any]:
    """Recipe and SHA-256 of the shipped query set a run answered, so results name their queries."""
    try:
        from ...queries import query_set_path

        sidecar = Path(str(query_set_path(env_name, recipe)) + ".sha256")
        if sidecar.exists():
            return {"queries": recipe, "queries_sha256": sidecar.read_text(encoding="utf-8").split()[0]}
    except (ImportError, OSError, IndexError):
        pass
    return {}


def run_sizes(run: RunSpec, profile: Profile | str | None = None, recipe: str | None = None) -> dict[str, Any]:
    """What a run reads at its profile's sizes, whatever profile is active in the process.

    A grid names its profile (``run_ablation(..., profile="classroom")``); the data, the
    queries and the Monte-Carlo runs must come from that profile, not from the one active
    where the grid happens to run (``$OPCC_EDU_PROFILE``, ``tiny`` by default). The answer
    functions pass these explicitly.

    Args:
        run: the run.
        profile: profile (object or name); the active one when ``None``.
        recipe: the query sets' recipe (default: :data:`opcc_edu.names.DEFAULT_QUERY_RECIPE`).

    Returns:
        ``{"dataset_size": int, "queries": QuerySet, "runs": int}``: the profile's
        ``dataset_size`` capped by the dataset's recipe, the profile's ``queries_per_env``
        queries of the shipped set (:func:`opcc_edu.baselines.estimate.select_profile_queries`)
        and its ``mc_runs``.
    """
    from ...datasets.recipes import get_recipe, resolve_size
    from ...queries import load_queries

    profile = get_profile(profile)
    recipe = DEFAULT_QUERY_RECIPE if recipe is None else recipe
    queries = select_profile_queries(load_queries(run.environment, recipe), n=profile.queries_per_env)
    size = resolve_size(get_recipe(run.environment, run.dataset), None, profile)
    return {"dataset_size": size, "queries": queries, "runs": int(profile.mc_runs)}


def run_ensemble_config(run: RunSpec, profile: Profile | str | None = None) -> Any:
    """The ``EnsembleConfig`` a run of the ensemble baseline trains and answers with.

    The profile's sizes, then :data:`~opcc_edu.lab.experiments.registry.BASELINE_DEFAULTS`, the
    run's overrides and its seed -- what :func:`baseline_answer_function` uses, so
    ``opcc_edu.baselines.get_or_train_ensemble(run.environment, run.dataset, config)`` finds a
    grid's trained ensemble in the cache.

    Args:
        run: the run (:class:`~opcc_edu.lab.experiments.grid.RunSpec`).
        profile: profile (object or name); the active one when ``None``.

    Raises:
        ValueError: an override names no field of ``EnsembleConfig`` (the valid ones listed).
    """
    baselines = _baselines_module()
    profile = get_profile(profile)
    config_cls = baselines.EnsembleConfig
    fields = {f.name for f in dataclasses.fields(config_cls)}
    if hasattr(config_cls, "from_profile"):
        base = config_cls.from_profile(profile)
    else:
        sizes = {
            "ensemble_size": profile.ensemble_size,
            "hidden_sizes": tuple(profile.hidden_sizes),
            "train_steps": profile.dynamics_train_steps,
            "batch_size": profile.batch_size,
        }
        base = config_cls(**{k: v for k, v in sizes.items() if k in fields})
    settings = {**BASELINE_DEFAULTS, **dict(run.overrides), "seed": run.seed}
    missing = sorted(set(settings) - fields)
    if missing:
        raise ValueError(f"EnsembleConfig has no field(s) {missing}; valid fields: {sorted(fields)}")
    return dataclasses.replace(base, **settings)


def _values_from_answers(answers: Answers) -> MemberValues:
    """The member values of a baseline's :class:`~opcc_edu.baselines.Answers`, with its timings."""
    info = {"train_seconds": answers.train_seconds, "answer_seconds": answers.answer_seconds}
    info["cache_hit"] = answers.cache_hit
    return dataclasses.replace(answers.values, info=info)
