"""``opcc-edu info``: what the package holds -- environments, policies, datasets, query sets, ablations."""

from __future__ import annotations

import argparse
import importlib

from .options import UsageError, add_recipe, environment

#: The sections of ``opcc-edu info``: ``"module:function"``, a function ``() -> list[str]``.
INFO_PROVIDERS: tuple[str, ...] = (
    "opcc_edu.build.table:info_lines",
    "opcc_edu.cli.sections:queries_lines",
    "opcc_edu.cli.sections:datasets_lines",
    "opcc_edu.lab.experiments:info_lines",
)


def register(parser: argparse.ArgumentParser) -> None:
    """Add the options and handler of ``opcc-edu info``."""
    parser.description = (
        "List the benchmark's environments (paper Table 8), the active profile, and the policies, "
        "datasets, query sets and ablations shipped with or cached by the package. `opcc-edu info queries "
        "[ENV] [--recipe R]` describes query sets: counts per horizon and form, same-state and self-pair "
        "shares, the value gaps and the error of the no-model heuristic."
    )
    parser.add_argument(
        "topic", metavar="TOPIC", nargs="?", choices=["queries"], default=None, help="'queries': describe query sets"
    )
    parser.add_argument(
        "env", metavar="ENV", nargs="?", type=environment, default=None, help="environment (default: all seven)"
    )
    add_recipe(parser, "--recipe", "query-set recipe to describe")
    parser.set_defaults(handler=_info)


def environment_lines() -> list[str]:
    """The version, the active profile and the environments table (paper Table 8)."""
    from .. import __version__
    from ..config import get_profile
    from ..envs import ENV_SPECS

    lines = [f"opcc_edu {__version__} -- active profile: {get_profile().name}", "", "Environments (paper Table 8):"]
    lines.append(f"  {'name':<15} {'kind':<11} {'obs':>4} {'act':>4} {'steps':>6}  termination")
    for spec in ENV_SPECS.values():
        lines.append(
            f"  {spec.name:<15} {spec.kind:<11} {spec.obs_dim:>4} {spec.act_dim:>4} "
            f"{spec.max_episode_steps:>6}  {spec.termination}"
        )
    return lines


def describe_lines(env: str | None, recipe: str) -> list[str]:
    """Lines of ``opcc-edu info queries [ENV] --recipe R``: :func:`opcc_edu.lab.describe.describe_queries`."""
    from ..envs import ENV_NAMES
    from ..lab.describe import describe_queries
    from ..queries import load_queries

    lines: list[str] = []
    for name in ENV_NAMES if env is None else (env,):
        if lines:
            lines.append("")
        lines += describe_queries(load_queries(name, recipe)).lines()
    return lines


def _info(args: argparse.Namespace) -> int:
    if args.topic == "queries":
        for line in describe_lines(args.env, args.recipe):
            print(line)
        return 0
    if args.env is not None:
        raise UsageError("ENV is given only with the topic 'queries' (opcc-edu info queries ENV)")
    for line in environment_lines():
        print(line)
    for provider in INFO_PROVIDERS:
        print()
        module_name, function = provider.split(":")
        try:
            lines = getattr(importlib.import_module(module_name), function)()
        except ImportError as exc:  # one missing subsystem must not hide the others
            lines = [f"{module_name}: unavailable ({exc})"]
        for line in lines:
            print(line)
    return 0
