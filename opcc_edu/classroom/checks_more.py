"""Trusted checks of assignments 3 to 5 (see :mod:`opcc_edu.classroom.checks` for the design)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..baselines import answer_queries
from ..confidence import (
    compute_confidence,
    ensemble_voting,
    paired_confidence_interval,
    synthetic_ensemble,
    unpaired_confidence_interval,
)
from ..metrics import coverage_resolution, evaluate, mean_confidence_interval, selective_gain
from .assignments import baseline_selective_gains, check_confidence_output, design_task_data

_LOPSIDED = """
import numpy as np


def lopsided(values_a, values_b):
    return (values_a.mean(1) < values_b.mean(1)).astype(int), np.abs(values_a.mean(1))
"""

_NEVER_FLIPS = """
import numpy as np


def never_flips(values_a, values_b):
    return np.ones(len(values_a), dtype=int), np.abs(values_a.mean(1) - values_b.mean(1))
"""

_PCI = "from opcc_edu.confidence import paired_confidence_interval as pci_reference\n"


def _ensemble_cases() -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(31)
    cases = []
    for n, m, seed in ((60, 2, 1), (80, 5, 2), (120, 16, 3)):
        data = synthetic_ensemble(n, m, seed=seed)
        cases.append((data.values_a, data.values_b))
    steps = rng.integers(0, 4, size=(100, 7)).astype(float)
    cases.append((steps, rng.integers(0, 4, size=(100, 7)).astype(float)))
    same = rng.normal(size=(20, 6))
    cases.append((same, same.copy()))
    constant_gap = np.tile(rng.normal(size=(20, 1)), (1, 6))
    cases.append((constant_gap, constant_gap + 1.5))
    return cases


def register_more(check, builder, Context, _arr, _pair) -> None:  # noqa: N803, C901 - registration
    """Register the builders and checks of the ensemble, design and ablation assignments."""

    # ----------------------------------------------------------------------------------------
    # 3. Confidence from an ensemble
    # ----------------------------------------------------------------------------------------
    @builder("ensemble_confidence")
    def _build_ensemble() -> dict[str, Any]:
        data = synthetic_ensemble(300, 10, seed=0)
        given = [data.values_a, data.values_b]
        cases = _ensemble_cases()
        out: dict[str, Any] = {"given": given}
        for name, fn in (
            ("ev", ensemble_voting),
            ("pci", paired_confidence_interval),
            ("upci", unpaired_confidence_interval),
        ):
            out[name] = {"given": list(fn(*given)), "hidden": [[a, b, *fn(a, b)] for a, b in cases]}
        symmetric = synthetic_ensemble(150, 8, seed=12)
        out["swap"] = [symmetric.values_a, symmetric.values_b]
        return out

    def _same_confidence(got: Any, expected_prediction: Any, expected_confidence: Any, name: str) -> None:
        prediction, confidence = _pair(got)
        tolerance = {} if name == "ev" else {"rtol": 0, "atol": 1e-9}
        assert prediction.shape == confidence.shape == np.shape(expected_prediction), "wrong shape"
        assert np.array_equal(prediction, expected_prediction), "predictions differ"
        assert np.allclose(confidence.astype(float), expected_confidence, **tolerance), "confidences differ"

    def _ensemble_checks(question: str, name: str) -> None:
        def given(ctx: Context) -> None:
            _same_confidence(ctx.call(name, *ctx.data["given"]), *ctx.data[name]["given"], name)

        def hidden(ctx: Context) -> None:
            for a, b, prediction, confidence in ctx.data[name]["hidden"]:
                _same_confidence(ctx.call(name, a, b), prediction, confidence, name)

        check("ensemble_confidence", question)(given)
        check("ensemble_confidence", question)(hidden)

    for question, name in (("q1", "ev"), ("q2", "pci"), ("q3", "upci")):
        _ensemble_checks(question, name)

    @check("ensemble_confidence", "q4")
    def _symmetry(ctx: Context) -> None:
        expected = {"EV": False, "PCI": True, "U-PCI": True}
        assert ctx.value("symmetric") == expected, (
            "PCI and U-PCI are symmetric; EV is not when members tie (a tie votes 0 in both orders)"
        )

    @check("ensemble_confidence", "q4")
    def _swap_symmetric(ctx: Context) -> None:
        a, b = ctx.data["swap"]
        fn = {"__fn__": "pci_reference", "source": _PCI}
        assert ctx.call("swap_symmetric", fn, a, b, raw_args=(0,)) is True
        lopsided = {"__fn__": "lopsided", "source": _LOPSIDED}
        never = {"__fn__": "never_flips", "source": _NEVER_FLIPS}
        assert ctx.call("swap_symmetric", lopsided, a, b, raw_args=(0,)) is False
        assert ctx.call("swap_symmetric", never, a, b, raw_args=(0,)) is False
        same = np.tile(a[:, :1], (1, 8))
        assert ctx.call("swap_symmetric", never, same, same, raw_args=(0,)) is True, "equal means are not checked"

    # ----------------------------------------------------------------------------------------
    # 4. Design a confidence function
    # ----------------------------------------------------------------------------------------
    @builder("design_confidence")
    def _build_design() -> dict[str, Any]:
        out = {}
        for split in ("tuning", "held_out"):
            data = design_task_data(split)
            out[split] = {
                "values": [data.values_a, data.values_b],
                "target": data.target,
                "baselines": baseline_selective_gains(data.values_a, data.values_b, data.target),
            }
        return out

    def _design_output(ctx: Context, split: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        half = ctx.data[split]
        cache = ctx.data.setdefault("_outputs", {})
        if split not in cache:
            try:
                cache[split] = ctx.call("my_confidence", *half["values"])
            except Exception as exc:  # noqa: BLE001 - remembered, so one failure is one call
                cache[split] = exc
        if isinstance(cache[split], Exception):
            raise cache[split]
        prediction, confidence = check_confidence_output(tuple(cache[split]), len(half["target"]))
        return prediction, confidence, half["target"]

    @check("design_confidence", "q1")
    def _baseline_gains(ctx: Context) -> None:
        gains, expected = ctx.value("baseline_gains"), ctx.data["tuning"]["baselines"]
        assert isinstance(gains, dict) and set(gains) == set(expected), f"keys must be {sorted(expected)}"
        for label, gain in expected.items():
            assert np.isclose(float(gains[label]), gain), f"{label}: not its selective gain on the tuning half"

    def _gain_check(split: str, baseline: str, strict: bool) -> None:
        def run(ctx: Context) -> None:
            prediction, confidence, target = _design_output(ctx, split)
            gain = selective_gain(prediction, target, confidence)
            reference = ctx.data[split]["baselines"][baseline]
            ok = gain > reference if strict else gain >= reference
            assert ok, f"{split} selective gain {gain:.3f} does not reach {baseline}'s {reference:.3f}"

        check("design_confidence", "q2")(run)

    _gain_check("tuning", "EV", True)
    _gain_check("held_out", "EV", True)
    _gain_check("held_out", "U-PCI", False)
    _gain_check("held_out", "PCI", False)

    def _resolution_check(split: str) -> None:
        def run(ctx: Context) -> None:
            prediction, confidence, target = _design_output(ctx, split)
            resolution = coverage_resolution(prediction, target, confidence)
            assert resolution >= 0.9, f"CR_10 is {resolution:.1f} on the {split} half: too many ties"

        check("design_confidence", "q3")(run)

    _resolution_check("tuning")
    _resolution_check("held_out")

    # ----------------------------------------------------------------------------------------
    # 5. Mini-research: one ablation
    # ----------------------------------------------------------------------------------------
    @builder("mini_ablation")
    def _build_ablation() -> dict[str, Any]:
        answers = answer_queries("maze2d-umaze", progress=False)
        return {"values_a": answers.values_a, "values_b": answers.values_b, "target": np.asarray(answers.target)}

    def _results(ctx: Context) -> Any:
        import pandas as pd

        results = ctx.value("results")
        assert isinstance(results, pd.DataFrame), "results must be a pandas DataFrame"
        return results

    @check("mini_ablation", "q1")
    def _table_shape(ctx: Context) -> None:
        results, factor = _results(ctx), ctx.value("factor")
        required = {"factor", "level", "seed", "aurcc", "selective_gain", "cr_k"}
        assert required <= set(results.columns), f"missing columns: {sorted(required - set(results.columns))}"
        assert factor in ("ensemble_size", "confidence") and set(results["factor"]) == {factor}
        per_level = results.groupby(results["level"].astype(str))["seed"].nunique()
        assert len(per_level) >= 2, "at least two levels"
        assert (per_level >= 3).all(), "at least three seeds per level"
        assert not results.duplicated(["level", "seed"]).any(), "one row per (level, seed)"
        assert results["aurcc"].between(0, 1).all() and results["cr_k"].between(0, 1).all()

    @check("mini_ablation", "q1")
    def _table_recipe(ctx: Context) -> None:
        results, factor, d = _results(ctx), ctx.value("factor"), ctx.data
        assert len(results) <= 500, "at most 500 rows"
        for row in results.itertuples():
            size = int(row.level) if factor == "ensemble_size" else 6
            members = np.random.default_rng(int(row.seed)).choice(d["values_a"].shape[1], size=size, replace=False)
            name = "pci" if factor == "ensemble_size" else str(row.level)
            prediction, confidence = compute_confidence(name, d["values_a"][:, members], d["values_b"][:, members])
            scores = evaluate(prediction, d["target"], confidence)
            for metric in ("aurcc", "selective_gain", "cr_k"):
                assert np.isclose(float(getattr(row, metric)), scores[metric]), (row.level, row.seed, metric)

    @check("mini_ablation", "q2")
    def _summary_shape(ctx: Context) -> None:
        import pandas as pd

        summary, levels = ctx.value("summary"), ctx.value("levels")
        assert isinstance(summary, pd.DataFrame) and {"level", "mean", "half_width"} <= set(summary.columns)
        assert [str(x) for x in summary["level"]] == [str(x) for x in levels], "one row per level, in order"
        half = summary["half_width"].to_numpy(dtype=float)
        assert np.all(np.isfinite(half)) and (half > 0).all(), (
            "every half-width must be finite and positive: a level's seeds must draw different members "
            "(ensemble sizes between 2 and M - 1)"
        )

    @check("mini_ablation", "q2")
    def _summary_values(ctx: Context) -> None:
        summary, results = ctx.value("summary"), _results(ctx)
        for row in summary.itertuples():
            gains = results.loc[results["level"].astype(str) == str(row.level), "selective_gain"].to_numpy(dtype=float)
            mean, half_width = mean_confidence_interval(gains)
            assert np.isclose(float(row.mean), mean) and np.isclose(float(row.half_width), half_width), row.level

    @check("mini_ablation", "q3")
    def _verdict_choice(ctx: Context) -> None:
        verdict = ctx.value("verdict")
        assert verdict in ("better", "worse", "not separated"), f"unknown verdict {verdict!r}"

    @check("mini_ablation", "q3")
    def _verdict_agrees(ctx: Context) -> None:
        # the book's rule: the paired interval (last level minus first, seed by seed) excludes zero
        verdict, results, levels = ctx.value("verdict"), _results(ctx), ctx.value("levels")
        by_seed = results.assign(level=results["level"].astype(str))
        gains = by_seed.pivot_table(index="seed", columns="level", values="selective_gain")
        paired = (gains[str(levels[-1])] - gains[str(levels[0])]).dropna().to_numpy(dtype=float)
        mean, half_width = mean_confidence_interval(paired)
        expected = "better" if mean - half_width > 0 else "worse" if mean + half_width < 0 else "not separated"
        assert verdict == expected, f"the paired interval {mean:+.4f} ± {half_width:.4f} says {expected!r}"
