"""Book hygiene: every chapter is stored stripped, listed in the TOC and follows the standard."""

import builtins
import importlib.util
import json
import re
import symtable
from pathlib import Path

import nbformat
import pytest
import yaml

from opcc_edu.display import CHECK_MARKER

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(
    p for p in (ROOT / "book").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts and "_build" not in p.parts
)


def _toc_files():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        for chapter in part.get("chapters", []):
            files.append(chapter["file"])
            files.extend(section["file"] for section in chapter.get("sections", []))
    return files


def _load(path):
    return json.loads(path.read_text())


def test_there_are_chapters():
    assert len(NOTEBOOKS) >= 2


def test_toc_lists_existing_chapters_only_and_all_of_them():
    listed = _toc_files()
    for entry in listed:
        assert (ROOT / f"{entry}.ipynb").exists() or (ROOT / f"{entry}.md").exists(), f"_toc.yml lists missing {entry}"
    stems = {str(p.relative_to(ROOT).with_suffix("")) for p in NOTEBOOKS}
    assert stems <= set(listed), f"chapters missing from _toc.yml: {sorted(stems - set(listed))}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "book").with_suffix("")))
def test_outputs_are_stripped(path):
    for cell in _load(path)["cells"]:
        if cell["cell_type"] == "code":
            assert cell.get("outputs", []) == [], f"{path.name} has stored outputs"
            assert cell.get("execution_count") is None, f"{path.name} has execution counts"


def _sync_module():
    spec = importlib.util.spec_from_file_location("sync_colab", ROOT / "scripts" / "sync_colab.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "book").with_suffix("")))
def test_colab_cell_is_written_from_the_configured_repository(path):
    sync = _sync_module()
    url, ref = sync.repository(ROOT / "_config.yml")
    fresh = json.loads(nbformat.writes(sync.sync_notebook(path, url, ref)))
    remedy = "run: python scripts/sync_colab.py"
    assert fresh == _load(path), f"{path.name}: the Colab cell or a hidden-check marker is out of date; {remedy}"
    cells = nbformat.read(path, as_version=4).cells
    install = next(i for i, c in enumerate(cells) if sync.is_install_cell(c))
    assert cells[install - 1].cell_type == "markdown" and cells[install - 1].source.startswith("# ")
    assert cells[install].metadata.tags == ["remove-cell"], "the install cell is not shown on the page"


def _is_lab_notes(path):
    return "lab_notes" in path.relative_to(ROOT / "book").parts


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "book").with_suffix("")))
def test_chapter_standard(path):
    cells = _load(path)["cells"]
    markdown = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    if _is_lab_notes(path):
        # an appendix page: a title and a line naming the lesson it belongs to; no Summary or Exercises
        first = "".join(cells[0]["source"]) if cells and cells[0]["cell_type"] == "markdown" else ""
        assert first.startswith("# "), f"{path.name}: lab notes open with a title"
        assert "{doc}`" in first, f"{path.name}: lab notes say which lesson they belong to, with a {{doc}} link"
        return
    assert re.search(r"^## Summary", markdown, re.M), f"{path.name}: no Summary section"
    assert re.search(r"^## Exercises", markdown, re.M), f"{path.name}: no Exercises section"
    solved = "{solution}" in markdown or "{solution-start}" in markdown
    assert "{exercise}" in markdown and solved, f"{path.name}: exercises need solutions"
    assert "{cite}" in markdown, f"{path.name}: cite the paper section it covers"
    hidden_asserts = [
        c
        for c in cells
        if c["cell_type"] == "code"
        and "remove-cell" in c.get("metadata", {}).get("tags", [])
        and "assert" in "".join(c["source"])
    ]
    assert hidden_asserts, f"{path.name}: assert the facts it teaches in hidden cells"


# --------------------------------------------------------------------------------------------
# Assignments: what a student reads before starting
# --------------------------------------------------------------------------------------------
ASSIGNMENTS = sorted((ROOT / "assignments" / "source").glob("*.ipynb"))
_QUESTION = re.compile(r"^# BEGIN QUESTION\s*\nname:\s*(\S+)\s*\npoints:\s*([\d.]+)", re.M)
_GRADING_ROW = re.compile(r"^\|\s*(q\d+)\b[^|]*\|\s*([\d.]+)\s*\|", re.M)


@pytest.mark.parametrize("path", ASSIGNMENTS, ids=lambda p: p.stem)
def test_assignment_page_opens_with_its_title_and_says_how_to_submit_and_how_it_is_graded(path):
    cells = nbformat.read(path, as_version=4).cells
    intro = cells[0]
    assert intro.cell_type == "markdown" and intro.source.startswith("# Assignment"), "the title comes first"
    install = next(i for i, c in enumerate(cells) if c.cell_type == "code" and "%pip install" in c.source)
    assert install == 1, "the Colab install cell comes right after the title"
    assert "**How to submit.**" in intro.source and f"`{path.stem}.ipynb`" in intro.source
    assert "**How it is graded.**" in intro.source
    declared = {name: float(points) for name, points in _QUESTION.findall("\n".join(c.source for c in cells))}
    listed = {name: float(points) for name, points in _GRADING_ROW.findall(intro.source)}
    assert declared and listed == declared, f"{path.stem}: the grading table says {listed}, the questions {declared}"
    total = sum(declared.values())
    assert re.search(rf"\*\*How it is graded\.\*\* {total:g} points", intro.source), f"{path.stem}: total {total:g}"
    if "written" in intro.source.lower():
        assert "rubric" in intro.source, f"{path.stem}: a written part states its rubric"


def test_assignments_name_the_vote_margin_for_what_it_is():
    for path in ASSIGNMENTS:
        text = path.read_text()
        assert "vote share" not in text and "vote_share" not in text, f"{path.stem}: |2k - M| / M is the vote margin"


def test_citations_exist_in_bibliography():
    keys = set(re.findall(r"@\w+\{([^,]+),", (ROOT / "references.bib").read_text()))
    for path in NOTEBOOKS:
        text = path.read_text()
        for group in re.findall(r"\{cite[^}]*\}`([^`]+)`", text):
            for key in group.split(","):
                assert key.strip() in keys, f"{path.name} cites unknown key {key.strip()!r}"


# --------------------------------------------------------------------------------------------
# One source of truth: a function lives in the package, not in two chapters
# --------------------------------------------------------------------------------------------
REPEAT_LIMIT = 6
"""A chapter may not repeat this many consecutive code lines of another chapter."""

_DEF = re.compile(r"^\s*(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(", re.M)
_IMPORT = re.compile(r"^(?:import\s|from\s+\S+\s+import\s)")
_PUNCTUATION_ONLY = re.compile(r"^[\W_]*$")


def _code_cells(path):
    """A chapter's code cells but its Colab cell (written by scripts/sync_colab.py, the same in all)."""
    sources = ("".join(c["source"]) for c in _load(path)["cells"] if c["cell_type"] == "code")
    return [source for source in sources if '"google.colab" in sys.modules' not in source]


def defined_functions(path):
    """Names of the functions a chapter's code cells define."""
    return {name for source in _code_cells(path) for name in _DEF.findall(source)}


def normalized_code_lines(path):
    """A chapter's code lines with whitespace collapsed, minus blank, comment, magic, import and
    punctuation-only lines (an import continuation inside parentheses counts as an import)."""
    lines = []
    for source in _code_cells(path):
        in_import = False
        for raw in source.splitlines():
            line = " ".join(raw.split())
            if in_import:
                in_import = not line.startswith(")") and not line.endswith(")")
                continue
            if not line or line.startswith(("#", "%", "!")):
                continue
            if _IMPORT.match(line):
                in_import = line.endswith("(")
                continue
            if _PUNCTUATION_ONLY.match(line):
                continue
            lines.append(line)
    return lines


def repeated_runs(lines_a, lines_b, length=REPEAT_LIMIT):
    """Every run of ``length`` consecutive lines of ``lines_a`` that also occurs in ``lines_b``."""
    windows = {tuple(lines_b[i : i + length]) for i in range(len(lines_b) - length + 1)}
    runs = (tuple(lines_a[i : i + length]) for i in range(len(lines_a) - length + 1))
    return [run for run in runs if run in windows]


def test_repeated_runs_finds_a_copied_block_and_ignores_a_short_one():
    shared = [f"x{i} = f({i})" for i in range(REPEAT_LIMIT)]
    assert repeated_runs(["a = 1", *shared, "b = 2"], ["c = 3", *shared]) == [tuple(shared)]
    assert repeated_runs(["a = 1", *shared[:-1], "b = 2"], ["c = 3", *shared[:-1], "d = 4"]) == []


def test_normalized_code_lines_skips_imports_comments_and_punctuation(tmp_path):
    source = (
        "import numpy as np\nfrom x import (\n    a,\n    b,\n)\n# a comment\n\n"
        "rows = [\n    1,\n]\ny  =   np.sum(rows)\n"
    )
    path = tmp_path / "chapter.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "source": [source]}]}))
    assert normalized_code_lines(path) == ["rows = [", "1,", "y = np.sum(rows)"]


def test_no_function_is_defined_in_two_chapters():
    owners = {}
    for path in NOTEBOOKS:
        for name in defined_functions(path):
            owners.setdefault(name, []).append(path.name)
    shared = {name: paths for name, paths in owners.items() if len(paths) > 1}
    assert not shared, f"functions defined in several chapters (move them into the package): {shared}"


def test_no_chapter_repeats_a_block_of_another_chapter():
    code = {path.name: normalized_code_lines(path) for path in NOTEBOOKS}
    names = sorted(code)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            runs = repeated_runs(code[a], code[b])
            assert not runs, f"{a} repeats {REPEAT_LIMIT}+ code lines of {b} (move them into the package): {runs[0]}"


def test_doc_links_resolve_and_exercise_labels_are_unique():
    # caught here in a second, instead of by the executed book build's warnings
    pages = [p for p in (ROOT / "book").rglob("*") if p.suffix in (".ipynb", ".md") and "_build" not in p.parts]
    missing, labels = [], {}
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"\{doc\}`([^`]*)`", text):
            target = re.sub(r".*<(.*)>", r"\1", match.group(1)).strip()
            base = ROOT / target.lstrip("/") if target.startswith("/") else page.parent / target
            if not any(base.with_suffix(suffix).exists() for suffix in (".ipynb", ".md")):
                missing.append(f"{page.relative_to(ROOT)}: {target}")
        for match in re.finditer(r":label: ([\w-]+)", text):
            labels.setdefault(match.group(1), []).append(str(page.relative_to(ROOT)))
    assert missing == [], "{doc} links to pages that do not exist (a page under lab_notes/ links with ../)"
    assert {label: where for label, where in labels.items() if len(where) > 1} == {}


def chapter_numbers(toc: dict) -> dict[str, int]:
    """Each numbered chapter's number as the built book shows it: numbered parts count on from one
    part to the next; an unnumbered part (the appendix, the references) has none."""
    numbers, n = {}, 0
    for part in toc.get("parts", []):
        if not part.get("numbered"):
            continue
        for chapter in part.get("chapters", []):
            n += 1
            numbers[chapter["file"]] = n
    return numbers


def wrong_chapter_numbers(page: Path, text: str, numbers: dict[str, int]) -> list[str]:
    """Links whose text types a chapter number ("chapter 7 <answering_with_confidence>") that is not
    the linked chapter's number."""
    wrong = []
    for match in re.finditer(r"\{doc\}`[^`<]*?\b(?:[Cc]hapter|[Cc]h\.)\s+(\d+)[^`<]*<([^>]+)>`", text):
        target = match.group(2).strip()
        base = ROOT / target.lstrip("/") if target.startswith("/") else page.parent / target
        key = str(base.resolve().relative_to(ROOT.resolve()))
        if numbers.get(key) != int(match.group(1)):
            wrong.append(f"{page.name}: '{match.group(0)}' links chapter {numbers.get(key)}")
    return wrong


def test_wrong_chapter_numbers_finds_a_link_typed_with_another_chapters_number():
    numbers = chapter_numbers(yaml.safe_load((ROOT / "_toc.yml").read_text()))
    page = ROOT / "book" / "intro.md"
    right = f"see {{doc}}`chapter {numbers['book/answering_with_confidence']} <answering_with_confidence>`"
    wrong = f"see {{doc}}`chapter {numbers['book/answering_with_confidence'] + 1} <answering_with_confidence>`"
    assert wrong_chapter_numbers(page, right, numbers) == []
    assert len(wrong_chapter_numbers(page, wrong, numbers)) == 1
    # an appendix page has no number, so no typed number can be right
    assert len(wrong_chapter_numbers(page, "{doc}`chapter 3 <lab_notes/answering_pcqs>`", numbers)) == 1


def test_a_chapter_number_typed_in_a_link_is_the_linked_chapters_number():
    # the numbers come from the table of contents: moving a chapter must not leave a link wrong
    numbers = chapter_numbers(yaml.safe_load((ROOT / "_toc.yml").read_text()))
    assert numbers["book/mdp_background"] == 1 and len(numbers) > 20
    wrong, checked = [], 0
    for page in (ROOT / "book").rglob("*"):
        if page.suffix in (".ipynb", ".md") and "_build" not in page.parts:
            text = page.read_text(encoding="utf-8")
            if page.suffix == ".ipynb":  # the cells' text, with a link broken over two lines whole
                text = "\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"])
            checked += len(re.findall(r"\{doc\}`[^`<]*?\b(?:[Cc]hapter|[Cc]h\.)\s+\d+", text))
            wrong += wrong_chapter_numbers(page, text, numbers)
    assert checked >= 5 and wrong == []


# --------------------------------------------------------------------------------------------
# The reader's view: hidden checks are skipped there, so no visible cell may need one
# --------------------------------------------------------------------------------------------
ALL_NOTEBOOKS = NOTEBOOKS + sorted((ROOT / "assignments").rglob("*.ipynb"))
_MAGIC = re.compile(r"^(\s*)[!%].*$", re.M)
_KNOWN = set(dir(builtins)) | {"display", "get_ipython", "__file__"}


def cell_names(source: str) -> tuple[set[str], set[str]]:
    """The global names a cell binds and the global names it reads (its functions' and
    comprehensions' included), IPython's ``!`` and ``%`` lines left out."""
    if source.lstrip().startswith("%%"):
        return set(), set()
    table = symtable.symtable(_MAGIC.sub(r"\1pass", source), "<cell>", "exec")
    bound = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    read = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
    scopes = list(table.get_children())
    while scopes:
        scope = scopes.pop()
        scopes.extend(scope.get_children())
        for symbol in scope.get_symbols():
            if symbol.is_global() and symbol.is_referenced():
                read.add(symbol.get_name())
            if symbol.is_declared_global() and symbol.is_assigned():
                bound.add(symbol.get_name())
    return bound, read


def names_left_to_hidden_checks(cells: list[tuple[bool, str]]) -> list[tuple[int, str]]:
    """``(cell index, name)`` for every visible code cell that reads a global name whose last
    binding before it is in a hidden-check cell: undefined for a reader, whose kernel skips those
    cells, or different from what the test suite saw. ``cells`` are ``(is code, source)`` pairs."""
    bound_by_check: dict[str, bool] = {}
    found = []
    for index, (is_code, source) in enumerate(cells):
        if not is_code:
            continue
        bound, read = cell_names(source)
        hidden = source.startswith(CHECK_MARKER)
        if not hidden:
            found += [(index, name) for name in sorted(read - bound - _KNOWN) if bound_by_check.get(name)]
        bound_by_check.update(dict.fromkeys(bound, hidden))
    return found


def test_names_left_to_hidden_checks_finds_what_a_reader_lacks():
    check = f"{CHECK_MARKER}\nroom = load()\nassert room\n"
    cells = [
        (True, "import numpy as np\nload = list\n!ls\n%time load()"),
        (True, check),
        (False, "room, as the check above called it"),
        (True, "print(np.mean([1]), [room for _ in 'ab'])\nprint(len(room))"),
        (True, "def size():\n    return len(room)"),
        (True, "room = load()\nprint(room, [x for x in 'ab'], display)"),
        (True, f"{CHECK_MARKER}\nnp = None"),
        (True, "np.zeros(2)"),
    ]
    assert names_left_to_hidden_checks(cells) == [(3, "room"), (4, "room"), (7, "np")]
    assert names_left_to_hidden_checks(cells[:2] + cells[5:6]) == []


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT).with_suffix("")))
def test_no_visible_cell_needs_a_hidden_check(path):
    """A reader's kernel skips the hidden checks (``opcc_edu.display.skip_hidden_checks``), so a name
    that only a hidden check binds is undefined there: the page fails to build without the checks."""
    cells = [(c["cell_type"] == "code", "".join(c["source"])) for c in _load(path)["cells"]]
    found = names_left_to_hidden_checks(cells)
    assert found == [], f"{path.relative_to(ROOT)}: visible cells read names bound by a hidden check: {found}"
