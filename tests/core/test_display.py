"""Tables that render as tables and explorers with a static twin (opcc_edu.display)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from opcc_edu.display import EXPLORER_NOTE, Table, explore  # noqa: E402
from opcc_edu.lab import experiments as ex  # noqa: E402

HEADER = ["environment", "level", "AURCC (↓)", "CR_K (↑)"]
ROWS = [
    ["hopper", "10", "0.100 ± 0.010", "0.600 ± 0.050"],
    ["hopper", "50", "0.300 ± 0.020", "0.800 ± 0.050"],
    ["walker", "10", "0.200 ± 0.010", "0.500 ± 0.050"],
    ["walker", "50", "0.200 ± 0.030", "0.400 ± 0.050"],
]
VALUES = [[None, None, 0.1, 0.6], [None, None, 0.3, 0.8], [None, None, 0.2, 0.5], [None, None, 0.2, 0.4]]


def test_table_is_its_markdown_text_and_renders_html():
    table = Table(HEADER, ROWS, caption="mean ± half-width")
    assert str(table).splitlines()[:2] == [
        "| environment | level | AURCC (↓) | CR_K (↑) |",
        "|---|---|---|---|",
    ]
    html = table._repr_html_()
    assert '<table class="table opcc-table"' in html and html.count("<tr>") == 1 + len(ROWS)
    assert "|---|" not in html and "mean ± half-width</p>" in html
    assert table._repr_markdown_().startswith("mean ± half-width\n\n| environment")


def test_best_cell_per_column_within_each_group():
    table = Table(HEADER, ROWS, values=VALUES, better=[None, None, "lower", "higher"], group=0)
    # hopper: AURCC 0.1 (row 0) lowest, CR_K 0.8 (row 1) highest; walker: AURCC ties (none),
    # CR_K 0.5 (row 2) highest
    assert table.best == frozenset({(0, 2), (1, 3), (2, 3)})
    html = table.to_html()
    assert html.count('class="best"') == 3 and "<strong>0.100 ± 0.010</strong>" in html


def test_table_escapes_html():
    table = Table(["a"], [["0.001 ± (<0.001)"]])
    assert "(&lt;0.001)" in table.to_html() and "(<0.001)" in str(table)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rows": [["x"]]}, "row 0 has 1 cells"),
        ({"rows": ROWS, "values": VALUES, "better": ["lower"]}, "one direction per column"),
        ({"rows": ROWS, "values": VALUES, "better": [None, None, "smaller", None]}, "'smaller'"),
        ({"rows": ROWS, "values": VALUES[:2], "better": [None] * 4}, "values needs one number"),
        ({"rows": ROWS, "values": VALUES, "better": [None] * 4, "group": 7}, "group must be a column index"),
    ],
)
def test_table_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Table(HEADER, **kwargs)


def test_merged_columns_show_each_run_of_equal_cells_once_in_html_only():
    rows = [
        ["hopper", "0", "medium", "Table 1", "0.1"],
        ["hopper", "5", "medium", "none", "0.2"],
        ["walker", "0", "medium", "Table 1", "0.3"],
        ["walker", "5", "medium", "Table 1", "0.4"],
    ]
    table = Table(["environment", "level", "data", "paper's cell", "AURCC"], rows, group=0, merge=(0, 2, 3))
    html = table.to_html()
    # a run never crosses a group: "medium" spans two rows per environment, not four
    assert html.count('rowspan="2"') == 5 and 'rowspan="4"' not in html
    assert html.count(">medium<") == 2 and html.count(">Table 1<") == 2 and html.count(">none<") == 1
    assert html.count(">hopper<") == 1 and all(f">{v}<" in html for v in ("0.1", "0.2", "0.3", "0.4"))
    assert str(table).count("medium") == 4, "the Markdown text keeps every cell"
    with pytest.raises(ValueError, match="merge must hold column indices"):
        Table(["a"], [["x"]], merge=(3,))


def _comparison():
    rows = []
    for level, ours in (("10", 0.05), ("50", 0.2)):
        for metric in ("aurcc", "rpp", "cr_k", "loss"):
            rows.append(
                {
                    "environment": "hopper",
                    "level": level,
                    "paper_level": level,
                    "metric": metric,
                    "ours_mean": ours,
                    "ours_ci": 0.01,
                    "paper_mean": ours / 2,
                    "paper_ci": 0.002,
                    "paper_ci_is_bound": False,
                }
            )
    return pd.DataFrame(rows)


def test_format_table_is_a_table_with_the_same_text_and_marked_best():
    table = ex.format_table(_comparison())
    assert isinstance(table, Table) and table.caption == ex.TABLE_CAPTION
    assert str(table).splitlines()[2].startswith("| hopper | 10 | 0.050 ± 0.010 | 0.025 ± 0.002 |")
    # lower is better for AURCC, RPP and loss (level 10), higher for CR_K (level 50)
    columns = {table.header[j]: i for i, j in table.best}
    assert columns["AURCC (↓) ours"] == 0 and columns["CR_K (↑) ours"] == 1 and columns["loss (↓) paper"] == 0
    latex = ex.format_table(_comparison(), fmt="latex")
    assert not isinstance(latex, Table) and latex.startswith("\\begin{tabular}")


def test_explore_draws_the_default_once_then_redraws_on_change(monkeypatch):
    calls = []
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))

    def draw(n=3):
        calls.append(n)
        plt.figure()

    import ipywidgets as widgets

    slider = widgets.IntSlider(value=3, min=1, max=5)
    explorer = explore(draw, n=slider)
    assert calls == [3], "the default state is drawn once, outside the widget"
    assert len(shown) == 1 and shown[0].data == EXPLORER_NOTE
    slider.value = 5
    assert calls == [3, 5]
    assert isinstance(explorer, widgets.interactive)
    plt.close("all")


def test_explore_needs_a_control():
    with pytest.raises(ValueError, match="at least one control"):
        explore(lambda: None)


def test_spans_group_the_header_in_html_only():
    table = Table(["env", "AURCC ours", "AURCC paper"], [["hopper", "0.1", "0.2"]], spans=[("", 1), ("AURCC", 2)])
    html = table.to_html()
    assert '<th colspan="2" style="text-align: center">AURCC</th>' in html
    assert ">ours</th>" in html and ">paper</th>" in html
    assert str(table).startswith("| env | AURCC ours | AURCC paper |")
    with pytest.raises(ValueError, match="spans must cover the 3 columns"):
        Table(["a", "b", "c"], [], spans=[("x", 2)])


def test_query_explorer_draws_its_first_query_and_follows_the_environment(monkeypatch):
    from opcc_edu.plotting import query_explorer
    from opcc_edu.queries import load_queries

    monkeypatch.setattr("IPython.display.display", lambda obj: None)
    sets = {name: load_queries(name) for name in ("maze2d-umaze", "maze2d-open")}
    plt.close("all")
    explorer = query_explorer(sets, env_name="maze2d-open")
    assert len(plt.get_fignums()) == 1, "the first query is drawn once, as an ordinary figure"
    env, horizon, number = explorer.children[:3]
    assert env.value == "maze2d-open" and number.max == len(sets["maze2d-open"]) - 1
    env.value = "maze2d-umaze"
    assert list(horizon.options) == ["all", *sets["maze2d-umaze"].horizons]
    assert number.max == len(sets["maze2d-umaze"]) - 1
    horizon.value = sets["maze2d-umaze"].horizons[0]
    assert number.max == int((sets["maze2d-umaze"].horizon == horizon.value).sum()) - 1
    plt.close("all")
    with pytest.raises(ValueError, match="not one of the query sets"):
        query_explorer(sets, env_name="hopper")
    with pytest.raises(ValueError, match="at least one query set"):
        query_explorer({})
    with pytest.raises(ValueError, match="one query set only"):
        query_explorer(sets, policies=[])


def test_explore_can_leave_the_default_figure_to_the_cell_above(monkeypatch):
    import ipywidgets as widgets

    calls = []
    monkeypatch.setattr("IPython.display.display", lambda obj: None)
    slider = widgets.IntSlider(value=1, min=1, max=3)
    explore(lambda n: calls.append(n), draw=False, n=slider)
    assert calls == []
    slider.value = 2
    assert calls == [2]
