"""The ablation runner: a declarative grid, a resumable results table, aggregation and reports.

Every experiment of the paper (Koul et al., Section 7 and Appendix B) varies one factor of the
baseline -- the dataset, the query horizon, the confidence function, the ensemble size, or one
switch of the dynamics model -- and reports mean +- 95% confidence interval of AURCC, RPP,
CR_K and loss per environment. This module turns that protocol into code:

1. **Grid.** An :class:`Ablation` from :data:`ABLATIONS` names its factor and levels;
   :func:`plan_ablation` expands it into a :class:`GridSpec` -- environments x datasets x seeds
   x configurations -- for the active profile. A configuration is a set of overrides of the
   baseline's defaults (:data:`BASELINE_DEFAULTS`, the paper's default model) with a canonical
   label such as ``"default"`` or ``"prior_scale=5"``.
2. **Run.** :func:`run_grid` asks an *answer function* (by default
   :func:`baseline_answer_function`: train or load an ensemble from the cache, estimate every
   query's value in every member) for the (N, M) member values of each run, scores them for
   every confidence function, every horizon (and all horizons together) and every
   ensemble-count prefix, and appends the rows to ``results.csv`` as soon as the run finishes.
   ``runs.csv`` records the finished runs; an interrupted grid resumes where it stopped, and
   runs shared by several ablations (the default configuration serves the dataset, horizon,
   confidence and ensemble-count ablations and the reference level of every other one) are
   computed once.
3. **Aggregate.** :func:`aggregate` reduces the rows of one ablation to mean +- half-width of
   the two-sided 95% Student-t interval of the mean over the n = seeds x datasets runs of each
   (environment, level): ``half = t_{0.975, n-1} * s / sqrt(n)`` with ``s`` the sample
   standard deviation (:func:`opcc_edu.metrics.mean_confidence_interval`). With one run the
   half-width is ``nan``. :func:`level_risk_coverage` averages risk-coverage curves over the
   horizons of each run, then over runs, on a common coverage grid.
4. **Compare and report.** :func:`paper_results` loads the paper's numbers
   (``opcc_edu/assets/paper_results.csv``, one row per table cell, each citing its table);
   :func:`compare_with_paper` puts them next to ours and :func:`report_text` /
   :func:`write_report` render every ablation as Markdown or LaTeX.

The results table has one row per (environment, dataset, seed, configuration, horizon,
confidence, ensemble_count) with the columns of :data:`RESULT_COLUMNS`. ``horizon`` is
``"all"`` for the whole query set; ``ensemble_count`` m < ``ensemble_size`` rows use members
0..m-1 of the trained ensemble, as the paper read its ensemble-count ablation from prefixes of
one 100-member ensemble (Tables 5 and 18).

The paper's CSV columns: ``table``, ``ablation``, ``environment`` (this package's names),
``dataset`` (``"all"`` = averaged over the five locomotion datasets), ``factor``, ``level``
(this package's label), ``paper_level`` (the label printed in the paper), ``metric``,
``mean``, ``ci`` (half-width of the 95% interval), ``ci_is_bound`` (true where the paper
printed ``(<0.001)``: ``ci`` then holds the bound 0.001) and ``source``.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as _dt
import io as _io
import json
import math
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .config import Profile, get_profile
from .utils import check_choice

__all__ = [
    "info_lines",
    "METRICS",
    "RESULT_COLUMNS",
    "RUN_COLUMNS",
    "ALL_HORIZONS",
    "BASELINE_DEFAULTS",
    "PAPER_ENSEMBLE_COUNTS",
    "Level",
    "Ablation",
    "ABLATIONS",
    "get_ablation",
    "RunSpec",
    "GridSpec",
    "RunValues",
    "AnswerFunction",
    "configuration_label",
    "ensemble_count_levels",
    "default_datasets",
    "plan_ablation",
    "score_values",
    "baseline_answer_function",
    "synthetic_answer_function",
    "run_grid",
    "run_ablation",
    "results_dir",
    "find_results_root",
    "committed_results",
    "committed_profiles",
    "load_runs",
    "ablation_rows",
    "read_meta",
    "load_results",
    "load_run_values",
    "aggregate",
    "level_risk_coverage",
    "plot_level_risk_coverage",
    "paper_results",
    "compare_with_paper",
    "level_differences",
    "plot_comparison",
    "format_table",
    "report_text",
    "write_report",
    "machine_description",
]

#: The paper's metrics, in the order of its tables' columns.
METRICS: tuple[str, ...] = ("aurcc", "rpp", "cr_k", "loss")

#: Columns of ``results.csv``, one row per scored subset of one run.
RESULT_COLUMNS: tuple[str, ...] = (
    "environment",
    "dataset",
    "seed",
    "configuration",
    "horizon",
    "confidence",
    "ensemble_count",
    "ensemble_size",
    "aurcc",
    "rpp",
    "cr_k",
    "loss",
    "n",
    "profile",
    "run_id",
)

#: Columns of ``runs.csv``, one row per finished run (written after its result rows).
RUN_COLUMNS: tuple[str, ...] = (
    "run_id",
    "environment",
    "dataset",
    "seed",
    "configuration",
    "profile",
    "n_queries",
    "ensemble_size",
    "seconds",
    "finished",
)

#: ``horizon`` value of rows scored on the whole query set.
ALL_HORIZONS = "all"

#: The paper's default baseline (Section 7): deterministic feed-forward members without a
#: randomized prior, normalized inputs, predictions clipped to the data's bounds, the
#: environment's predefined termination function, one member per rollout.
BASELINE_DEFAULTS: dict[str, Any] = {
    "model_type": "ff",
    "stochastic": False,
    "prior_scale": 0.0,
    "normalize": True,
    "clip": True,
    "termination": "predefined",
    "mixture": False,
}

#: Ensemble sizes of the paper's ensemble-count ablation (Tables 5 and 18), read as prefixes of
#: one 100-member ensemble.
PAPER_ENSEMBLE_COUNTS: tuple[int, ...] = (10, 20, 40, 80, 100)

_SELECTION_FACTORS = ("dataset", "horizon", "confidence", "ensemble_count")
_CONFIDENCES = ("ev", "pci", "upci")
_ASSET_CSV = Path(__file__).resolve().parent / "assets" / "paper_results.csv"


# --------------------------------------------------------------------------------------------
# The registry of ablations
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Level:
    """One level of an ablation's factor."""

    label: str
    """Label in the results and in ``paper_results.csv`` (``"5"``, ``"true"``, ``"ar"``)."""
    overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Configuration overrides of :data:`BASELINE_DEFAULTS` (configuration factors only)."""
    title: str = ""
    """Display name; the label when empty."""

    @property
    def display(self) -> str:
        return self.title or self.label


@dataclasses.dataclass(frozen=True)
class Ablation:
    """One experiment of the paper: a factor, its levels, the paper's tables and finding."""

    name: str
    """Registry key, e.g. ``"prior-scale"``."""
    title: str
    """Display title."""
    factor: str
    """A selection factor -- a column of the results (``dataset``, ``horizon``,
    ``confidence``, ``ensemble_count``) read from runs of the default configuration -- or a
    configuration field of :data:`BASELINE_DEFAULTS`, one trained configuration per level."""
    levels: tuple[Level, ...]
    """Levels of a configuration factor or of ``confidence``; empty for ``dataset``,
    ``horizon`` and ``ensemble_count``, whose levels follow from the data, the queries and
    the ensemble size (:func:`ensemble_count_levels`)."""
    paper_tables: tuple[int, ...]
    """Tables of the paper reporting this ablation (empty: mentioned without a table)."""
    hypothesis: str
    """The expectation from prior work that the ablation tests."""
    paper_finding: str
    """What the paper's tables show, in one sentence."""
    confidence: str = "ev"
    """Confidence function of every level (the paper's default, ensemble voting)."""

    @property
    def is_selection(self) -> bool:
        """True when the levels are read from the default configuration's runs."""
        return self.factor in _SELECTION_FACTORS

    def configurations(self) -> tuple[dict[str, Any], ...]:
        """Override dicts of the configurations this ablation trains (default first)."""
        if self.is_selection:
            return ({},)
        return tuple(dict(level.overrides) for level in self.levels)


def _format_value(value: Any) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (float, np.floating)):
        return f"{float(value):g}"
    return str(value)


def _switch(factor: str, reference: Any, other: Any, titles: tuple[str, str]) -> tuple[Level, ...]:
    """Two levels of an on/off factor, the paper's default first."""
    return (
        Level(_format_value(reference), {factor: reference}, titles[0]),
        Level(_format_value(other), {factor: other}, titles[1]),
    )


ABLATIONS: dict[str, Ablation] = {
    a.name: a
    for a in (
        Ablation(
            name="dataset-type",
            title="Dataset type",
            factor="dataset",
            levels=(),
            paper_tables=(1, 2),
            hypothesis="Datasets that cover more of the state space (random, replay and mixed "
            "data) should teach models that generalise to the query states, so they should "
            "answer with lower risk than narrow expert data.",
            paper_finding="Little difference between dataset types within an environment, large "
            "differences between environments; maze medium and umaze are nearly solved.",
        ),
        Ablation(
            name="horizon",
            title="Query horizon",
            factor="horizon",
            levels=(),
            paper_tables=(3, 17),
            hypothesis="Errors of a learned model compound along a rollout, so comparisons over "
            "longer horizons should be harder.",
            paper_finding="AURCC grows with the horizon; at h = 10 or 20 it is about an order of "
            "magnitude smaller than at longer horizons.",
        ),
        Ablation(
            name="confidence",
            title="Confidence function",
            factor="confidence",
            levels=(
                Level("ev", title="EV"),
                Level("pci", title="PCI"),
                Level("upci", title="U-PCI"),
            ),
            paper_tables=(4, 16),
            hypothesis="A test on the members' value differences uses their magnitudes, not "
            "only their signs, so it should order queries better than a vote.",
            paper_finding="PCI and U-PCI lower AURCC and RPP on HalfCheetah and Hopper but have "
            "far lower CR_K; on the mazes EV has the lowest AURCC.",
        ),
        Ablation(
            name="ensemble-count",
            title="Ensemble size",
            factor="ensemble_count",
            levels=(),
            paper_tables=(5, 18),
            hypothesis="More members estimate the spread of plausible models better, so larger "
            "ensembles should rank queries better.",
            paper_finding="AURCC barely moves between 10 and 100 members, while RPP and CR_K "
            "change significantly.",
        ),
        Ablation(
            name="prior-scale",
            title="Randomized constant prior",
            factor="prior_scale",
            levels=(Level("0", {"prior_scale": 0.0}, "0 (no prior)"), Level("5", {"prior_scale": 5.0})),
            paper_tables=(6, 10),
            hypothesis="A frozen random prior network per member (Osband et al.) keeps members "
            "apart where there is no data, which should make disagreement more informative.",
            paper_finding="No significant improvement, except a lower AURCC in the large maze.",
        ),
        Ablation(
            name="stochastic",
            title="Deterministic vs stochastic models",
            factor="stochastic",
            levels=_switch("stochastic", False, True, ("deterministic", "stochastic")),
            paper_tables=(11, 12),
            hypothesis="Sampling next states from a learned Gaussian adds aleatoric spread to "
            "each member's estimate.",
            paper_finding="No significant difference between deterministic and stochastic members.",
        ),
        Ablation(
            name="model-type",
            title="Feed-forward vs autoregressive models",
            factor="model_type",
            levels=(Level("ff", {"model_type": "ff"}, "feed-forward"), Level("ar", {"model_type": "ar"}, "autoregressive")),
            paper_tables=(7, 13),
            hypothesis="Autoregressive models (Zhang et al.) predict one dimension at a time, "
            "conditioned on the others, and should capture the dynamics better.",
            paper_finding="No significant AURCC gain; AR raises CR_K on HalfCheetah, Hopper and "
            "Walker2d.",
        ),
        Ablation(
            name="normalization",
            title="Input normalization",
            factor="normalize",
            levels=_switch("normalize", True, False, ("normalized", "raw")),
            paper_tables=(14, 15),
            hypothesis="Standardised inputs ease optimisation when state dimensions have very "
            "different scales.",
            paper_finding="Marginal on locomotion; in the mazes Table 15 shows a lower AURCC with "
            "normalization in the large maze and a higher one in umaze.",
        ),
        Ablation(
            name="clipping",
            title="Clipping predictions to the data's bounds",
            factor="clip",
            levels=_switch("clip", True, False, ("clipped", "unclipped")),
            paper_tables=(),
            hypothesis="Clipping predicted observations and rewards to the dataset's range keeps "
            "a rollout's compounding errors from diverging.",
            paper_finding="Called important in the paper, without a table.",
        ),
        Ablation(
            name="termination",
            title="Termination function",
            factor="termination",
            levels=(
                Level("predefined", {"termination": "predefined"}),
                Level("learned", {"termination": "learned"}),
                Level("none", {"termination": "none"}),
            ),
            paper_tables=(),
            hypothesis="The environment's known termination rule stops a rollout exactly when "
            "the real episode would end; a learned or absent rule adds or hides reward.",
            paper_finding="Called important in the paper, without a table (mazes never terminate, "
            "so predefined and none coincide there).",
        ),
        Ablation(
            name="mixture",
            title="Mixture propagation",
            factor="mixture",
            levels=_switch("mixture", False, True, ("one member per rollout", "random member per step")),
            paper_tables=(),
            hypothesis="Switching to a random member at every step propagates model uncertainty "
            "along the rollout instead of keeping members apart.",
            paper_finding="An option of the public reference code, without a table.",
        ),
    )
}


def get_ablation(name: str | Ablation) -> Ablation:
    """Return the registered :class:`Ablation` called ``name`` (or ``name`` itself)."""
    if isinstance(name, Ablation):
        return name
    check_choice(name, ABLATIONS, "ablation")
    return ABLATIONS[name]


# --------------------------------------------------------------------------------------------
# Configurations and grids
# --------------------------------------------------------------------------------------------
def configuration_label(overrides: Mapping[str, Any] | None = None) -> str:
    """Canonical label of a configuration: ``"default"`` or ``"key=value;..."`` (sorted).

    Overrides equal to :data:`BASELINE_DEFAULTS` are dropped, so ``{"prior_scale": 0}`` and
    ``{}`` name the same run.

    Raises:
        ValueError: for a key that is not a field of :data:`BASELINE_DEFAULTS`.
    """
    parts = []
    for key in sorted(overrides or {}):
        check_choice(key, BASELINE_DEFAULTS, "configuration field")
        value = overrides[key]
        if _format_value(value) != _format_value(BASELINE_DEFAULTS[key]):
            parts.append(f"{key}={_format_value(value)}")
    return ";".join(parts) or "default"


def ensemble_count_levels(ensemble_size: int) -> tuple[tuple[int, int], ...]:
    """Prefix sizes that stand for the paper's 10, 20, 40, 80 and 100 members.

    The paper's counts are fractions of its 100-member ensemble; a profile with M members
    uses ``max(2, round(M * p / 100))`` members for the paper's ``p`` (two members at least,
    so PCI and U-PCI stay defined).

    Returns:
        ``((count, paper_count), ...)`` in the paper's order; counts may repeat for small M.
    """
    m = int(ensemble_size)
    if m < 1:
        raise ValueError(f"ensemble_size must be >= 1, got {ensemble_size!r}")
    return tuple((min(m, max(2, round(m * p / 100))), p) for p in PAPER_ENSEMBLE_COUNTS)


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One cell of a grid: train (or load) one ensemble and answer one query set."""

    environment: str
    dataset: str
    seed: int
    overrides: Mapping[str, Any]

    @property
    def configuration(self) -> str:
        return configuration_label(self.overrides)

    @property
    def run_id(self) -> str:
        """Unique key ``env/dataset/seed<k>/configuration`` of the run."""
        return f"{self.environment}/{self.dataset}/seed{self.seed}/{self.configuration}"

    @property
    def slug(self) -> str:
        """File-name form of :attr:`run_id`."""
        return "__".join(
            (self.environment, self.dataset, f"seed{self.seed}", self.configuration.replace("=", "-").replace(";", "+"))
        )


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
    """Override dicts of :data:`BASELINE_DEFAULTS`, one per trained configuration."""

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
    from .datasets import DEFAULT_DATASET, dataset_names, get_recipe

    profile = profile if isinstance(profile, Profile) else get_profile(profile)
    names = tuple(dataset_names(env_name))
    if not all_types:
        if profile.name == "paper":
            return ("1m",) if "1m" in names else names
        return (DEFAULT_DATASET[env_name],)
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
        name: registry key of :data:`ABLATIONS` (or an :class:`Ablation`).
        profile: profile (object or name); the active one when ``None``.
        environments: environments; the profile's ``environments`` when ``None``.
        datasets: dataset names for every environment, or a dict per environment;
            :func:`default_datasets` when ``None``.
        seeds: a number of seeds (0..n-1) or explicit seeds; the profile's ``n_seeds`` when
            ``None``.

    Returns:
        The :class:`GridSpec`.
    """
    from .envs import ENV_NAMES

    ablation = get_ablation(name)
    profile = profile if isinstance(profile, Profile) else get_profile(profile)
    envs = tuple(environments) if environments is not None else tuple(profile.environments)
    for env in envs:
        check_choice(env, ENV_NAMES, "environment")
    if datasets is None:
        per_env = {env: default_datasets(env, profile, all_types=ablation.factor == "dataset") for env in envs}
    elif isinstance(datasets, Mapping):
        per_env = {env: tuple(datasets.get(env, ())) for env in envs}
    else:
        per_env = {env: tuple(datasets) for env in envs}
    if seeds is None:
        seed_list = tuple(range(profile.n_seeds))
    elif isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ValueError(f"seeds must be a positive count or a list of seeds, got {seeds!r}")
        seed_list = tuple(range(int(seeds)))
    else:
        seed_list = tuple(int(s) for s in seeds)
    return GridSpec(envs, per_env, seed_list, ablation.configurations())


# --------------------------------------------------------------------------------------------
# Answers and scoring
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass
class RunValues:
    """What one run's ensemble says about a query set (N queries, M members, R runs)."""

    values_a: np.ndarray
    """(N, M) or (N, M, R) member estimates of side a's value."""
    values_b: np.ndarray
    """(N, M) or (N, M, R) member estimates of side b's value."""
    target: np.ndarray
    """(N,) true answers, 1 iff V_a < V_b."""
    horizon: np.ndarray
    """(N,) query horizons."""
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Anything worth keeping about the run (timings, cache hits, training loss)."""

    def __post_init__(self) -> None:
        a = np.asarray(self.values_a, dtype=np.float64)
        b = np.asarray(self.values_b, dtype=np.float64)
        if a.ndim == 3:
            a = a.mean(axis=2)  # a member's estimate is its Monte-Carlo mean over R runs
        if b.ndim == 3:
            b = b.mean(axis=2)
        if a.ndim != 2 or a.shape != b.shape:
            raise ValueError(f"values_a and values_b must both have shape (N, M) or (N, M, R), got {np.shape(self.values_a)} and {np.shape(self.values_b)}")
        n = a.shape[0]
        target = np.asarray(self.target).astype(np.int8).reshape(-1)
        horizon = np.asarray(self.horizon).astype(np.int64).reshape(-1)
        if target.shape != (n,) or horizon.shape != (n,):
            raise ValueError(f"target and horizon must have shape ({n},), got {target.shape} and {horizon.shape}")
        if not np.all(np.isfinite(a)) or not np.all(np.isfinite(b)):
            raise ValueError("values_a and values_b must be finite (a model rollout diverged?)")
        self.values_a, self.values_b, self.target, self.horizon = a, b, target, horizon

    @property
    def ensemble_size(self) -> int:
        return int(self.values_a.shape[1])

    def __len__(self) -> int:
        return int(self.values_a.shape[0])


#: ``answer(run, progress) -> RunValues``: the expensive part of a run.
AnswerFunction = Callable[[RunSpec, bool], RunValues]


def score_values(
    values: RunValues,
    confidences: Sequence[str] = _CONFIDENCES,
    ensemble_counts: Sequence[int] | None = None,
    k: int = 10,
) -> list[dict[str, Any]]:
    """Score one run: every confidence function x (each horizon and all) x ensemble prefix.

    Full-ensemble answers are scored on all queries and on each horizon separately; prefixes
    (members 0..m-1) on all queries only, which is what the ensemble-count tables report.

    Args:
        values: the run's :class:`RunValues`.
        confidences: keys of :data:`opcc_edu.confidence.CONFIDENCE_FUNCTIONS`.
        ensemble_counts: prefix sizes m < M; :func:`ensemble_count_levels` of M when ``None``.
        k: bins of CR_K.

    Returns:
        One dict per scored subset with the keys horizon, confidence, ensemble_count,
        ensemble_size and the metrics of :data:`METRICS` plus ``n``. PCI and U-PCI need two
        members and are skipped for one.
    """
    from .confidence import CONFIDENCE_FUNCTIONS, compute_confidence
    from .metrics import evaluate

    for name in confidences:
        check_choice(name, CONFIDENCE_FUNCTIONS, "confidence")
    m_full = values.ensemble_size
    if ensemble_counts is None:
        ensemble_counts = [count for count, _ in ensemble_count_levels(m_full)]
    counts = sorted({int(c) for c in ensemble_counts if 1 <= int(c) < m_full} | {m_full})
    horizons = np.unique(values.horizon)
    rows: list[dict[str, Any]] = []
    for m in counts:
        for name in confidences:
            if name != "ev" and m < 2:
                continue
            prediction, confidence = compute_confidence(name, values.values_a[:, :m], values.values_b[:, :m])
            subsets: list[tuple[str, np.ndarray | None]] = [(ALL_HORIZONS, None)]
            if m == m_full:
                subsets += [(str(int(h)), values.horizon == h) for h in horizons]
            for label, mask in subsets:
                if mask is None:
                    metrics = evaluate(prediction, values.target, confidence, k=k)
                else:
                    metrics = evaluate(prediction[mask], values.target[mask], confidence[mask], k=k)
                row = {
                    "horizon": label,
                    "confidence": name,
                    "ensemble_count": m,
                    "ensemble_size": m_full,
                    **{metric: float(metrics[metric]) for metric in METRICS},
                    "n": int(metrics["n"]),
                }
                rows.append(row)
    return rows


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

    from .confidence import synthetic_ensemble

    horizons = tuple(int(h) for h in horizons)
    if not horizons:
        raise ValueError("horizons must hold at least one horizon")
    per_h = max(1, int(n_queries) // len(horizons))

    def answer(run: RunSpec, progress: bool = True) -> RunValues:
        base = zlib.crc32(f"{run.environment}/{run.dataset}/{run.seed}".encode())
        parts = [
            synthetic_ensemble(per_h, ensemble_size, seed=base + h, difficulty_range=(0.2 * h, 4.0 * h))
            for h in horizons
        ]
        return RunValues(
            np.concatenate([p.values_a for p in parts]),
            np.concatenate([p.values_b for p in parts]),
            np.concatenate([p.target for p in parts]),
            np.repeat(np.asarray(horizons), per_h),
            info={"synthetic": True},
        )

    return answer


def _baselines_module():
    try:
        from . import baselines
    except ImportError as exc:
        raise ImportError(
            "the default answer function needs opcc_edu.baselines (dynamics ensembles and "
            "rollouts); pass answer_fn= to run without it"
        ) from exc
    return baselines


def baseline_answer_function(profile: Profile | str | None = None, **answer_kwargs: Any) -> AnswerFunction:
    """The real answer function: train or load an ensemble, estimate every query's values.

    Builds the baseline's ``EnsembleConfig`` from the profile, :data:`BASELINE_DEFAULTS`, the
    run's overrides and its seed, and calls :func:`opcc_edu.baselines.answer_queries` (which
    trains through the ensemble cache).

    Args:
        profile: profile whose sizes (members, widths, steps, query count) are used; the active
            one when ``None`` (read when a run starts).
        **answer_kwargs: passed on to ``answer_queries`` (e.g. ``device``).

    Returns:
        An :data:`AnswerFunction`.
    """

    def answer(run: RunSpec, progress: bool = True) -> RunValues:
        baselines = _baselines_module()
        prof = profile if isinstance(profile, Profile) else get_profile(profile)
        config = _ensemble_config(baselines, prof, run)
        start = time.perf_counter()
        answers = baselines.answer_queries(
            run.environment, run.dataset, config=config, progress=progress, **answer_kwargs
        )
        values = _values_from_answers(answers)
        values.info.setdefault("seconds", time.perf_counter() - start)
        values.info.update(_query_provenance(run.environment))
        return values

    return answer


def _query_provenance(env_name: str) -> dict[str, Any]:
    """SHA-256 of the shipped query set a run answered, so results name their queries."""
    try:
        from .queries import query_set_path

        sidecar = Path(str(query_set_path(env_name)) + ".sha256")
        if sidecar.exists():
            return {"queries_sha256": sidecar.read_text(encoding="utf-8").split()[0]}
    except (ImportError, OSError, IndexError):
        pass
    return {}


def _ensemble_config(baselines: Any, profile: Profile, run: RunSpec) -> Any:
    """Adapter to ``opcc_edu.baselines.EnsembleConfig``: profile sizes + defaults + overrides."""
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


def _values_from_answers(answers: Any) -> RunValues:
    """Adapter from the baselines' ``Answers`` to :class:`RunValues`."""
    queries = getattr(answers, "queries", None)

    def pick(name: str) -> Any:
        if getattr(answers, name, None) is not None:
            return getattr(answers, name)
        if queries is not None and getattr(queries, name, None) is not None:
            return getattr(queries, name)
        raise ValueError(f"the answers object has no {name!r} (looked at answers.{name} and answers.queries.{name})")

    info = {}
    for key in ("seconds", "train_seconds", "answer_seconds", "cache_hit", "cached"):
        if getattr(answers, key, None) is not None:
            info[key] = getattr(answers, key)
    return RunValues(pick("values_a"), pick("values_b"), pick("target"), pick("horizon"), info=info)


# --------------------------------------------------------------------------------------------
# The runner
# --------------------------------------------------------------------------------------------
def results_dir(out: str | os.PathLike | None = None, profile: Profile | str | None = None) -> Path:
    """Directory of one profile's results: ``<out>/<profile>`` (``out`` default
    ``results/ablations``)."""
    profile = profile if isinstance(profile, Profile) else get_profile(profile)
    return Path(out if out is not None else "results/ablations") / profile.name


def _read_csv_rows(path: Path, columns: Sequence[str]) -> list[dict[str, str]]:
    """Rows of a CSV written by this module; a torn last line (a crash mid-write) is dropped."""
    if not path.exists():
        return []
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None:
            return []
        if tuple(reader.fieldnames) != tuple(columns):
            raise ValueError(f"{path} has columns {reader.fieldnames}, expected {list(columns)}")
        return [row for row in reader if None not in row.values() and None not in row]


def _write_csv(path: Path, columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> None:
    from .io import atomic_write_text

    buffer = _io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buffer.getvalue())


def _append_csv(path: Path, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> None:
    buffer = _io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    if not path.exists() or path.stat().st_size == 0:
        writer.writeheader()
    writer.writerows(rows)
    # One write call per run and an fsync: a crash leaves at most one torn line, which the
    # reader drops together with every row of runs missing from runs.csv.
    with open(path, "a", encoding="utf-8", newline="") as handle:
        handle.write(buffer.getvalue())
        handle.flush()
        os.fsync(handle.fileno())


def _repair(directory: Path) -> set[str]:
    """Drop result rows of unfinished runs; return the ids of finished runs."""
    results_path, runs_path = directory / "results.csv", directory / "runs.csv"
    finished = _read_csv_rows(runs_path, RUN_COLUMNS)
    done = {row["run_id"] for row in finished}
    if results_path.exists():
        rows = _read_csv_rows(results_path, RESULT_COLUMNS)
        kept = [row for row in rows if row["run_id"] in done]
        with open(results_path, encoding="utf-8") as handle:
            line_count = sum(1 for _ in handle) - 1
        if len(kept) != line_count:
            _write_csv(results_path, RESULT_COLUMNS, kept)
    if runs_path.exists():
        with open(runs_path, encoding="utf-8") as handle:
            if sum(1 for _ in handle) - 1 != len(finished):
                _write_csv(runs_path, RUN_COLUMNS, finished)
    return done


def machine_description() -> str:
    """One line naming the machine: OS, CPU cores, torch threads and GPU (if any)."""
    parts = [platform.platform(), f"{os.cpu_count()} CPU cores"]
    processor = platform.processor()
    if processor:
        parts.append(processor)
    try:
        import torch

        parts.append(f"torch {torch.__version__} ({torch.get_num_threads()} threads)")
        if torch.cuda.is_available():
            parts.append(f"GPU {torch.cuda.get_device_name(0)}")
        else:
            parts.append("no GPU")
    except ImportError:  # pragma: no cover
        pass
    parts.append(f"Python {platform.python_version()}")
    return "; ".join(parts)


def _update_meta(directory: Path, session: Mapping[str, Any]) -> None:
    """Add ``session`` to meta.json, or replace the entry with the same ``id`` (a session is
    rewritten after every run, so a killed grid still records what it finished)."""
    from .io import atomic_write_text

    path = directory / "meta.json"
    meta: dict[str, Any] = {"sessions": []}
    if path.exists():
        meta = json.loads(path.read_text(encoding="utf-8"))
    sessions = [s for s in meta.setdefault("sessions", []) if s.get("id") is None or s.get("id") != session.get("id")]
    meta["sessions"] = sessions + [dict(session)]
    meta["total_wall_seconds"] = round(sum(float(s.get("wall_seconds", 0.0)) for s in meta["sessions"]), 1)
    atomic_write_text(path, json.dumps(meta, indent=2) + "\n")


def run_grid(
    grid: GridSpec,
    out_dir: str | os.PathLike,
    answer_fn: AnswerFunction | None = None,
    profile: Profile | str | None = None,
    progress: bool = True,
    save_values: bool = True,
    max_runs: int | None = None,
    label: str = "",
    command: str | None = None,
) -> Any:
    """Run every unfinished run of ``grid`` and append its rows to ``out_dir/results.csv``.

    Args:
        grid: the :class:`GridSpec`.
        out_dir: directory of ``results.csv``, ``runs.csv``, ``meta.json`` and ``values/``.
        answer_fn: the :data:`AnswerFunction`; :func:`baseline_answer_function` when ``None``.
        profile: profile recorded with the rows; the active one when ``None``.
        progress: show a progress bar over runs (and pass the flag to ``answer_fn``).
        save_values: keep each run's (N, M) member values as ``values/<run>.npz`` (needed by
            :func:`level_risk_coverage`).
        max_runs: stop after this many new runs (``None``: all).
        label: name recorded in ``meta.json`` (the ablation).
        command: command line recorded in ``meta.json`` (default: this process's argv).

    Returns:
        The whole results table (:func:`load_results` of ``out_dir``) as a DataFrame.
    """
    from .io import save_npz

    profile = profile if isinstance(profile, Profile) else get_profile(profile)
    answer_fn = answer_fn if answer_fn is not None else baseline_answer_function(profile)
    directory = Path(out_dir)
    directory.mkdir(parents=True, exist_ok=True)
    done = _repair(directory)
    pending = [run for run in grid.runs() if run.run_id not in done]
    if max_runs is not None:
        pending = pending[: max(0, int(max_runs))]
    started, clock = _dt.datetime.now(_dt.timezone.utc), time.perf_counter()
    session = {
        "id": f"{started.isoformat(timespec='microseconds')}/{os.getpid()}",
        "label": label,
        "command": command if command is not None else " ".join(shlex.quote(a) for a in [Path(sys.argv[0]).name, *sys.argv[1:]]),
        "machine": machine_description(),
        "profile": profile.name,
        "started": started.isoformat(timespec="seconds"),
        "wall_seconds": 0.0,
        "runs_completed": 0,
        "runs_in_grid": len(grid.runs()),
    }
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(pending), desc=label or "grid", unit="run")
    try:
        for run in pending:
            if bar is not None:
                bar.set_postfix_str(run.run_id)
            run_start = time.perf_counter()
            values = answer_fn(run, progress)
            rows = score_values(values)
            base = {
                "environment": run.environment,
                "dataset": run.dataset,
                "seed": run.seed,
                "configuration": run.configuration,
                "profile": profile.name,
                "run_id": run.run_id,
            }
            if save_values:
                save_npz(
                    directory / "values" / f"{run.slug}.npz",
                    {"values_a": values.values_a.astype(np.float32), "values_b": values.values_b.astype(np.float32), "target": values.target, "horizon": values.horizon},
                    {**base, "overrides": {k: _format_value(v) for k, v in run.overrides.items()}, "info": _jsonable(values.info)},
                )
            _append_csv(directory / "results.csv", RESULT_COLUMNS, [{**base, **row} for row in rows])
            _append_csv(
                directory / "runs.csv",
                RUN_COLUMNS,
                [
                    {
                        **{k: base[k] for k in ("run_id", "environment", "dataset", "seed", "configuration", "profile")},
                        "n_queries": len(values),
                        "ensemble_size": values.ensemble_size,
                        "seconds": round(time.perf_counter() - run_start, 2),
                        "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                    }
                ],
            )
            session["runs_completed"] += 1
            session["wall_seconds"] = round(time.perf_counter() - clock, 1)
            _update_meta(directory, session)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        if session["runs_completed"]:
            session["wall_seconds"] = round(time.perf_counter() - clock, 1)
            _update_meta(directory, session)
    return load_results(directory)


def _jsonable(info: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in info.items():
        if isinstance(value, (np.generic,)):
            value = value.item()
        if isinstance(value, (str, int, float, bool)) or value is None:
            out[str(key)] = value
    return out


def run_ablation(
    name: str | Ablation,
    out: str | os.PathLike | None = None,
    profile: Profile | str | None = None,
    answer_fn: AnswerFunction | None = None,
    environments: Sequence[str] | None = None,
    datasets: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    seeds: int | Sequence[int] | None = None,
    progress: bool = True,
    max_runs: int | None = None,
    command: str | None = None,
) -> Any:
    """Plan and run one ablation, then aggregate it.

    Results go to :func:`results_dir` ``(out, profile)``, shared by every ablation of the
    profile, so runs common to several ablations are computed once.

    Returns:
        :func:`aggregate` of the ablation (a DataFrame).
    """
    ablation = get_ablation(name)
    profile = profile if isinstance(profile, Profile) else get_profile(profile)
    grid = plan_ablation(ablation, profile, environments=environments, datasets=datasets, seeds=seeds)
    directory = results_dir(out, profile)
    results = run_grid(
        grid, directory, answer_fn=answer_fn, profile=profile, progress=progress, max_runs=max_runs, label=ablation.name, command=command
    )
    return aggregate(results, ablation, grid=grid)


def find_results_root(start: str | os.PathLike | None = None) -> Path | None:
    """The repository's committed ``results/ablations`` directory, or ``None``.

    ``$OPCC_EDU_RESULTS`` wins when set. Otherwise searched from ``start`` (default: the
    working directory, e.g. ``book/`` when a chapter runs) upwards, then next to the package's
    source tree (an editable install). A package installed from a wheel ships no results.
    """
    if start is None and os.environ.get("OPCC_EDU_RESULTS"):
        forced = Path(os.environ["OPCC_EDU_RESULTS"])
        return forced if forced.is_dir() else None
    here = Path(start if start is not None else Path.cwd()).resolve()
    for folder in (here, *here.parents, Path(__file__).resolve().parents[1]):
        candidate = folder / "results" / "ablations"
        if candidate.is_dir():
            return candidate
    return None


def committed_results(
    root: str | os.PathLike | None = None,
    prefer: Sequence[str] = ("paper", "classroom", "tiny"),
    ablation: str | Ablation | None = None,
) -> Path | None:
    """The results directory of the largest profile with finished runs under ``root``.

    Args:
        root: results root (default :func:`find_results_root`).
        prefer: profiles in order of preference.
        ablation: only profiles holding this ablation count (every level of a configuration
            ablation, since the default level alone is shared by all ablations).

    Returns:
        ``<root>/<profile>`` or ``None`` when nothing was committed.
    """
    root_path = Path(root) if root is not None else find_results_root()
    if root_path is None:
        return None
    for name in prefer:
        directory = root_path / name
        if not (directory / "runs.csv").exists():
            continue
        if ablation is None:
            return directory
        found = aggregate(load_results(directory), ablation)
        # a configuration ablation counts only with every level (the default alone is shared)
        needed = len(get_ablation(ablation).levels) if not get_ablation(ablation).is_selection else 1
        if found["level"].nunique() >= needed:
            return directory
    return None


def committed_profiles(
    root: str | os.PathLike | None = None,
    prefer: Sequence[str] = ("paper", "classroom", "tiny"),
    ablation: str | Ablation | None = None,
) -> list[Path]:
    """Every results directory under ``root`` that holds ``ablation`` (all levels of a
    configuration ablation), largest profile first; see :func:`committed_results`."""
    root_path = Path(root) if root is not None else find_results_root()
    if root_path is None:
        return []
    out = []
    for name in prefer:
        found = committed_results(root_path, prefer=(name,), ablation=ablation)
        if found is not None:
            out.append(found)
    return out


def load_runs(directory: str | os.PathLike) -> Any:
    """``runs.csv`` of a results directory (one row per finished run, with its wall time in
    seconds) as a DataFrame."""
    import pandas as pd

    frame = pd.DataFrame(_read_csv_rows(Path(directory) / "runs.csv", RUN_COLUMNS), columns=list(RUN_COLUMNS))
    for column in ("seed", "n_queries", "ensemble_size"):
        frame[column] = frame[column].astype(np.int64)
    frame["seconds"] = frame["seconds"].astype(np.float64)
    return frame


def read_meta(directory: str | os.PathLike) -> dict[str, Any]:
    """``meta.json`` of a results directory: one session per invocation (command, machine,
    profile, start time, wall seconds, runs completed) and ``total_wall_seconds``."""
    path = Path(directory) / "meta.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def load_results(directory: str | os.PathLike) -> Any:
    """The results table of a directory (only finished runs) as a pandas DataFrame."""
    import pandas as pd

    directory = Path(directory)
    finished = {row["run_id"] for row in _read_csv_rows(directory / "runs.csv", RUN_COLUMNS)}
    rows = [row for row in _read_csv_rows(directory / "results.csv", RESULT_COLUMNS) if row["run_id"] in finished]
    frame = pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
    for column in ("seed", "ensemble_count", "ensemble_size", "n"):
        frame[column] = frame[column].astype(np.int64)
    for column in METRICS:
        frame[column] = frame[column].astype(np.float64)
    return frame


def load_run_values(directory: str | os.PathLike, run: RunSpec | str) -> RunValues:
    """The saved (N, M) member values of one run (by :class:`RunSpec` or file slug)."""
    from .io import load_npz

    slug = run.slug if isinstance(run, RunSpec) else str(run)
    arrays, metadata = load_npz(Path(directory) / "values" / f"{slug}.npz")
    return RunValues(arrays["values_a"], arrays["values_b"], arrays["target"], arrays["horizon"], info=dict(metadata.get("info", {})))


# --------------------------------------------------------------------------------------------
# Aggregation
# --------------------------------------------------------------------------------------------
def ablation_rows(results: Any, ablation: str | Ablation, grid: GridSpec | None = None) -> Any:
    """The rows of ``results`` that an ablation's table is made of, with a ``level`` column:
    one confidence function, all queries (or one horizon), the full ensemble (or a prefix),
    and the configurations of its levels (the default one for selection factors).

    Args:
        results: the results DataFrame (:func:`load_results`).
        ablation: registry key or :class:`Ablation`.
        grid: restrict to the runs of this grid.
    """
    return _select(results, get_ablation(ablation), grid)


def _select(results: Any, ablation: Ablation, grid: GridSpec | None = None) -> Any:
    """Rows of ``results`` that belong to ``ablation``, with a ``level`` column added."""
    frame = results.copy()
    if grid is not None:
        wanted = {run.run_id for run in grid.runs()}
        frame = frame[frame["run_id"].isin(wanted)]
    factor = ablation.factor
    if factor != "horizon":
        frame = frame[frame["horizon"] == ALL_HORIZONS]
    else:
        frame = frame[frame["horizon"] != ALL_HORIZONS]
    if factor != "confidence":
        frame = frame[frame["confidence"] == ablation.confidence]
    else:
        frame = frame[frame["confidence"].isin([level.label for level in ablation.levels])]
    if factor != "ensemble_count":
        frame = frame[frame["ensemble_count"] == frame["ensemble_size"]]
    if factor != "dataset" and grid is None and len(frame):
        frame = frame[_paper_datasets_mask(frame)]
    if ablation.is_selection:
        frame = frame[frame["configuration"] == "default"]
        frame = frame.assign(level=frame[factor].astype(str))
    else:
        labels = {configuration_label(level.overrides): level.label for level in ablation.levels}
        frame = frame[frame["configuration"].isin(labels)]
        frame = frame.assign(level=frame["configuration"].map(labels))
    return frame


def _paper_datasets_mask(frame: Any) -> Any:
    """Rows on the datasets the paper's non-dataset tables used, where an environment has any.

    The paper averaged every other ablation over the ``1m`` maze data and all five locomotion
    datasets. Extra maze prefixes (1k, 10k, 100k) exist in a results table only because the
    dataset-type ablation ran them, with the default configuration alone; mixing them into
    the default level of another ablation would compare levels on different data. An
    environment without any of the paper's datasets keeps all its rows.
    """
    keep = np.zeros(len(frame), dtype=bool)
    environments = frame["environment"].to_numpy()
    datasets = frame["dataset"].to_numpy()
    for env in np.unique(environments):
        in_env = environments == env
        try:
            wanted = set(default_datasets(str(env), "paper"))
        except (KeyError, ValueError):
            wanted = set()
        on_paper_data = in_env & np.isin(datasets, list(wanted))
        keep |= on_paper_data if on_paper_data.any() else in_env
    return keep


def _level_order(ablation: Ablation, levels: Iterable[str]) -> list[str]:
    levels = list(dict.fromkeys(levels))
    if ablation.levels:
        order = [level.label for level in ablation.levels]
        return [lv for lv in order if lv in levels] + [lv for lv in levels if lv not in order]
    if ablation.factor in ("horizon", "ensemble_count"):
        return sorted(levels, key=lambda v: int(v))
    if ablation.factor == "dataset":
        known = ["random", "medium-replay", "medium", "medium-expert", "expert", "1k", "10k", "100k", "1m"]
        return sorted(levels, key=lambda v: (known.index(v) if v in known else len(known), v))
    return levels


def aggregate(
    results: Any,
    ablation: str | Ablation,
    metrics: Sequence[str] = METRICS,
    level: float = 0.95,
    grid: GridSpec | None = None,
) -> Any:
    """Mean +- 95% t-interval half-width of each metric per (environment, level).

    The samples of a cell are the runs of that environment and level: seeds x datasets (seeds
    only for the dataset-type ablation, whose level is the dataset). Without a ``grid``, the
    other ablations use the datasets of the paper's tables where an environment has them
    (``1m`` for the mazes, the five locomotion datasets), so the extra maze prefixes of the
    dataset-type ablation do not enter another ablation's default level. The interval is the
    two-sided Student-t interval of the mean, ``t_{(1+level)/2, n-1} s / sqrt(n)``; with one
    run it is ``nan``.

    Args:
        results: the results DataFrame (:func:`load_results`).
        ablation: registry key or :class:`Ablation`.
        metrics: metric columns to aggregate.
        level: confidence level of the interval.
        grid: restrict to the runs of this grid (``None``: every matching row).

    Returns:
        A tidy DataFrame with columns environment, factor, level, metric, mean, ci, n_samples,
        in the ablation's level order.
    """
    import pandas as pd

    from .metrics import mean_confidence_interval

    ablation = get_ablation(ablation)
    for metric in metrics:
        check_choice(metric, METRICS, "metric")
    frame = _select(results, ablation, grid)
    records = []
    for env in dict.fromkeys(frame["environment"]):
        env_rows = frame[frame["environment"] == env]
        for lv in _level_order(ablation, env_rows["level"]):
            cell = env_rows[env_rows["level"] == lv]
            for metric in metrics:
                mean, half = mean_confidence_interval(cell[metric].to_numpy(dtype=np.float64), level=level)
                records.append(
                    {
                        "environment": env,
                        "factor": ablation.factor,
                        "level": lv,
                        "metric": metric,
                        "mean": mean,
                        "ci": half,
                        "n_samples": int(len(cell)),
                    }
                )
    return pd.DataFrame(records, columns=["environment", "factor", "level", "metric", "mean", "ci", "n_samples"])


def _runs_of(results: Any, ablation: Ablation, environment: str) -> dict[str, list[tuple[str, str | None, int]]]:
    """level -> [(values file slug, horizon filter, members)] for :func:`level_risk_coverage`."""
    frame = _select(results, ablation)
    frame = frame[frame["environment"] == environment]
    out: dict[str, list[tuple[str, str | None, int]]] = {}
    for lv in _level_order(ablation, frame["level"]):
        cell = frame[frame["level"] == lv].drop_duplicates("run_id")
        entries = []
        for _, row in cell.iterrows():
            run = RunSpec(row["environment"], row["dataset"], int(row["seed"]), _parse_configuration(row["configuration"]))
            horizon = row["horizon"] if ablation.factor == "horizon" else None
            entries.append((run.slug, horizon, int(row["ensemble_count"])))
        out[lv] = entries
    return out


def _parse_configuration(label: str) -> dict[str, Any]:
    if label == "default":
        return {}
    out: dict[str, Any] = {}
    for part in label.split(";"):
        key, text = part.split("=", 1)
        reference = BASELINE_DEFAULTS[key]
        if isinstance(reference, bool):
            out[key] = text == "true"
        elif isinstance(reference, float):
            out[key] = float(text)
        else:
            out[key] = text
    return out


def level_risk_coverage(
    directory: str | os.PathLike,
    ablation: str | Ablation,
    environment: str,
    grid_points: int = 101,
    results: Any = None,
) -> dict[str, dict[str, np.ndarray]]:
    """Risk-coverage curves per level, averaged over horizons and then over runs.

    For every run of a level, the exact RCC of each horizon's queries is interpolated
    (piecewise linearly, as the curve is defined) on a common coverage grid and the horizon
    curves are averaged; the horizon ablation uses its own horizon only. The run curves are
    then averaged, with a 95% t-interval per grid point.

    Args:
        directory: a results directory with saved ``values/``.
        ablation: registry key or :class:`Ablation`.
        environment: environment name.
        grid_points: coverage grid size on [0, 1].
        results: the results DataFrame (read from ``directory`` when ``None``).

    Returns:
        ``{level: {"coverage": (G,), "risk": (G,), "ci": (G,), "n_runs": ()}}``.
    """
    from .confidence import compute_confidence
    from .metrics import risk_coverage_curve

    ablation = get_ablation(ablation)
    results = load_results(directory) if results is None else results
    coverage = np.linspace(0.0, 1.0, int(grid_points))
    out: dict[str, dict[str, np.ndarray]] = {}
    cache: dict[str, RunValues] = {}
    for lv, entries in _runs_of(results, ablation, environment).items():
        curves = []
        for slug, horizon, members in entries:
            if slug not in cache:
                cache[slug] = load_run_values(directory, slug)
            values = cache[slug]
            name = lv if ablation.factor == "confidence" else ablation.confidence
            prediction, confidence = compute_confidence(name, values.values_a[:, :members], values.values_b[:, :members])
            horizons = [int(horizon)] if horizon is not None else np.unique(values.horizon).tolist()
            per_h = []
            for h in horizons:
                mask = values.horizon == h
                cov, risk, _ = risk_coverage_curve(prediction[mask], values.target[mask], confidence[mask])
                per_h.append(np.interp(coverage, cov, risk))
            curves.append(np.mean(per_h, axis=0))
        stack = np.asarray(curves)
        mean = stack.mean(axis=0)
        if len(curves) > 1:
            from scipy import stats

            half = stats.t.ppf(0.975, len(curves) - 1) * stack.std(axis=0, ddof=1) / math.sqrt(len(curves))
        else:
            half = np.full_like(mean, np.nan)
        out[lv] = {"coverage": coverage, "risk": mean, "ci": half, "n_runs": np.asarray(len(curves))}
    return out


def plot_level_risk_coverage(curves: Mapping[str, Mapping[str, np.ndarray]], ax: Any = None, title: str | None = None, titles: Mapping[str, str] | None = None):
    """Plot :func:`level_risk_coverage` curves, one line and 95% band per level.

    Returns:
        The matplotlib Axes.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.5))
    for lv, curve in curves.items():
        name = (titles or {}).get(lv, lv)
        (line,) = ax.plot(curve["coverage"], curve["risk"], label=f"{name} (n={int(curve['n_runs'])})")
        if np.all(np.isfinite(curve["ci"])):
            ax.fill_between(curve["coverage"], curve["risk"] - curve["ci"], curve["risk"] + curve["ci"], color=line.get_color(), alpha=0.2)
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(bottom=0.0)
    ax.set_xlabel("coverage (fraction of queries answered)")
    ax.set_ylabel("selective risk (fraction wrong)")
    if title:
        ax.set_title(title)
    ax.legend(loc="upper left", fontsize="small")
    return ax


# --------------------------------------------------------------------------------------------
# The paper's numbers, comparison and reports
# --------------------------------------------------------------------------------------------
def paper_results(ablation: str | Ablation | None = None, path: str | os.PathLike | None = None) -> Any:
    """The paper's ablation tables as a tidy DataFrame (see the module docstring).

    Args:
        ablation: keep one ablation's rows (``None``: all).
        path: CSV path (default: the shipped ``opcc_edu/assets/paper_results.csv``).
    """
    import pandas as pd

    frame = pd.read_csv(path or _ASSET_CSV, dtype={"level": str, "paper_level": str, "dataset": str})
    if ablation is not None:
        frame = frame[frame["ablation"] == get_ablation(ablation).name].reset_index(drop=True)
    return frame


def compare_with_paper(ours: Any, ablation: str | Ablation, ensemble_size: int | None = None) -> Any:
    """Our aggregate next to the paper's numbers, one row per (environment, level, metric).

    Levels are matched by label; for the ensemble-count ablation our prefix of
    ``round(M p / 100)`` members is matched with the paper's ``p`` members
    (:func:`ensemble_count_levels`, M = ``ensemble_size``, read from the largest level when
    ``None``). Environments or levels missing on one side get ``nan``.

    Returns:
        DataFrame with environment, level, paper_level, metric, ours_mean, ours_ci,
        n_samples, paper_mean, paper_ci, paper_ci_is_bound (the paper printed ``(<0.001)``),
        paper_table, overlap (whether the two intervals intersect; ``nan`` when a side is
        missing or has no interval).
    """
    import pandas as pd

    ablation = get_ablation(ablation)
    paper = paper_results(ablation)
    ours = ours.copy()
    ours["paper_level"] = ours["level"]
    if ablation.factor == "ensemble_count" and len(ours):
        m = ensemble_size if ensemble_size is not None else int(max(int(v) for v in ours["level"]))
        mapping = ensemble_count_levels(m)
        expanded = []
        for count, p in mapping:
            part = ours[ours["level"] == str(count)].copy()
            part["paper_level"] = str(p)
            expanded.append(part)
        ours = pd.concat(expanded, ignore_index=True)
    paper = paper.rename(
        columns={"mean": "paper_mean", "ci": "paper_ci", "ci_is_bound": "paper_ci_is_bound", "table": "paper_table", "level": "paper_level_label"}
    )
    paper = paper[["environment", "paper_level_label", "metric", "paper_mean", "paper_ci", "paper_ci_is_bound", "paper_table"]]
    merged = ours.rename(columns={"mean": "ours_mean", "ci": "ours_ci"}).merge(
        paper, how="left", left_on=["environment", "paper_level", "metric"], right_on=["environment", "paper_level_label", "metric"]
    )
    merged = merged.drop(columns=["paper_level_label"])
    low_a, high_a = merged["ours_mean"] - merged["ours_ci"], merged["ours_mean"] + merged["ours_ci"]
    low_b, high_b = merged["paper_mean"] - merged["paper_ci"], merged["paper_mean"] + merged["paper_ci"]
    overlap = (low_a <= high_b) & (low_b <= high_a)
    defined = merged[["ours_ci", "paper_mean"]].notna().all(axis=1)
    merged["overlap"] = overlap.where(defined, other=np.nan)
    columns = [
        "environment", "level", "paper_level", "metric", "ours_mean", "ours_ci", "n_samples",
        "paper_mean", "paper_ci", "paper_ci_is_bound", "paper_table", "overlap",
    ]
    return merged[columns]


def level_differences(table: Any, ablation: str | Ablation, reference: str | None = None) -> Any:
    """Each level against a reference level, per environment and metric.

    The paper calls a difference significant when the two 95% intervals do not intersect
    (Section 7); this applies the same reading to any tidy table with columns environment,
    level, metric, mean and ci -- :func:`aggregate`'s output or :func:`paper_results`.

    Args:
        table: tidy table of means and half-widths.
        ablation: registry key or :class:`Ablation` (for the level order).
        reference: the level compared against (default: the ablation's first level present).

    Returns:
        DataFrame with environment, metric, reference, level, difference (level - reference),
        separated (intervals disjoint; touching intervals and missing intervals count as not
        separated).
    """
    import pandas as pd

    ablation = get_ablation(ablation)
    records = []
    for env in dict.fromkeys(table["environment"]):
        part = table[table["environment"] == env]
        order = _level_order(ablation, part["level"].astype(str))
        ref = reference if reference is not None else (order[0] if order else None)
        if ref is None or ref not in order:
            continue
        for metric in dict.fromkeys(part["metric"]):
            rows = part[part["metric"] == metric].assign(level=lambda f: f["level"].astype(str)).drop_duplicates("level").set_index("level")
            if ref not in rows.index:
                continue
            base = rows.loc[ref]
            for lv in order:
                if lv == ref or lv not in rows.index:
                    continue
                other = rows.loc[lv]
                # touching intervals (equal up to rounding of the printed tables) intersect
                separated = bool(
                    np.isfinite(base["ci"]) and np.isfinite(other["ci"])
                    and abs(other["mean"] - base["mean"]) > base["ci"] + other["ci"] + 1e-9
                )
                records.append(
                    {"environment": env, "metric": metric, "reference": ref, "level": lv, "difference": float(other["mean"] - base["mean"]), "separated": separated}
                )
    return pd.DataFrame(records, columns=["environment", "metric", "reference", "level", "difference", "separated"])


def plot_comparison(comparison: Any, metric: str = "aurcc", ax: Any = None, titles: Mapping[str, str] | None = None):
    """Bar chart of :func:`compare_with_paper`: ours and the paper's mean +- 95% interval per
    (environment, level) for one metric.

    Returns:
        The matplotlib Axes.
    """
    import matplotlib.pyplot as plt

    from .metrics import METRIC_NAMES

    check_choice(metric, METRICS, "metric")
    part = comparison[comparison["metric"] == metric].reset_index(drop=True)
    if ax is None:
        _, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(part) + 1.5), 3.5))
    x = np.arange(len(part))
    ours_err = np.nan_to_num(part["ours_ci"].to_numpy(dtype=float))
    paper_err = np.nan_to_num(part["paper_ci"].to_numpy(dtype=float))
    ax.bar(x - 0.2, part["ours_mean"], width=0.4, yerr=ours_err, capsize=3, label="ours")
    ax.bar(x + 0.2, part["paper_mean"].fillna(0.0), width=0.4, yerr=paper_err, capsize=3, label="paper", alpha=0.8)
    names = [(titles or {}).get(lv, lv) for lv in part["level"]]
    multi_env = part["environment"].nunique() > 1
    labels = [f"{env}\n{name}" if multi_env else name for env, name in zip(part["environment"], names)]
    ax.set_xticks(x, labels, fontsize="small")
    ax.set_ylabel(f"{METRIC_NAMES[metric]} (fraction)")
    ax.set_xlabel("level")
    ax.legend(fontsize="small")
    return ax


def _fmt(mean: float, half: float, digits: int = 3, bound: bool = False) -> str:
    from .metrics import format_mean_ci

    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    if bound:  # the paper printed "(<0.001)": keep it, do not pretend to know the half-width
        return f"{float(mean):.{digits}f} ± (<{float(half):.{digits}f})"
    return format_mean_ci(float(mean), float(half), digits=digits)


def format_table(comparison: Any, metrics: Sequence[str] = METRICS, fmt: str = "markdown", titles: Mapping[str, str] | None = None) -> str:
    """Render :func:`compare_with_paper` as a table: per environment and level, each metric as
    "ours" and "paper" columns.

    Args:
        comparison: output of :func:`compare_with_paper`.
        metrics: metric columns to show.
        fmt: ``"markdown"`` or ``"latex"``.
        titles: display names of the levels.

    Returns:
        The table as text.
    """
    from .metrics import METRIC_NAMES

    check_choice(fmt, ("markdown", "latex"), "format")
    header = ["environment", "level"]
    for metric in metrics:
        header += [f"{METRIC_NAMES[metric]} ours", f"{METRIC_NAMES[metric]} paper"]
    body = []
    keys = list(dict.fromkeys(zip(comparison["environment"], comparison["level"], comparison["paper_level"])))
    for env, lv, plv in keys:
        cells = [env, (titles or {}).get(lv, lv) + (f" (paper {plv})" if plv != lv else "")]
        part = comparison[(comparison["environment"] == env) & (comparison["level"] == lv) & (comparison["paper_level"] == plv)]
        for metric in metrics:
            row = part[part["metric"] == metric]
            if len(row):
                r = row.iloc[0]
                bound = bool(r["paper_ci_is_bound"]) if r["paper_ci_is_bound"] == r["paper_ci_is_bound"] else False
                cells += [_fmt(r["ours_mean"], r["ours_ci"]), _fmt(r["paper_mean"], r["paper_ci"], bound=bound)]
            else:
                cells += ["–", "–"]
        body.append(cells)
    if fmt == "markdown":
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(cells) + " |" for cells in body]
        return "\n".join(lines)

    def tex(text: str) -> str:
        return (
            text.replace("\\", "\\textbackslash{}").replace("_", "\\_").replace("%", "\\%").replace("&", "\\&")
            .replace("±", "$\\pm$").replace("↓", "$\\downarrow$").replace("↑", "$\\uparrow$").replace("<", "$<$").replace("–", "--")
        )

    lines = ["\\begin{tabular}{ll" + "rr" * len(metrics) + "}", "\\toprule", " & ".join(tex(h) for h in header) + " \\\\", "\\midrule"]
    lines += [" & ".join(tex(c) for c in cells) + " \\\\" for cells in body]
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines)


def report_text(out: str | os.PathLike | None = None, fmt: str = "markdown", profiles: Sequence[str] | None = None) -> str:
    """Every ablation with results under ``out`` (one directory per profile), ours vs paper.

    Args:
        out: root of the results (default ``results/ablations``).
        fmt: ``"markdown"`` or ``"latex"``.
        profiles: profile directories to include (default: every one found).

    Returns:
        The report text. Raises FileNotFoundError when no results exist.
    """
    check_choice(fmt, ("markdown", "latex"), "format")
    root = Path(out if out is not None else "results/ablations")
    found = sorted(p.parent.name for p in root.glob("*/runs.csv"))
    if profiles is not None:
        found = [p for p in found if p in set(profiles)]
    if not found:
        raise FileNotFoundError(f"no results under {root} (expected {root}/<profile>/runs.csv); run `opcc-edu ablation NAME` first")
    chunks: list[str] = []
    md = fmt == "markdown"

    def heading(level: int, text: str) -> str:
        if md:
            return "#" * level + " " + text
        command = {1: "section", 2: "subsection", 3: "subsubsection"}[level]
        return f"\\{command}*{{{text}}}"

    chunks.append(heading(1, "Ablations: ours next to Koul et al."))
    chunks.append(
        "Each cell is mean ± half-width of the 95% Student-t interval over the runs "
        "(seeds × datasets) of that environment and level; the paper's cells are over 5 seeds "
        "(× 5 datasets for locomotion)."
    )
    for profile_name in found:
        directory = root / profile_name
        results = load_results(directory)
        meta = read_meta(directory)
        chunks.append(heading(2, f"Profile {profile_name}"))
        sessions = meta.get("sessions", [])
        if sessions:
            machines = sorted({s.get("machine", "") for s in sessions})
            chunks.append(
                f"{len(results['run_id'].unique())} runs; total wall time {meta.get('total_wall_seconds', 0):.0f} s; "
                f"machine: {' | '.join(machines)}."
            )
            used = results.groupby("environment")["dataset"].agg(lambda d: ", ".join(sorted(set(d))))
            chunks.append("Datasets: " + "; ".join(f"{env}: {names}" for env, names in used.items()) + ".")
            commands = list(dict.fromkeys(s.get("command", "") for s in sessions))
            chunks.append(("Commands: " if md else "Commands: ") + "; ".join(f"`{c}`" if md else f"\\texttt{{{c}}}" for c in commands))
        for ablation in ABLATIONS.values():
            ours = aggregate(results, ablation)
            if ours.empty:
                continue
            tables = ", ".join(str(t) for t in ablation.paper_tables) or "none"
            chunks.append(heading(3, f"{ablation.title} (paper tables: {tables})"))
            titles = {level.label: level.display for level in ablation.levels}
            chunks.append(format_table(compare_with_paper(ours, ablation), fmt=fmt, titles=titles))
    separator = "\n\n"
    text = separator.join(chunks) + "\n"
    if not md:
        text = text.replace("95%", "95\\%").replace("×", "$\\times$").replace("±", "$\\pm$")
    return text


def write_report(out: str | os.PathLike | None = None, fmt: str = "markdown", profiles: Sequence[str] | None = None) -> Path:
    """Write :func:`report_text` to ``<out>/report.md`` or ``<out>/report.tex``; return the path."""
    from .io import atomic_write_text

    root = Path(out if out is not None else "results/ablations")
    path = root / ("report.md" if fmt == "markdown" else "report.tex")
    atomic_write_text(path, report_text(root, fmt=fmt, profiles=profiles))
    return path


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------
def add_ablation_parser(sub: Any) -> None:
    """``opcc-edu ablation NAME [--profile P] [--out DIR] ...``"""
    p = sub.add_parser(
        "ablation",
        help="run one of the paper's ablations (train, answer, score; resumable)",
        description="Run one ablation of Koul et al. (Section 7, Appendix B) over environments x "
        "datasets x seeds x levels, appending results to <out>/<profile>/results.csv as runs "
        "finish (an interrupted run resumes), then print ours next to the paper's numbers. "
        f"Ablations: {', '.join(ABLATIONS)}.",
    )
    p.add_argument("name", choices=list(ABLATIONS), metavar="NAME", help=f"one of: {', '.join(ABLATIONS)}")
    p.add_argument(
        "--profile", dest="ablation_profile", metavar="P", choices=["tiny", "classroom", "paper"], default=None,
        help="tiny, classroom or paper (default: the active profile)",
    )
    p.add_argument("--out", default="results/ablations", help="results root (default results/ablations)")
    p.add_argument("--environments", nargs="+", default=None, help="environments (default: the profile's)")
    p.add_argument("--datasets", nargs="+", default=None, help="datasets for every environment (default: per profile)")
    p.add_argument("--seeds", type=int, default=None, help="number of seeds (default: the profile's n_seeds)")
    p.add_argument("--max-runs", type=int, default=None, help="stop after this many new runs")
    p.add_argument("--dry-run", action="store_true", help="list the runs and exit")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(handler=_ablation_handler)


def _ablation_handler(args: Any) -> int:
    from .config import set_profile

    if args.ablation_profile is not None:
        set_profile(args.ablation_profile)
    profile = get_profile()
    ablation = get_ablation(args.name)
    grid = plan_ablation(ablation, profile, environments=args.environments, datasets=args.datasets, seeds=args.seeds)
    directory = results_dir(args.out, profile)
    runs = grid.runs()
    if args.dry_run:
        done = _repair(directory) if directory.exists() else set()
        print(f"{ablation.name}: {len(runs)} runs in profile {profile.name} ({sum(r.run_id in done for r in runs)} done) -> {directory}")
        for run in runs:
            print(f"  {'done' if run.run_id in done else 'todo'}  {run.run_id}")
        return 0
    command = "opcc-edu " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv and sys.argv[0].endswith("opcc-edu") else None
    ours = run_ablation(
        ablation,
        out=args.out,
        profile=profile,
        environments=args.environments,
        datasets=args.datasets,
        seeds=args.seeds,
        progress=not args.no_progress,
        max_runs=args.max_runs,
        command=command,
    )
    titles = {level.label: level.display for level in ablation.levels}
    print(f"\n{ablation.title} -- profile {profile.name}, results in {directory}")
    print(format_table(compare_with_paper(ours, ablation), titles=titles))
    return 0


def add_report_parser(sub: Any) -> None:
    """``opcc-edu report [--out DIR] [--format markdown|latex]``"""
    p = sub.add_parser(
        "report",
        help="write every ablation's table (ours next to the paper's) as Markdown or LaTeX",
        description="Aggregate the results under <out>/<profile>/ (mean ± 95%% t-interval over "
        "seeds x datasets) and write them next to the paper's numbers to <out>/report.md or "
        "<out>/report.tex; the report is also printed.",
    )
    p.add_argument("--out", default="results/ablations", help="results root (default results/ablations)")
    p.add_argument("--format", dest="report_format", choices=["markdown", "latex"], default="markdown", help="output format (default markdown)")
    p.add_argument("--profiles", nargs="+", default=None, help="profile directories to include (default: all found)")
    p.set_defaults(handler=_report_handler)


def _report_handler(args: Any) -> int:
    path = write_report(args.out, fmt=args.report_format, profiles=args.profiles)
    print(path.read_text(encoding="utf-8"))
    print(f"written to {path}", file=sys.stderr)
    return 0


def info_lines() -> list[str]:
    """The section of ``opcc-edu info``: registered ablations and committed results."""
    lines = ["Ablations (opcc-edu ablation NAME; paper Section 7, Appendix B):"]
    for ablation in ABLATIONS.values():
        tables = ", ".join(map(str, ablation.paper_tables)) or "-"
        lines.append(f"  {ablation.name:<15} factor {ablation.factor:<15} paper tables {tables}")
    root = find_results_root()
    if root is not None:
        for runs in sorted(root.glob("*/runs.csv")):
            count = len(_read_csv_rows(runs, RUN_COLUMNS))
            lines.append(f"  committed results: {runs.parent} ({count} runs)")
    return lines
