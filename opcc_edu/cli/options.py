"""The options every ``opcc-edu`` command shares, defined once, and their checks.

* :class:`Parser` -- an ``ArgumentParser`` whose errors are one line on stderr.
* :func:`common_options` -- ``--profile``, ``--no-progress``, ``--threads``: accepted before or
  after the command, one meaning everywhere.
* :func:`add_out`, :func:`add_seed` -- the per-command ``--out DIR`` and ``--seed N``, spelled
  and checked the same way by every command that has them.
* :func:`add_recipe`, :func:`add_baseline`, :func:`add_reward` -- ``--queries``/``--recipe``,
  ``--baseline`` and ``--reward``, one helper per flag.
* Argument types (:func:`positive_int`, :func:`non_negative_int`, :func:`non_negative_float`,
  :func:`unit_float`, :func:`environment`) that reject bad numbers and names while parsing.
* :func:`check_output_dir`, :func:`check_cache_dir` -- paths checked before any work starts.
* :func:`torch_threads` -- the one place that sets torch's and OpenMP's thread count.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn

from ..config import PROFILES


class UsageError(ValueError):
    """A command line that cannot work (a bad value, an unusable path); its message is complete."""


class Parser(argparse.ArgumentParser):
    """An argument parser that reports a usage error as one line: ``PROG: error: MESSAGE``."""

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: error: MESSAGE`` (no usage block) and exit with status 2."""
        self.exit(2, f"{self.prog}: error: {message}\n")


# --------------------------------------------------------------------------------------------
# Argument types: bad values fail while parsing, naming the option and the valid range
# --------------------------------------------------------------------------------------------
def _integer(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (a count of steps, members, runs...)."""
    return _integer(text, 1)


def non_negative_int(text: str) -> int:
    """An integer >= 0 (a seed, a run limit)."""
    return _integer(text, 0)


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0."""
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {value:g}")
    return value


def unit_float(text: str) -> float:
    """A number in [0, 1] (a discount)."""
    value = _number(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1], got {value:g}")
    return value


def choice_type(what: str, choices: Callable[[], Sequence[str]], extra: Sequence[str] = ()) -> Callable[[str], str]:
    """A type accepting one of ``choices()`` (read on first use, so help stays fast) or ``extra``."""

    def check(text: str) -> str:
        valid = [*choices(), *extra]
        if text not in valid:
            raise argparse.ArgumentTypeError(f"unknown {what} {text!r}; valid choices: {', '.join(valid)}")
        return text

    return check


def _env_names() -> tuple[str, ...]:
    from ..envs import ENV_NAMES

    return ENV_NAMES


environment = choice_type("environment", _env_names)
"""An environment name of :data:`opcc_edu.envs.ENV_NAMES`."""
environment_or_all = choice_type("environment", _env_names, extra=("all",))
"""An environment name, or ``all``."""


# --------------------------------------------------------------------------------------------
# The shared options
# --------------------------------------------------------------------------------------------
def common_options() -> Parser:
    """A parent parser with the options every command accepts, before or after its name.

    Their defaults are suppressed, so a value given before the command is not overwritten by
    the command's own parser; read them with :func:`profile_of`, :func:`progress_of`,
    :func:`threads_of`.
    """
    parent = Parser(add_help=False)
    group = parent.add_argument_group("options of every command")
    group.add_argument(
        "--profile",
        choices=list(PROFILES),
        default=argparse.SUPPRESS,
        help="size profile of every expensive step: tiny, classroom or paper (default: $OPCC_EDU_PROFILE, else tiny)",
    )
    group.add_argument("--no-progress", action="store_true", default=argparse.SUPPRESS, help="hide progress bars")
    group.add_argument(
        "--quiet", dest="no_progress", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    group.add_argument(
        "--threads",
        type=positive_int,
        metavar="N",
        default=argparse.SUPPRESS,
        help="CPU threads of torch and OpenMP (default: torch's choice; 1 is best on a busy machine)",
    )
    return parent


def profile_of(args: argparse.Namespace) -> str | None:
    """The ``--profile`` given, or ``None``."""
    return getattr(args, "profile", None)


def progress_of(args: argparse.Namespace) -> bool:
    """Whether to show progress bars (``--no-progress`` not given)."""
    return not getattr(args, "no_progress", False)


def threads_of(args: argparse.Namespace) -> int | None:
    """``--threads`` if given, else ``None`` (leave torch's choice)."""
    return getattr(args, "threads", None)


def add_out(parser: argparse.ArgumentParser, default: str | None, help: str, aliases: Sequence[str] = ()) -> None:
    """Add ``--out DIR`` (and old spellings in ``aliases``, accepted but not shown)."""
    parser.add_argument("--out", metavar="DIR", default=default, help=help)
    for alias in aliases:
        parser.add_argument(alias, dest="out", metavar="DIR", default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def add_seed(parser: argparse.ArgumentParser, default: int | None, help: str) -> None:
    """Add ``--seed N`` (an integer >= 0)."""
    parser.add_argument("--seed", type=non_negative_int, metavar="N", default=default, help=help)


def add_recipe(parser: argparse.ArgumentParser, flag: str, help: str) -> None:
    """Add ``flag`` (``--queries`` or ``--recipe``): a query-set recipe, ``paper`` by default."""
    from ..names import DEFAULT_QUERY_RECIPE, QUERY_RECIPES

    parser.add_argument(
        flag, choices=list(QUERY_RECIPES), default=DEFAULT_QUERY_RECIPE, help=f"{help} (default {DEFAULT_QUERY_RECIPE})"
    )


def add_baseline(parser: argparse.ArgumentParser, help: str) -> None:
    """Add ``--baseline ensemble|heuristic`` (default ``ensemble``)."""
    from ..names import BASELINES

    parser.add_argument("--baseline", choices=list(BASELINES), default="ensemble", help=f"{help} (default ensemble)")


def add_reward(parser: argparse.ArgumentParser) -> None:
    """Add ``--reward learned|predefined`` (default ``learned``, the paper's)."""
    from ..dynamics.spec import DEFAULT_REWARD_MODE, REWARD_MODES

    parser.add_argument(
        "--reward",
        choices=list(REWARD_MODES),
        default=DEFAULT_REWARD_MODE,
        help="rollout rewards: learned by the members (the paper) or the environment's reward function of the "
        f"predicted transition (PETS) (default {DEFAULT_REWARD_MODE})",
    )


def add_command(
    subparsers: argparse._SubParsersAction, name: str, help: str, description: str
) -> argparse.ArgumentParser:
    """A (sub)command parser that also accepts the options of every command."""
    return subparsers.add_parser(name, help=help, description=description, parents=[common_options()])


# --------------------------------------------------------------------------------------------
# Paths, checked before any work starts (nothing is created)
# --------------------------------------------------------------------------------------------
def _check_writable(path: Path, what: str, remedy: str) -> None:
    """Raise :class:`UsageError` unless ``path`` is, or can be created as, a writable directory."""
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise UsageError(f"{what} {path} is a file, not a directory; {remedy}")
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise UsageError(f"{what} {path} lies under {existing}, which is a file; {remedy}")
    if existing.exists() and not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {path}: directory {existing} is not writable; {remedy}")


def check_output_dir(path: str | os.PathLike, option: str = "--out", default: bool = False) -> Path:
    """Check that ``path`` is or can become a writable directory; return it as a ``Path``.

    Args:
        path: the directory.
        option: the option that chooses it (named in the message).
        default: ``path`` is where the command writes when ``option`` is not given.

    Raises:
        UsageError: it is a file, lies under a file, or its nearest existing directory is not
            writable. The message names ``option`` and the path.
    """
    what = f"output directory (no {option} given)" if default else option
    _check_writable(Path(path), what, f"choose a writable directory with {option}")
    return Path(path)


def check_cache_dir() -> Path:
    """Check the cache directory (``$OPCC_EDU_CACHE``, else the default) can be written; return it."""
    from ..utils import CACHE_ENV_VAR, cache_dir

    root = cache_dir(create=False)
    source = f"cache directory (${CACHE_ENV_VAR})" if os.environ.get(CACHE_ENV_VAR) else "cache directory"
    _check_writable(root, source, f"set {CACHE_ENV_VAR} to a writable directory")
    return root


# --------------------------------------------------------------------------------------------
# Threads
# --------------------------------------------------------------------------------------------
@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run a block with ``n`` torch and OpenMP threads (``None``: leave them); restore afterwards."""
    if n is None:
        yield
        return
    import torch

    previous_torch, previous_env = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = str(n)  # inherited by worker processes
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous_torch)
        if previous_env is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = previous_env


def echo_stderr(line: str) -> None:
    """Print one line to stderr (for notes that are not the command's output)."""
    print(line, file=sys.stderr)
