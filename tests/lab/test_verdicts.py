"""Machine-readable verdicts and the findings-at-a-glance table, on hand-made tables.

Each verdict function is given a table whose intervals make the paper's finding reproduced,
reversed or inconclusive, and must say so per environment (``Verdict.outcomes``) while its
lines stay what the chapters print.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from synthetic_answers import SyntheticAnswers

from opcc_edu.lab import experiments as ex
from opcc_edu.lab import findings
from opcc_edu.lab.experiments.report import profile_directories
from opcc_edu.lab.findings import Expectation, Verdict


def _table(rows):
    """Tidy table from (environment, level, metric, mean, ci) tuples."""
    return pd.DataFrame(rows, columns=["environment", "level", "metric", "mean", "ci"])


def test_verdict_is_its_lines_with_outcomes_a_majority_and_a_summary():
    verdict = Verdict(["a", "b", "c"], {"hopper": "reversed", "walker2d": "reversed", "maze2d-open": "reproduced"})
    assert verdict == ["a", "b", "c"] and isinstance(verdict, list)
    assert verdict.counts() == {"reproduced": 1, "reversed": 2, "inconclusive": 0}
    assert verdict.overall == "reversed" and verdict.summary() == "reversed (2 of 3; 1 reproduced)"
    split = Verdict([], {"hopper": "reversed", "walker2d": "reproduced"})
    assert split.overall == "inconclusive" and split.summary() == "inconclusive (no majority: 1 reproduced, 1 reversed)"
    assert Verdict([], {"all environments": "reproduced"}).summary() == "reproduced"
    assert Verdict(["x"]).overall is None and Verdict(["x"]).summary() == "not judged"
    both = Verdict(["a"], {"hopper": "reversed"}) + Verdict(["b"], {"walker2d": "reproduced"})
    assert both == ["a", "b"] and both.outcomes == {"hopper": "reversed", "walker2d": "reproduced"}
    grown = Verdict(["a"], {"hopper": "reversed"})
    grown += Verdict(["b"], {"walker2d": "reproduced"})
    assert grown == both and grown.outcomes == both.outcomes and isinstance(grown, Verdict)
    with pytest.raises(ValueError, match="verdict"):
        Verdict([], {"hopper": "maybe"})


@pytest.mark.parametrize(
    ("difference", "separated", "claim", "half_width", "outcome"),
    [
        (-0.1, True, "lower", 0.05, "reproduced"),
        (0.1, True, "lower", 0.05, "reversed"),
        (-0.1, False, "lower", 0.2, "inconclusive"),
        (0.1, True, "higher", 0.05, "reproduced"),
        # a claim of absence: the difference's interval must lie inside the margin (AURCC: 0.01)
        (0.1, False, "same", 0.2, "inconclusive"),  # overlapping intervals alone no longer reproduce it
        (0.002, False, "same", 0.006, "reproduced"),  # [-0.004, 0.008] inside +-0.01
        (0.002, False, "same", 0.009, "inconclusive"),  # [-0.007, 0.011] crosses 0.01
        (0.002, False, "same", float("nan"), "inconclusive"),  # no interval: no absence shown
        (-0.1, True, "same", 0.05, "reversed"),  # [-0.15, -0.05]: wholly beyond the margin
        (-0.008, True, "same", 0.005, "inconclusive"),  # separated, but [-0.013, -0.003] crosses it
        (0.02, True, "same", 0.015, "inconclusive"),  # [0.005, 0.035]: may be negligible
        (0.02, True, "same", 0.005, "reversed"),  # [0.015, 0.025]: more than the margin, shown
        (0.004, True, "same", 0.001, "reproduced"),  # separated, but too small to matter
        (0.1, True, "not lower", 0.05, "reproduced"),  # worse is not a gain: the finding of no gain holds
        (-0.1, True, "not lower", 0.05, "reversed"),
        (-0.012, True, "not lower", 0.004, "inconclusive"),  # a gain, not shown beyond the margin
        (-0.1, False, "not lower", 0.2, "inconclusive"),  # a gain of up to 0.3 not excluded
        (-0.002, False, "not lower", 0.005, "reproduced"),  # a gain above 0.01 excluded
        (0.1, True, "not higher", 0.05, "reversed"),
        (0.1, True, "not higher", float("nan"), "inconclusive"),  # no interval: nothing shown
        (0.002, False, "not higher", 0.005, "reproduced"),
    ],
)
def test_judge_difference(difference, separated, claim, half_width, outcome):
    margin = findings.verdicts.equivalence_margin("aurcc")
    assert findings.judge_difference(difference, separated, claim, half_width, margin) == outcome


def test_margins_are_stated_once_for_every_metric_and_the_half_width_is_the_root_sum_of_squares():
    from opcc_edu.names import TABLE_METRICS

    verdicts = findings.verdicts
    assert set(verdicts.EQUIVALENCE_MARGINS) == set(TABLE_METRICS)
    assert verdicts.EQUIVALENCE_MARGINS["aurcc"] == 0.01 and all(m > 0 for m in verdicts.EQUIVALENCE_MARGINS.values())
    assert verdicts.difference_half_width(0.003, 0.004) == pytest.approx(0.005)
    assert verdicts.difference_half_width(0.003, 0.004) < 0.003 + 0.004  # narrower than the overlap rule's
    assert math.isnan(verdicts.difference_half_width(0.003, float("nan")))
    # without a margin nothing is shown absent
    assert findings.judge_difference(0.0, False, "same", 0.001) == "inconclusive"
    with pytest.raises(ValueError, match="metric"):
        verdicts.equivalence_margin("accuracy")


def test_combine_outcomes():
    assert findings.combine_outcomes(["reproduced", "reproduced"]) == "reproduced"
    assert findings.combine_outcomes(["reversed", "inconclusive"]) == "reversed"
    assert findings.combine_outcomes(["reversed", "reproduced"]) == "inconclusive"
    assert findings.combine_outcomes(["inconclusive"]) == "inconclusive"
    assert findings.combine_outcomes([]) == "inconclusive"


def test_trend_verdict_each_kind():
    table = _table(
        [
            ("hopper", "10", "aurcc", 0.05, 0.01),  # grows, separated: reproduced
            ("hopper", "50", "aurcc", 0.15, 0.02),
            ("maze2d-umaze", "20", "aurcc", 0.30, 0.02),  # falls, separated: reversed
            ("maze2d-umaze", "50", "aurcc", 0.10, 0.02),
            ("maze2d-open", "20", "aurcc", 0.30, 0.10),  # falls within the intervals: inconclusive
            ("maze2d-open", "50", "aurcc", 0.25, 0.10),
        ]
    )
    verdict = findings.trend_verdict(table, level_prefix="h=")
    assert verdict[0] == "hopper: AURCC h=10 0.050 -> h=50 0.150: grows (separated)"
    assert verdict.outcomes == {"hopper": "reproduced", "maze2d-umaze": "reversed", "maze2d-open": "inconclusive"}
    assert verdict.overall == "inconclusive"


def test_contrast_verdict_each_kind():
    table = _table(
        [
            ("hopper", "ev", "aurcc", 0.150, 0.005),  # PCI lower, separated: reproduced
            ("hopper", "pci", "aurcc", 0.120, 0.005),
            ("walker2d", "ev", "aurcc", 0.070, 0.002),  # PCI higher, separated: reversed
            ("walker2d", "pci", "aurcc", 0.080, 0.002),
            ("halfcheetah", "ev", "aurcc", 0.20, 0.05),  # lower, within the intervals: inconclusive
            ("halfcheetah", "pci", "aurcc", 0.19, 0.05),
        ]
    )
    verdict = findings.contrast_verdict(table, "pci", "ev", [Expectation("aurcc", "lower")])
    assert verdict[1] == "walker2d: AURCC PCI 0.080 vs EV 0.070 (not lower)"
    assert verdict.outcomes == {"hopper": "reproduced", "walker2d": "reversed", "halfcheetah": "inconclusive"}
    # the paper found no significant gain: a separated loss does not contradict it, a gain does
    no_gain = findings.contrast_verdict(table, "pci", "ev", [Expectation("aurcc", "lower", claim="not lower")])
    # a gain of up to 0.08 is not excluded in halfcheetah: the absence is not shown
    assert no_gain.outcomes == {"hopper": "reversed", "walker2d": "reproduced", "halfcheetah": "inconclusive"}
    # without intervals nothing is separated
    bare = findings.contrast_verdict(table.drop(columns="ci"), "pci", "ev", [Expectation("aurcc", "lower")])
    assert set(bare.outcomes.values()) == {"inconclusive"}
    with pytest.raises(ValueError, match="claim"):
        Expectation("aurcc", "lower", claim="better")


def test_ensemble_size_verdict_each_kind():
    rows = []
    for env, aurcc, aurcc_ci, cr_k in (
        ("hopper", (0.140, 0.145), 0.002, (0.30, 0.50)),  # AURCC flat within the margin, CR_K grows: reproduced
        ("walker2d", (0.20, 0.10), 0.01, (0.30, 0.30)),  # AURCC falls far, CR_K flat: reversed
        ("halfcheetah", (0.140, 0.145), 0.002, (0.30, 0.31)),  # flat, CR_K grows within the intervals
        ("maze2d-open", (0.140, 0.145), 0.01, (0.30, 0.50)),  # AURCC overlaps, but up to +-0.019: not shown flat
    ):
        for level, a, c in (("2", aurcc[0], cr_k[0]), ("10", aurcc[1], cr_k[1])):
            rows += [(env, level, "aurcc", a, aurcc_ci), (env, level, "cr_k", c, 0.02)]
    verdict = findings.ensemble_size_verdict(_table(rows))
    assert verdict[0] == "hopper: 2 -> 10 members: AURCC 0.140 -> 0.145 (change +0.005); CR_K 0.30 -> 0.50 (grows)"
    assert verdict.outcomes == {
        "hopper": "reproduced",
        "walker2d": "reversed",
        "halfcheetah": "inconclusive",
        "maze2d-open": "inconclusive",  # reproduced by overlapping intervals under the old rule
    }


def test_ensemble_size_verdict_states_the_size_of_a_reproduced_growth():
    rows = []
    for env in ("hopper", "walker2d"):
        for level, cr_k in (("10", 0.30), ("100", 0.50)):
            rows += [(env, level, "aurcc", 0.140, 0.002), (env, level, "cr_k", cr_k, 0.02)]
    table = _table(rows)
    # CR_K grows by 0.20: ten times the paper's 0.02 in hopper, twice its 0.10 in walker2d
    verdict = findings.ensemble_size_verdict(table, paper={"hopper": 0.02, "walker2d": 0.10})
    assert verdict.outcomes == {"hopper": "reproduced", "walker2d": "reproduced"}
    assert verdict.sizes == {"hopper": "CR_K 10×"}
    assert "another size: hopper CR_K 10×" in verdict.summary()
    # a paper growth of the other sign or none at all states no size
    assert findings.ensemble_size_verdict(table, paper={"hopper": -0.02}).sizes == {}
    assert findings.ensemble_size_verdict(table).sizes == {}
    # a growth not reproduced states no size, however large its ratio
    flat = _table([r if r[2] != "cr_k" else (*r[:3], 0.30, 0.02) for r in rows])
    assert findings.ensemble_size_verdict(flat, paper={"hopper": 0.001}).sizes == {}


@pytest.mark.parametrize(
    ("rows", "outcome"),
    [
        ([("hopper", "medium", 0.10), ("hopper", "expert", 0.15), ("walker2d", "medium", 0.5)], "reproduced"),
        ([("hopper", "medium", 0.10), ("hopper", "expert", 0.30), ("walker2d", "medium", 0.12)], "reversed"),
        ([("hopper", "medium", 0.10), ("walker2d", "medium", 0.5)], "inconclusive"),  # one dataset each
    ],
)
def test_dataset_spread_verdict_each_kind(rows, outcome):
    verdict = findings.dataset_spread_verdict(_table([(env, lv, "aurcc", m, 0.0) for env, lv, m in rows]))
    assert verdict.outcomes == {"all environments": outcome}
    assert verdict[-1].endswith({"reproduced": "reproduced", "reversed": "not reproduced"}.get(outcome, outcome))


def test_dataset_spread_scopes_keep_complete_environments_and_cut_the_mazes_to_1m():
    rows = [("hopper", lv, "aurcc", 0.1 * i, 0.01) for i, lv in enumerate(findings.DATASET_TYPES["locomotion"])]
    rows += [("walker2d", "medium", "aurcc", 0.2, 0.01), ("walker2d", "expert", "aurcc", 0.3, 0.01)]  # partial
    rows += [("maze2d-umaze", lv, "aurcc", 0.05, 0.01) for lv in ("1k", "10k", "100k", "1m")]
    rows += [("maze2d-open", lv, "aurcc", 0.05, 0.01) for lv in ("1k", "1m")]  # partial
    rows += [("hopper", "medium", "loss", 0.9, 0.01)]  # another metric
    scopes = findings.dataset_spread_scopes(_table(rows))
    assert list(scopes) == ["every complete environment", "the paper's scope (mazes on 1m)", "locomotion alone"]
    whole, paper, locomotion = scopes.values()
    assert sorted(whole["environment"].unique()) == ["hopper", "maze2d-umaze"] and len(whole) == 9
    assert (whole["metric"] == "aurcc").all()
    assert sorted(paper[paper["environment"] == "maze2d-umaze"]["level"]) == ["1m"] and len(paper) == 6
    assert set(locomotion["environment"]) == {"hopper"} and len(locomotion) == 5
    # no locomotion environment is complete: that scope is left out, not empty
    only_mazes = findings.dataset_spread_scopes(_table([r for r in rows if r[0] != "hopper"]))
    assert list(only_mazes) == ["every complete environment", "the paper's scope (mazes on 1m)"]
    with pytest.raises(ValueError, match="metric"):
        findings.dataset_spread_scopes(_table(rows), metric="accuracy")


def test_level_difference_verdict_each_kind_with_given_and_paper_claims():
    table = _table(
        [
            ("hopper", "0", "aurcc", 0.20, 0.01),  # prior 5 lower, separated
            ("hopper", "5", "aurcc", 0.10, 0.01),
            ("walker2d", "0", "aurcc", 0.10, 0.05),  # within the intervals, but wider than the margin
            ("walker2d", "5", "aurcc", 0.12, 0.05),
            ("maze2d-umaze", "0", "aurcc", 0.100, 0.003),  # the difference's interval inside +-0.01
            ("maze2d-umaze", "5", "aurcc", 0.102, 0.003),
            ("maze2d-large", "0", "aurcc", 0.20, 0.01),
            ("maze2d-large", "5", "aurcc", 0.25, 0.01),  # prior 5 higher, separated
        ]
    )
    same = findings.level_difference_verdict(table, "prior-scale", claims="same")
    assert same[0] == "hopper: AURCC lower with 5 than with 0 (no prior) by 0.100 (separated)"
    assert same.outcomes == {
        "hopper": "reversed",
        "walker2d": "inconclusive",  # reproduced by overlap under the old rule; +-0.071 is no absence
        "maze2d-umaze": "reproduced",  # 0.002 +- 0.004 lies inside AURCC's margin of 0.01
        "maze2d-large": "reversed",
    }
    lower = findings.level_difference_verdict(table, "prior-scale", claims={"hopper": "lower", "walker2d": "lower"})
    assert lower.outcomes == {"hopper": "reproduced", "walker2d": "inconclusive"}  # the large maze: no claim
    # by default each environment is judged against the paper's own cell (Tables 6 and 10)
    claims = findings.paper_claims("prior-scale")
    assert claims["maze2d-large"] == {"5": "lower"}  # Table 10: 0.140 -> 0.104, disjoint intervals
    assert claims["hopper"] == {"5": "same"}  # Table 6: 0.141 vs 0.145, overlapping
    assert claims["walker2d"] == {"5": "lower"}  # Table 6: disjoint intervals
    paper = findings.level_difference_verdict(table, "prior-scale")
    assert paper.outcomes == {
        "hopper": "reversed",
        "walker2d": "inconclusive",
        "maze2d-umaze": "reproduced",  # Table 10: no difference
        "maze2d-large": "reversed",
    }
    assert findings.paper_claims("clipping") == {}
    assert findings.level_difference_verdict(table.assign(level=table["level"]), "clipping").outcomes == {}


# --------------------------------------------------------------------------------------------
# Findings at a glance
# --------------------------------------------------------------------------------------------
def test_every_ablation_has_one_finding_and_a_chapter_name():
    assert [f.ablation for f in findings.FINDINGS] == list(ex.ABLATIONS)
    assert all(f.words for f in findings.FINDINGS)
    assert findings.chapter_name("ensemble-count") == "ablation_ensemble_count"


@pytest.mark.filterwarnings("ignore:judge_finding")  # hand-made tables carry no runs
def test_judge_finding_on_hand_made_tables():
    table = _table(
        [
            ("hopper", "10", "aurcc", 0.05, 0.01),
            ("hopper", "50", "aurcc", 0.15, 0.02),
            ("walker2d", "10", "aurcc", 0.30, 0.01),
            ("walker2d", "50", "aurcc", 0.10, 0.01),
        ]
    )
    verdict = findings.judge_finding("horizon", table)
    assert verdict.outcomes == {"hopper": "reproduced", "walker2d": "reversed"}
    assert findings.judge_finding("mixture", table) is None
    confidence = _table(
        [
            ("walker2d", "ev", "aurcc", 0.070, 0.002),  # the paper (Table 4): PCI higher AURCC, lower CR_K
            ("walker2d", "pci", "aurcc", 0.080, 0.002),
            ("walker2d", "ev", "cr_k", 0.30, 0.01),
            ("walker2d", "pci", "cr_k", 0.20, 0.01),
            ("hopper", "ev", "aurcc", 0.10, 0.002),  # the paper: AURCC alike, CR_K lower; ours: both differ
            ("hopper", "pci", "aurcc", 0.13, 0.002),
            ("hopper", "ev", "cr_k", 0.30, 0.01),
            ("hopper", "pci", "cr_k", 0.90, 0.01),
        ]
    )
    judged = findings.judge_finding("confidence", confidence)
    assert judged.outcomes == {"walker2d": "reproduced", "hopper": "reversed"}
    mixed = confidence.assign(mean=confidence["mean"].where(confidence["metric"] != "aurcc", 0.10))
    # hopper: AURCC alike as in the paper, CR_K the other way: a mixed finding is inconclusive
    assert findings.judge_finding("confidence", mixed).outcomes["hopper"] == "inconclusive"


def test_findings_at_a_glance_reads_every_committed_set_and_links_the_chapters(tmp_path):
    root = tmp_path / "ablations"
    for name in ("prior-scale", "horizon"):
        grid = ex.plan_ablation(name, "tiny", environments=["maze2d-umaze"], datasets=["1m"], seeds=2)
        ex.run_grid(grid, root / "paper" / "tiny", answer_fn=SyntheticAnswers(key="environment-seed"), progress=False)
    frame = findings.findings_at_a_glance(root)
    assert list(frame["ablation"]) == list(ex.ABLATIONS)
    column = "tiny (paper queries)"
    assert column in frame.columns
    by_name = frame.set_index("ablation")
    assert by_name.loc["stochastic", column] == "–", "a configuration ablation needs all its levels"
    verdicts = frame.attrs["verdicts"]
    # identical values for both prior scales, as the paper's umaze cell (Table 10: no difference), but
    # two seeds per level give an interval far wider than AURCC's margin: the absence is not shown
    assert verdicts[("prior-scale", column)].outcomes == {"maze2d-umaze": "inconclusive"}
    assert by_name.loc["prior-scale", column] == "inconclusive [1 environment only (maze2d-umaze)]"
    assert by_name.loc["horizon", column].startswith(verdicts[("horizon", column)].summary() + " [1 environment only")
    assert by_name.loc["mixture", column] == "–"  # its second level was not run
    assert by_name.loc["horizon", "chapter"] == "{doc}`ablation_horizon`"
    table = findings.glance_table(frame)
    assert table.header == ("finding", "paper tables", column)
    horizon = by_name.loc["horizon", "title"]
    assert f"{{doc}}`{horizon} <ablation_horizon>`: " in str(table)
    page = table.to_html()
    assert f'<a href="ablation_horizon.html">{horizon}</a>' in page and "{doc}" not in page
    assert page.count("<a href=") == int(frame["chapter_name"].astype(bool).sum())
    assert table.caption == findings.glance.GLANCE_CAPTION


def test_findings_at_a_glance_judges_no_environment_on_a_single_run(tmp_path):
    directory = tmp_path / "ablations" / "paper" / "tiny"
    data = {"maze2d-umaze": ("1m",), "hopper": ("medium",)}
    answer = SyntheticAnswers(key="environment-seed")
    column = "tiny (paper queries)"

    def run(environments, seeds, configuration):
        grid = ex.GridSpec(environments, {env: data[env] for env in environments}, seeds, (configuration,))
        ex.run_grid(grid, directory, answer_fn=answer, progress=False)

    run(("maze2d-umaze", "hopper"), (0, 1), {})
    run(("maze2d-umaze",), (0, 1), {"prior_scale": 5.0})
    run(("hopper",), (0,), {"prior_scale": 5.0})  # one seed of the second level so far
    frame = findings.findings_at_a_glance(directory.parent.parent)
    assert set(frame.attrs["verdicts"][("prior-scale", column)].outcomes) == {"maze2d-umaze"}
    run(("hopper",), (1,), {"prior_scale": 5.0})  # the second seed lands: Hopper is judged
    frame = findings.findings_at_a_glance(directory.parent.parent)
    assert set(frame.attrs["verdicts"][("prior-scale", column)].outcomes) == {"maze2d-umaze", "hopper"}
    assert "two runs or more" in findings.glance.GLANCE_CAPTION


def test_findings_at_a_glance_leaves_a_level_of_one_run_unjudged(tmp_path):
    directory = tmp_path / "ablations" / "paper" / "tiny"
    grid = ex.GridSpec(("maze2d-umaze",), {"maze2d-umaze": ("1m",)}, (0,), ({}, {"prior_scale": 5.0}))
    ex.run_grid(grid, directory, answer_fn=SyntheticAnswers(key="environment-seed"), progress=False)
    frame = findings.findings_at_a_glance(directory.parent.parent)
    assert frame.set_index("ablation").loc["prior-scale", "tiny (paper queries)"] == "–"


def test_findings_at_a_glance_labels_each_root_and_the_sizes_its_runs_read(tmp_path):
    """A classroom grid that read the tiny profile's data and queries is labelled so; a second
    root at the profile's own sizes gets a column of its own."""
    from opcc_edu.lab.experiments.store import ResultsStore

    first, second = tmp_path / "ablations", tmp_path / "ablations-classroom"
    grid = ex.plan_ablation("prior-scale", "tiny", environments=["maze2d-umaze"], datasets=["1m"], seeds=2)
    for root, sizes in ((first, (20_000, 300)), (second, (200_000, 1500))):
        directory = root / "paper" / "classroom"
        ex.run_grid(grid, directory, answer_fn=SyntheticAnswers(key="environment-seed"), progress=False)
        meta = ResultsStore(directory).meta_json
        data = json.loads(meta.read_text())
        data["sizes"] = {"dataset_size": sizes[0], "queries_per_env": sizes[1], "mc_runs": 1}
        meta.write_text(json.dumps(data))
    assert findings.results_label(first / "paper" / "classroom") == "classroom models, tiny data (paper queries)"
    assert findings.results_label(second / "paper" / "classroom") == "classroom (paper queries)"
    alone = findings.findings_at_a_glance(first)
    assert "classroom models, tiny data (paper queries)" in alone.columns
    assert "classroom (paper queries)" not in alone.columns  # a root given: no other root unless asked
    both = findings.findings_at_a_glance(first, also=[second])
    columns = [c for c in both.columns if c.endswith("queries)")]
    assert columns == ["classroom models, tiny data (paper queries)", "classroom (paper queries)"]
    by_name = both.set_index("ablation")
    one = "inconclusive [1 environment only (maze2d-umaze)]"
    assert by_name.loc["prior-scale", columns[0]] == by_name.loc["prior-scale", columns[1]] == one
    with pytest.raises(ValueError, match="two results directories give the column"):
        findings.findings_at_a_glance(first, also=[first])


@pytest.mark.filterwarnings("ignore:judge_finding")  # hand-made tables carry no runs
def test_the_termination_finding_is_judged_only_where_an_episode_can_end_early():
    rows = []
    for env in ("hopper", "walker2d", "halfcheetah", "maze2d-umaze"):
        worse = env in ("hopper", "maze2d-umaze")  # a separated change in umaze is noise: no rule can fire
        for level, mean in (
            ("predefined", 0.10),
            ("learned", 0.20 if worse else 0.05),
            ("none", 0.20 if worse else 0.05),
        ):
            rows.append((env, level, "aurcc", mean, 0.01))
    verdict = findings.judge_finding("termination", _table(rows))
    assert set(verdict.outcomes) == {"hopper", "walker2d"}
    assert verdict.outcomes == {"hopper": "reproduced", "walker2d": "reversed"}


def test_a_glance_cell_says_when_its_data_is_not_comparable_with_the_papers():
    five = "random, medium-replay, medium, medium-expert, expert"
    rows = []
    for env, datasets in (("hopper", "medium"), ("walker2d", "medium"), ("halfcheetah", five), ("maze2d-umaze", "1m")):
        for level, mean in (("0", 0.10), ("5", 0.10)):
            rows.append((env, level, "aurcc", mean, 0.001, datasets))
    table = pd.DataFrame(rows, columns=["environment", "level", "metric", "mean", "ci", "datasets"])
    verdict = findings.level_difference_verdict(table, "prior-scale", claims="same")
    notes = findings.glance.comparability_notes(table, verdict, "prior-scale")
    assert notes == ["2 of 4 environments on medium data only; paper: 5 datasets"]
    # the mazes' 1m cells are the paper's; the dataset-type ablation's level is the dataset
    mazes = table[table["environment"].str.startswith("maze")]
    assert findings.glance.comparability_notes(mazes, verdict, "prior-scale") == ["1 environment only (maze2d-umaze)"]
    one = table[table["environment"] == "hopper"]
    alone = findings.level_difference_verdict(one, "prior-scale", claims="same")
    assert findings.glance.comparability_notes(one, alone, "prior-scale") == [
        "1 environment only (hopper)",
        "on medium data only; paper: 5 datasets",
    ]
    assert findings.glance.comparability_notes(table, verdict, "clipping") == []  # no paper table to compare with
    assert "not comparable" in findings.glance.GLANCE_CAPTION and "margin" in findings.glance.GLANCE_CAPTION


def test_a_glance_cell_on_one_environment_shows_the_note(tmp_path):
    root = tmp_path / "ablations"
    grid = ex.plan_ablation("prior-scale", "tiny", environments=["maze2d-umaze"], datasets=["1m"], seeds=2)
    ex.run_grid(grid, root / "paper" / "tiny", answer_fn=SyntheticAnswers(key="environment-seed"), progress=False)
    frame = findings.findings_at_a_glance(root)
    cell = frame.set_index("ablation").loc["prior-scale", "tiny (paper queries)"]
    assert cell == "inconclusive [1 environment only (maze2d-umaze)]"


def test_what_we_learned_states_the_rule_margins_and_verdicts_through_the_package():
    """book/what_we_learned.ipynb types no verdict and no margin count: it prints them with
    :func:`findings.margin_statement` and :func:`findings.show_all_verdicts` (the rendered book's
    test compares its verdicts with each lesson's)."""
    import nbformat

    page = Path(__file__).resolve().parents[2] / "book" / "what_we_learned.ipynb"
    code = "\n".join(c.source for c in nbformat.read(page, as_version=4).cells if c.cell_type == "code")
    assert "findings.margin_statement()" in code and "findings.show_all_verdicts()" in code
    text = findings.margin_statement()
    for _, row in findings.glance.paper_margin_agreement().iterrows():
        if row["metric"] in ("aurcc", "rpp", "cr_k", "loss"):
            assert f"{row['inside']} of the {row['not_significant']} it reports as not significant" in text
            assert f"{row['outside']} of the {row['significant']} it reports as significant" in text
    margins = findings.verdicts.EQUIVALENCE_MARGINS
    assert margins["aurcc"] == margins["loss"] == 0.01 and margins["rpp"] == 0.005 and margins["cr_k"] == 0.05


def test_each_lesson_verdict_is_the_glance_verdict_of_its_named_run_set():
    frame = findings.findings_at_a_glance().set_index("ablation")
    for ablation in findings.LESSON_RUN_SETS:
        entry = findings.lesson_results(ablation)
        column = findings.results_label(entry.directory)
        verdict = findings.lesson_verdict(ablation)
        statement = findings.verdict_statement(ablation)
        name = findings.lessons.RUN_SET_NAMES[findings.LESSON_RUN_SETS[ablation]]
        assert f"the {name} (" in statement and "`" not in statement
        if verdict is None:
            assert frame.loc[ablation, column] == "not judged" and "no verdict" in statement
            continue
        assert frame.attrs["verdicts"][(ablation, column)].outcomes == verdict.outcomes, ablation
        assert frame.loc[ablation, column].startswith(verdict.summary()), ablation
        assert f"**Our verdict: {verdict.summary()}**" in statement
        assert statement.startswith("The paper: ")  # the claim is named as the paper's, not ours
        for env, outcome in verdict.outcomes.items():
            assert env in statement.split(f"{outcome}: ")[1].split(";")[0], (ablation, env)
    with pytest.raises(ValueError, match="unknown ablation 'no-such-ablation'; valid choices: dataset-type"):
        findings.lesson_results("no-such-ablation")


def test_a_lesson_asks_for_runs_by_their_word_never_by_folder(monkeypatch, tmp_path):
    """``lesson_results(..., runs=...)``, :func:`findings.run_set_label` and
    :func:`findings.one_step_errors` read the small, larger and hard runs (:data:`findings.RUN_SETS`)
    as the folders they stand for, so a lesson's code names no folder, profile or stored key."""
    assert findings.RUN_SETS == {
        "small": "paper/tiny",
        "larger": "ablations-classroom/paper/classroom",
        "hard": "hard/tiny",
    }
    hard = findings.lesson_results("horizon", runs="hard")
    assert hard is findings.lesson_results("horizon", runs="hard"), "read once per process"
    assert hard.name == "hard/tiny" and hard.table.equals(findings.load_committed("horizon")["hard/tiny"].table)
    assert findings.lesson_results("horizon", runs="larger") is findings.lesson_results("horizon")
    assert findings.lesson_results("termination", runs="small") is findings.lesson_results("termination")
    # findings_at_a_glance's columns: one label per results directory of every root
    root = ex.find_results_root()
    columns = {
        findings.results_label(base / name)
        for base in (root, *sorted(root.parent.glob(f"{root.name}-*")))
        for name in profile_directories(base)
    }
    for runs in findings.RUN_SETS:
        label = findings.run_set_label(runs)
        assert label == findings.results_label(findings.lesson_results("horizon", runs=runs).directory)
        assert label in columns, (runs, label)
    assert (findings.run_set_label("small"), findings.run_set_label("larger")) == (
        "tiny (paper queries)",
        "classroom (paper queries)",
    )
    # the one-step error measured on the model-type lesson's own runs (the small runs)
    errors = findings.one_step_errors("model-type")
    assert set(errors) == {"maze2d-umaze/1m", "hopper/medium"}
    assert all(
        len(by_level[lv]) == 3 and {"mse", "seed"} <= set(by_level[lv][0])
        for by_level in errors.values()
        for lv in ("ff", "ar")
    )
    assert errors != findings.one_step_errors("model-type", runs="larger")
    with pytest.raises(LookupError, match="not the run set 'hard/tiny'"):
        findings.one_step_errors("model-type", runs="hard")
    with pytest.raises(LookupError, match="no one-step error measured"):
        findings.one_step_errors("horizon")
    with pytest.raises(ValueError, match="unknown set of runs 'huge'; valid choices: small, larger, hard"):
        findings.lesson_results("horizon", runs="huge")
    with pytest.raises(ValueError, match="unknown set of runs 'huge'"):
        findings.run_set_label("huge")
    monkeypatch.setenv("OPCC_EDU_RESULTS", str(tmp_path / "nothing"))
    with pytest.raises(LookupError, match="not committed"):
        findings.run_set_label("small")


def test_glance_judges_clipping_on_the_two_levels_its_finding_reads():
    """The clipping finding reads the default box and no clipping only, so a set of results with
    those two levels (the larger runs: no data's-box or observations'-box runs) is judged, not
    shown as without results."""
    frame = findings.findings_at_a_glance()
    larger = findings.run_set_label("larger")
    assert frame.set_index("ablation").loc["clipping", larger] != "–"
    assert set(frame.attrs["verdicts"][("clipping", larger)].outcomes) == {"maze2d-umaze", "hopper"}


def test_a_level_title_with_a_comma_is_quoted_in_a_verdict_line():
    titles = findings.verdicts.level_titles("clipping")
    assert "," in titles["health"] and "," not in titles["transitions"]
    verdict = findings.level_difference_verdict(findings.lesson_results("clipping").table, "clipping")
    line = next(line for line in verdict if titles["transitions"] in line)
    assert f'than with "{titles["health"]}" by' in line and f"with {titles['transitions']} than" in line


def test_a_size_ratio_never_prints_as_the_factor_itself():
    assert findings.rule.size_ratio(0.1, 0.303) == "1/3.03 of"
    assert findings.rule.size_ratio(0.303, 0.1) == "3.03×"
    assert findings.rule.size_ratio(0.1, 0.4) == "1/4.0 of"
    assert findings.rule.size_ratio(0.1, 0.3) is None


def test_the_normalization_finding_names_the_paper_tables_directions():
    """The finding's words list the environments where the paper's tables separate raw inputs
    from normalized ones, each on its side (what the verdict judges); the others are the same."""
    words = next(f.words for f in findings.FINDINGS if f.ablation == "normalization")
    claims = {env: claim["false"] for env, claim in findings.paper_claims("normalization").items()}
    higher, lower = words.split(" rises on ")[1].split(", falls on ")
    names = {
        "walker2d": "Walker2d",
        "hopper": "Hopper",
        "maze2d-large": "large",
        "maze2d-open": "open",
        "maze2d-umaze": "U-maze",
        "maze2d-medium": "medium",
        "halfcheetah": "HalfCheetah",
    }
    for env, claim in claims.items():
        assert (names[env] in higher) == (claim == "higher"), env
        assert (names[env] in lower) == (claim == "lower"), env
