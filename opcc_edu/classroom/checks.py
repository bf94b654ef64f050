"""The trusted checks of every assignment: expected values at build time, comparisons at grading.

Each Otter test of a source notebook (public and hidden) has a counterpart here that the grader
runs in its own process (:mod:`opcc_edu.classroom.grading`), never in the student's:

* :func:`build_expected` computes, when ``opcc-edu assignments build`` runs, the hidden inputs
  and the values the reference functions of the package give on them; they are stored in the
  autograder zip (``opcc/expected.json``) and never sent to a student's process.
* a check receives :class:`Context`: ``ctx.call(fn, *args)`` runs one of the student's functions
  in the sandbox on inputs (plain data) and returns its output (plain data); ``ctx.value(name)``
  is a value of the student's executed notebook; ``ctx.source(fn)`` the text of a ``def``. A
  check raises ``AssertionError`` (or any exception) to fail.

Where an expectation depends on the student's own choices (the levels and seeds of the ablation,
the summary of the student's table), it is computed here, in the grading process, from data
stored at build time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..confidence import ensemble_voting, paired_confidence_interval, synthetic_ensemble
from ..config import get_profile
from ..mdp import monte_carlo_returns, policy_value, q_value, random_mdp
from ..metrics import aurcc, coverage_resolution, reverse_pair_proportion, risk_coverage_curve

#: Graded functions (taken from the notebook's syntax tree) and values, per assignment.
GRADED: dict[str, dict[str, tuple[str, ...]]] = {
    "finite_horizon_values": {
        "functions": ("backward_induction", "monte_carlo_value", "answer_query"),
        "values": ("rmse", "slope", "rollout_counts"),
    },
    "risk_coverage_metrics": {
        "functions": ("risk_coverage_points", "my_aurcc", "my_rpp", "my_cr_k"),
        "values": ("constant_scores", "random_aurcc"),
    },
    "ensemble_confidence": {"functions": ("ev", "pci", "upci", "swap_symmetric"), "values": ("symmetric",)},
    "design_confidence": {"functions": ("my_confidence",), "values": ("baseline_gains",)},
    "mini_ablation": {"functions": (), "values": ("results", "factor", "levels", "summary", "verdict")},
}


class StudentError(Exception):
    """The student's code raised, returned something that cannot be graded, or is missing."""


@dataclass
class Context:
    """What a check may use (see the module docstring)."""

    data: dict[str, Any]
    call: Callable[..., Any]
    timed_call: Callable[..., tuple[Any, float]]
    values: dict[str, Any]
    sources: dict[str, str]

    def value(self, name: str) -> Any:
        value = self.values.get(name)
        if isinstance(value, StudentError):
            raise value
        if name not in self.values:
            raise StudentError(f"{name} is not defined")
        return value

    def source(self, name: str) -> str:
        return self.sources.get(name, "")


Check = Callable[[Context], None]
CHECKS: dict[str, dict[str, list[Check]]] = {}
BUILDERS: dict[str, Callable[[], dict[str, Any]]] = {}


def check(assignment: str, question: str) -> Callable[[Check], Check]:
    def register(fn: Check) -> Check:
        CHECKS.setdefault(assignment, {}).setdefault(question, []).append(fn)
        return fn

    return register


def builder(assignment: str) -> Callable:
    def register(fn: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
        BUILDERS[assignment] = fn
        return fn

    return register


def build_expected(assignment: str) -> dict[str, Any]:
    """The hidden inputs and expected values of ``assignment`` (trusted code, at build time)."""
    return {"assignment": assignment, "profile": get_profile().name, **BUILDERS[assignment]()}


def _arr(x: Any, dtype: Any = float) -> np.ndarray:
    return np.asarray(x, dtype=dtype)


def _pair(output: Any) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(output, (tuple, list)) or len(output) != 2:
        raise AssertionError("must return a pair (prediction, confidence)")
    return np.asarray(output[0]), np.asarray(output[1])


# --------------------------------------------------------------------------------------------
# 1. Finite-horizon values
# --------------------------------------------------------------------------------------------
@builder("finite_horizon_values")
def _build_finite_horizon() -> dict[str, Any]:
    mdp = random_mdp(n_states=6, n_actions=2, branching=3, seed=7)
    policy = np.random.default_rng(7).integers(0, mdp.n_actions, size=(8, mdp.n_states))
    other_cases = []
    for seed, (states, actions, horizon, gamma) in enumerate([(4, 3, 5, 1.0), (9, 2, 12, 0.9), (5, 4, 1, 0.5)]):
        other = random_mdp(states, actions, branching=2, seed=100 + seed)
        pol = np.random.default_rng(seed).integers(0, actions, size=(horizon, states))
        other_cases.append([other.transitions, other.rewards, pol, gamma, policy_value(other, pol, horizon, gamma)])
    last = other_cases[-1]
    mc = [
        [state, gamma, policy_value(mdp, policy, len(policy), gamma)[state]]
        + [monte_carlo_returns(mdp, policy, state, len(policy), 20000, gamma, seed=3).std(ddof=1)]
        for state, gamma in ((2, 1.0), (5, 0.8))
    ]
    rng = np.random.default_rng(11)
    other = random_mdp(7, 3, branching=3, seed=42)
    queries = []
    for _ in range(40):
        horizon = int(rng.integers(1, 9))
        pol_a, pol_b = (rng.integers(0, 3, size=(horizon, 7)) for _ in range(2))
        s_a, s_b, a_a, a_b = (int(x) for x in rng.integers(0, 3, size=4))
        query = {"state_a": s_a, "action_a": a_a, "policy_a": pol_a, "state_b": s_b, "action_b": a_b, "policy_b": pol_b}
        truth = int(q_value(other, pol_a, horizon)[s_a, a_a] < q_value(other, pol_b, horizon)[s_b, a_b])
        queries.append([query, truth])
    q = q_value(mdp, policy, len(policy))
    example = {"state_a": 1, "action_a": 0, "policy_a": policy, "state_b": 1, "action_b": 1, "policy_b": policy}
    return {
        "transitions": mdp.transitions,
        "rewards": mdp.rewards,
        "policy": policy,
        "exact": policy_value(mdp, policy, len(policy)),
        "one_step": mdp.rewards[np.arange(mdp.n_states), policy[0]],
        "other_cases": other_cases,
        "empty_case": [last[0], last[1]],
        "mc_cases": mc,
        "example_query": example,
        "example_truth": int(q[1, 0] < q[1, 1]),
        "queries": queries,
        "other_T": other.transitions,
        "other_R": other.rewards,
    }


@check("finite_horizon_values", "q1")
def _fh_shape_and_one_step(ctx: Context) -> None:
    d = ctx.data
    values = _arr(ctx.call("backward_induction", d["transitions"], d["rewards"], d["policy"]))
    assert values.shape == (6,), f"expected shape (6,), got {values.shape}"
    one_step = _arr(ctx.call("backward_induction", d["transitions"], d["rewards"], d["policy"][:1]))
    assert np.allclose(one_step, d["one_step"]), "with H = 1 the value is the reward of the first action"


@check("finite_horizon_values", "q1")
def _fh_exact(ctx: Context) -> None:
    d = ctx.data
    got = _arr(ctx.call("backward_induction", d["transitions"], d["rewards"], d["policy"]))
    assert got.shape == d["exact"].shape and np.allclose(got, d["exact"]), "values differ from the exact values"


@check("finite_horizon_values", "q1")
def _fh_hidden(ctx: Context) -> None:
    source = ctx.source("backward_induction")
    assert "policy_value" not in source and "q_value" not in source, "compute the values yourself"
    for transitions, rewards, pol, gamma, expected in ctx.data["other_cases"]:
        got = _arr(ctx.call("backward_induction", transitions, rewards, pol, gamma=gamma))
        assert got.shape == expected.shape and np.allclose(got, expected)
    transitions, rewards = ctx.data["empty_case"]
    empty = _arr(ctx.call("backward_induction", transitions, rewards, np.zeros((0, 5), dtype=np.int64)))
    assert empty.size > 0 and np.allclose(empty, 0.0), "H = 0: every value is 0"


@check("finite_horizon_values", "q2")
def _fh_mc_close(ctx: Context) -> None:
    d = ctx.data
    mean, standard_error = (
        float(x) for x in ctx.call("monte_carlo_value", d["transitions"], d["rewards"], d["policy"], 0, 4000, seed=1)
    )
    exact = float(d["exact"][0])
    assert np.isfinite(mean) and 0 < standard_error < 0.2, f"standard error {standard_error} is implausible"
    assert abs(mean - exact) < 5 * standard_error, f"estimate {mean} is far from the exact value {exact}"


@check("finite_horizon_values", "q2")
def _fh_mc_hidden(ctx: Context) -> None:
    d = ctx.data
    args = (d["transitions"], d["rewards"], d["policy"], 3, 500)
    first = ctx.call("monte_carlo_value", *args, seed=5)
    assert first == ctx.call("monte_carlo_value", *args, seed=5), "same seed, same estimate"
    assert first != ctx.call("monte_carlo_value", *args, seed=6), "another seed"
    for state, gamma, exact, spread in d["mc_cases"]:
        mean, standard_error = (
            float(x)
            for x in ctx.call(
                "monte_carlo_value", d["transitions"], d["rewards"], d["policy"], state, 20000, seed=2, gamma=gamma
            )
        )
        assert abs(mean - exact) < 5 * standard_error
        assert np.isclose(standard_error, spread / np.sqrt(20000), rtol=0.1), "standard error = std / sqrt(n)"


@check("finite_horizon_values", "q3")
def _fh_rmse(ctx: Context) -> None:
    rmse, slope = _arr(ctx.value("rmse")), float(ctx.value("slope"))
    assert rmse.shape == (3,), f"rmse must have shape (3,), got {rmse.shape}"
    assert np.all(np.diff(rmse) < 0), "the error must fall as the number of rollouts grows"
    assert -0.8 < slope < -0.2, f"slope {slope} is far from -1/2"


@check("finite_horizon_values", "q3")
def _fh_slope_fit(ctx: Context) -> None:
    rmse, slope, counts = _arr(ctx.value("rmse")), float(ctx.value("slope")), _arr(ctx.value("rollout_counts"))
    assert np.all(rmse > 0)
    fitted = np.polyfit(np.log(counts), np.log(rmse), 1)[0]
    assert np.isclose(slope, fitted), "slope must be the least-squares slope of log(rmse) on log(n)"


@check("finite_horizon_values", "q4")
def _fh_example_query(ctx: Context) -> None:
    d = ctx.data
    got = ctx.call("answer_query", d["transitions"], d["rewards"], d["example_query"])
    assert got == d["example_truth"]


@check("finite_horizon_values", "q4")
def _fh_queries(ctx: Context) -> None:
    d = ctx.data
    for query, truth in d["queries"]:
        assert ctx.call("answer_query", d["other_T"], d["other_R"], query) == truth


# --------------------------------------------------------------------------------------------
# 2. Risk-coverage metrics
# --------------------------------------------------------------------------------------------
_RC_CASES = {
    "risk_coverage_points": (2024, ((1, 0), (7, 2), (50, 0), (300, 5), (300, 1))),
    "my_aurcc": (99, ((1, 0), (2, 1), (40, 0), (500, 3), (500, 11))),
    "my_rpp": (7, ((1, 0), (30, 0), (400, 4), (400, 1))),
    "my_cr_k": (5, ((1, 0, 10), (10, 0, 10), (10, 3, 4), (300, 6, 10), (300, 0, 25), (300, 1, 10))),
}


@builder("risk_coverage_metrics")
def _build_risk_coverage() -> dict[str, Any]:
    data = synthetic_ensemble(200, 10, seed=3)
    prediction, confidence = paired_confidence_interval(data.values_a, data.values_b)
    _, votes = ensemble_voting(data.values_a, data.values_b)
    target = np.asarray(data.target)
    reference = {
        "risk_coverage_points": lambda p, t, c, **kw: risk_coverage_curve(p, t, c)[:2],
        "my_aurcc": aurcc,
        "my_rpp": reverse_pair_proportion,
        "my_cr_k": coverage_resolution,
    }
    given, hidden = {}, {}
    for name, fn in reference.items():
        given[name] = [fn(prediction, target, conf) for conf in (confidence, votes)]
        seed, cases = _RC_CASES[name]
        rng = np.random.default_rng(seed)
        hidden[name] = []
        for case in cases:
            n, levels = case[0], case[1]
            p, t = rng.integers(0, 2, n), rng.integers(0, 2, n)
            if name == "risk_coverage_points":
                c = rng.random(n) if levels == 0 else rng.integers(0, levels, n) / max(levels, 1)
            elif name == "my_aurcc":
                c = rng.normal(size=n) if levels == 0 else rng.integers(0, levels, n).astype(float)
            else:
                c = rng.random(n) if levels == 0 else rng.integers(0, levels, n).astype(float)
            kwargs = {"k": case[2]} if len(case) == 3 else {}
            hidden[name].append([[p, t, c], kwargs, fn(p, t, c, **kwargs)])
        if name == "my_rpp":
            small = [rng.integers(0, 2, 2000), rng.integers(0, 2, 2000), rng.random(2000)]
            big = [rng.integers(0, 2, 25_000), rng.integers(0, 2, 25_000), rng.random(25_000)]
            speed = [small, big, reverse_pair_proportion(*big)]
    loss = (prediction != target).astype(float)
    random_aurcc = np.mean(
        [aurcc(prediction, target, np.random.default_rng(s).random(len(target))) for s in range(200)]
    )
    return {
        "inputs": [prediction, target, confidence, votes],
        "given": given,
        "hidden": hidden,
        "speed": speed,
        "loss_mean": float(loss.mean()),
        "random_aurcc": float(random_aurcc),
    }


def _rc_same(name: str, got: Any, expected: Any) -> None:
    if name == "risk_coverage_points":
        coverage, risk = (_arr(x) for x in got)
        assert coverage.shape == np.shape(expected[0]), f"expected {np.size(expected[0])} points"
        assert np.allclose(coverage, expected[0]) and np.allclose(risk, expected[1])
    else:
        assert np.isclose(float(got), expected), f"expected {float(expected):.6g}, got {float(got):.6g}"


def _rc_given(name: str) -> Check:
    def run(ctx: Context) -> None:
        prediction, target, confidence, votes = ctx.data["inputs"]
        for conf, expected in zip((confidence, votes), ctx.data["given"][name], strict=True):
            got = ctx.call(name, prediction, target, conf)
            if name == "risk_coverage_points":
                coverage, risk = (_arr(x) for x in got)
                assert coverage.size and coverage[0] == 0 and risk[0] == 0, "the first point is the anchor (0, 0)"
            _rc_same(name, got, expected)

    return run


def _rc_hidden(name: str) -> Check:
    def run(ctx: Context) -> None:
        for args, kwargs, expected in ctx.data["hidden"][name]:
            _rc_same(name, ctx.call(name, *args, **kwargs), expected)

    return run


for _q, _name in (("q1", "risk_coverage_points"), ("q2", "my_aurcc"), ("q3", "my_rpp"), ("q4", "my_cr_k")):
    check("risk_coverage_metrics", _q)(_rc_given(_name))
    check("risk_coverage_metrics", _q)(_rc_hidden(_name))


@check("risk_coverage_metrics", "q3")
def _rc_speed(ctx: Context) -> None:
    small, big, expected = ctx.data["speed"]
    _, seconds = ctx.timed_call("my_rpp", *small)
    assert seconds < 1.0, "too slow on 2,000 queries: avoid loops over pairs"
    value, seconds = ctx.timed_call("my_rpp", *big)
    assert seconds < 0.5, "too slow on 25,000 queries: sort and binary-search, no n x n matrix"
    assert np.isclose(float(value), expected)


@check("risk_coverage_metrics", "q5")
def _rc_constant(ctx: Context) -> None:
    aurcc, rpp, cr_k = (float(x) for x in ctx.value("constant_scores"))
    loss = ctx.data["loss_mean"]
    assert np.isclose(aurcc, loss / 2), "a constant confidence's AURCC is half the full-coverage loss"
    assert rpp == 0 and np.isclose(cr_k, 0.2)
    assert 0.0 <= float(ctx.value("random_aurcc")) <= 1.0, "random_aurcc is a mean AURCC: a number between 0 and 1"


@check("risk_coverage_metrics", "q5")
def _rc_random(ctx: Context) -> None:
    assert np.isclose(float(ctx.value("random_aurcc")), ctx.data["random_aurcc"])


from .checks_more import register_more  # noqa: E402 - the other three assignments

register_more(check, builder, Context, _arr, _pair)

__all__ = ["BUILDERS", "CHECKS", "GRADED", "Context", "StudentError", "build_expected"]
