"""A baseline's answers to a query set: values, predictions, confidences, metrics.

:func:`answer_queries` trains (or loads) the ensemble, lets every member estimate both sides
of every query and scores the member values with :func:`opcc_edu.scoring.score_values`, the
one scoring function of the package; :class:`Answers` holds the result.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import get_profile
from ..names import (
    ALL_HORIZONS,
    CONFIDENCE_NAMES,
    CONFIDENCES,
    DEFAULT_QUERY_RECIPE,
    METRICS,
    TIE_FAIR_METRICS,
)
from ..utils import check_choice, check_positive_int
from .config import EnsembleConfig

if TYPE_CHECKING:
    import pandas as pd
    import torch
    from matplotlib.axes import Axes

    from ..dynamics import DynamicsEnsemble
    from ..queries import QuerySet
    from .fqe import FQEConfig


def _metrics_table(
    values_a: np.ndarray,
    values_b: np.ndarray,
    target: np.ndarray,
    horizon: np.ndarray,
    confidences: Sequence[str],
    k: int,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, dict[str, dict[str, float]]]]:
    """``(predictions, confidences, metrics[name][horizon])`` of (N, M) member values."""
    from ..scoring import score_values

    scores = score_values(values_a, values_b, target, horizon, confidences, k=k)
    return scores.predictions, scores.confidences, scores.table()


#: Suffix of the name of a confidence calibrated by :meth:`Answers.with_calibrated`.
CALIBRATED_SUFFIX = "_cal"


def _plain_metrics(metrics: dict[str, Any]) -> dict[str, float | int]:
    # as opcc_edu.scoring's rows: ``n`` an int, every other metric a float
    return {key: (int(v) if key == "n" else float(v)) for key, v in metrics.items()}


@dataclasses.dataclass
class Answers:
    """A baseline's answers to a query set: member values, predictions, confidences, metrics.

    Shapes: N queries, M members.
    """

    env_name: str
    """Environment of the queries."""
    dataset_name: str
    """Dataset the ensemble was trained on."""
    config: EnsembleConfig | FQEConfig | None
    """The ensemble's configuration (an :class:`~opcc_edu.baselines.fqe.FQEConfig` for FQE; None
    for a baseline without a model, the heuristic)."""
    queries: QuerySet
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
    baseline: str = "ensemble"
    """``"ensemble"``, ``"heuristic"`` or ``"fqe"`` (:data:`opcc_edu.names.BASELINES`)."""
    calibrated: dict[str, tuple[str, int, int]] = dataclasses.field(default_factory=dict)
    """Confidences added by :meth:`with_calibrated`: name -> (source confidence, folds, seed)."""

    @classmethod
    def from_values(
        cls,
        env_name: str,
        dataset_name: str,
        config: EnsembleConfig | FQEConfig,
        queries: QuerySet,
        values_a: np.ndarray,
        values_b: np.ndarray,
        confidences: Sequence[str],
        k: int = 10,
        started: float | None = None,
        **fields: Any,
    ) -> Answers:
        """Score (N, M) member values of a model-based or model-free baseline.

        Every confidence in ``confidences`` predicts and is scored by every metric per horizon
        (:func:`opcc_edu.scoring.score_values`). Shapes: N queries, M members.

        Args:
            env_name, dataset_name, config, queries, k: as the fields.
            values_a, values_b: (N, M) member values of each side, row i for ``queries[i]``.
            confidences: confidence functions to score.
            started: ``time.perf_counter()`` when value estimation began; ``answer_seconds``
                runs from it to the end of scoring (None: scoring only).
            fields: the remaining fields (``train_seconds``, ``cache_hit``, ``model_path``,
                ``baseline``).

        Raises:
            ValueError: values of different shapes, a row count other than the queries', or an
                unknown confidence name (the message lists the valid ones).
        """
        started = time.perf_counter() if started is None else started
        target, horizon = queries.target, queries.horizon
        predictions, confs, metrics = _metrics_table(values_a, values_b, target, horizon, confidences, k)
        return cls(
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
            answer_seconds=time.perf_counter() - started,
            **fields,
        )

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
        """Members M whose values are held."""
        return int(self.values_a.shape[1])

    def with_members(self, m: int) -> Answers:
        """The answers of the ensemble made of members 0..m-1 (rescored, no new rollouts)."""
        m = check_positive_int(m, "m")
        if self.config is None:
            raise ValueError(f"the {self.baseline} baseline has no ensemble members to take a prefix of")
        if m > self.ensemble_size:
            raise ValueError(f"m must be at most the ensemble size {self.ensemble_size}, got {m}")
        va, vb = self.values_a[:, :m], self.values_b[:, :m]
        base = [name for name in self.predictions if name not in self.calibrated]
        predictions, confidences, metrics = _metrics_table(va, vb, self.target, self.horizon, base, self.k)
        prefix = dataclasses.replace(
            self,
            config=dataclasses.replace(self.config, ensemble_size=m),
            values_a=va,
            values_b=vb,
            predictions=predictions,
            confidences=confidences,
            metrics=metrics,
            calibrated={},
        )
        for name, (source, folds, seed) in self.calibrated.items():
            if source in prefix.predictions:  # PCI and U-PCI need two members
                prefix = prefix.with_calibrated(source, folds=folds, seed=seed, name=name)
        return prefix

    def calibrate(self, confidence: str = "pci", folds: int = 2, seed: int = 0) -> np.ndarray:
        """(N,) calibrated confidence: the cross-fitted probability that ``confidence``'s answer is right.

        An isotonic regression from the confidence to the 0/1 correctness of its answers, fitted
        on all folds but one and applied to that one (:func:`opcc_edu.calibration.isotonic_calibration`).

        Args:
            confidence: a confidence held (a key of :attr:`confidences`).
            folds: parts of the cross-fit (>= 2).
            seed: seed of the split into parts.
        """
        from ..calibration import isotonic_calibration
        from ..metrics import query_losses

        check_choice(confidence, self.confidences, "confidence")
        correct = 1 - query_losses(self.predictions[confidence], self.target)
        return isotonic_calibration(self.confidences[confidence], correct, folds=folds, seed=seed)

    def with_calibrated(
        self, confidence: str = "pci", folds: int = 2, seed: int = 0, name: str | None = None
    ) -> Answers:
        """These answers with one more confidence function: ``confidence`` calibrated by :meth:`calibrate`.

        It keeps the predictions of ``confidence`` and is scored by every metric, per horizon and
        overall, under ``name`` (default ``"<confidence>_cal"``), so :meth:`table`,
        :func:`format_metrics` and :meth:`summary` show it beside the others.
        """
        from ..metrics import evaluate

        name = f"{confidence}{CALIBRATED_SUFFIX}" if name is None else name
        if name in self.predictions and name not in self.calibrated:
            raise ValueError(f"name {name!r} is already a confidence of these answers; choose another")
        calibrated = self.calibrate(confidence, folds=folds, seed=seed)
        prediction = self.predictions[confidence]
        metrics = {ALL_HORIZONS: _plain_metrics(evaluate(prediction, self.target, calibrated, k=self.k))}
        for h in np.unique(self.horizon):
            mask = self.horizon == h
            metrics[str(int(h))] = _plain_metrics(
                evaluate(prediction[mask], self.target[mask], calibrated[mask], k=self.k)
            )
        return dataclasses.replace(
            self,
            predictions={**self.predictions, name: prediction},
            confidences={**self.confidences, name: calibrated},
            metrics={**self.metrics, name: metrics},
            calibrated={**self.calibrated, name: (confidence, folds, seed)},
        )

    def predictor_metrics(self) -> dict[str, dict[str, float | int | None]] | None:
        """DOPE's metrics of the member-mean value estimates, per horizon and overall.

        See :func:`opcc_edu.predictor_metrics.predictor_metrics`. None for the heuristic, whose
        scores are not values.
        """
        from ..predictor_metrics import predictor_metrics

        if self.baseline == "heuristic":
            return None
        return predictor_metrics(self.queries, self.values_a.mean(axis=1), self.values_b.mean(axis=1))

    def calibration(self, n_bins: int = 10, folds: int = 2, seed: int = 0) -> dict[str, Any]:
        """How well the confidences read as probabilities, and how well member intervals cover.

        Returns:
            ``{"confidence": {name: ...}, "intervals": ...}``: for every confidence held (the
            calibrated ones excepted) the ECE, Brier score and AUROC of its probability reading
            (none for the heuristic, whose confidence is not in [0, 1]) and of its cross-fitted
            isotonic calibration
            (:func:`opcc_edu.calibration.calibration_metrics`); and, with two members or more,
            the coverage of the members' value intervals per kind and horizon
            (:func:`opcc_edu.calibration.coverage_table`; None otherwise). JSON-ready.
        """
        from ..calibration import calibration_metrics, coverage_table

        by_confidence = {
            name: calibration_metrics(
                self.predictions[name],
                self.target,
                self.confidences[name],
                n_bins=n_bins,
                folds=folds,
                seed=seed,
                as_probability=self.baseline != "heuristic",
            )
            for name in self.predictions
            if name not in self.calibrated
        }
        intervals = None
        if self.baseline != "heuristic" and self.ensemble_size >= 2:
            q = self.queries
            intervals = coverage_table(self.values_a, self.values_b, q.value_a, q.value_b, self.horizon)
        return {"confidence": by_confidence, "intervals": intervals}

    def table(self) -> pd.DataFrame:
        """Metrics as a tidy ``pandas.DataFrame``: one row per (confidence, horizon).

        Columns: confidence, horizon, the paper's metrics (:data:`opcc_edu.names.METRICS`), the
        tie-fair ones beside them (:data:`opcc_edu.names.TIE_FAIR_METRICS`), then ``n`` and
        the other keys of :func:`opcc_edu.metrics.evaluate`.
        """
        import pandas as pd

        rows = []
        for name, by_h in self.metrics.items():
            for h, values in by_h.items():
                rows.append({"confidence": name, "horizon": h, **values})
        frame = pd.DataFrame(rows)
        first = ["confidence", "horizon", *METRICS, *TIE_FAIR_METRICS, "n"]
        columns = [c for c in first if c in frame.columns] + [c for c in frame.columns if c not in first]
        order = {
            h: i for i, h in enumerate(sorted({r["horizon"] for r in rows if r["horizon"] != ALL_HORIZONS}, key=int))
        }
        order[ALL_HORIZONS] = len(order)
        return (
            frame[columns]
            .sort_values(["confidence", "horizon"], key=lambda s: s.map(order) if s.name == "horizon" else s)
            .reset_index(drop=True)
        )

    def summary(self) -> dict[str, Any]:
        """JSON-ready results: the setup, timings and every metric.

        ``metrics[confidence][horizon]`` holds every key of :func:`opcc_edu.metrics.evaluate`;
        ``paper_metrics`` and ``tie_fair_metrics`` name which of them are the paper's and which
        are tie-fair (ties broken at random, no discount for ties). ``predictor_metrics`` judges
        the value estimates alone (:meth:`predictor_metrics`: DOPE's normalised error, rank
        correlation and regret@1 per horizon) and ``calibration`` the confidences as
        probabilities and the members' intervals (:meth:`calibration`).
        """
        return {
            "env_name": self.env_name,
            "dataset": self.dataset_name,
            "n_queries": int(len(self.target)),
            "queries_recipe": str(self.queries.metadata.get("recipe", "hard")),
            "baseline": self.baseline,
            "ensemble_size": self.ensemble_size,
            "config": None if self.config is None else self.config.to_dict(),
            "k": self.k,
            "train_seconds": self.train_seconds,
            "answer_seconds": self.answer_seconds,
            "cache_hit": self.cache_hit,
            "model_path": self.model_path,
            "paper_metrics": list(METRICS),
            "tie_fair_metrics": list(TIE_FAIR_METRICS),
            "metrics": self.metrics,
            "predictor_metrics": self.predictor_metrics(),
            "calibration": self.calibration(),
        }

    def save(self, directory: str | Path, stem: str | None = None) -> dict[str, Path]:
        """Write ``<stem>.json`` (summary) and ``<stem>.npz`` (values, predictions, confidences).

        Returns:
            ``{"json": path, "npz": path}``.
        """
        from ..io import atomic_write_text, save_npz

        directory = Path(directory)
        stem = stem or f"{self.env_name}_{self.dataset_name}"
        arrays = {"values_a": self.values_a, "values_b": self.values_b, "target": self.target, "horizon": self.horizon}
        for name in self.predictions:
            arrays[f"prediction_{name}"] = self.predictions[name]
            arrays[f"confidence_{name}"] = self.confidences[name]
        json_path = atomic_write_text(
            directory / f"{stem}.json", json.dumps(self.summary(), indent=2, sort_keys=True) + "\n"
        )
        npz_path = save_npz(
            directory / f"{stem}.npz", arrays, {"env_name": self.env_name, "dataset": self.dataset_name}
        )
        return {"json": json_path, "npz": npz_path}

    def plot_risk_coverage(self, ax: Axes | None = None, confidences: Sequence[str] | None = None) -> Axes:
        """Risk-coverage curves of the confidence functions on one Axes (returned).

        Each curve is drawn by :func:`opcc_edu.plotting.plot_risk_coverage` (a new Axes when
        ``ax`` is None), labelled with the confidence's display name and its AURCC.
        """
        from ..plotting import plot_risk_coverage

        for name in confidences or list(self.predictions):
            ax = plot_risk_coverage(
                self.predictions[name],
                self.target,
                self.confidences[name],
                ax=ax,
                label=CONFIDENCE_NAMES.get(name, name),
            )
        if self.config is None:
            ax.set_title(f"{self.env_name}: {self.baseline} (no model)")
        else:
            ax.set_title(f"{self.env_name} / {self.dataset_name}, M = {self.ensemble_size}")
        return ax


def answer_queries(
    env_name: str,
    dataset_name: str | None = None,
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
    """Train (or load) an ensemble, estimate every query's values, predict and score.

    Args:
        env_name: environment.
        dataset_name: dataset (None: the environment's default).
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
    from ..datasets import DEFAULT_DATASET
    from .cache import get_or_train_ensemble
    from .estimate import estimate_values, select_profile_queries

    config = EnsembleConfig.from_profile() if config is None else config
    dataset_name = DEFAULT_DATASET[env_name] if dataset_name is None else dataset_name
    for name in confidences:
        check_choice(name, CONFIDENCES, "confidence")
    if queries is None:
        from ..queries import load_queries

        queries = select_profile_queries(load_queries(env_name, recipe))
    if queries.env_name != env_name:
        raise ValueError(f"queries are for {queries.env_name!r} but env_name is {env_name!r}")
    runs = get_profile().mc_runs if runs is None else runs
    if model is None:
        model = get_or_train_ensemble(
            env_name,
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
        env_name,
        dataset_name,
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

    The values held are the rule's (N, 1) scores of each side; predictions and confidences are
    the rule's, under the confidence name ``"heuristic"``, scored by the same metrics.

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
        values_a=rule.score_a[:, None],
        values_b=rule.score_b[:, None],
        predictions={"heuristic": rule.prediction},
        confidences={"heuristic": rule.confidence},
        metrics=metrics,
        k=k,
        answer_seconds=time.perf_counter() - start,
        baseline="heuristic",
    )


METRIC_COLUMNS: tuple[tuple[str, str], ...] = (
    *((key, "loss" if key == "loss" else key.upper()) for key in METRICS),
    ("expected_aurcc", "E[AURCC]"),
    ("selective_gain", "gain"),
    ("auroc", "AUROC"),
)
"""(key, column title) of the metrics :func:`format_metrics` prints: the paper's AURCC, RPP,
CR_K and loss, then the tie-fair E[AURCC] (:func:`opcc_edu.metrics.expected_aurcc`), selective
gain and AUROC."""

#: The note under :func:`format_metrics`'s table: what the tie-fair columns mean.
TIE_FAIR_NOTE = (
    "E[AURCC], gain, AUROC: tie-fair (tied confidences ordered at random: ties earn no discount);\n"
    "gain 1 = perfect ordering, 0 = no better than random, < 0 = worse"
)


def format_metrics(answers: Answers) -> str:
    """A plain-text table per confidence and horizon: the paper's AURCC, RPP, CR_K and loss, the
    tie-fair E[AURCC], selective gain and AUROC beside them (:data:`METRIC_COLUMNS`), and n;
    then a note on the tie-fair columns (:data:`TIE_FAIR_NOTE`)."""
    header = (
        f"  {'confidence':<10} {'horizon':>7} " + " ".join(f"{title:>8}" for _, title in METRIC_COLUMNS) + f" {'n':>6}"
    )
    lines = [header, "  " + "-" * (len(header) - 2)]
    table = answers.table()
    for _, row in table.iterrows():
        cells = " ".join(f"{row[key]:>8.4f}" for key, _ in METRIC_COLUMNS)
        name = CONFIDENCE_NAMES.get(row["confidence"], row["confidence"])
        lines.append(f"  {name:<10} {row['horizon']:>7} {cells} {int(row['n']):>6}")
    lines += [f"  {line}" for line in TIE_FAIR_NOTE.split("\n")]
    return "\n".join(lines)


def format_predictor_metrics(answers: Answers) -> str:
    """A plain-text table per horizon: the PCQ loss of the member-mean answer beside DOPE's
    normalised absolute error, rank correlation and normalised regret@1 of the member-mean
    values (:meth:`Answers.predictor_metrics`), with the start states they are averaged over.
    Empty for the heuristic, which estimates no values."""
    from ..metrics import query_losses

    table = answers.predictor_metrics()
    if table is None:
        return ""
    # the member-mean answer (a zero difference predicts 1), as PCI and U-PCI predict
    prediction = (answers.values_a.mean(axis=1) - answers.values_b.mean(axis=1) <= 0).astype(np.int8)
    loss = query_losses(prediction, answers.target)
    header = f"  {'horizon':>7} {'loss':>8} {'NAE':>8} {'rank corr':>10} {'regret@1':>9} {'starts':>7}"
    lines = [header, "  " + "-" * (len(header) - 2)]
    for h, row in table.items():
        mask = np.ones(loss.size, dtype=bool) if h == ALL_HORIZONS else answers.horizon == int(h)
        cells = [
            f"{value:>{width}.4f}" if value is not None else f"{'-':>{width}}"
            for value, width in (
                (row["normalized_abs_error"], 8),
                (row["rank_correlation"], 10),
                (row["normalized_regret_at_1"], 9),
            )
        ]
        lines.append(f"  {h:>7} {loss[mask].mean():>8.4f} {' '.join(cells)} {row['n_groups']:>7}")
    lines.append("  loss: PCQ 0/1 loss of the member-mean answer; NAE, regret@1: normalised by the range of true")
    lines.append("  values per horizon; rank corr: Spearman across the policies of a start state (starts: 2+ sides)")
    return "\n".join(lines)
