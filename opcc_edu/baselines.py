"""The paper's model-based baselines end to end: ensemble -> member values -> confidence -> metrics.

Koul et al. (Section 5) answer a policy-comparison query in three steps:

1. learn an ensemble of M dynamics-and-reward models from the offline dataset
   (:func:`train_ensemble`, cached by :func:`get_or_train_ensemble`);
2. let every member estimate both sides' values by simulating the policies
   (:func:`estimate_values` -> two (N, M) arrays);
3. combine the M value pairs into a prediction and a confidence (EV, PCI, U-PCI of
   :mod:`opcc_edu.confidence`) and score them (:mod:`opcc_edu.metrics`).

:func:`answer_queries` does all three and returns :class:`Answers`. Every variation the paper
studies is one field of :class:`EnsembleConfig`, so an ablation is a list of configs. The
members of an ensemble are exchangeable: members 0..m-1 of a 100-member ensemble form an
m-member ensemble, which is how the ensemble-count ablation reads every size from one training
run (:meth:`Answers.with_members`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .config import Profile, get_profile
from .dynamics import (
    MODEL_TYPES,
    TERMINATION_MODES,
    DynamicsEnsemble,
    ModelSpec,
    TrainHistory,
    build_ensemble,
    load_ensemble,
    rollout_values,
    save_ensemble,
    train_dynamics,
)
from .io import CorruptFileError
from .utils import cache_dir, check_choice, check_positive_int, dataclass_from_dict, get_device

CONFIDENCE_METHODS: tuple[str, ...] = ("ev", "pci", "upci")
"""Confidence functions :func:`answer_queries` scores by default (paper Section 5.3)."""
ALL_HORIZONS = "all"
"""Key of the whole-query-set metrics in :attr:`Answers.metrics`."""
CACHE_FORMAT = 1
"""Bumped when a change makes cached ensembles stale."""


@dataclasses.dataclass(frozen=True)
class EnsembleConfig:
    """One baseline: how the ensemble is built, trained and rolled out.

    The defaults are the paper's default model (Section 7: 100 deterministic feed-forward
    members, MBPO architecture, no prior, normalised inputs, clipping and the predefined
    termination function); :meth:`from_profile` takes the sizes from a profile instead.
    """

    ensemble_size: int = 100
    """Members M."""
    hidden_sizes: tuple[int, ...] = (200, 200, 200, 200)
    """Hidden widths of each member (MBPO: four layers of 200, SiLU)."""
    model_type: str = "ff"
    """``"ff"`` feed-forward Gaussian or ``"ar"`` autoregressive (Tables 7, 13)."""
    stochastic: bool = False
    """Sample from each member's Gaussian instead of using its mean (Tables 11, 12)."""
    prior_scale: float = 0.0
    """Randomized constant prior scale; 0 = no prior (Tables 6, 10)."""
    normalize: bool = True
    """Standardise model inputs with dataset statistics (Tables 14, 15)."""
    clip: bool = True
    """Clip predicted observations and rewards to the dataset's bounds."""
    termination: str = "predefined"
    """``"predefined"`` (the environment's function), ``"learned"`` or ``"none"``."""
    mixture: bool = False
    """Rollouts draw a random member per step (rollout-only: shares the trained model)."""
    train_steps: int = 50_000
    """Gradient steps of ensemble training."""
    batch_size: int = 256
    """Rows per member per gradient step."""
    lr: float = 1e-3
    """Adam learning rate."""
    seed: int = 0
    """Seeds initialisation, bootstrap, minibatches and rollout noise."""

    # Fields that only change how a trained ensemble is used, not the ensemble itself.
    _ROLLOUT_ONLY = ("mixture",)

    def __post_init__(self) -> None:
        check_positive_int(self.ensemble_size, "ensemble_size")
        if isinstance(self.hidden_sizes, int) or not self.hidden_sizes:
            raise ValueError(f"hidden_sizes must be a non-empty sequence of widths, got {self.hidden_sizes!r}")
        object.__setattr__(self, "hidden_sizes", tuple(check_positive_int(h, "hidden_sizes entry") for h in self.hidden_sizes))
        check_choice(self.model_type, MODEL_TYPES, "model_type")
        check_choice(self.termination, TERMINATION_MODES, "termination")
        for name in ("stochastic", "normalize", "clip", "mixture"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not np.isfinite(self.prior_scale) or self.prior_scale < 0:
            raise ValueError(f"prior_scale must be a finite number >= 0, got {self.prior_scale!r}")
        check_positive_int(self.train_steps, "train_steps")
        check_positive_int(self.batch_size, "batch_size")
        if not (isinstance(self.lr, (int, float)) and 0 < self.lr < 1):
            raise ValueError(f"lr must be a number in (0, 1), got {self.lr!r}")
        check_positive_int(self.seed, "seed", minimum=0)
        if self.mixture and self.ensemble_size < 2:
            raise ValueError(f"mixture needs ensemble_size >= 2, got {self.ensemble_size}")

    @classmethod
    def from_profile(cls, profile: Profile | str | None = None, **overrides: Any) -> EnsembleConfig:
        """The default baseline at a profile's sizes (members, widths, steps, batch size).

        Args:
            profile: a :class:`~opcc_edu.config.Profile`, its name, or None for the active one.
            **overrides: any other field, e.g. ``prior_scale=5.0``.
        """
        prof = profile if isinstance(profile, Profile) else get_profile(profile)
        sizes = {
            "ensemble_size": prof.ensemble_size,
            "hidden_sizes": tuple(prof.hidden_sizes),
            "train_steps": prof.dynamics_train_steps,
            "batch_size": prof.batch_size,
        }
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - fields)
        if unknown:
            raise ValueError(f"unknown EnsembleConfig field(s) {unknown}; valid fields: {sorted(fields)}")
        return cls(**{**sizes, **overrides})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of every field."""
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EnsembleConfig:
        return dataclass_from_dict(cls, data)

    def model_spec(self, env_name: str) -> ModelSpec:
        """The architecture of this config's ensemble for an environment."""
        from .envs import get_spec

        spec = get_spec(env_name)
        return ModelSpec(
            env_name=spec.name,
            obs_dim=spec.obs_dim,
            act_dim=spec.act_dim,
            ensemble_size=self.ensemble_size,
            hidden_sizes=self.hidden_sizes,
            model_type=self.model_type,
            stochastic=self.stochastic,
            prior_scale=float(self.prior_scale),
            normalize=self.normalize,
            clip=self.clip,
            termination=self.termination,
        )

    def training_fields(self) -> dict[str, Any]:
        """The fields that determine the trained weights (everything but rollout options)."""
        return {k: v for k, v in self.to_dict().items() if k not in self._ROLLOUT_ONLY}


# --------------------------------------------------------------------------------------------
# Training and the ensemble cache
# --------------------------------------------------------------------------------------------
def train_ensemble(
    dataset: Mapping[str, np.ndarray],
    config: EnsembleConfig,
    env_name: str,
    device: Any = None,
    progress: bool = True,
) -> tuple[DynamicsEnsemble, TrainHistory]:
    """Build and train the ensemble of ``config`` on a D4RL-format dataset.

    Args:
        dataset: ``observations`` (T, D), ``actions`` (T, A), ``rewards`` (T,),
            ``next_observations`` (T, D), ``terminals`` (T,).
        config: the baseline.
        env_name: environment of the data (sizes, termination function).
        device: torch device (default: CUDA when available).
        progress: show a progress bar.

    Returns:
        ``(model in eval mode, history)``.
    """
    model = build_ensemble(config.model_spec(env_name), seed=config.seed)
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


def ensemble_cache_path(env_name: str, dataset_name: str, config: EnsembleConfig, dataset_size: int | None, dataset_seed: int = 0) -> Path:
    """Cache file of the ensemble trained with ``config`` on one dataset.

    The file name hashes everything that determines the weights: the training fields of the
    config, the environment, the dataset's name, size, seed and generator version, and
    :data:`CACHE_FORMAT`.
    """
    from .datasets import DATA_FORMAT_VERSION

    key = {
        "format": CACHE_FORMAT,
        "data_format": DATA_FORMAT_VERSION,
        "env": env_name,
        "dataset": dataset_name,
        "dataset_size": dataset_size,
        "dataset_seed": dataset_seed,
        "config": config.training_fields(),
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir("ensembles", env_name, dataset_name, create=False) / f"ensemble-{digest}.safetensors"


def get_or_train_ensemble(
    env_name: str,
    dataset_name: str | None = None,
    config: EnsembleConfig | None = None,
    dataset_size: int | None = None,
    dataset_seed: int = 0,
    device: Any = None,
    progress: bool = True,
    cache: bool = True,
    dataset: Mapping[str, np.ndarray] | None = None,
) -> DynamicsEnsemble:
    """Load the ensemble of ``config`` from the cache, or train and cache it.

    Args:
        env_name: environment.
        dataset_name: dataset of :func:`opcc_edu.datasets.load_dataset` (None: the
            environment's default).
        config: the baseline (None: :meth:`EnsembleConfig.from_profile`).
        dataset_size: transitions (None: the active profile's, capped by the recipe).
        dataset_seed: seed of the dataset.
        device: torch device for the returned model.
        progress: show progress bars.
        cache: read and write the cache (``False`` always trains and stores nothing).
        dataset: use these transitions instead of loading ``dataset_name`` (then they must be
            what that name, size and seed denote, or the cache will be wrong).

    Returns:
        The model in eval mode. Its attribute ``info`` (a dict) says whether it came from the
        cache (``cache_hit``), where it is stored (``path``) and how long training took
        (``train_seconds``, 0 for a cache hit), with the training history when trained.
    """
    from .datasets import DEFAULT_DATASET, resolve_size, get_recipe

    config = EnsembleConfig.from_profile() if config is None else config
    dataset_name = DEFAULT_DATASET[env_name] if dataset_name is None else dataset_name
    if dataset is None:
        dataset_size = resolve_size(get_recipe(env_name, dataset_name), dataset_size)
    else:
        dataset_size = len(dataset["observations"])
    path = ensemble_cache_path(env_name, dataset_name, config, dataset_size, dataset_seed)
    device = get_device(device)
    if cache and path.exists():
        try:
            model, meta = load_ensemble(path, device=device)
        except (CorruptFileError, ValueError, RuntimeError) as exc:
            warnings.warn(f"cached ensemble {path} is unusable ({exc}); training it again", stacklevel=2)
        else:
            model.info = {"cache_hit": True, "path": str(path), "train_seconds": 0.0, "trained": meta}
            return model
    if dataset is None:
        from .datasets import load_dataset

        dataset = load_dataset(env_name, dataset_name, size=dataset_size, seed=dataset_seed, progress=progress)
    start = time.perf_counter()
    model, history = train_ensemble(dataset, config, env_name, device=device, progress=progress)
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
    }
    if cache:
        save_ensemble(path, model, meta)
    model.info = {"cache_hit": False, "path": str(path) if cache else None, "train_seconds": seconds, "trained": meta, "history": history}
    return model


# --------------------------------------------------------------------------------------------
# Values, confidences, metrics
# --------------------------------------------------------------------------------------------
def estimate_values(
    model: DynamicsEnsemble,
    queries,
    policies: Sequence[Any] | None = None,
    runs: int = 1,
    mixture: bool = False,
    seed: int = 0,
    reduce_runs: bool = True,
    device: Any = None,
    memory_budget: int | None = None,
    progress: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Every member's value estimate of both sides of every query.

    Side a of query i starts at ``obs_a[i]``, takes ``action_a[i]``, then follows policy
    level ``policy_a[i]`` for ``horizon[i] - 1`` more steps inside the model; returns are
    discounted by ``gamma[i]`` and stop at the model's termination. All queries, both sides,
    all members and all runs are simulated together (:func:`opcc_edu.dynamics.rollout_values`).

    Args:
        model: a trained ensemble with M members.
        queries: a :class:`opcc_edu.queries.QuerySet` with N queries.
        policies: the query policies, index i = level i + 1 (None:
            :func:`opcc_edu.policies.load_policies` of the queries' environment).
        runs: Monte-Carlo runs R per member (more than 1 only helps stochastic models or
            mixtures).
        mixture: advance each trajectory with a random member per step.
        seed: seed of model noise and the mixture.
        reduce_runs: average over runs and return (N, M); else return (N, M, R).
        device: torch device (default: the model's).
        memory_budget: bytes of activations per rollout chunk (default: automatic).
        progress: show a progress bar.

    Returns:
        ``(values_a, values_b)``, each (N, M) float64 (or (N, M, R)).
    """
    if policies is None:
        from .policies import load_policies

        policies = load_policies(queries.env_name)
    n = len(queries)
    obs = np.concatenate([queries.obs_a, queries.obs_b]).astype(np.float32)
    first = np.concatenate([queries.action_a, queries.action_b]).astype(np.float32)
    level = np.concatenate([queries.policy_a, queries.policy_b]).astype(np.int64)
    if n and (level.min() < 1 or level.max() > len(policies)):
        raise ValueError(f"query policy levels must lie in [1, {len(policies)}] (one per policy), got [{level.min()}, {level.max()}]")
    values = rollout_values(
        model,
        policies,
        obs,
        policy_index=level - 1,
        horizon=np.concatenate([queries.horizon, queries.horizon]),
        first_action=first,
        gamma=np.concatenate([queries.gamma, queries.gamma]),
        runs=runs,
        mixture=mixture,
        seed=seed,
        memory_budget=memory_budget,
        device=device,
        progress=progress,
    )
    if reduce_runs:
        values = values.mean(axis=-1)
    return values[:n], values[n:]


def score_values(
    values_a: np.ndarray,
    values_b: np.ndarray,
    target: np.ndarray,
    horizon: np.ndarray,
    confidences: Sequence[str] = CONFIDENCE_METHODS,
    k: int = 10,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, dict[str, dict[str, float]]]]:
    """Predictions, confidences and metrics of (N, M) member values.

    Args:
        values_a: (N, M) member values of side a.
        values_b: (N, M) member values of side b.
        target: (N,) true answers (1 iff V_a < V_b).
        horizon: (N,) horizons, for per-horizon metrics.
        confidences: names in :data:`opcc_edu.confidence.CONFIDENCE_FUNCTIONS`.
        k: bins of the coverage resolution CR_K.

    Returns:
        ``(predictions, confidences, metrics)``: the first two map a confidence name to an
        (N,) array; ``metrics[name][h]`` is :func:`opcc_edu.metrics.evaluate`'s dict for
        horizon ``h`` (a string) or for :data:`ALL_HORIZONS`.
    """
    from .confidence import compute_confidence
    from .metrics import evaluate

    target = np.asarray(target)
    horizon = np.asarray(horizon)
    predictions, confs, metrics = {}, {}, {}
    for name in confidences:
        prediction, confidence = compute_confidence(name, values_a, values_b)
        predictions[name], confs[name] = prediction, confidence
        table = {ALL_HORIZONS: _plain(evaluate(prediction, target, confidence, k=k))}
        for h in np.unique(horizon):
            mask = horizon == h
            table[str(int(h))] = _plain(evaluate(prediction[mask], target[mask], confidence[mask], k=k))
        metrics[name] = table
    return predictions, confs, metrics


def _plain(metrics: Mapping[str, Any]) -> dict[str, float]:
    return {key: (int(v) if key == "n" else float(v)) for key, v in metrics.items() if np.isscalar(v)}


@dataclasses.dataclass
class Answers:
    """A baseline's answers to a query set: member values, predictions, confidences, metrics.

    Shapes: N queries, M members.
    """

    env_name: str
    """Environment of the queries."""
    dataset_name: str
    """Dataset the ensemble was trained on."""
    config: EnsembleConfig
    """The baseline."""
    queries: Any
    """The :class:`opcc_edu.queries.QuerySet` answered."""
    values_a: np.ndarray
    """(N, M) member value estimates of side a."""
    values_b: np.ndarray
    """(N, M) member value estimates of side b."""
    predictions: dict[str, np.ndarray]
    """Confidence name -> (N,) int8 prediction (1 means V_a < V_b)."""
    confidences: dict[str, np.ndarray]
    """Confidence name -> (N,) float64 confidence."""
    metrics: dict[str, dict[str, dict[str, float]]]
    """``metrics[name][h]``: aurcc, rpp, cr_k, loss, n, ... for horizon ``h`` or ``"all"``."""
    k: int = 10
    """Bins of CR_K."""
    train_seconds: float = 0.0
    """Seconds spent training (0 when the ensemble came from the cache)."""
    answer_seconds: float = 0.0
    """Seconds spent estimating values and scoring."""
    cache_hit: bool = False
    """The ensemble was loaded from the cache."""
    model_path: str | None = None
    """Where the ensemble is cached."""

    @property
    def target(self) -> np.ndarray:
        """(N,) true answers."""
        return self.queries.target

    @property
    def horizon(self) -> np.ndarray:
        """(N,) horizons."""
        return self.queries.horizon

    @property
    def ensemble_size(self) -> int:
        return int(self.values_a.shape[1])

    def with_members(self, m: int) -> Answers:
        """The answers of the ensemble made of members 0..m-1 (rescored, no new rollouts)."""
        m = check_positive_int(m, "m")
        if m > self.ensemble_size:
            raise ValueError(f"m must be at most the ensemble size {self.ensemble_size}, got {m}")
        names = [n for n in self.predictions if n == "ev" or m >= 2]
        va, vb = self.values_a[:, :m], self.values_b[:, :m]
        predictions, confidences, metrics = score_values(va, vb, self.target, self.horizon, names, self.k)
        return dataclasses.replace(
            self,
            config=dataclasses.replace(self.config, ensemble_size=m),
            values_a=va,
            values_b=vb,
            predictions=predictions,
            confidences=confidences,
            metrics=metrics,
        )

    def table(self):
        """Metrics as a tidy ``pandas.DataFrame``: one row per (confidence, horizon)."""
        import pandas as pd

        rows = []
        for name, by_h in self.metrics.items():
            for h, values in by_h.items():
                rows.append({"confidence": name, "horizon": h, **values})
        frame = pd.DataFrame(rows)
        order = {h: i for i, h in enumerate(sorted({r["horizon"] for r in rows if r["horizon"] != ALL_HORIZONS}, key=int))}
        order[ALL_HORIZONS] = len(order)
        return frame.sort_values(["confidence", "horizon"], key=lambda s: s.map(order) if s.name == "horizon" else s).reset_index(drop=True)

    def summary(self) -> dict[str, Any]:
        """JSON-ready results: the setup, timings and every metric."""
        return {
            "env_name": self.env_name,
            "dataset": self.dataset_name,
            "n_queries": int(len(self.target)),
            "ensemble_size": self.ensemble_size,
            "config": self.config.to_dict(),
            "k": self.k,
            "train_seconds": self.train_seconds,
            "answer_seconds": self.answer_seconds,
            "cache_hit": self.cache_hit,
            "model_path": self.model_path,
            "metrics": self.metrics,
        }

    def save(self, directory: str | Path, stem: str | None = None) -> dict[str, Path]:
        """Write ``<stem>.json`` (summary) and ``<stem>.npz`` (values, predictions, confidences).

        Returns:
            ``{"json": path, "npz": path}``.
        """
        from .io import atomic_write_text, save_npz

        directory = Path(directory)
        stem = stem or f"{self.env_name}_{self.dataset_name}"
        arrays = {"values_a": self.values_a, "values_b": self.values_b, "target": self.target, "horizon": self.horizon}
        for name in self.predictions:
            arrays[f"prediction_{name}"] = self.predictions[name]
            arrays[f"confidence_{name}"] = self.confidences[name]
        json_path = atomic_write_text(directory / f"{stem}.json", json.dumps(self.summary(), indent=2, sort_keys=True) + "\n")
        npz_path = save_npz(directory / f"{stem}.npz", arrays, {"env_name": self.env_name, "dataset": self.dataset_name})
        return {"json": json_path, "npz": npz_path}

    def plot_risk_coverage(self, ax=None, confidences: Sequence[str] | None = None):
        """Risk-coverage curves of the confidence functions on one Axes (returned)."""
        from .confidence import CONFIDENCE_NAMES
        from .metrics import plot_risk_coverage

        if ax is None:
            import matplotlib.pyplot as plt

            _, ax = plt.subplots(figsize=(5, 4))
        for name in confidences or list(self.predictions):
            label = CONFIDENCE_NAMES.get(name, name)  # the plot appends the AURCC
            plot_risk_coverage(self.predictions[name], self.target, self.confidences[name], ax=ax, label=label)
        ax.set_title(f"{self.env_name} / {self.dataset_name}, M = {self.ensemble_size}")
        return ax


def select_profile_queries(queries, n: int | None = None, seed: int = 0):
    """A reproducible subset of ``n`` queries (None: the active profile's ``queries_per_env``;
    0 or at least N keeps all), spread evenly over horizons."""
    n = get_profile().queries_per_env if n is None else int(n)
    total = len(queries)
    if n <= 0 or n >= total:
        return queries
    rng = np.random.default_rng(seed)
    horizons = np.asarray(queries.horizon)
    levels, counts = np.unique(horizons, return_counts=True)
    quota = counts * n / total  # proportional allocation, largest remainders round up
    share = np.floor(quota).astype(int)
    share[np.argsort(-(quota - share), kind="stable")[: n - share.sum()]] += 1
    keep = [rng.choice(np.flatnonzero(horizons == h), size=int(c), replace=False) for h, c in zip(levels, share)]
    return queries.select(np.sort(np.concatenate(keep)))


def answer_queries(
    env_name: str,
    dataset_name: str | None = None,
    config: EnsembleConfig | None = None,
    queries=None,
    policies: Sequence[Any] | None = None,
    dataset_size: int | None = None,
    dataset_seed: int = 0,
    runs: int | None = None,
    confidences: Sequence[str] = CONFIDENCE_METHODS,
    k: int = 10,
    device: Any = None,
    cache: bool = True,
    model: DynamicsEnsemble | None = None,
    progress: bool = True,
) -> Answers:
    """Train (or load) an ensemble, estimate every query's values, predict and score.

    Args:
        env_name: environment.
        dataset_name: dataset (None: the environment's default).
        config: the baseline (None: :meth:`EnsembleConfig.from_profile`).
        queries: a :class:`~opcc_edu.queries.QuerySet` (None: the shipped set, reduced to the
            profile's ``queries_per_env`` by :func:`select_profile_queries`).
        policies: query policies, index i = level i + 1 (None: the shipped ones).
        dataset_size: transitions (None: the profile's).
        dataset_seed: seed of the dataset.
        runs: Monte-Carlo runs per member (None: the profile's ``mc_runs``).
        confidences: confidence functions to score.
        k: bins of CR_K.
        device: torch device.
        cache: use the ensemble cache.
        model: use this trained ensemble instead of training/loading one.
        progress: show progress bars.

    Returns:
        :class:`Answers`.
    """
    from .datasets import DEFAULT_DATASET

    config = EnsembleConfig.from_profile() if config is None else config
    dataset_name = DEFAULT_DATASET[env_name] if dataset_name is None else dataset_name
    for name in confidences:
        check_choice(name, CONFIDENCE_METHODS, "confidence")
    if queries is None:
        from .queries import load_queries

        queries = select_profile_queries(load_queries(env_name))
    if queries.env_name != env_name:
        raise ValueError(f"queries are for {queries.env_name!r} but env_name is {env_name!r}")
    runs = get_profile().mc_runs if runs is None else runs
    if model is None:
        model = get_or_train_ensemble(
            env_name, dataset_name, config, dataset_size=dataset_size, dataset_seed=dataset_seed, device=device, progress=progress, cache=cache
        )
    info = getattr(model, "info", {})
    start = time.perf_counter()
    values_a, values_b = estimate_values(model, queries, policies, runs=runs, mixture=config.mixture, seed=config.seed, progress=progress)
    if model.ensemble_size < 2:
        confidences = [c for c in confidences if c == "ev"]
    predictions, confs, metrics = score_values(values_a, values_b, queries.target, queries.horizon, confidences, k)
    return Answers(
        env_name=env_name,
        dataset_name=dataset_name,
        config=config,
        queries=queries,
        values_a=values_a,
        values_b=values_b,
        predictions=predictions,
        confidences=confs,
        metrics=metrics,
        k=k,
        train_seconds=float(info.get("train_seconds", 0.0)),
        answer_seconds=time.perf_counter() - start,
        cache_hit=bool(info.get("cache_hit", False)),
        model_path=info.get("path"),
    )


# --------------------------------------------------------------------------------------------
# The end-to-end job behind `opcc-edu run`
# --------------------------------------------------------------------------------------------
METRIC_COLUMNS: tuple[tuple[str, str], ...] = (("aurcc", "AURCC"), ("rpp", "RPP"), ("cr_k", "CR_K"), ("loss", "loss"))


def format_metrics(answers: Answers) -> str:
    """A plain-text table of AURCC, RPP, CR_K and loss per confidence and horizon."""
    from .confidence import CONFIDENCE_NAMES

    header = f"  {'confidence':<10} {'horizon':>7} " + " ".join(f"{title:>8}" for _, title in METRIC_COLUMNS) + f" {'n':>6}"
    lines = [header, "  " + "-" * (len(header) - 2)]
    table = answers.table()
    for _, row in table.iterrows():
        cells = " ".join(f"{row[key]:>8.4f}" for key, _ in METRIC_COLUMNS)
        lines.append(f"  {CONFIDENCE_NAMES.get(row['confidence'], row['confidence']):<10} {row['horizon']:>7} {cells} {int(row['n']):>6}")
    return "\n".join(lines)


def run_end_to_end(
    env_name: str | None = None,
    dataset_name: str | None = None,
    out: str | Path = "runs",
    config: EnsembleConfig | None = None,
    device: Any = None,
    cache: bool = True,
    progress: bool = True,
    echo=print,
) -> tuple[Answers, dict[str, Path]]:
    """Train or load the ensemble, answer the environment's query set, report and save.

    Writes ``<out>/<env>/<dataset>/results.json`` (setup, timings, every metric),
    ``results.npz`` (member values, predictions, confidences) and ``rcc.png`` (risk-coverage
    curves of EV, PCI and U-PCI).

    Args:
        env_name: environment (None: ``maze2d-umaze``).
        dataset_name: dataset (None: the environment's default).
        out: output directory.
        config: the baseline (None: :meth:`EnsembleConfig.from_profile`).
        device: torch device.
        cache: use the ensemble cache.
        progress: show progress bars.
        echo: where report lines go (``print`` by default).

    Returns:
        ``(answers, paths)`` with keys ``json``, ``npz`` and ``plot``.
    """
    from matplotlib.figure import Figure  # no pyplot: works headless, leaves no open figure

    from .datasets import DEFAULT_DATASET
    from .envs import DEFAULT_ENV

    env_name = DEFAULT_ENV if env_name is None else env_name
    from .envs import get_spec

    get_spec(env_name)  # unknown names fail here, listing the valid ones
    dataset_name = DEFAULT_DATASET[env_name] if dataset_name is None else dataset_name
    config = EnsembleConfig.from_profile() if config is None else config
    profile = get_profile()
    echo(f"opcc-edu run: {env_name} / {dataset_name}, profile {profile.name}")
    echo(
        f"  ensemble: {config.ensemble_size} x {config.model_type.upper()} {list(config.hidden_sizes)}, "
        f"{'stochastic' if config.stochastic else 'deterministic'}, prior scale {config.prior_scale:g}, "
        f"{config.train_steps} steps, seed {config.seed}"
    )
    start = time.perf_counter()
    answers = answer_queries(env_name, dataset_name, config, device=device, cache=cache, progress=progress)
    where = "loaded from the cache" if answers.cache_hit else f"trained in {answers.train_seconds:.1f} s"
    echo(f"  ensemble {where}; {len(answers.target)} queries answered in {answers.answer_seconds:.1f} s")
    echo("")
    echo(format_metrics(answers))
    directory = Path(out) / env_name / dataset_name
    paths = answers.save(directory, stem="results")
    fig = Figure(figsize=(5.5, 4.2), layout="tight")
    answers.plot_risk_coverage(ax=fig.subplots())
    paths["plot"] = directory / "rcc.png"
    fig.savefig(paths["plot"], dpi=120)
    echo("")
    echo(f"  wrote {paths['json']}, {paths['npz']} and {paths['plot']} ({time.perf_counter() - start:.1f} s in total)")
    return answers, paths

