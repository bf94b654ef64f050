"""The ``opcc-edu`` command line.

Subcommands live in their own functions and are registered in :data:`COMMANDS`; each one
adds an argparse sub-parser (so ``--help`` works everywhere) and a handler taking the parsed
namespace and returning an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable

from . import __version__
from .config import PROFILES, set_profile

# name -> "module:function" that adds the sub-parser; modules are imported lazily so that
# `opcc-edu --help` stays fast and one subsystem's import error cannot break the others.
COMMANDS: dict[str, str] = {
    "info": "opcc_edu.commands:add_info",
    "run": "opcc_edu.commands:add_run",
    "mdp-demo": "opcc_edu.commands:add_mdp_demo",
    "build": "opcc_edu.build_cli:add_build",
    "ablation": "opcc_edu.experiments:add_ablation_parser",
    "report": "opcc_edu.experiments:add_report_parser",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="opcc-edu",
        description="Offline Policy Comparison with Confidence: benchmark, baselines, metrics and book.",
    )
    parser.add_argument("--version", action="version", version=f"opcc_edu {__version__}")
    parser.add_argument(
        "--profile",
        choices=list(PROFILES),
        default=None,
        help="size profile for every expensive step (default: $OPCC_EDU_PROFILE or 'tiny')",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for target in COMMANDS.values():
        module_name, func_name = target.split(":")
        add: Callable = getattr(importlib.import_module(module_name), func_name)
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.profile is not None:
        set_profile(args.profile)
    try:
        return int(args.handler(args) or 0)
    except (ValueError, KeyError, FileNotFoundError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"opcc-edu {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
