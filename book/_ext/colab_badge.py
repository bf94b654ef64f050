"""Sphinx extension of the book: the Colab badge of each chapter from the book's own files.

Each chapter's title cell carries Colab's badge (``scripts/sync_colab.py`` writes it, linking to
the chapter at the configured repository and revision). In Jupyter, on Colab and on GitHub the
notebook shows Colab's own image; on the book's pages this transform swaps it for
``book/_ext/colab-badge.svg``, which Sphinx copies into the build (``_images``), so that a page
loads no image from elsewhere and reads the same offline. The link is left as it is. (Not in a
``_static`` folder: Jupyter Book would then load every script of ``html_static_path`` on every
page, MathJax's extensions included.)
"""

from __future__ import annotations

import os
from pathlib import Path

from docutils import nodes
from sphinx.transforms import SphinxTransform

#: The image of the badge that the chapters name (= the one in ``scripts/sync_colab.py``).
COLAB_BADGE_URL = "https://colab.research.google.com/assets/colab-badge.svg"
#: The book's copy.
LOCAL_BADGE = Path(__file__).resolve().with_name("colab-badge.svg")


class LocalColabBadge(SphinxTransform):
    """Point every image of :data:`COLAB_BADGE_URL` at :data:`LOCAL_BADGE`."""

    default_priority = 400

    def apply(self, **kwargs) -> None:
        here = Path(self.env.doc2path(self.env.docname)).parent
        local = Path(os.path.relpath(LOCAL_BADGE, here)).as_posix()
        for image in self.document.findall(nodes.image):
            if image.get("uri") == COLAB_BADGE_URL:
                image["uri"] = local


def setup(app):
    app.add_transform(LocalColabBadge)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
