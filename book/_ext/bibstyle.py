"""The reference list labelled as the text cites it: "[Koul et al., 2022]", not "[8]".

sphinxcontrib-bibtex cites author-year in the text (``bibtex_reference_style: author_year``),
but the list's labels come from the pybtex style of the ``{bibliography}`` directive, and
pybtex's own label styles are numbers or letters. This registers ``authoryear``: pybtex's
``plain`` formatting and sorting with labels in the text's form.
"""

from __future__ import annotations

import string

from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle


def _surname(person) -> str:
    return Text.from_latex(
        " ".join(person.prelast_names + person.last_names)
    ).render_as("text")


def _label(entry) -> str:
    persons = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_surname(p) for p in persons]
    if len(names) > 2:
        who = f"{names[0]} et al."
    elif names:
        who = " and ".join(names)
    else:
        who = entry.fields.get("title", entry.key)
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearLabels(BaseLabelStyle):
    def format_labels(self, sorted_entries):
        labels = [_label(entry) for entry in sorted_entries]
        seen: dict[str, int] = {}
        for label in labels:
            seen[label] = seen.get(label, 0) + 1
        count: dict[str, int] = {}
        for label in labels:  # the same authors and year twice: 2021a, 2021b
            if seen[label] > 1:
                count[label] = count.get(label, 0) + 1
                yield label + string.ascii_lowercase[count[label] - 1]
            else:
                yield label


class AuthorYearStyle(PlainStyle):
    default_label_style = AuthorYearLabels


def setup(app):
    register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
