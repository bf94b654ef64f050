"""What a reader sees: checks on the HTML of an executed book build.

The book must be built with execution on and the inline backend first, as a reader builds it
(the hidden checks off: they run under ``pytest``), e.g.::

    env -u MPLBACKEND -u OPCC_EDU_CHECKS jupyter-book build . --path-output /tmp/book
    OPCC_EDU_BOOK_HTML=/tmp/book/_build/html pytest tests/book/test_rendered_book.py

``$OPCC_EDU_BOOK_HTML`` names the folder of the HTML; the tests skip when it is not set (an
old ``_build`` is not checked by accident) or holds no chapter page. A single-page build
(``jupyter-book build book/<chapter>.ipynb``) is checked the same way: point the variable at
its ``html`` folder. The build executed every chapter to its end: no ``reports/**/*.err.log``
(where myst-nb leaves the traceback of a chapter that failed) and, for every chapter page found:

* no cell output that is an error (a traceback);
* no raw Markdown table (a line such as ``|---|---|``) in the text;
* no stderr output, no warning text and no object repr (``<matplotlib... at 0x...>``) in any cell output;
* every cell whose code draws a figure shows an image, no wider than the page (so that its
  text keeps the style's 9 pt);
* every widget output has a static image in the same cell or an adjacent one;
* every link to another file of the book resolves, and MathJax comes from the book's own files;
* the widget manager too: no page loads a script from a widget-manager or require.js CDN, a page
  with widgets loads the book's copy (``_vendor/jupyter-widgets``, ``scripts/vendor_widgets.py``),
  and no image (the Colab badge included) comes from elsewhere.

:func:`test_pages_in_a_browser` opens one page per part of the book in headless Chromium
(selenium and the system's ``chromium``/``chromedriver``): no JavaScript errors, every image
loaded, every widget drawn (not a blank area), a visible table on an ablation page; screenshots go
to ``$OPCC_EDU_SCREENSHOTS``.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
import yaml

from opcc_edu.plotting import MIN_FONT_SIZE

bs4 = pytest.importorskip("bs4", reason="beautifulsoup4 reads the built HTML")

ROOT = Path(__file__).resolve().parents[2]
HTML = Path(os.environ.get("OPCC_EDU_BOOK_HTML", ROOT / "_build" / "no-book-named")).resolve()

#: A line of a Markdown table's header rule, as it reads when the table was not rendered.
RAW_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)+\|?\s*$", re.M)
#: A warning that leaked onto the page: Python's format (``file.py:12: UserWarning: ...``), a
#: logged ``WARNING``, MuJoCo's notice. (A chapter may print a warning it caught on purpose,
#: e.g. ``StoreWarning: ...``, to teach what the store reports.)
WARNING_TEXT = re.compile(r"\.py:\d+: \w*Warning\b|\bWARNING\b|settotalmass")
#: The repr of a plotting call's return value left as a cell's last line (``<matplotlib.legend.Legend
#: at 0x7f...>``, ``[<matplotlib.lines.Line2D at 0x...>]``): noise above the figure.
OBJECT_REPR = re.compile(r"<(matplotlib|mpl_toolkits)\.[\w.]+ (object )?at 0x[0-9a-f]+>")
#: The head of a Python traceback printed into an output.
TRACEBACK_TEXT = re.compile(r"Traceback \(most recent call last\)|^-{20,}\n\w+(Error|Exception)\b", re.M)
#: Code that draws a figure.
PLOTTING = re.compile(
    r"plt\.(subplots|figure|show)\(|\.(plot|hist|bar|imshow|scatter|errorbar)\(|\bplot_\w+\(|\bdraw_\w+\("
    r"|\bexplore\(|_explorer\("
)
#: Figures drawn only where an OpenGL backend exists (skipped, with a printed note, elsewhere).
NEEDS_OPENGL = re.compile(r"render_states|plot_start_frames")
WIDGET = "application/vnd.jupyter.widget-view+json"
#: Script addresses of a widget manager or require.js from a CDN (myst-nb's default, which leaves
#: the widget areas blank offline).
WIDGET_CDN = re.compile(r"require(\.min)?\.js|html-manager|embed-amd|jupyter-widgets|cdn\.jsdelivr|unpkg\.com|cdnjs")
#: The book's own widget manager, relative to ``_static`` (``_config.yml``: ``nb_ipywidgets_js``).
WIDGET_MANAGER = ("jupyter-widgets/mathjax-hub.js", "jupyter-widgets/embed.js")
#: Widest figure, in image pixels, that the page shows without shrinking its 9 pt text below 9 pt:
#: the book's output column is 692 CSS px wide at a 1300 px window; at figure.dpi = 100 a 9 pt
#: label is 12.5 px tall, and 12 px is 9 pt on screen, so 692 / (12 / 12.5) = 720.
MAX_FIGURE_PIXELS = 720
#: Console errors of the book toolchain, not of the book: sphinx-thebe 0.3 adds its configuration
#: script to a page more than once (``const THEBE_JS_URL`` declared twice), and the theme logs
#: an empty stored colour mode as an error on a first visit.
TOOLCHAIN_CONSOLE_ERRORS = ("Identifier 'THEBE_JS_URL' has already been declared", "Got invalid theme mode")


def _toc_pages() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [chapter["file"] for chapter in part.get("chapters", [])]
    return files


def _page_path(entry: str) -> Path | None:
    """The built page of a TOC entry (a full build's ``book/x.html``, or a single-page build)."""
    for candidate in (HTML / f"{entry}.html", HTML / f"{Path(entry).name}.html"):
        if candidate.is_file():
            return candidate
    return None


PAGES = {entry: path for entry in _toc_pages() if (path := _page_path(entry)) is not None}
needs_book = pytest.mark.skipif(
    not PAGES, reason=f"no built chapter under {HTML}: build the executed book and set OPCC_EDU_BOOK_HTML"
)


def _soup(path: Path):
    return bs4.BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def _cells(soup) -> list:
    return soup.select("div.cell")


def _code(cell) -> str:
    block = cell.select_one("div.cell_input")
    return block.get_text() if block is not None else ""


def _outputs(cell) -> list:
    return cell.select("div.cell_output")


def _errors(soup) -> list[str]:
    """The first line of every cell output that is an error (a traceback on the page)."""
    shown = [
        out
        for out in soup.select("div.cell_output")
        if out.select_one("div.output.traceback") is not None or TRACEBACK_TEXT.search(out.get_text())
    ]
    return [(out.get_text().strip().splitlines() or [""])[-1][:200] for out in shown]


def _has_image(cell) -> bool:
    return any(out.find("img") is not None for out in _outputs(cell))


def _has_widget(cell) -> bool:
    return any(out.find("script", attrs={"type": WIDGET}) is not None for out in _outputs(cell))


@needs_book
def test_every_chapter_executed_to_its_end():
    reports = sorted(str(path.relative_to(HTML)) for path in (HTML / "reports").rglob("*.err.log"))
    assert reports == [], f"chapters failed to execute (their tracebacks are in these files): {reports}"


@needs_book
@pytest.mark.parametrize("entry", sorted(PAGES), ids=lambda e: Path(e).name)
def test_no_cell_shows_an_error(entry):
    errors = _errors(_soup(PAGES[entry]))
    assert errors == [], f"{entry}: {len(errors)} cell(s) show an error: {errors[:3]}"


@needs_book
@pytest.mark.parametrize("entry", sorted(PAGES), ids=lambda e: Path(e).name)
def test_no_raw_markdown_table(entry):
    soup = _soup(PAGES[entry])
    for script in soup.find_all("script"):
        script.decompose()
    text = soup.get_text("\n")
    match = RAW_TABLE_RULE.search(text)
    assert match is None, f"{entry}: a Markdown table shown as text ({match.group(0).strip()!r})"


@needs_book
@pytest.mark.parametrize("entry", sorted(PAGES), ids=lambda e: Path(e).name)
def test_no_stderr_or_warning_in_outputs(entry):
    soup = _soup(PAGES[entry])
    stderr = soup.select("div.output.stderr")
    assert not stderr, f"{entry}: stderr on the page: {stderr[0].get_text()[:200]!r}"
    for cell in _cells(soup):
        for out in _outputs(cell):
            for script in out.find_all("script"):
                script.decompose()
            found = WARNING_TEXT.search(out.get_text())
            assert found is None, f"{entry}: warning text in an output: {out.get_text()[:300]!r}"
            found = OBJECT_REPR.search(out.get_text())
            assert found is None, f"{entry}: an object's repr in an output (end the cell with plt.show()): {found[0]!r}"


@needs_book
@pytest.mark.parametrize("entry", sorted(PAGES), ids=lambda e: Path(e).name)
def test_every_plotting_cell_shows_an_image(entry):
    cells = _cells(_soup(PAGES[entry]))
    if not any(_outputs(cell) for cell in cells):
        pytest.skip(f"{entry} has no cell output (a Markdown page, or a notebook with execution_mode off)")
    missing = [
        _code(cell).strip().splitlines()[0]
        for cell in cells
        if PLOTTING.search(_code(cell))
        and not NEEDS_OPENGL.search(_code(cell))
        and not _has_widget(cell)  # an explorer's figure may stand in the cell above (next test)
        and not _has_image(cell)
    ]
    assert not missing, (
        f"{entry}: {len(missing)} cell(s) draw but show no image (built with MPLBACKEND=Agg?): {missing[:3]}"
    )


@needs_book
@pytest.mark.parametrize("entry", sorted(PAGES), ids=lambda e: Path(e).name)
def test_figures_fit_the_page_so_their_text_keeps_its_size(entry):
    from PIL import Image

    page = PAGES[entry]
    too_wide = []
    for cell in _cells(_soup(page)):
        for image in (img for out in _outputs(cell) for img in out.find_all("img")):
            path = page.parent / unquote(image.get("src", ""))
            if path.suffix.lower() in (".png", ".jpg", ".jpeg") and path.is_file():
                with Image.open(path) as picture:
                    if picture.width > MAX_FIGURE_PIXELS:
                        too_wide.append((_code(cell).strip().splitlines()[:1], picture.width))
    assert not too_wide, (
        f"{entry}: figures wider than the page ({MAX_FIGURE_PIXELS} px), so shrunk with their text below "
        f"{MIN_FONT_SIZE:g} pt; size them with opcc_edu.plotting.figure_size: {too_wide[:3]}"
    )


def _verdicts(soup) -> dict[str, str]:
    """The verdict paragraphs of a page (:func:`opcc_edu.lab.findings.show_verdict`), by finding."""
    return {p["data-finding"]: " ".join(p.get_text().split()) for p in soup.select("p.opcc-verdict")}


#: The findings whose lesson must state its verdict (the paper states no finding on the others).
JUDGED_FINDINGS = (
    "dataset-type",
    "horizon",
    "confidence",
    "ensemble-count",
    "prior-scale",
    "stochastic",
    "model-type",
    "normalization",
    "clipping",
    "termination",
)


@pytest.mark.skipif("book/what_we_learned" not in PAGES, reason="What we learned was not built")
def test_every_lesson_states_its_verdict_as_what_we_learned_does():
    from opcc_edu.lab.findings import FINDINGS, chapter_name

    summary = _verdicts(_soup(PAGES["book/what_we_learned"]))
    assert set(summary) == {f.ablation for f in FINDINGS}, sorted(summary)
    differ = []
    for finding in JUDGED_FINDINGS:
        lesson = PAGES.get(f"book/{chapter_name(finding)}")
        if lesson is None:
            continue
        stated = _verdicts(_soup(lesson))
        if stated.get(finding) != summary[finding]:
            differ.append((finding, stated.get(finding), summary[finding]))
    assert not differ, f"a lesson's verdict is not What we learned's: {differ}"


#: A quantity as a page prints it: a decimal number or a percentage (counts and years are left out).
QUANTITY = re.compile(r"(?<![\w.,])(\d+(?:\.\d+)?\s?%|\d+\.\d+)(?![\w.]\d)")


def _quantities(text: str) -> list[tuple[float, float]]:
    """The quantities of a text, each as (value, half its last printed unit); a percentage as a
    fraction (8.3% is 0.083 +- 0.0005)."""
    found = []
    for token in QUANTITY.findall(" ".join(text.split())):
        percent = token.endswith("%")
        number = token.rstrip("%").strip()
        decimals = len(number.partition(".")[2])
        value, unit = float(number), 10.0**-decimals
        if percent:
            value, unit = value / 100, unit / 100
        found.append((value, unit / 2))
    return found


def _agrees(quantity: tuple[float, float], others: list[tuple[float, float]]) -> bool:
    """A quantity is on another page when a printed number there rounds to the same value at the
    coarser of the two precisions."""
    value, half = quantity
    return any(abs(value - v) <= max(half, h) + 1e-9 for v, h in others)


def test_quantities_behave_as_printed():
    assert _quantities("wrong on 8.3% of them, AURCC 0.083, level 1 of 2025") == [(0.083, 0.0005), (0.083, 0.0005)]
    assert _agrees((0.083, 0.0005), [(0.0834, 0.00005)]) and not _agrees((0.083, 0.0005), [(0.085, 0.0005)])
    assert _agrees((0.994, 0.0005), [(0.99, 0.005)]) and not _agrees((0.994, 0.0005), [(0.98, 0.005)])


@pytest.mark.skipif("book/what_we_learned" not in PAGES, reason="What we learned was not built")
def test_what_we_learned_states_each_lessons_numbers_as_the_lesson_does():
    """Every number *What we learned* states beside a lesson it links (its section "The book's own
    lessons") is printed by one of those lessons too, to the coarser of the two precisions: the
    summary cannot drift from the pages it summarises. (The findings' numbers are in the verdict
    paragraphs, compared above.)"""
    soup = _soup(PAGES["book/what_we_learned"])
    headed = [(s, s.find(["h2", "h3"])) for s in soup.find_all("section")]
    section = next((s for s, title in headed if title is not None and "own lessons" in title.get_text()), None)
    assert section is not None, "What we learned has no section on the book's own lessons"
    items = section.find_all("li")
    assert items, "that section lists no lessons"
    missing, compared = [], 0
    for item in items:
        linked = {
            f"book/{Path(urlparse(a['href']).path).stem}"
            for a in item.find_all("a", href=True)
            if not urlparse(a["href"]).scheme and urlparse(a["href"]).path.endswith(".html")
        }
        pages = [PAGES[entry] for entry in sorted(linked) if entry in PAGES]
        if not pages or len(pages) < len(linked & set(_toc_pages())):
            continue  # a linked lesson was not built (a single-page build)
        printed = [q for page in pages for q in _quantities(_soup(page).get_text(" "))]
        for quantity in _quantities(item.get_text(" ")):
            compared += 1
            if not _agrees(quantity, printed):
                missing.append((sorted(linked), quantity[0]))
    assert not missing, f"What we learned states numbers its linked lessons never print: {missing}"
    if len(PAGES) > 30:  # the whole book: the section's numbers were all compared
        assert compared, "no number of the section was compared"


@needs_book
@pytest.mark.parametrize("entry", sorted(PAGES), ids=lambda e: Path(e).name)
def test_every_widget_has_a_static_image_nearby(entry):
    cells = _cells(_soup(PAGES[entry]))
    for i, cell in enumerate(cells):
        if _has_widget(cell):
            near = [cells[j] for j in (i - 1, i, i + 1) if 0 <= j < len(cells)]
            assert any(_has_image(c) for c in near), (
                f"{entry}: a widget without a static figure beside it: {_code(cell).strip()[:120]!r}"
            )


@needs_book
@pytest.mark.parametrize("entry", sorted(PAGES), ids=lambda e: Path(e).name)
def test_internal_links_resolve(entry):
    page = PAGES[entry]
    soup = _soup(page)
    broken = []
    for tag, attribute in (("a", "href"), ("img", "src"), ("script", "src"), ("link", "href")):
        for node in soup.find_all(tag):
            target = node.get(attribute)
            if not target:
                continue
            parsed = urlparse(target)
            if parsed.scheme or parsed.netloc or not parsed.path:
                continue  # external, or an anchor on this page
            if not (page.parent / unquote(parsed.path)).exists():
                broken.append(target)
    assert not broken, f"{entry}: links to missing files: {sorted(set(broken))[:5]}"
    mathjax = [node["src"] for node in soup.find_all("script", src=True) if "tex-mml-chtml" in node["src"]]
    assert all(not urlparse(src).scheme for src in mathjax), f"{entry}: MathJax from outside the book: {mathjax}"


@needs_book
@pytest.mark.parametrize("entry", sorted(PAGES), ids=lambda e: Path(e).name)
def test_widget_manager_and_images_come_from_the_book(entry):
    page = PAGES[entry]
    soup = _soup(page)
    scripts = [node["src"] for node in soup.find_all("script", src=True)]
    external = [src for src in scripts if urlparse(src).scheme or urlparse(src).netloc]
    assert not [src for src in external if WIDGET_CDN.search(src)], f"{entry}: widget manager from a CDN: {external}"
    images = [node.get("src", "") for node in soup.find_all("img")]
    assert not [src for src in images if urlparse(src).scheme in ("http", "https")], (
        f"{entry}: images from outside the book: {[s for s in images if urlparse(s).scheme][:3]}"
    )
    # MathJax loads its extensions itself; a page that loads them as scripts (Jupyter Book does
    # for every script of html_static_path once a _static folder exists) throws on each.
    stray = [src for src in scripts if "/mathjax/" in src and "tex-mml-chtml" not in src]
    assert not stray, f"{entry}: MathJax's own files loaded as page scripts: {stray[:3]}"
    if soup.find("script", attrs={"type": WIDGET}) is None:
        return
    local = [urlparse(src).path for src in scripts if not urlparse(src).scheme]
    for name in WIDGET_MANAGER:
        found = [path for path in local if path.endswith(f"_static/{name}")]
        assert found, f"{entry}: has widgets but does not load the book's {name} (scripts: {scripts})"
        assert (page.parent / unquote(found[0])).is_file(), f"{entry}: {found[0]} is not in the build"
    assert local.index(next(p for p in local if p.endswith(WIDGET_MANAGER[0]))) < local.index(
        next(p for p in local if p.endswith(WIDGET_MANAGER[1]))
    ), f"{entry}: {WIDGET_MANAGER[0]} must load before {WIDGET_MANAGER[1]}"


def test_checks_find_what_they_look_for():
    page = bs4.BeautifulSoup(
        '<div class="cell"><div class="cell_input"><pre>fig, ax = plt.subplots()</pre></div>'
        '<div class="cell_output"><p>| a | b |</p><p>|---|---|</p>'
        "<pre>/tmp/x.py:3: UserWarning: careful</pre></div></div>",
        "html.parser",
    )
    (cell,) = _cells(page)
    assert PLOTTING.search(_code(cell)) and not _has_image(cell)
    assert RAW_TABLE_RULE.search(page.get_text("\n"))
    assert WARNING_TEXT.search(_outputs(cell)[0].get_text())
    assert not RAW_TABLE_RULE.search("a | b\nvalue ± 0.1 | - |")
    assert not WARNING_TEXT.search("StoreWarning: a torn line was set aside")  # printed on purpose
    assert OBJECT_REPR.search("<matplotlib.legend.Legend at 0x7f44316a1510>")
    assert OBJECT_REPR.search("[<matplotlib.lines.Line2D at 0x7f0>]")
    assert not OBJECT_REPR.search("<Figure size 700x350>")
    assert _errors(page) == []
    failed = bs4.BeautifulSoup(
        '<div class="cell"><div class="cell_output"><div class="output traceback highlight-ipythontb">'
        "<pre>NameError    Traceback (most recent call last)\nNameError: name 'room' is not defined</pre></div>"
        '</div></div><div class="cell"><div class="cell_output"><pre>-------------------------\n'
        "ValueError    Traceback (most recent call last)</pre></div></div>",
        "html.parser",
    )
    last_lines = ["NameError: name 'room' is not defined", "ValueError    Traceback (most recent call last)"]
    assert _errors(failed) == last_lines
    printed = bs4.BeautifulSoup(
        '<div class="cell_output"><pre>opcc-edu ablation: error: 1 run(s) failed\nValueError: caught</pre></div>',
        "html.parser",
    )
    assert _errors(printed) == []  # an error message a chapter prints on purpose is no traceback
    cdn = "https://cdn.jsdelivr.net/npm/@jupyter-widgets/html-manager@1.0.6/dist/embed-amd.js"
    assert WIDGET_CDN.search(cdn) and WIDGET_CDN.search("https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.4/r.js")


# --------------------------------------------------------------------------------------------
# A real browser
# --------------------------------------------------------------------------------------------
def _browser():
    try:
        from selenium import webdriver
    except ImportError:
        pytest.skip("the browser check needs selenium (pip install selenium)")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver") or shutil.which("chromedriver", path=os.environ.get("CHROMEWEBDRIVER"))
    if chromium is None or driver is None:
        pytest.skip("the browser check needs Chromium: apt-get install chromium chromium-driver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1300,2000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=options)


def _wait_for_widgets(browser, seconds: float = 15.0) -> tuple[int, int]:
    """Widget views on the page, and how many the manager drew (a visible area with content)."""
    import time

    script = (
        f"const views = document.querySelectorAll('script[type=\"{WIDGET}\"]').length;"
        "const drawn = Array.from(document.querySelectorAll('.widget-subarea'))"
        ".filter(e => e.offsetHeight > 0 && e.querySelector('.jupyter-widgets, .widget-box, .widget-output')).length;"
        "return [views, drawn];"
    )
    deadline = time.monotonic() + seconds
    views, drawn = browser.execute_script(script)
    while drawn < views and time.monotonic() < deadline:
        time.sleep(0.25)
        views, drawn = browser.execute_script(script)
    return views, drawn


def _sample_entries() -> list[str]:
    """The introduction and the first chapter of each part of the book."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [toc["root"]] + [part["chapters"][0]["file"] for part in toc.get("parts", []) if part.get("chapters")]


def _sample() -> list[str]:
    """The built pages of :func:`_sample_entries`."""
    return [entry for entry in _sample_entries() if entry in PAGES]


@needs_book
def test_pages_in_a_browser():
    sample = _sample()
    if not sample:
        pytest.skip(f"no page of the sample ({', '.join(_sample_entries())}) is built under {HTML}")
    browser = _browser()
    shots = Path(os.environ.get("OPCC_EDU_SCREENSHOTS", ROOT / "_build" / "screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    try:
        for entry in sample:
            browser.get(PAGES[entry].resolve().as_uri())
            views, drawn = _wait_for_widgets(browser)  # drawn after the load event: errors come later
            errors = [
                entry_["message"]
                for entry_ in browser.get_log("browser")
                if entry_["level"] == "SEVERE"
                and PAGES[entry].parent.as_uri() in entry_["message"]
                and not any(known in entry_["message"] for known in TOOLCHAIN_CONSOLE_ERRORS)
            ]
            assert not errors, f"{entry}: JavaScript errors from the book's own files: {errors[:3]}"
            broken = browser.execute_script(
                "return Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0))"
                ".map(i => i.src).filter(s => s.startsWith('file:'))"
            )
            assert not broken, f"{entry}: images that did not load: {broken[:3]}"
            assert drawn == views, f"{entry}: {views - drawn} of {views} widgets left blank"
            if "ablation" in entry:
                rows = browser.execute_script(
                    "return Array.from(document.querySelectorAll('table.opcc-table tbody tr'))"
                    ".filter(r => r.offsetHeight > 0 && r.innerText.trim()).length"
                )
                assert rows > 0, f"{entry}: no visible results table"
            height = browser.execute_script("return document.body.scrollHeight")
            browser.set_window_size(1300, min(int(height), 16000))
            browser.save_screenshot(str(shots / f"{Path(entry).name}.png"))
    finally:
        browser.quit()


#: Every visible code block or output of the article (solutions opened) whose text is wider than
#: its box: it would scroll, so its end is hidden on the page and in a printout.
HIDDEN_CODE = """
for (const e of document.querySelectorAll('main article .dropdown *')) {  // open every solution
  if (getComputedStyle(e).display === 'none') e.style.display = 'block';
}
const out = [];
for (const pre of document.querySelectorAll('main article pre')) {
  let hidden = pre.offsetParent === null;
  for (let e = pre; e; e = e.parentElement) { if (e.tagName === 'DETAILS' && !e.open) hidden = true; }
  if (!hidden && pre.scrollWidth > pre.clientWidth + 1 && pre.innerText.trim())
    out.push([pre.scrollWidth, pre.clientWidth,
              pre.innerText.split('\\n').reduce((a, l) => l.length > a.length ? l : a, '').slice(0, 60)]);
}
return out;
"""


def _on_every_lesson_at_1280_px(script: str) -> list[tuple]:
    """``(page, *row)`` for every row ``script`` returns on every lesson, in a 1280 px window."""
    lessons = [entry for entry in sorted(PAGES) if not any(part in entry for part in NOT_LESSONS)]
    browser = _browser()
    try:
        browser.set_window_size(1280, 1600)
        rows = []
        for entry in lessons:
            browser.get(PAGES[entry].resolve().as_uri())
            rows += [(entry, *row) for row in browser.execute_script(script)]
    finally:
        browser.quit()
    return rows


@needs_book
def test_no_lesson_hides_the_end_of_a_code_line_at_1280_px():
    cut = _on_every_lesson_at_1280_px(HIDDEN_CODE)
    assert cut == [], f"code or output wider than its box (width, box, longest line): {cut[:5]}"


#: Pages that are not lessons: their tables may scroll (the lab notes hold the research record).
NOT_LESSONS = ("lab_notes/", "assignments/", "teaching_guide", "references", "glossary", "running_at_paper_scale")

#: The width of every visible table of the page's article against the article's own width.
TABLE_WIDTHS = """
const main = document.querySelector('main article') || document.querySelector('article') || document.body;
const column = main.getBoundingClientRect().width;
const out = [];
for (const table of main.querySelectorAll('table')) {
  let hidden = table.offsetParent === null;
  for (let e = table; e; e = e.parentElement) { if (e.tagName === 'DETAILS' && !e.open) hidden = true; }
  if (!hidden) out.push([table.scrollWidth, column, table.innerText.slice(0, 60)]);
}
return out;
"""


@needs_book
def test_no_lesson_table_is_wider_than_the_text_column_at_1280_px():
    too_wide = [row for row in _on_every_lesson_at_1280_px(TABLE_WIDTHS) if row[1] > row[2] + 1]
    assert too_wide == [], f"tables wider than the text column (width, column, first text): {too_wide[:5]}"
