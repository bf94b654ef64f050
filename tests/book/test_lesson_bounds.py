"""A lesson reads in 20-25 minutes: every rendered lesson page within the book's bounds.

``scripts/lesson_bounds.py`` measures a rendered page (words of the main text with cell outputs,
visible tables, the widest table's columns, insider words). With ``$OPCC_EDU_BOOK_HTML`` naming a
built book (as for ``tests/book/test_rendered_book.py``, whose page discovery this reuses), every
lesson page must be within the bounds. Lesson pages are the chapters of ``_toc.yml`` except the
appendix (lab notes: a part whose caption names lab notes or an appendix, or a file under
``book/lab_notes/``), the Assignments part, the teaching guide, the references and the glossary;
the root page (the introduction) is no chapter. Without a built book those tests skip; the unit
tests below check the checker on small hand-made pages, so that it can fail.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("bs4", reason="beautifulsoup4 reads the built HTML")

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # a dataclass needs its module registered
    spec.loader.exec_module(module)
    return module


bounds = _load("lesson_bounds", ROOT / "scripts" / "lesson_bounds.py")
rendered = _load("_rendered_book_pages", Path(__file__).with_name("test_rendered_book.py"))

#: Parts of the book that hold no lesson (matched in lower case in the part's caption).
NOT_LESSON_PARTS = ("lab notes", "appendix", "assignments")
#: Chapters that are no lesson (the file's name, without folder).
NOT_LESSON_FILES = {"teaching_guide", "references", "glossary"}


def lesson_entries(toc: dict) -> list[str]:
    """The TOC entries of the lesson pages (see the module's docstring)."""
    entries = []
    for part in toc.get("parts", []):
        if any(word in str(part.get("caption", "")).lower() for word in NOT_LESSON_PARTS):
            continue
        for chapter in part.get("chapters", []):
            entry = chapter["file"]
            if Path(entry).name in NOT_LESSON_FILES or "/lab_notes/" in f"/{entry}":
                continue
            entries.append(entry)
    return entries


LESSONS = {
    entry: path
    for entry in lesson_entries(yaml.safe_load((ROOT / "_toc.yml").read_text()))
    if (path := rendered._page_path(entry)) is not None
}


@pytest.mark.skipif(not LESSONS, reason="no built lesson page: build the executed book and set OPCC_EDU_BOOK_HTML")
@pytest.mark.parametrize("entry", sorted(LESSONS), ids=lambda e: Path(e).name)
def test_lesson_page_within_bounds(entry):
    measured = bounds.measure(LESSONS[entry])
    assert not measured.problems(), f"{entry}: {'; '.join(measured.problems())} (move the record to its lab notes)"


def test_lesson_entries_leave_out_the_appendix_assignments_and_reference_pages():
    toc = {
        "root": "book/intro",
        "parts": [
            {"caption": "Background", "chapters": [{"file": "book/mdp_background"}]},
            {"caption": "Ablations", "chapters": [{"file": "book/ablation_horizon"}, {"file": "book/glossary"}]},
            {"caption": "Assignments", "chapters": [{"file": "book/teaching_guide"}, {"file": "assignments/x/y"}]},
            {"caption": "Lab notes", "chapters": [{"file": "book/lab_notes/horizon"}]},
            {"caption": "Other", "chapters": [{"file": "book/lab_notes/other"}, {"file": "book/references"}]},
        ],
    }
    assert lesson_entries(toc) == ["book/mdp_background", "book/ablation_horizon"]


def _page(body: str) -> str:
    return f'<html><body><div class="nav">menu words</div><article class="bd-article">{body}</article></body></html>'


def _table(columns: int, rows: int = 1) -> str:
    head = "".join(f"<th>c{j}</th>" for j in range(columns))
    body = "".join("<tr>" + "".join(f"<td>{i}</td>" for _ in range(columns)) + "</tr>" for i in range(rows))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(source: str, output: str) -> str:
    return (
        '<div class="cell docutils container"><div class="cell_input docutils container">'
        f'<div class="highlight-ipython3 notranslate"><div class="highlight"><pre>{source}</pre></div></div></div>'
        f'<div class="cell_output docutils container">{output}</div></div>'
    )


SMALL = _page(
    '<section><h1>A title<a class="headerlink" href="#t">#</a></h1>'
    "<p>One two three four five.</p>"
    + _cell("print('code words are not counted at all')", '<div class="output stream"><pre>six seven</pre></div>')
    + _cell("df", '<div class="output text_html"><style>.x { y: z }</style>' + _table(3, rows=2) + "</div>")
    + '<div class="solution dropdown admonition"><p>Solution words hidden from results/ablations/x</p></div>'
    + '<details class="sd-dropdown"><summary>More</summary><p>hidden hidden hidden</p></details>'
    + '<details open=""><summary>Open</summary><p>shown</p></details>'
    + '<div class="highlight-python notranslate"><pre>ex.load("ablations-classroom")</pre></div>'
    + '<div class="cell tag_hide-output"><div class="cell_input"><pre>x</pre></div>'
    '<details class="admonition hide below-input"><summary>Show output</summary>'
    '<div class="cell_output">' + _table(9) + "</div></details></div>"
    "</section>"
)


def test_checker_counts_what_a_reader_sees():
    measured = bounds.measure_html(SMALL)
    # "A title" 2, prose 5, output 2, table: 3 headers + 6 cells, the open dropdown 2 ("Open shown")
    assert measured.words == 2 + 5 + 2 + 9 + 2
    assert (measured.tables, measured.widest) == (1, 3)  # the hidden output's 9-column table is collapsed
    assert measured.insider == ["results/ablations"]  # in collapsed prose; the code block's name is code
    assert measured.problems() == ["insider words: results/ablations"]


def test_an_unresolved_doc_link_counts_as_the_page_title_a_full_build_shows():
    """A single-page build shows a {doc} link's target name; the full build shows its title."""
    title = bounds.page_title("policy_comparison_queries")
    assert title and len(title.split()) > 1  # a title of several words, read from the notebook
    single = _page('<p>See <span class="xref std std-doc">policy_comparison_queries</span>.</p>')
    full = _page(f'<p>See <a class="reference internal" href="x.html"><span class="doc">{title}</span></a>.</p>')
    assert bounds.measure_html(single).words == bounds.measure_html(full).words == 1 + len(title.split())
    unknown = _page('<p>See <span class="xref std std-doc">no_such_page</span>.</p>')
    assert bounds.measure_html(unknown).words == 2  # left as shown when no source is found


def test_a_single_page_build_counts_citations_and_the_chapter_number_as_the_full_build_shows_them():
    """A single-page build leaves a citation empty ("[]") and its title unnumbered."""
    single = _page('<h1>A title</h1><p>As shown <span class="bibtex-citation" id="id2">[]</span>.</p>')
    full = _page(
        '<h1>10. A title</h1><p>As shown <span class="bibtex-citation">[<a href="r.html">Koul '
        "<em>et al.</em>, 2022</a>]</span>.</p>"
    )
    assert bounds.measure_html(single).words == bounds.measure_html(full).words == 3 + 2 + 4
    # a full build's resolved citation and numbered title are counted as they are
    assert bounds.measure_html(full).words == len(bounds._WORD.findall("10. A title As shown [Koul et al., 2022]."))


def test_checker_fails_a_page_that_breaks_each_bound(tmp_path):
    within = _page("<p>" + " ".join(["word"] * bounds.MAX_WORDS) + "</p>")
    assert bounds.measure_html(within).problems() == []
    too_long = _page("<p>" + " ".join(["word"] * (bounds.MAX_WORDS + 1)) + "</p>")
    assert "words" in bounds.measure_html(too_long).problems()[0]
    six = _page(_table(2) * bounds.MAX_TABLES)
    assert bounds.measure_html(six).problems() == []
    assert "tables" in bounds.measure_html(_page(_table(2) * (bounds.MAX_TABLES + 1))).problems()[0]
    assert bounds.measure_html(_page(_table(bounds.MAX_COLUMNS))).problems() == []
    wide = bounds.measure_html(_page(_table(bounds.MAX_COLUMNS + 1)))
    assert wide.widest == bounds.MAX_COLUMNS + 1 and "columns" in wide.problems()[0]
    spanned = '<table><tr><th colspan="5">a</th><th colspan="3">b</th></tr><tr><td>1</td></tr></table>'
    assert bounds.measure_html(_page(spanned)).widest == 8
    for text, name in (
        ("read from results/ablations/horizon", "results/ablations"),
        ("the paper/tiny grid", "paper/tiny"),
        ("the paper/classroom run", "paper/classroom"),
        ("the hard/tiny queries", "hard/tiny"),
        ("as committed", "committed"),
        ("scripts/run_committed.sh", "run_committed"),
        ("run on fc-v12", "host name"),
        ("bench_answers.py shows", "benchmark script"),
        ("see benchmarks/results", "benchmarks/results"),
        ("the ablations-classroom profile", "ablations-classroom"),
    ):
        found = bounds.measure_html(_page(f"<p>{text}</p>"))
        assert found.insider == [name], (text, found.insider)
    page = tmp_path / "page.html"
    page.write_text(too_long)
    assert bounds.main([str(page)]) == 1
    page.write_text(within)
    assert bounds.main([str(page)]) == 0
