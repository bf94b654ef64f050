"""The glossary covers the book, and no lesson uses a glossary term before it is taught.

* Every term a lesson sets in bold (``**term**``, the book's mark of a term being defined) or
  cites with MyST's ``{term}`` role has an entry in ``book/glossary.md``.
* Each entry links (``{doc}``) to the page that teaches it; a lesson citing a term with
  ``{term}`` or setting it in bold comes at or after that page in the reading order of
  ``_toc.yml`` (so the glossary sends a reader to the first lesson that teaches the term; bold marks where a
  term is taught, a preview of it sets it in italics). The book's opening page, which previews
  every part, is not held to the order.

The lessons are the pages of ``_toc.yml`` apart from the lab notes, the teaching guide, the
assignments, the glossary and the references. A bold phrase that ends in a full stop or a
colon is a paragraph's label (**What you will learn.**), not a term.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "book" / "glossary.md"

#: Pages of the table of contents that are not lessons.
NOT_LESSONS = re.compile(r"^book/(lab_notes/|teaching_guide$|glossary$|references$)|^assignments/")
BOLD = re.compile(r"\*\*([^*\n]+?)\*\*")
TERM_ROLE = re.compile(r"\{term\}`([^`]+)`")
DOC_ROLE = re.compile(r"\{doc\}`(?:[^`<]*<)?([^`>]+)>?`")
#: Bold text that is no term: a paragraph's label (ending in a stop or holding a colon), a
#: number, a comparison's heading ("A vs B"), a word stressed (a conjunction).
NOT_A_TERM = re.compile(r"[.?!]$|:|^[\d\s.,%±+-]+$| vs\.? |^(or|and|not|both|all|only)$", re.I)
#: A term is a short phrase: a longer bold run is a paragraph's run-in heading.
MAX_TERM_WORDS = 4


def toc_pages(toc: Path = ROOT / "_toc.yml") -> list[str]:
    """Every page of the table of contents, in reading order (``book/x``, no suffix)."""
    config = yaml.safe_load(toc.read_text())
    pages = [config["root"]]

    def walk(items):
        for item in items or []:
            if "file" in item:
                pages.append(item["file"])
            walk(item.get("sections"))

    for part in config.get("parts", []):
        walk(part.get("chapters"))
    return pages


def lesson_pages() -> list[str]:
    return [page for page in toc_pages() if not NOT_LESSONS.search(page)]


def page_markdown(page: str) -> str:
    """A page's Markdown text (a notebook's Markdown cells, or a Markdown page)."""
    notebook, markdown = ROOT / f"{page}.ipynb", ROOT / f"{page}.md"
    if notebook.exists():
        nb = nbformat.read(notebook, as_version=4)
        return "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return markdown.read_text() if markdown.exists() else ""


def glossary_entries(text: str) -> dict[str, str]:
    """Entry name -> its definition, from the ``{glossary}`` block."""
    block = re.search(r"```\{glossary\}\n(.*?)\n```", text, re.S)
    assert block, "book/glossary.md has no {glossary} block"
    entries = {}
    for chunk in re.split(r"\n(?=\S)", block.group(1).strip("\n")):
        name, _, definition = chunk.partition("\n")
        entries[name.strip()] = definition
    return entries


def normal(term: str) -> str:
    """A term's comparable form: lower case, hyphens and dashes as spaces, a plural's s dropped."""
    words = re.sub(r"[-–—_/]", " ", term.lower()).split()
    return " ".join(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words)


def names_of(entry: str) -> set[str]:
    """The names an entry answers to: itself, its parts around "and", commas and brackets."""
    names = {entry}
    inside = re.findall(r"\(([^)]*)\)", entry)
    outside = re.sub(r"\([^)]*\)", "", entry)
    names |= {outside, *inside}
    for name in list(names):
        names |= set(re.split(r",| and ", name))
    return {normal(n) for n in names if n.strip()}


def covered(term: str, entries: dict[str, str]) -> bool:
    """Whether a glossary entry answers to ``term``: one of its names is ``term``, starts with it
    ("unanimous" and "Unanimous vote"), or is a whole phrase of it ("EV's confidence" and "EV")."""
    wanted = normal(term)
    for entry in entries:
        for name in names_of(entry):
            if wanted == name or name.startswith(wanted + " ") or re.search(rf"(^| ){re.escape(name)}( |$)", wanted):
                return True
    return False


def taught_in(definition: str) -> str | None:
    """The page an entry's definition links to as where it is taught (its last ``{doc}``)."""
    links = DOC_ROLE.findall(definition)
    return f"book/{links[-1]}" if links else None


def bold_terms(text: str) -> list[str]:
    # code spans, math and links' targets are no prose
    text = re.sub(r"`[^`]*`|\$[^$]*\$", "", text)
    terms = []
    for match in BOLD.finditer(text):
        term = match.group(1).strip()
        label = text[match.end() : match.end() + 1] in (".", ":")  # **Heading**: or **Heading**.
        if term and not label and not NOT_A_TERM.search(term) and len(term.split()) <= MAX_TERM_WORDS:
            terms.append(term)
    return terms


def missing_terms(pages: list[str], entries: dict[str, str], read=page_markdown) -> list[str]:
    """``page: term`` for each bold or ``{term}`` term of a page that no entry covers."""
    found = []
    for page in pages:
        text = read(page)
        terms = bold_terms(text) + [re.sub(r".*<(.*)>", r"\1", t) for t in TERM_ROLE.findall(text)]
        found += [f"{page}: {t}" for t in dict.fromkeys(terms) if not covered(t, entries)]
    return found


def entry_of(term: str, entries: dict[str, str]) -> str | None:
    """The glossary entry that covers ``term`` (see :func:`covered`), or None."""
    return next((entry for entry in entries if covered(term, {entry: ""})), None)


def used_before_taught(pages: list[str], entries: dict[str, str], read=page_markdown) -> list[str]:
    """``page: term (taught in later)`` for each term a page cites (``{term}``) or sets in bold
    before the page its glossary entry links to as where it is taught."""
    order = {page: i for i, page in enumerate(pages)}
    found = []
    for page in pages:
        text = read(page)
        cited = [re.sub(r".*<(.*)>", r"\1", t) for t in TERM_ROLE.findall(text)]
        for target in dict.fromkeys(cited + bold_terms(text)):
            entry = entry_of(target, entries)
            where = taught_in(entries[entry]) if entry else None
            if where in order and order[where] > order[page]:
                found.append(f"{page}: {target} (taught in {where})")
    return found


ENTRIES = glossary_entries(GLOSSARY.read_text())


def test_every_entry_links_to_where_it_is_taught():
    pages = set(toc_pages())
    unlinked = [name for name, text in ENTRIES.items() if taught_in(text) not in pages]
    assert not unlinked, f"glossary entries without a {{doc}} link to a page of the book: {unlinked}"


@pytest.mark.parametrize("page", lesson_pages())
def test_every_bold_term_of_a_lesson_is_in_the_glossary(page):
    missing = missing_terms([page], ENTRIES)
    assert not missing, "terms without a glossary entry: " + "; ".join(missing)


def test_no_glossary_term_is_used_before_it_is_taught():
    # the book's opening page previews the terms of every part: the order starts after it
    early = used_before_taught(lesson_pages()[1:], ENTRIES)
    assert not early, "terms cited before the page that teaches them: " + "; ".join(early)


def test_the_checks_find_a_missing_term_and_a_term_cited_too_early():
    entries = glossary_entries(
        "```{glossary}\nEV (ensemble voting)\n  The vote ({doc}`late`).\n\nPolicy level\n  A rank ({doc}`early`).\n```"
    )
    pages = {
        "book/early": "**What you will learn.** The **policy levels**, {term}`EV`'s vote, **ensemble voting** too.",
        "book/late": "**Ensemble voting** and a **saturation** nobody defined. **A heading**: text, **or** so.",
    }
    assert missing_terms(list(pages), entries, read=pages.get) == ["book/late: saturation"]
    assert used_before_taught(list(pages), entries, read=pages.get) == [
        "book/early: EV (taught in book/late)",
        "book/early: ensemble voting (taught in book/late)",
    ]
    assert used_before_taught(["book/late", "book/early"], entries, read=pages.get) == []
