"""What a reader sees: tables that render as tables, explorers with a figure the page keeps.

* :class:`Table` -- a results table. It is the Markdown text of the table (a ``str``, so it
  prints in a terminal and joins into reports), and it shows itself as an HTML table in
  Jupyter, on Colab and on the book's pages, with a caption and the best cell of each column
  marked. Markdown output is not a table everywhere (CommonMark has none), HTML is.
* :func:`explore` -- an ipywidgets explorer with a static twin: the figure of its default
  state is drawn as an ordinary output, which the static book keeps, followed by a one-line
  note and the controls, which move only in a running notebook.
* :func:`skip_hidden_checks` -- a chapter's hidden checks (cells whose first line is
  :data:`CHECK_MARKER`) run in the test suite and are skipped in a reader's notebook.
"""

from __future__ import annotations

import html
import math
import os
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ipywidgets import Widget

__all__ = ["Table", "explore", "skip_hidden_checks", "CHECK_MARKER", "CHECKS_VARIABLE", "EXPLORER_NOTE"]

#: First line of a hidden check cell: the chapter asserts a fact it teaches (a regression fails
#: the test suite); a reader's notebook skips the cell.
CHECK_MARKER = "# hidden check: runs in the test suite only"

#: The environment variable that makes hidden checks run (the test suite and CI set it to 1).
CHECKS_VARIABLE = "OPCC_EDU_CHECKS"

#: The line shown between an explorer's static figure and its controls.
EXPLORER_NOTE = (
    "*Interactive explorer: the controls below work in Jupyter and on Colab (open this chapter "
    "there). The figure above shows their default setting; a change draws its figure below them.*"
)

_DIRECTIONS = ("lower", "higher", None)

#: Text cells longer than this many characters are at least 10 em wide on the page.
_WRAP_AFTER = 24


class Table(str):
    """A table whose text is Markdown and whose notebook display is HTML.

    Args:
        header: the column names.
        rows: the cells, as text, one sequence of ``len(header)`` per row.
        values: the number behind each cell (``None`` or ``nan`` where there is none), used to
            find the best cell of a column; default: no cell is marked.
        better: per column, ``"lower"``, ``"higher"`` or ``None`` (not compared).
        group: index of a column whose equal cells form a group (e.g. the environment): the
            best cell is found within each group of at least two rows with a number.
        caption: one line shown above the table in notebooks and on the page (not in the text).
        spans: an HTML header row above ``header``: ``(name, columns)`` pairs covering every
            column in order; below a named span each column shows its name without the span's
            (``"AURCC (↓)"`` over ``"ours"``, ``"paper"``).
        merge: indices of text columns whose runs of equal cells are shown once in HTML, as one
            cell spanning the rows (within a group, when ``group`` is given; the ``group``
            column itself merges its runs). The Markdown text keeps every cell.

    The string itself is the Markdown table alone, so ``print`` and reports are unchanged.

    Raises:
        ValueError: for rows, values or directions that do not match the header.
    """

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    best: frozenset[tuple[int, int]]
    caption: str | None
    spans: tuple[tuple[str, int], ...] | None
    merge: tuple[int, ...]
    group: int | None

    def __new__(
        cls,
        header: Sequence[str],
        rows: Sequence[Sequence[str]],
        *,
        values: Sequence[Sequence[float | None]] | None = None,
        better: Sequence[str | None] | None = None,
        group: int | None = None,
        caption: str | None = None,
        spans: Sequence[tuple[str, int]] | None = None,
        merge: Sequence[int] = (),
    ) -> Table:
        header = tuple(str(h) for h in header)
        width = len(header)
        if width == 0:
            raise ValueError("header must name at least one column")
        rows = tuple(tuple(str(c) for c in row) for row in rows)
        for i, row in enumerate(rows):
            if len(row) != width:
                raise ValueError(f"row {i} has {len(row)} cells, the header {width}: {row!r}")
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * width]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        table = super().__new__(cls, "\n".join(lines))
        table.header = header
        table.rows = rows
        table.caption = caption
        table.best = _best_cells(rows, width, values, better, group)
        table.spans = _check_spans(spans, header)
        table.merge = tuple(int(j) for j in merge)
        if any(not 0 <= j < width for j in table.merge):
            raise ValueError(f"merge must hold column indices in [0, {width}), got {tuple(merge)!r}")
        table.group = group
        return table

    def _row_spans(self) -> dict[tuple[int, int], int]:
        """(row, column) -> rows spanned, for merged cells; 0 for a cell inside a span above."""
        spans: dict[tuple[int, int], int] = {}
        for j in self.merge:
            start = 0
            # a run ends at a new cell text, or (for other columns than ``group``) at a new group
            g = j if self.group is None else self.group
            for i in range(1, len(self.rows) + 1):
                same = i < len(self.rows) and self.rows[i][j] == self.rows[start][j]
                if not (same and self.rows[i][g] == self.rows[start][g]):
                    spans[(start, j)] = i - start
                    spans.update({(k, j): 0 for k in range(start + 1, i)})
                    start = i
        return spans

    def _repr_markdown_(self) -> str:
        return (f"{self.caption}\n\n" if self.caption else "") + str(self)

    def _repr_html_(self) -> str:
        return self.to_html()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def to_html(self) -> str:
        """The table as HTML: the caption, then the table in a box that scrolls sideways when the
        page is narrower, the best cells in bold (class ``best``)."""
        esc = html.escape
        numeric = self._numeric_columns()
        parts = []
        if self.caption:  # above the scrolling box, so that it wraps at the page's width
            parts.append(f'<p class="opcc-table-caption" style="font-size: 0.85em">{esc(self.caption)}</p>')
        parts += ['<div style="overflow-x: auto">', '<table class="table opcc-table" style="font-size: 0.85em">']
        parts.append("<thead>")
        names = list(self.header)
        if self.spans:
            row, start = [], 0
            for name, count in self.spans:
                row.append(f'<th colspan="{count}" style="text-align: center">{esc(name)}</th>')
                if name:
                    names[start : start + count] = [
                        n.removeprefix(name).strip() or n for n in names[start : start + count]
                    ]
                start += count
            parts.append("<tr>" + "".join(row) + "</tr>")
        parts.append("<tr>" + "".join(self._cell("th", j in numeric, n) for j, n in enumerate(names)) + "</tr>")
        parts.append("</thead><tbody>")
        merged = self._row_spans()
        for i, row in enumerate(self.rows):
            cells = "".join(
                self._cell("td", j in numeric, c, (i, j) in self.best, merged.get((i, j), 1))
                for j, c in enumerate(row)
                if merged.get((i, j), 1)
            )
            parts.append(f"<tr>{cells}</tr>")
        parts.append("</tbody></table></div>")
        return "\n".join(parts)

    @staticmethod
    def _cell(tag: str, numeric: bool, text: str, best: bool = False, rows: int = 1) -> str:
        parts = re.split(r"( → | / )", text) if numeric and tag == "td" else [text]
        body = html.escape(text)
        if numeric and len(parts) > 1:
            # a number with its interval never breaks; a cell of several ("a → b", "a / b") may
            # break between them, so a table of intervals still fits the text column
            style = ' style="text-align: right"'
            body = "".join(
                html.escape(part) if i % 2 else f'<span style="white-space: nowrap">{html.escape(part)}</span>'
                for i, part in enumerate(parts)
            )
        elif numeric:  # a header may wrap between its words, a number may not
            style = ' style="text-align: right; white-space: nowrap"' if tag == "td" else ' style="text-align: right"'
        else:
            style = ' style="min-width: 10em"' if len(text) > _WRAP_AFTER else ""  # a few lines, not single words
        body = f"<strong>{body}</strong>" if best else body
        mark = ' class="best"' if best else ""
        span = f' rowspan="{rows}"' if rows > 1 else ""
        return f"<{tag}{mark}{span}{style}>{body}</{tag}>"

    def _numeric_columns(self) -> set[int]:
        return {j for j in range(len(self.header)) if any(_is_number_text(row[j]) for row in self.rows)}


def _check_spans(
    spans: Sequence[tuple[str, int]] | None, header: tuple[str, ...]
) -> tuple[tuple[str, int], ...] | None:
    if spans is None:
        return None
    spans = tuple((str(name), int(count)) for name, count in spans)
    if any(count < 1 for _, count in spans) or sum(count for _, count in spans) != len(header):
        raise ValueError(f"spans must cover the {len(header)} columns with positive counts, got {spans!r}")
    return spans


def _is_number_text(text: str) -> bool:
    head = text.split(" ", 1)[0].lstrip("−-")
    return bool(head) and head.replace(".", "", 1).isdigit()


def _best_cells(
    rows: tuple[tuple[str, ...], ...],
    width: int,
    values: Sequence[Sequence[float | None]] | None,
    better: Sequence[str | None] | None,
    group: int | None,
) -> frozenset[tuple[int, int]]:
    if values is None or better is None:
        return frozenset()
    better = tuple(better)
    if len(better) != width:
        raise ValueError(f"better needs one direction per column ({width}), got {len(better)}")
    for direction in better:
        if direction not in _DIRECTIONS:
            raise ValueError(f"better holds {direction!r}; choose from {_DIRECTIONS}")
    if len(values) != len(rows) or any(len(v) != width for v in values):
        raise ValueError("values needs one number (or None) per cell, in the shape of rows")
    if group is not None and not 0 <= group < width:
        raise ValueError(f"group must be a column index in [0, {width}), got {group!r}")
    groups: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault(row[group] if group is not None else "", []).append(i)
    best = set()
    for members in groups.values():
        for j, direction in enumerate(better):
            if direction is None:
                continue
            numbers = [(i, float(values[i][j])) for i in members if _finite(values[i][j])]
            if len(numbers) < 2:
                continue
            pick = min if direction == "lower" else max
            target = pick(v for _, v in numbers)
            if all(v == target for _, v in numbers):
                continue  # every level ties: nothing is best
            best.update((i, j) for i, v in numbers if v == target)
    return frozenset(best)


def _finite(value: Any) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def explore(function: Callable[..., Any], /, note: bool = True, draw: bool = True, **controls: Any) -> Widget:
    """Show ``function``'s figure at the controls' defaults, then return its explorer.

    The default state is drawn as an ordinary cell output (the static book keeps it); then
    :data:`EXPLORER_NOTE`; the returned ``ipywidgets.interactive`` draws below its controls
    only when one changes, so a notebook reader never sees the default figure twice.

    Args:
        function: draws one figure from keyword arguments (it may call ``plt.show()``).
        note: show :data:`EXPLORER_NOTE` between the figure and the controls.
        draw: draw the default state here; ``False`` where the cell just above already shows
            that figure.
        **controls: one ipywidgets control (or fixed value, as ``ipywidgets.interactive``
            takes) per keyword argument of ``function``.

    Returns:
        The ``ipywidgets.interactive`` widget (the last line of a cell displays it).

    Raises:
        ValueError: when no control is given.
    """
    import ipywidgets as widgets
    import matplotlib.pyplot as plt
    from IPython.display import Markdown, display

    if not controls:
        raise ValueError("explore needs at least one control, e.g. n=ipywidgets.IntSlider(...)")
    drawn = {"default": False}

    def redraw(**kwargs: Any) -> None:
        if not drawn["default"]:  # interactive calls once at construction: that figure is above
            drawn["default"] = True
            return
        function(**kwargs)
        plt.show()

    explorer = widgets.interactive(redraw, **controls)
    if draw:
        function(**explorer.kwargs)
        plt.show()
    if note:
        display(Markdown(EXPLORER_NOTE))
    return explorer


def _skip_check_cells(lines: list[str]) -> list[str]:
    if lines and lines[0].startswith(CHECK_MARKER):
        return [f"pass  # hidden check skipped (set {CHECKS_VARIABLE}=1 to run it)\n"]
    return lines


def skip_hidden_checks(shell: Any = None) -> bool:
    """Make the running IPython kernel skip cells whose first line is :data:`CHECK_MARKER`,
    unless ``$OPCC_EDU_CHECKS`` is ``1`` (the test suite sets it; the CI book build, like a reader's, does not).

    Every chapter calls it in its first cell, so a reader on Colab or in Jupyter does not run
    the checks that guard the book against regressions.

    Args:
        shell: the IPython shell (default: the running one).

    Returns:
        Whether checks are skipped (``False`` also outside IPython).
    """
    if os.environ.get(CHECKS_VARIABLE) == "1":
        return False
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None:
        return False
    if _skip_check_cells not in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.append(_skip_check_cells)
    return True
