"""A baseline's answers to a query set: values, predictions, confidences, metrics.

:class:`Answers` holds member values (:class:`~opcc_edu.scoring.MemberValues`, none for the
no-model heuristic) and their scores (:mod:`opcc_edu.scoring`, where the package scores), and
derives what is computed from them: the answers of
a prefix of the ensemble, calibrated confidences, the predictor's own metrics, a tidy table.
Producing answers is :mod:`opcc_edu.baselines.pipeline` (:func:`answer_queries`); storing them
:func:`answers_summary` and :func:`save_answers`, below; printing them
:mod:`opcc_edu.baselines.report`; drawing them :func:`opcc_edu.plotting.plot_answers`.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..calibration import calibration_metrics, coverage_table, isotonic_calibration
from ..io import atomic_write_text, save_npz
from ..metrics import query_losses
from ..names import ALL_HORIZONS, METRICS, TIE_FAIR_METRICS
from ..plotting.selective import plot_answers
from ..predictor_metrics import predictor_metrics
from ..scoring import MemberValues, score_answers
from ..utils import check_choice, check_positive_int
from .config import EnsembleConfig, FQEConfig

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

    from ..queries import QuerySet


#: Suffix of the name of a confidence calibrated by :meth:`Answers.with_calibrated`.
CALIBRATED_SUFFIX = "_cal"


@dataclasses.dataclass
class Answers:
    """A baseline's answers to a query set: member values, predictions, confidences, metrics.

    Shapes: N queries, M members. The no-model heuristic has no members: its :attr:`values` is
    None and its answers are its predictions and confidences alone.
    """

    env_name: str
    """Environment of the queries."""
    dataset_name: str
    """Dataset the ensemble was trained on."""
    config: EnsembleConfig | FQEConfig | None
    """The ensemble's configuration (an :class:`~opcc_edu.baselines.FQEConfig` for FQE; None
    for a baseline without a model, the heuristic)."""
    queries: QuerySet
    """The :class:`opcc_edu.queries.QuerySet` answered."""
    values: MemberValues | None
    """The members' (N, M) value estimates of each side; None for a baseline without members
    (the heuristic)."""
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
            fields: the remaining fields (``train_seconds``, ``cache_hit``, ``model_path``).

        Raises:
            ValueError: values of different shapes, a row count other than the queries', or an
                unknown confidence name (the message lists the valid ones).
        """
        started = time.perf_counter() if started is None else started
        values = MemberValues(values_a, values_b, queries.target, queries.horizon)
        scores = values.score(confidences, k=k)
        predictions, confs, metrics = scores.predictions, scores.confidences, scores.table()
        return cls(
            env_name=env_name,
            dataset_name=dataset_name,
            config=config,
            queries=queries,
            values=values,
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
    def baseline(self) -> str:
        """``"ensemble"``, ``"fqe"`` or ``"heuristic"`` (:data:`opcc_edu.names.BASELINES`), by :attr:`config`."""
        return "heuristic" if self.config is None else "fqe" if isinstance(self.config, FQEConfig) else "ensemble"

    @property
    def values_a(self) -> np.ndarray:
        """(N, M) member value estimates of side a (:attr:`values`)."""
        return self._member_values().values_a

    @property
    def values_b(self) -> np.ndarray:
        """(N, M) member value estimates of side b (:attr:`values`)."""
        return self._member_values().values_b

    def _member_values(self) -> MemberValues:
        if self.values is None:
            raise ValueError(f"the {self.baseline} baseline has no members, so no member values")
        return self.values

    @property
    def ensemble_size(self) -> int:
        """Members M whose values are held (1 for the heuristic, scored as one answer)."""
        return 1 if self.values is None else self.values.ensemble_size

    def with_members(self, m: int) -> Answers:
        """The answers of the ensemble made of members 0..m-1 (rescored, no new rollouts)."""
        m = check_positive_int(m, "m")
        if self.config is None:
            raise ValueError(f"the {self.baseline} baseline has no ensemble members to take a prefix of")
        if m > self.ensemble_size:
            raise ValueError(f"m must be at most the ensemble size {self.ensemble_size}, got {m}")
        values = self._member_values().prefix(m)
        base = [name for name in self.predictions if name not in self.calibrated]
        scores = values.score(base, k=self.k)
        predictions, confidences, metrics = scores.predictions, scores.confidences, scores.table()
        prefix = dataclasses.replace(
            self,
            config=dataclasses.replace(self.config, ensemble_size=m),
            values=values,
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
        name = f"{confidence}{CALIBRATED_SUFFIX}" if name is None else name
        if name in self.predictions and name not in self.calibrated:
            raise ValueError(f"name {name!r} is already a confidence of these answers; choose another")
        calibrated = self.calibrate(confidence, folds=folds, seed=seed)
        prediction = self.predictions[confidence]
        metrics = score_answers({name: (prediction, calibrated)}, self.target, self.horizon, k=self.k).table()[name]
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
        if self.config is None:
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
        by_confidence = {
            name: calibration_metrics(
                self.predictions[name],
                self.target,
                self.confidences[name],
                n_bins=n_bins,
                folds=folds,
                seed=seed,
                as_probability=self.config is not None,
            )
            for name in self.predictions
            if name not in self.calibrated
        }
        intervals = None
        if self.config is not None and self.ensemble_size >= 2:
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
        """JSON-ready results: setup, timings, every metric (:func:`answers_summary`)."""
        return answers_summary(self)

    def save(self, directory: str | Path, stem: str | None = None) -> dict[str, Path]:
        """Write ``<stem>.json`` and ``<stem>.npz`` (:func:`save_answers`)."""
        return save_answers(self, directory, stem)

    def plot_risk_coverage(self, ax: Axes | None = None, confidences: Sequence[str] | None = None) -> Axes:
        """Risk-coverage curves of the confidences on one Axes (:func:`opcc_edu.plotting.plot_answers`)."""
        return plot_answers(self, ax=ax, confidences=confidences)


def answers_summary(answers: Answers) -> dict[str, Any]:
    """JSON-ready results: the setup, timings and every metric.

    ``metrics[confidence][horizon]`` holds every key of :func:`opcc_edu.metrics.evaluate`;
    ``paper_metrics`` and ``tie_fair_metrics`` name which of them are the paper's and which
    are tie-fair (ties broken at random, no discount for ties). ``predictor_metrics`` judges
    the value estimates alone (:meth:`predictor_metrics`: DOPE's normalised error, rank
    correlation and regret@1 per horizon) and ``calibration`` the confidences as
    probabilities and the members' intervals (:meth:`calibration`).
    """
    return {
        "env_name": answers.env_name,
        "dataset": answers.dataset_name,
        "n_queries": int(len(answers.target)),
        "queries_recipe": str(answers.queries.metadata.get("recipe", "hard")),
        "baseline": answers.baseline,
        "ensemble_size": answers.ensemble_size,
        "config": None if answers.config is None else answers.config.to_dict(),
        "k": answers.k,
        "train_seconds": answers.train_seconds,
        "answer_seconds": answers.answer_seconds,
        "cache_hit": answers.cache_hit,
        "model_path": answers.model_path,
        "paper_metrics": list(METRICS),
        "tie_fair_metrics": list(TIE_FAIR_METRICS),
        "metrics": answers.metrics,
        "predictor_metrics": answers.predictor_metrics(),
        "calibration": answers.calibration(),
    }


def save_answers(answers: Answers, directory: str | Path, stem: str | None = None) -> dict[str, Path]:
    """Write ``<stem>.json`` (summary) and ``<stem>.npz`` (member values where there are members,
    targets, horizons, predictions, confidences).

    Returns:
        ``{"json": path, "npz": path}``.
    """
    directory = Path(directory)
    stem = stem or f"{answers.env_name}_{answers.dataset_name}"
    arrays = {} if answers.values is None else {"values_a": answers.values_a, "values_b": answers.values_b}
    arrays.update({"target": answers.target, "horizon": answers.horizon})
    for name in answers.predictions:
        arrays[f"prediction_{name}"] = answers.predictions[name]
        arrays[f"confidence_{name}"] = answers.confidences[name]
    json_path = atomic_write_text(
        directory / f"{stem}.json", json.dumps(answers_summary(answers), indent=2, sort_keys=True) + "\n"
    )
    npz_path = save_npz(
        directory / f"{stem}.npz", arrays, {"env_name": answers.env_name, "dataset": answers.dataset_name}
    )
    return {"json": json_path, "npz": npz_path}
