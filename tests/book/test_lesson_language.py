"""Lessons speak to students: no insider words on the page, and code that fits the page.

A lesson's prose (its Markdown) and the code a reader sees (code cells not hidden by the
``remove-cell`` tag or the hidden-check marker, and the code of its solutions) name no profile,
no file path or results folder, no stored result file, no hidden check and no machinery of the
repository; an exercise is cited by its number (16.2), not as "exercise 2"; and every visible
code line fits the page: at most :data:`MAX_COLUMNS` characters.

The lessons are the pages of ``_toc.yml`` apart from the lab notes, the teaching guide and the
assignments (:func:`tests.book.test_glossary.lesson_pages`).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The widest code line a page shows without a scroll bar.
MAX_COLUMNS = 80
CHECK_MARKER = "# hidden check: runs in the test suite only"  # = opcc_edu.display.CHECK_MARKER

#: (what it is, pattern) of the words a lesson keeps off its page, in prose and in code.
INSIDER = [
    (
        "a profile's name",
        re.compile(
            r"`(tiny|classroom)`|[\"'/-](tiny|classroom)[\"'/]|/tiny\b|\b(tiny|classroom|paper) profile\b", re.I
        ),
    ),
    ("a results folder or file", re.compile(r"results/|[\"']results[\"']|\w+\.(json|csv|npz|safetensors)\b")),
    ("a grid's stored key", re.compile(r"[\"'](hard|paper)/\w+[\"']")),
    ("a hidden check", re.compile(r"hidden (cell|check)s?\b", re.I)),
    (
        "a lab-notebook remark",
        re.compile(r"\b(not\s+been\s+timed|has\s+not\s+been\s+run|committed|an\s+earlier\s+version)\b", re.I),
    ),
    ("an older recipe as a current one", re.compile(r"\b(an )?older (query )?recipe\b", re.I)),
    ("an exercise without its chapter's number", re.compile(r"\bexercises? \d+\b(?!\.\d)", re.I)),
]
#: What prose keeps off the page that code may use: the profile's settings by name (code reads
#: them so that a chapter scales with the profile; prose states what they mean).
PROSE_ONLY = [("a profile's setting", re.compile(r"\bprofile\.\w+|profiles? has not", re.I))]
#: What visible code keeps off the page: printing which profile runs.
CODE_ONLY = [("the profile's name printed", re.compile(r"\bprofile\(\)\.name\b|\bprofile\.name\b"))]
FENCED_CODE = re.compile(
    r"^(`{3,})[ \t]*(?:\{code-cell\}[^\n]*|python3?|py|ipython3?)[ \t]*\n(.*?)\n\1[ \t]*$", re.S | re.M
)


def _hidden(cell) -> bool:
    tags = cell.metadata.get("tags", [])
    return "remove-cell" in tags or "remove-input" in tags or cell.source.startswith(CHECK_MARKER)


def page_cells(page: str) -> list[tuple[str, str]]:
    """``(kind, text)`` of what a lesson page shows: ``"prose"`` (Markdown) or ``"code"``."""
    notebook, markdown = ROOT / f"{page}.ipynb", ROOT / f"{page}.md"
    if notebook.exists():
        nb = nbformat.read(notebook, as_version=4)
        return [
            ("prose" if cell.cell_type == "markdown" else "code", cell.source)
            for cell in nb.cells
            if cell.cell_type == "markdown" or (cell.cell_type == "code" and not _hidden(cell))
        ]
    return [("prose", markdown.read_text())] if markdown.exists() else []


def lesson_problems(cells: list[tuple[str, str]]) -> list[str]:
    """What keeps a page's cells from speaking to students (see the module's docstring)."""
    found = []
    for kind, text in cells:
        code = [text] if kind == "code" else [m.group(2) for m in FENCED_CODE.finditer(text)]
        prose = FENCED_CODE.sub("", text) if kind == "prose" else ""
        checks = [(what, pattern, part) for what, pattern in INSIDER for part in [prose, *code]]
        checks += [(what, pattern, prose) for what, pattern in PROSE_ONLY]
        checks += [(what, pattern, part) for what, pattern in CODE_ONLY for part in code]
        for what, pattern, part in checks:
            if match := pattern.search(part):
                line = part[: match.start()].count("\n")
                found.append(f"{what}: {part.splitlines()[line].strip()[:90]!r}")
        for block in code:
            found += [
                f"a code line of {len(line)} columns (at most {MAX_COLUMNS}): {line.strip()[:60]!r}"
                for line in block.splitlines()
                if len(line) > MAX_COLUMNS
            ]
    return list(dict.fromkeys(found))


def _lessons() -> list[str]:
    from tests.book.test_glossary import lesson_pages

    return lesson_pages()


#: The problems still on the pages, page by page (``python -m tests.book.test_lesson_language``
#: writes it): a page may lose one, never gain one, and an entry that no longer occurs must go.
PENDING_FILE = Path(__file__).with_name("lesson_language_pending.json")


def _pending() -> dict[str, list[str]]:
    import json

    return json.loads(PENDING_FILE.read_text()) if PENDING_FILE.exists() else {}


@pytest.mark.parametrize("page", _lessons())
def test_a_lesson_speaks_to_students(page):
    problems = lesson_problems(page_cells(page))
    known = _pending().get(page, [])
    new = [p for p in problems if p not in known]
    assert not new, f"{page}: " + "; ".join(new)
    gone = [p for p in known if p not in problems]
    assert not gone, f"{page}: fixed, so take them off {PENDING_FILE.name}: " + "; ".join(gone)


if __name__ == "__main__":  # rewrite the list of the problems still on the pages
    import json
    import sys

    sys.path.insert(0, str(ROOT))
    found = {page: lesson_problems(page_cells(page)) for page in _lessons()}
    PENDING_FILE.write_text(json.dumps({k: v for k, v in found.items() if v}, indent=1, ensure_ascii=False) + "\n")
    print(f"{sum(map(len, found.values()))} problems on {sum(1 for v in found.values() if v)} pages")


def test_the_check_finds_insider_words_and_long_lines():
    bad = [
        ("prose", "With n = `profile.mdp_rollouts` rollouts, in the tiny profile (checked in a hidden cell)."),
        ("prose", "That profile has not been timed on a GPU yet; see exercise 2."),
        ("prose", "An older query recipe of this package.\n```python\nx = 1\n" + "y = 2  #" + "-" * 90 + "\n```"),
        ("code", 'path = root / "benchmarks" / "results" / "model_error_tiny.json"'),
        ("code", 'grid = load_committed("horizon")["hard/tiny"]'),
        ("code", 'print(f"profile {profile.name}: {n} queries")'),
    ]
    problems = lesson_problems(bad)
    history = lesson_problems([("prose", "The converter (an\nearlier version ignored it) shifts by 0.2.")])
    assert any(p.startswith("a lab-notebook remark") for p in history), history
    for what in (
        "a profile's name",
        "a profile's setting",
        "a hidden check",
        "a lab-notebook remark",
        "an exercise without",
        "an older recipe",
        "a code line of",
        "a results folder",
        "a grid's stored key",
        "the profile's name printed",
    ):
        assert any(p.startswith(what) for p in problems), (what, problems)
    good = [
        ("prose", "See {ref}`ex-ablation-ensemble-count-2` (exercise 15.2) and the paper's Table 9."),
        ("code", "x = 1"),
    ]
    assert lesson_problems(good) == []
