"""The registry of the paper's ablations: factors, levels and configuration labels.

An :class:`Ablation` varies one factor of the baseline, whose defaults (the paper's default
model, :data:`opcc_edu.baselines.config.BASELINE_DEFAULTS`) are declared with the ensemble's
configuration. A *selection* factor (``dataset``, ``horizon``, ``confidence``,
``ensemble_count``) is read from the runs of the default configuration; a *configuration*
factor is a field of :data:`BASELINE_DEFAULTS` and trains one configuration per level. A
configuration is named by :func:`configuration_label`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...baselines.config import BASELINE_DEFAULTS
from ...dynamics.spec import DEFAULT_AR_TARGETS, LEGACY_AR_TARGETS, check_ar_targets, clip_text
from ...utils import check_choice

__all__ = [
    "BASELINE_DEFAULTS",
    "PAPER_ENSEMBLE_COUNTS",
    "SELECTION_FACTORS",
    "SUB_OPTIONS",
    "Level",
    "Ablation",
    "ABLATIONS",
    "get_ablation",
    "configuration_label",
    "parse_configuration",
    "ensemble_count_levels",
]

#: Ensemble sizes of the paper's ensemble-count ablation (Tables 5 and 18), read as prefixes of
#: one 100-member ensemble.
PAPER_ENSEMBLE_COUNTS: tuple[int, ...] = (10, 20, 40, 80, 100)

#: Factors whose levels are read from the default configuration's runs (columns of the results).
SELECTION_FACTORS: tuple[str, ...] = ("dataset", "horizon", "confidence", "ensemble_count")

#: Configuration fields that are not factors of the paper's baseline but sub-options of one:
#: ``ar_targets``, the training objective of the autoregressive model (``model_type="ar"``).
SUB_OPTIONS: dict[str, Any] = {"ar_targets": DEFAULT_AR_TARGETS}


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
        """The display name: :attr:`title`, else :attr:`label`."""
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
        return self.factor in SELECTION_FACTORS

    def configurations(self) -> tuple[dict[str, Any], ...]:
        """Override dicts of the configurations this ablation trains (default first)."""
        if self.is_selection:
            return ({},)
        return tuple(dict(level.overrides) for level in self.levels)


def format_value(value: Any) -> str:
    """Text of a configuration value in labels and CSV files (``true``, ``5``, ``ar``)."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (float, np.floating)):
        return f"{float(value):g}"
    return str(value)


def _switch(factor: str, reference: Any, other: Any, titles: tuple[str, str]) -> tuple[Level, ...]:
    """Two levels of an on/off factor, the paper's default first."""
    return (
        Level(format_value(reference), {factor: reference}, titles[0]),
        Level(format_value(other), {factor: other}, titles[1]),
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
            paper_finding="AURCC barely moves between 10 and 100 members, while RPP and CR_K change significantly.",
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
            hypothesis="Sampling next states from a learned Gaussian adds aleatoric spread to each member's estimate.",
            paper_finding="No significant difference between deterministic and stochastic members.",
        ),
        Ablation(
            name="model-type",
            title="Feed-forward vs autoregressive models",
            factor="model_type",
            levels=(
                Level("ff", {"model_type": "ff"}, "feed-forward"),
                Level("ar", {"model_type": "ar", "ar_targets": "all"}, "autoregressive"),
            ),
            paper_tables=(7, 13),
            hypothesis="Autoregressive models (Zhang et al.) predict one dimension at a time, "
            "conditioned on the others, and should capture the dynamics better.",
            paper_finding="No significant AURCC gain; AR raises CR_K on HalfCheetah, Hopper and Walker2d.",
        ),
        Ablation(
            name="normalization",
            title="Input normalization",
            factor="normalize",
            levels=_switch("normalize", True, False, ("normalized", "raw")),
            paper_tables=(14, 15),
            hypothesis="Standardised inputs ease optimisation when state dimensions have very different scales.",
            paper_finding="Marginal on locomotion; in the mazes Table 15 shows a lower AURCC with "
            "normalization in the large maze and a higher one in umaze.",
        ),
        Ablation(
            name="clipping",
            title="Clipping predictions to a box around the data",
            factor="clip",
            levels=(
                Level("health", {"clip": "health"}, "data's box, reaching the health limits"),
                Level("transitions", {"clip": "transitions"}, "data's box"),
                Level("observations", {"clip": "observations"}, "observations' box"),
                Level("none", {"clip": "none"}, "unclipped"),
            ),
            paper_tables=(),
            hypothesis="Clipping predicted observations and rewards to the dataset's range keeps "
            "a rollout's compounding errors from diverging; a box that cannot reach the "
            "termination region hides every fall the data never showed.",
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
            name="reward",
            title="Learned vs predefined reward",
            factor="reward",
            levels=(
                Level("learned", {"reward": "learned"}),
                Level("predefined", {"reward": "predefined"}),
            ),
            paper_tables=(),
            hypothesis="Applying the environment's known reward function to predicted transitions "
            "(PETS) removes the reward model's error; value errors then come from the dynamics alone.",
            paper_finding="Not studied in the paper, which learns the reward.",
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
    """Return the registered :class:`Ablation` called ``name`` (or ``name`` itself).

    Raises:
        ValueError: for an unknown name, listing the registered ones.
    """
    if isinstance(name, Ablation):
        return name
    check_choice(name, ABLATIONS, "ablation")
    return ABLATIONS[name]


def _value_text(key: str, value: Any) -> str:
    """A field's value as labels write it; the clip box through
    :func:`~opcc_edu.dynamics.spec.clip_text` (``clip=false`` is still the unclipped run)."""
    return format_value(clip_text(value) if key == "clip" else value)


def configuration_label(overrides: Mapping[str, Any] | None = None) -> str:
    """Canonical label of a configuration: ``"default"`` or ``"key=value;..."`` (sorted).

    Overrides equal to :data:`BASELINE_DEFAULTS` are dropped, so ``{"prior_scale": 0}`` and
    ``{}`` name the same run. The autoregressive model's training objective ``ar_targets``
    (:data:`SUB_OPTIONS`) is named whenever it differs from the objective of the runs labelled
    before it existed (one random dimension per row): ``{"model_type": "ar"}`` -- every
    dimension, the default -- is ``"ar_targets=all;model_type=ar"``, while
    ``{"model_type": "ar", "ar_targets": "one"}`` keeps the older label ``"model_type=ar"``.

    Raises:
        ValueError: for a key that is neither a field of :data:`BASELINE_DEFAULTS` nor of
            :data:`SUB_OPTIONS`, or an ``ar_targets`` that is unknown or set for a
            feed-forward model.
    """
    overrides = dict(overrides or {})
    fields = {**BASELINE_DEFAULTS, **SUB_OPTIONS}
    parts = {}
    for key in sorted(overrides):
        check_choice(key, fields, "configuration field")
        text = _value_text(key, overrides[key])
        if key not in SUB_OPTIONS and text != _value_text(key, BASELINE_DEFAULTS[key]):
            parts[key] = f"{key}={text}"
    model_type = format_value(overrides.get("model_type", BASELINE_DEFAULTS["model_type"]))
    ar_targets = check_ar_targets(overrides.get("ar_targets", DEFAULT_AR_TARGETS), model_type)
    if model_type == "ar" and ar_targets != LEGACY_AR_TARGETS:
        parts["ar_targets"] = f"ar_targets={ar_targets}"
    return ";".join(parts[key] for key in sorted(parts)) or "default"


def parse_configuration(label: str) -> dict[str, Any]:
    """The overrides named by a :func:`configuration_label` (its inverse).

    A label with ``model_type=ar`` and no ``ar_targets`` names the one-dimension objective
    (``"ar_targets": "one"``), the only one before the field existed.

    Raises:
        ValueError: for a field that is neither one of :data:`BASELINE_DEFAULTS` nor of
            :data:`SUB_OPTIONS`.
    """
    if label == "default":
        return {}
    fields = {**BASELINE_DEFAULTS, **SUB_OPTIONS}
    out: dict[str, Any] = {}
    for part in label.split(";"):
        key, text = part.split("=", 1)
        reference = fields[check_choice(key, fields, "configuration field")]
        if key == "clip":  # the boxes of the older on/off field keep their labels
            out[key] = {"true": "transitions", "false": "none"}.get(text, text)
        elif isinstance(reference, bool):
            out[key] = text == "true"
        elif isinstance(reference, float):
            out[key] = float(text)
        else:
            out[key] = text
    if out.get("model_type") == "ar" and "ar_targets" not in out:
        out["ar_targets"] = LEGACY_AR_TARGETS
    return out


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
