"""Regenerate the asset manifest, ``opcc_edu/assets/MANIFEST.json``, or check it.

The manifest lists the SHA-256 of every shipped asset file (policies, behaviour policies, query
sets, reference tables, training logs); loading an asset checks it (:mod:`opcc_edu.io`).
Writing an asset through the package updates its entry by itself, so run this script after
adding, removing or replacing asset files by other means:

    python scripts/update_manifest.py           # record the files as they are now
    python scripts/update_manifest.py --check   # list differences; exit status 1 if any
"""

from __future__ import annotations

import argparse
import sys

from opcc_edu.build.manifest import asset_files, manifest_problems, write_manifest
from opcc_edu.io import ASSETS_DIR


def main(argv: list[str] | None = None) -> int:
    """Run the script; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare the manifest with the files")
    args = parser.parse_args(argv)
    if args.check:
        problems = manifest_problems()
        for line in problems:
            print(line)
        print(f"{ASSETS_DIR}: {'manifest out of date' if problems else 'manifest matches every asset file'}")
        return 1 if problems else 0
    path = write_manifest()
    print(f"wrote {path} ({len(asset_files())} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
