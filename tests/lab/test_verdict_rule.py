"""The verdict rule (:mod:`opcc_edu.lab.findings.rule`) on hand-made runs: pairing by seed, the
floor on the half-width, the margin scaled to the metric's size, and the size statement.

Each test shows both sides: the case where the rule's part decides, and the case that comes out
the other way, so that a rule that ignored the part would fail it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from opcc_edu.lab import experiments as ex
from opcc_edu.lab import findings
from opcc_edu.lab.findings import rule
from opcc_edu.metrics import mean_confidence_interval


def _runs(environment: str, metric: str, levels: dict[str, list[float]], queries: int = 300) -> pd.DataFrame:
    """Runs of one environment: level -> one value per seed (seed i of every level are twins)."""
    rows = [
        {"environment": environment, "level": level, "dataset": "1m", "seed": seed, metric: value, "n": queries}
        for level, values in levels.items()
        for seed, value in enumerate(values)
    ]
    return pd.DataFrame(rows)


def _table(runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The aggregate of ``runs``: mean and 95% t half-width per level, as ``aggregate`` gives it."""
    rows = []
    for (env, level), cell in runs.groupby(["environment", "level"], sort=False):
        mean, ci = mean_confidence_interval(cell[metric].to_numpy())
        rows.append((env, level, metric, mean, ci, len(cell)))
    return pd.DataFrame(rows, columns=["environment", "level", "metric", "mean", "ci", "n_samples"])


def test_pairing_separates_a_difference_that_the_seeds_spread_hides():
    # each seed shifts both levels alike (0.10, 0.20, 0.30); the prior lowers AURCC by 0.02 on every seed
    runs = _runs("hopper", "aurcc", {"0": [0.10, 0.20, 0.30], "5": [0.081, 0.179, 0.281]})
    table = _table(runs, "aurcc")
    paired = rule.level_interval(table, runs, "hopper", "aurcc", "0", "5")
    unpaired = rule.level_interval(table, None, "hopper", "aurcc", "0", "5")
    assert paired.paired and not unpaired.paired
    assert paired.half_width < 0.01 < unpaired.half_width  # the shared seed effect cancels
    assert paired.difference == pytest.approx(-0.0197, abs=1e-4)
    assert paired.separated and not unpaired.separated
    claims = {"hopper": "lower"}
    assert findings.level_difference_verdict(table, "prior-scale", claims=claims, runs=runs).outcomes == {
        "hopper": "reproduced"
    }
    assert findings.level_difference_verdict(table, "prior-scale", claims=claims).outcomes == {"hopper": "inconclusive"}
    # the runs carried by the table (with_runs' attrs) are paired the same way
    carried = rule.attach_runs(table, runs)[lambda f: f["level"].isin(["0", "5"])]  # kept through a filter
    assert findings.level_difference_verdict(carried, "prior-scale", claims=claims).outcomes == {"hopper": "reproduced"}


def test_pairing_widens_where_the_twins_move_apart():
    # each level barely spreads, but the twins move against each other: the differences spread more
    runs = _runs("hopper", "aurcc", {"0": [0.095, 0.100, 0.105], "5": [0.085, 0.080, 0.075]})
    table = _table(runs, "aurcc")
    paired = rule.level_interval(table, runs, "hopper", "aurcc", "0", "5")
    unpaired = rule.level_interval(table, None, "hopper", "aurcc", "0", "5")
    assert paired.half_width > unpaired.half_width
    assert unpaired.separated and not paired.separated
    claims = {"hopper": "lower"}
    assert findings.level_difference_verdict(table, "prior-scale", claims=claims).outcomes == {"hopper": "reproduced"}
    assert findings.level_difference_verdict(table, "prior-scale", claims=claims, runs=runs).outcomes == {
        "hopper": "inconclusive"
    }
    # the paired interval is mean_confidence_interval of the differences, nothing else
    mean, half = mean_confidence_interval(np.array([-0.010, -0.020, -0.030]))
    assert paired.difference == pytest.approx(mean) and paired.raw_half_width == pytest.approx(half)


def test_three_equal_cr_k_seeds_get_the_floor_not_a_zero_width_interval():
    # CR_K moves in steps of 0.1: every twin is one bin higher, so the differences have no spread
    runs = _runs("hopper", "cr_k", {"10": [0.3, 0.3, 0.3], "100": [0.4, 0.4, 0.4]})
    table = _table(runs, "cr_k")
    interval = rule.level_interval(table, runs, "hopper", "cr_k", "10", "100")
    assert interval.raw_half_width == 0 and interval.floored
    # the floor: three twins of which one differs by one step of 0.1
    floor = mean_confidence_interval(np.array([0.0, 0.0, 0.1]))[1]
    assert interval.half_width == pytest.approx(floor) == pytest.approx(rule.half_width_floor("cr_k", 3))
    assert interval.half_width > interval.difference  # [-0.04, 0.24]: not separated
    assert not interval.separated and interval.judge("higher") == "inconclusive"
    unfloored = rule.judge_difference(interval.difference, True, "higher", 0.0, interval.margin)
    assert unfloored == "reproduced"  # what a zero-width interval would have claimed
    # no difference at all on three seeds: not shown absent within +-0.05 either
    same = _runs("hopper", "cr_k", {"10": [0.3, 0.3, 0.3], "100": [0.3, 0.3, 0.3]})
    flat = rule.level_interval(_table(same, "cr_k"), same, "hopper", "cr_k", "10", "100")
    assert flat.judge("same") == "inconclusive" and rule.judge_difference(0.0, False, "same", 0.0, 0.05) == "reproduced"
    # fifty twins in the same state: the floor has shrunk below the margin, and the absence shows
    many = _runs("hopper", "cr_k", {"10": [0.3] * 50, "100": [0.3] * 50})
    assert rule.level_interval(_table(many, "cr_k"), many, "hopper", "cr_k", "10", "100").judge("same") == "reproduced"
    # twins that spread more than the floor keep their own interval
    spread = _runs("hopper", "cr_k", {"10": [0.3, 0.3, 0.3, 0.3, 0.3], "100": [0.4, 0.6, 0.5, 0.7, 0.4]})
    wide = rule.level_interval(_table(spread, "cr_k"), spread, "hopper", "cr_k", "10", "100")
    assert not wide.floored and wide.half_width == pytest.approx(wide.raw_half_width)


def test_the_floor_of_aurcc_is_one_query_and_none_without_a_run_count():
    assert rule.metric_step("aurcc", 300) == pytest.approx(1 / 300)
    assert rule.metric_step("aurcc") == rule.PRINTED_STEP and rule.metric_step("cr_k", 300) == pytest.approx(0.1)
    assert rule.half_width_floor("aurcc", 2, 300) > 0.01 > rule.half_width_floor("aurcc", 3, 300)
    assert rule.half_width_floor("cr_k", None) == 0.0 == rule.half_width_floor("cr_k", 1)
    # the paper's tables (no run count): judged on their intervals as printed
    paper = rule.difference_interval("cr_k", 0.30, 0.0, 0.40, 0.0)
    assert paper.floor == 0 and paper.separated


def test_a_maze_sized_aurcc_is_judged_against_the_scaled_margin():
    # the paper's U-maze: AURCC 0.008; ours 0.002 against 0.008 with tight intervals -- a fourfold change
    tiny = rule.difference_interval("aurcc", 0.008, 0.0005, 0.002, 0.0005)
    assert tiny.margin == pytest.approx(0.004)  # half the larger level's AURCC, not 0.01
    assert tiny.judge("same") == "reversed"
    assert rule.judge_difference(tiny.difference, tiny.separated, "same", tiny.half_width, 0.01) == "reproduced"
    # the same change on a larger AURCC is no change: the absolute margin applies
    large = rule.difference_interval("aurcc", 0.108, 0.0005, 0.102, 0.0005)
    assert large.margin == pytest.approx(0.01) and large.judge("same") == "reproduced"
    # the medium maze (0.001): the margin stops at the paper's printed resolution
    assert rule.equivalence_margin("aurcc", 0.001, 0.0) == pytest.approx(rule.SMALLEST_MARGIN)
    assert rule.equivalence_margin("aurcc") == 0.01 == findings.EQUIVALENCE_MARGINS["aurcc"]
    # through a verdict: the maze pair inside +-0.01 but not inside its own margin
    table = pd.DataFrame(
        [("maze2d-umaze", "0", "aurcc", 0.008, 0.0005), ("maze2d-umaze", "5", "aurcc", 0.002, 0.0005)],
        columns=["environment", "level", "metric", "mean", "ci"],
    )
    assert findings.level_difference_verdict(table, "prior-scale", claims="same").outcomes == {
        "maze2d-umaze": "reversed"
    }


def test_the_margins_are_read_against_the_papers_own_half_widths():
    widths = rule.paper_half_widths()
    for metric in ("aurcc", "loss", "rpp", "cr_k"):
        assert 0 < widths[metric] < rule.EQUIVALENCE_MARGINS[metric], metric
    agreement = findings.paper_margin_agreement().set_index("metric")
    assert (agreement["inside"] <= agreement["not_significant"]).all()
    assert (agreement["outside"] <= agreement["significant"]).all()


def _contrast(ours: float, paper: float) -> findings.Verdict:
    table = pd.DataFrame(
        [("hopper", "ev", "aurcc", 0.15, 0.002), ("hopper", "pci", "aurcc", 0.15 + ours, 0.002)],
        columns=["environment", "level", "metric", "mean", "ci"],
    )
    expectation = findings.Expectation("aurcc", "lower", paper_difference=paper)
    return findings.contrast_verdict(table, "pci", "ev", [expectation])


def test_a_reproduced_direction_at_another_size_says_so():
    big = _contrast(-0.13, -0.01)
    assert big.outcomes == {"hopper": "reproduced"}
    assert big.summary() == "reproduced (same direction, AURCC 13× the paper's difference)"
    small = _contrast(-0.02, -0.1)
    assert small.summary() == "reproduced (same direction, AURCC 1/5.0 of the paper's difference)"
    alike = _contrast(-0.02, -0.01)  # twice the paper's: within the factor of 3
    assert alike.outcomes == {"hopper": "reproduced"} and alike.summary() == "reproduced"
    against = _contrast(0.13, -0.01)  # the other way: reversed, no size to compare
    assert against.outcomes == {"hopper": "reversed"} and against.summary() == "reversed"
    assert rule.size_statement(-0.13, -0.01) == "same direction, 13× the paper's difference"
    assert rule.size_statement(0.13, -0.01) is None and rule.size_statement(0.02, 0.01) is None


def test_the_size_statement_reads_the_papers_table_and_reaches_the_summary():
    # Table 10: the large maze's AURCC falls from 0.140 to 0.104 with the prior (-0.036)
    def verdict(change):
        table = pd.DataFrame(
            [("maze2d-large", "0", "aurcc", 0.6, 0.01), ("maze2d-large", "5", "aurcc", 0.6 + change, 0.01)],
            columns=["environment", "level", "metric", "mean", "ci"],
        )
        return findings.level_difference_verdict(table, "prior-scale")

    assert verdict(-0.5).summary() == "reproduced (same direction, AURCC 14× the paper's difference)"
    assert verdict(-0.05).summary() == "reproduced"
    several = findings.Verdict([], {"hopper": "reproduced", "walker2d": "reproduced"}, {"hopper": "AURCC 13×"})
    assert several.summary() == (
        "reproduced (2 of 2; same direction as the paper's difference, another size: hopper AURCC 13×)"
    )


def test_an_interval_rounds_as_a_page_prints_it():
    interval = rule.DifferenceInterval("aurcc", -0.03149, 0.01051, 0.01051, 0.0, True, 3, 0.01)
    assert interval.rounded() == (-0.031, 0.011)
    assert interval.rounded(2) == (-0.03, 0.01)
    assert interval.rounded() != (round(interval.low, 3), round(interval.high, 3))  # not the ends


def test_level_differences_separate_as_the_verdict_does_not_as_disjoint_intervals():
    # the paper's reading (disjoint intervals) misses a difference that pairing finds: the table a
    # lesson prints marks what the verdict judges
    hidden = _runs("hopper", "aurcc", {"0": [0.10, 0.20, 0.30], "5": [0.081, 0.179, 0.281]})
    apart = _runs("walker2d", "aurcc", {"0": [0.095, 0.100, 0.105], "5": [0.085, 0.080, 0.075]})
    runs = pd.concat([hidden, apart], ignore_index=True)
    table = rule.attach_runs(_table(runs, "aurcc"), runs)
    ours = findings.level_differences(table, "prior-scale").set_index("environment")
    paper_reading = ex.level_differences(table, "prior-scale").set_index("environment")
    assert ours.loc["hopper", "separated"] and not paper_reading.loc["hopper", "separated"]
    assert not ours.loc["walker2d", "separated"]  # the twins move apart: not separated either way
    assert ours["paired"].all()
    for env in ("hopper", "walker2d"):
        judged = rule.level_interval(table, runs, env, "aurcc", "0", "5")
        assert ours.loc[env, "half_width"] == pytest.approx(judged.half_width)
        assert ours.loc[env, "difference"] == pytest.approx(judged.difference)
    # without runs, the fallback is the combined interval, marked unpaired
    bare = findings.level_differences(_table(runs, "aurcc"), "prior-scale")
    assert not bare["paired"].any()
    # level_findings reports ours as the verdict judges them
    found = findings.level_findings(table, "prior-scale").set_index("environment")
    assert found.loc["hopper", "separated_ours"] and not found.loc["walker2d", "separated_ours"]


def test_judging_a_finding_without_its_runs_says_so():
    runs = _runs("hopper", "aurcc", {"0": [0.10, 0.20, 0.30], "5": [0.081, 0.179, 0.281]})
    table = _table(runs, "aurcc")
    with pytest.warns(UserWarning, match="no difference is paired"):
        findings.judge_finding("prior-scale", table)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        findings.judge_finding("prior-scale", rule.attach_runs(table, runs))


def test_joined_tables_keep_their_runs_where_pd_concat_drops_them():
    hopper = _runs("hopper", "aurcc", {"0": [0.10, 0.20, 0.30], "5": [0.081, 0.179, 0.281]})
    walker = _runs("walker2d", "aurcc", {"0": [0.10, 0.20, 0.30], "5": [0.081, 0.179, 0.281]})
    pieces = [rule.attach_runs(_table(r, "aurcc"), r) for r in (hopper, walker)]
    dropped = pd.concat(pieces, ignore_index=True)
    assert rule.runs_of(dropped) is None  # pandas keeps attrs only when every piece's are the same
    joined = findings.concat_tables(pieces)
    assert len(joined) == len(dropped) and rule.runs_of(joined) is not None
    marks = findings.level_differences(joined, "prior-scale").set_index("environment")
    assert marks["paired"].all() and marks["separated"].all()  # the shared seed effect cancels
    assert not findings.level_differences(dropped, "prior-scale")["separated"].any()
    # a piece of one table twice: its runs are not counted twice
    twice = findings.concat_tables([pieces[0][lambda f: f["level"] == "0"], pieces[0][lambda f: f["level"] == "5"]])
    assert len(rule.runs_of(twice)) == len(hopper)
    # tables without runs join without them; a mix is refused, as is nothing to join
    assert rule.runs_of(findings.concat_tables([_table(hopper, "aurcc"), _table(walker, "aurcc")])) is None
    with pytest.raises(ValueError, match="carry no runs"):
        findings.concat_tables([pieces[0], _table(walker, "aurcc")])
    with pytest.raises(ValueError, match="at least one"):
        findings.concat_tables([])
