"""Measure a rendered lesson page against the book's bounds for a lesson.

Usage::

    python scripts/lesson_bounds.py _build/_page/book-X/html/X.html [MORE.html ...]

For each page of a Jupyter Book build (HTML), prints one line: the words of the main text, the
visible tables, the columns of the widest one, and any insider words; exits with status 1 when a
page breaks a bound (:data:`MAX_WORDS`, :data:`MAX_TABLES`, :data:`MAX_COLUMNS`, no insider word).

What counts, as a reader sees the page:

* **words**: the text of the article (``article.bd-article``), cell outputs included (printed
  text, tables, Markdown), code inputs excluded (a cell's source, a code block in prose), and so
  is anything collapsed: a dropdown admonition (an exercise's ``{solution}`` with
  ``:class: dropdown``, ``{dropdown}``, ``:class: dropdown`` on any admonition), a ``<details>``
  element not marked ``open`` (a hidden cell output, ``{dropdown}`` of sphinx-design), a toggle.
  A word is a whitespace-separated token with a letter or digit (numbers in a table count).
  A ``{doc}`` link counts as the linked page's title, as the full build shows it, also on a
  single-page build (which shows the target's file name), an empty citation of a single-page
  build as an author-year label of four words, and its title with the chapter's number: both
  builds measure the same, or the single page a few words more.
* **tables**: every ``<table>`` in the visible part (a DataFrame's HTML, a Markdown table, the
  book's ``Table``); **columns**: the widest row of the widest table, ``colspan`` counted (a
  DataFrame's index column counts: the reader sees it).
* **insider words** (:data:`INSIDER`): folder paths of the results store, profile or recipe
  folders used as evidence, run scripts, host and benchmark file names. They are searched in
  everything a reader reads, collapsed prose included, but not in code.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

MAX_WORDS = 2000
MAX_TABLES = 6
MAX_COLUMNS = 7

#: Insider words: (name shown, pattern).
INSIDER: tuple[tuple[str, re.Pattern], ...] = tuple(
    (name, re.compile(pattern, re.I))
    for name, pattern in (
        ("results/ablations", r"results/ablations"),
        ("ablations-classroom", r"ablations-classroom"),
        ("paper/tiny", r"\bpaper/tiny\b"),
        ("paper/classroom", r"\bpaper/classroom\b"),
        ("hard/tiny", r"\bhard/tiny\b"),
        ("run_committed", r"\brun_committed\b"),
        ("committed", r"\bcommitted\b"),
        ("host name", r"\bfc-v\d+\b"),
        ("benchmark script", r"\bbench_\w+\.py\b"),
        ("benchmarks/results", r"benchmarks/results"),
    )
)

#: Collapsed content: not counted as main text.
COLLAPSED = (
    ".dropdown",  # sphinx-togglebutton's dropdown admonitions, sphinx-exercise's dropdown solutions
    ".toggle",  # sphinx-togglebutton's {toggle}
    "details:not([open])",  # sphinx-design's {dropdown}, myst-nb's hidden cell output or source
)
#: Code: never counted, never searched for insider words.
CODE = (
    "div.cell_input",  # a code cell's source
    "div[class*='highlight-']:not(.output)",  # a code block in prose (```python ...)
)
#: Page chrome inside the article: not text of the lesson.
CHROME = ("script", "style", "a.headerlink", "noscript")

_WORD = re.compile(r"\S*[^\W_]\S*")
ROOT = Path(__file__).resolve().parents[1]
#: What an author-year citation shows in the full build, in words ("[Koul et al., 2022]"); a
#: single-page build cannot read the bibliography and shows "[]".
CITATION_SHOWN = "[Author et al., 2022]"
#: Where a ``{doc}`` link's target is looked for (relative to these folders), as page sources.
DOC_FOLDERS = (ROOT / "book", ROOT / "book" / "lab_notes", ROOT)


@functools.cache  # one read per linked page, not one per link
def page_title(target: str) -> str | None:
    """The title a full build shows for a ``{doc}`` link to ``target``: its source's first heading.

    A single-page build cannot resolve a link to another page and shows the target's name
    instead (``span.xref.std-doc``); the full build shows the page's title, which is often longer.
    Counting the title keeps a single-page measure equal to the full build's.
    """
    for folder in DOC_FOLDERS:
        for suffix in (".ipynb", ".md"):
            path = folder / f"{target}{suffix}"
            if not path.is_file():
                continue
            if suffix == ".ipynb":
                cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
                text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
            else:
                text = path.read_text(encoding="utf-8")
            for line in text.splitlines():
                if line.startswith("# "):
                    return re.sub(r"[`*$]", "", line[2:]).strip()
    return None


@dataclass
class Bounds:
    """One page's measures."""

    page: str
    words: int
    tables: int
    widest: int
    insider: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        """The bounds this page breaks, in words (empty when within all)."""
        found = []
        if self.words > MAX_WORDS:
            found.append(f"{self.words} words > {MAX_WORDS}")
        if self.tables > MAX_TABLES:
            found.append(f"{self.tables} tables > {MAX_TABLES}")
        if self.widest > MAX_COLUMNS:
            found.append(f"a table of {self.widest} columns > {MAX_COLUMNS}")
        if self.insider:
            found.append("insider words: " + ", ".join(self.insider))
        return found

    def line(self) -> str:
        problems = self.problems()
        status = "OK" if not problems else "OVER: " + "; ".join(problems)
        insider = ", ".join(self.insider) or "-"
        return f"{self.page}: words={self.words} tables={self.tables} widest={self.widest} insider={insider}  {status}"


def _article(html: str):
    import bs4

    soup = bs4.BeautifulSoup(html, "html.parser")
    return soup.select_one("article.bd-article") or soup.select_one("main") or soup.body or soup


def _drop(root, selectors) -> None:
    for selector in selectors:
        for node in root.select(selector):
            node.decompose()


def _columns(table) -> int:
    widest = 0
    for row in table.find_all("tr"):
        cells = row.find_all(["td", "th"], recursive=False)
        widest = max(widest, sum(int(c.get("colspan", 1) or 1) for c in cells))
    return widest


def measure_html(html: str, page: str = "<page>") -> Bounds:
    """The measures of one page's HTML (see the module's docstring for what counts)."""
    reader = _article(html)
    _drop(reader, CHROME + CODE)
    single_page = False
    for link in reader.select("span.xref.std-doc"):  # a single-page build's unresolved {doc} link
        single_page = True
        title = page_title(link.get_text().strip())
        if title:
            link.string = title
    for cite in reader.select("span.bibtex-citation"):  # a citation a single-page build leaves empty
        if cite.get_text().strip("[] "):
            continue
        single_page = True
        cite.string = CITATION_SHOWN
    heading = reader.find("h1")
    if single_page and heading is not None and not re.match(r"\s*\d", heading.get_text()):
        heading.insert(0, "N. ")  # the full build numbers the chapter: one more word
    insider_text = reader.get_text(" ")
    insider = [name for name, pattern in INSIDER if pattern.search(insider_text)]
    if "run_committed" in insider and "committed" in insider:  # one finding, not two
        if not re.search(r"(?<!run_)\bcommitted\b", insider_text, re.I):
            insider.remove("committed")
    _drop(reader, COLLAPSED)
    tables = reader.find_all("table")
    words = len(_WORD.findall(reader.get_text(" ")))
    return Bounds(page, words, len(tables), max((_columns(t) for t in tables), default=0), insider)


def measure(path: str | Path) -> Bounds:
    """The measures of a rendered page."""
    path = Path(path)
    return measure_html(path.read_text(encoding="utf-8"), str(path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="+", type=Path, help="rendered pages (.html)")
    args = parser.parse_args(argv)
    failed = False
    for page in args.pages:
        bounds = measure(page)
        print(bounds.line())
        failed |= bool(bounds.problems())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
