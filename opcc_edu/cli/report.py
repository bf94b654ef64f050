"""``opcc-edu report``: every ablation's table, ours next to the paper's, as Markdown or LaTeX."""

from __future__ import annotations

import argparse

from ..config import PROFILES
from .options import add_out, check_output_dir, echo_stderr


def register(parser: argparse.ArgumentParser) -> None:
    """Add the options and handler of ``opcc-edu report``."""
    parser.description = (
        "Aggregate the results under OUT/RECIPE/PROFILE (mean ± half-width of the 95% Student-t interval over "
        "seeds x datasets) and write them next to the paper's numbers to OUT/report.md or OUT/report.tex; "
        "the report is also printed. Every row names the profile, the query recipe, the datasets behind the "
        "cell (with their transitions) and the paper's cell it is compared with, or why it is not comparable; "
        "the tie-fair metrics stand beside the paper's. Each grid's wall and CPU time come from its meta.json."
    )
    add_out(parser, "results/ablations", "results root, where the report is written too (default: results/ablations)")
    parser.add_argument(
        "--format",
        dest="report_format",
        choices=["markdown", "latex"],
        default="markdown",
        help="output format (default: markdown)",
    )
    parser.add_argument(
        "--profiles",
        nargs="+",
        choices=list(PROFILES),
        metavar="PROFILE",
        default=None,
        help=f"profiles to include, of {', '.join(PROFILES)} (default: every one with results)",
    )
    parser.set_defaults(handler=_report)


def _report(args: argparse.Namespace) -> int:
    from ..lab.experiments import write_report

    check_output_dir(args.out)
    path = write_report(args.out, fmt=args.report_format, profiles=args.profiles)
    print(path.read_text(encoding="utf-8"))
    echo_stderr(f"written to {path}")
    return 0
