"""``python scripts/import_original_benchmark.py SOURCE``: convert the original benchmark's assets.

SOURCE is a checkout of https://github.com/koulanurag/opcc (Apache-2.0). Its seven query pickles
are read with an allow-list unpickler and its 28 policies with ``torch.load(weights_only=True)``
(nothing in them can run code); they are written as ``opcc_edu/assets/queries/original/<env>.npz``
and ``opcc_edu/assets/original/policies/<env>/level<k>.safetensors``, with the licence, an
``import.json`` record (source digests, commit, command, the largest action difference between the
converted and the original networks) and the manifest's checksums. How: :mod:`opcc_edu.build.original`.
Run it again with the same checkout and the files come out the same.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from opcc_edu.build.original import import_original
from opcc_edu.envs import ENV_NAMES


def _commit(source: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


def main(argv: Sequence[str] | None = None) -> int:
    """Convert; print one line per environment. Returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python scripts/import_original_benchmark.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument("source", type=Path, help="a checkout of koulanurag/opcc")
    parser.add_argument("--commit", help="the checkout's commit (default: read with git)")
    parser.add_argument("--env", action="append", choices=ENV_NAMES, help="convert only these (repeatable)")
    args = parser.parse_args(argv)
    commit = args.commit or _commit(args.source)
    if not commit:
        parser.error("--commit is required when SOURCE is not a git checkout")
    command = "python scripts/import_original_benchmark.py SOURCE --commit " + commit
    record = import_original(args.source, commit, command, tuple(args.env or ENV_NAMES))
    for env_name, entry in record["environments"].items():
        worst = entry["max_action_difference"]
        print(f"{env_name}: {entry['queries']} queries, 4 policies, max |action difference| {worst:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
