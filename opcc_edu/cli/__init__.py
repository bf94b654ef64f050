"""The ``opcc-edu`` command line.

Each command group lives in its own module (:mod:`.info`, :mod:`.run`, :mod:`.mdp`,
:mod:`.build`, :mod:`.ablation`, :mod:`.report`, :mod:`.assignments`) with a ``register(parser)`` function that adds
its options and a thin handler calling the library. :data:`COMMANDS` maps command names to
those modules; only the module of the command being run is imported (``opcc-edu --help`` lists
the commands without importing any), so one subsystem's import error cannot break another.

The options every command shares (``--profile``, ``--no-progress``, ``--threads``) are defined
once in :mod:`.options` and accepted before or after the command name. :func:`main` turns every
error the user can act on into one line ``opcc-edu CMD: error: ...``; the exit statuses are
listed in :mod:`.errors`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import select
import sys
from collections.abc import Iterable, Sequence

from .. import __version__
from ..config import use_profile
from .errors import EXIT_BROKEN_PIPE, describe
from .options import Parser, common_options, profile_of, threads_of, torch_threads

#: Command name -> (module of :mod:`opcc_edu.cli` that registers it, one-line summary).
COMMANDS: dict[str, tuple[str, str]] = {
    "info": ("info", "list environments, profiles, policies, datasets, query sets and ablations"),
    "run": ("run", "train (or load) a dynamics ensemble, answer an environment's queries, score EV/PCI/U-PCI"),
    "mdp-demo": ("mdp", "exact (dynamic programming) vs Monte-Carlo values on a small tabular MDP"),
    "build": ("build", "regenerate benchmark assets: policies, query sets, datasets"),
    "ablation": ("ablation", "run one of the paper's ablations (train, answer, score; resumable)"),
    "report": ("report", "write every ablation's table (ours next to the paper's) as Markdown or LaTeX"),
    "assignments": ("assignments", "build the autograded classroom assignments, grade submissions into a CSV"),
}

_EPILOG = (
    "Every command has --help. Exit status: 0 success; 1 out of memory or disk space; 2 a bad "
    "option, name or path, a missing file or a missing optional extra; 130 interrupted."
)
# Options of the top-level parser that take a value (to find the command name in argv).
_VALUE_OPTIONS = ("--profile", "--threads")


def build_parser(commands: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The ``opcc-edu`` parser.

    Args:
        commands: the commands whose options are added (their modules are imported); the others
            are listed with their summary only. ``None``: every command.

    Returns:
        The parser; each fully registered command sets ``handler`` on the parsed namespace.
    """
    full = set(COMMANDS) if commands is None else set(commands)
    parser = Parser(
        prog="opcc-edu",
        description="Offline Policy Comparison with Confidence: benchmark, baselines, metrics and book.",
        epilog=_EPILOG,
        parents=[common_options()],
    )
    parser.add_argument("--version", action="version", version=f"opcc_edu {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    sub.required = True
    for name, (module_name, summary) in COMMANDS.items():
        command = sub.add_parser(name, help=summary, description=summary, parents=[common_options()])
        if name in full:
            module = importlib.import_module(f".{module_name}", __name__)
            module.register(command)
    return parser


def command_name(argv: Sequence[str]) -> str | None:
    """The command named in ``argv`` (its first positional word), or ``None``."""
    words = iter(argv)
    for word in words:
        if word == "--":
            return next(words, None)
        if not word.startswith("-"):
            return word
        if "=" not in word and len(word) > 2 and any(option.startswith(word) for option in _VALUE_OPTIONS):
            next(words, None)  # the option's value
    return None


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader went away (poll reports an error on it)."""
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & select.POLLERR for _, event in poll.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows) or no file descriptor
        return False


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (captured output)
        pass


def _report(prog: str, message: str) -> None:
    print(f"{prog}: error: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``opcc-edu`` with ``argv`` (default ``sys.argv[1:]``) and return the exit status.

    ``--help``, ``--version`` and usage errors exit through ``SystemExit`` as argparse does
    (status 0, 0 and 2); every other error the user can act on is printed as one line on stderr
    and returned as a status (see :mod:`opcc_edu.cli.errors`). Anything else is a bug and keeps
    its traceback.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    name = command_name(argv)
    prog = f"opcc-edu {name}" if name in COMMANDS else "opcc-edu"
    try:
        parser = build_parser([name] if name in COMMANDS else [])
        args = parser.parse_args(argv)
        args.argv = argv  # the command line as given, recorded as provenance by some commands
        profile = profile_of(args)
        with use_profile(profile) if profile else contextlib.nullcontext(), torch_threads(threads_of(args)):
            return int(args.handler(args) or 0)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - describe() lets every unexpected error through
        if isinstance(exc, BrokenPipeError) and _stdout_closed():  # `opcc-edu info | head`: stop quietly
            _silence_stdout()
            return EXIT_BROKEN_PIPE
        described = describe(exc)
        if described is None:
            raise
        message, status = described
        _report(prog, message)
        return status


__all__ = ["COMMANDS", "build_parser", "command_name", "main"]
