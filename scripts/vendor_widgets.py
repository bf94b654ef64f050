"""Refresh the book's own copy of the Jupyter widget manager (``_vendor/jupyter-widgets``).

The book's pages embed the saved state of their ipywidgets explorers; a widget manager script
draws the controls from that state. myst-nb loads it, with require.js, from CDNs by default, so a
page read offline shows blank widget areas. The book serves the manager from its own files
instead (``_config.yml``: ``nb_ipywidgets_js``), like MathJax (``_vendor/mathjax``).

This copies from the npm package ``@jupyter-widgets/html-manager``:

* ``dist/embed.js`` -- the manager with the core widgets (``@jupyter-widgets/base``,
  ``controls``, ``output``) built in; it needs no require.js and loads nothing from a CDN;
* the Font Awesome fonts its styles name (``.woff2`` and ``.woff``, the formats every current
  browser reads first);
* the package's licence (BSD-3-Clause) and ``embed.js.LICENSE.txt`` (the bundled libraries);

and writes a README with the version and the tarball's integrity hash. Run::

    python scripts/vendor_widgets.py                 # the pinned VERSION
    python scripts/vendor_widgets.py --version 1.0.16

It needs ``npm`` (``npm pack`` downloads the package from the registry and checks its hash).
Keep the version within the range that the installed ipywidgets expects
(``ipywidgets._version.__html_manager_version__``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "_vendor" / "jupyter-widgets"
PACKAGE = "@jupyter-widgets/html-manager"
#: The version served by the book (ipywidgets 8 writes widget state for html-manager ^1.0).
VERSION = "1.0.15"
#: Files of the package's dist/ folder that the book serves.
KEEP_SUFFIXES = (".woff2", ".woff")
KEEP_NAMES = ("embed.js", "embed.js.LICENSE.txt")
#: The book's own files in the folder, kept: MathJax 2's one call that the manager makes, answered
#: by the book's MathJax 3 (loaded before ``embed.js``, see ``_config.yml``).
OWN_FILES = ("mathjax-hub.js",)

#: The licence of the ipywidgets repository, which the package's ``license`` field names.
LICENSE = """Copyright (c) 2015 Project Jupyter Contributors
All rights reserved.

Redistribution and use in source and binary forms, with or without
modification, are permitted provided that the following conditions are met:

1. Redistributions of source code must retain the above copyright notice, this
   list of conditions and the following disclaimer.

2. Redistributions in binary form must reproduce the above copyright notice,
   this list of conditions and the following disclaimer in the documentation
   and/or other materials provided with the distribution.

3. Neither the name of the copyright holder nor the names of its
   contributors may be used to endorse or promote products derived from
   this software without specific prior written permission.

THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS"
AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE
DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT HOLDER OR CONTRIBUTORS BE LIABLE
FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR CONSEQUENTIAL
DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR
SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER
CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY,
OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.
"""

README = """{package} {version} (npm, {license}, see LICENSE; the libraries bundled into
`embed.js` and their licences are listed in `embed.js.LICENSE.txt`), served from the book's own
files so that the ipywidgets explorers' saved state renders offline: `embed.js` (the widget
manager with the core widgets built in: no require.js, nothing from a CDN) and the Font Awesome
fonts its styles name (`.woff2`, `.woff`). Tarball integrity: `{integrity}`.
`mathjax-hub.js` is the book's own, not the package's: the manager typesets widget labels with
MathJax 2's `MathJax.Hub.Queue`, which the book's MathJax 3 lacks; it answers that call.
`_config.yml` copies this folder into the built `_static` (`html_static_path`) and loads both
scripts on pages with widgets (`nb_ipywidgets_js`). Refresh with `python scripts/vendor_widgets.py`.
"""


def npm_pack(spec: str, folder: Path) -> tuple[Path, dict]:
    """Download ``spec`` with ``npm pack`` into ``folder``; the tarball and npm's record of it."""
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is needed (e.g. apt-get install nodejs npm)")
    done = subprocess.run(
        [npm, "pack", spec, "--json", "--pack-destination", str(folder)],
        check=True,
        capture_output=True,
        text=True,
    )
    (record,) = json.loads(done.stdout)
    return folder / record["filename"], record


def vendor(version: str = VERSION, target: Path = TARGET) -> list[Path]:
    """Replace ``target`` with the served files of ``PACKAGE@version``; the files written."""
    with tempfile.TemporaryDirectory() as tmp:
        tarball, record = npm_pack(f"{PACKAGE}@{version}", Path(tmp))
        with tarfile.open(tarball) as archive:
            manifest = json.load(archive.extractfile("package/package.json"))
            if manifest["license"] != "BSD-3-Clause":
                raise SystemExit(f"{PACKAGE}@{version}: licence {manifest['license']!r}, expected BSD-3-Clause")
            members = [
                m
                for m in archive.getmembers()
                if m.isfile()
                and m.name.startswith("package/dist/")
                and (Path(m.name).name in KEEP_NAMES or m.name.endswith(KEEP_SUFFIXES))
            ]
            if "embed.js" not in {Path(m.name).name for m in members}:
                raise SystemExit(f"{PACKAGE}@{version} has no dist/embed.js")
            target.mkdir(parents=True, exist_ok=True)
            for old in target.iterdir():
                if old.name not in OWN_FILES:
                    old.unlink()
            written = []
            for member in members:
                path = target / Path(member.name).name
                path.write_bytes(archive.extractfile(member).read())
                written.append(path)
    for name, text in (
        ("LICENSE", LICENSE),
        (
            "README.md",
            README.format(
                package=PACKAGE, version=manifest["version"], license=manifest["license"], integrity=record["integrity"]
            ),
        ),
    ):
        (target / name).write_text(text)
        written.append(target / name)
    return sorted(written)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default=VERSION, help=f"version of {PACKAGE} (default {VERSION})")
    args = parser.parse_args(argv)
    for path in vendor(args.version):
        print(f"{path.relative_to(ROOT)}  {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
