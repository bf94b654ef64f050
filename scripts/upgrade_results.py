"""``python scripts/upgrade_results.py DIR [DIR ...]``: bring results directories up to date.

Each directory is prepared by :func:`opcc_edu.lab.experiments.migrate_results`: temporaries of
killed processes removed, damaged records set aside, CSV-only runs converted to records, and
runs recorded before the tie-fair metrics upgraded from their kept member values (old records
and table backed up; see :mod:`opcc_edu.lab.experiments.store`). Running it again changes nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from opcc_edu.lab.experiments.store import migrate_results


def main(argv: Sequence[str] | None = None) -> int:
    """Upgrade every directory named; print its counts. Returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python scripts/upgrade_results.py",
        description="Bring results directories (records/, results.csv, runs.csv, values/) to the current "
        "format: runs recorded before the tie-fair metrics get them, recomputed from values/.",
    )
    parser.add_argument(
        "directories", nargs="+", metavar="DIR", help="a results directory, e.g. results/ablations/hard/tiny"
    )
    args = parser.parse_args(argv)
    for directory in args.directories:
        path = Path(directory)
        if not ((path / "records").is_dir() or (path / "runs.csv").exists()):
            print(f"{path}: not a results directory (no records/ and no runs.csv)", file=sys.stderr)
            return 2
    for directory in args.directories:
        counts = migrate_results(directory)
        print(f"{directory}: " + ", ".join(f"{key} {value}" for key, value in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
