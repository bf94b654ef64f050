"""``opcc-edu build TARGET ...``: regenerate shipped or cached assets deterministically.

Each target module exposes ``add_build_parser(subparsers)``; a target whose module is not
importable (for example a missing optional extra) is skipped.
"""

from __future__ import annotations

import argparse
import importlib

BUILD_TARGETS: dict[str, str] = {
    "policies": "opcc_edu.policies:add_build_parser",
    "queries": "opcc_edu.queries:add_build_parser",
    "datasets": "opcc_edu.datasets:add_build_parser",
}


def add_build(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "build",
        help="regenerate benchmark assets (policies, query sets, datasets)",
        description="Regenerate a benchmark asset deterministically from its seed. Shipped assets "
        "record the command and seed that produced them.",
    )
    targets = p.add_subparsers(dest="target", metavar="TARGET")
    targets.required = True
    for target in BUILD_TARGETS.values():
        module_name, func_name = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        add = getattr(module, func_name, None)
        if add is not None:
            add(targets)
