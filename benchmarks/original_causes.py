"""Why today's simulators change some of the original benchmark's answers: the raw record.

``benchmarks/results/original_benchmark.md`` holds, under "What explains the differences", the
experiments that test each cause of disagreement between the original labels and today's
(:mod:`opcc_edu.build.original_report`): start states moved by 1e-9 (every environment) and by
1e-6 (HalfCheetah), v2's alive bonus (Hopper, Walker2d) and v2's right-foot friction
(Walker2d). ``scripts/relabel_original_benchmark.py`` writes that table but keeps no raw record;
this script runs the same experiments
(:func:`~opcc_edu.build.original_report.cause_experiments`) on the shipped ``original`` and ``original-relabelled``
query sets (the relabelled set is what that script saves; it simulates nothing else) and
writes their :func:`~opcc_edu.build.original_report.agreement` rows, so that a page can read
the numbers and ``tests/lab/test_original_causes.py`` can check that the report's table is
this record, number for number.

Usage (about five minutes on two busy CPU cores; deterministic, a rerun changes nothing but the
provenance block)::

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python benchmarks/original_causes.py

writes ``benchmarks/results/original_causes.json``. ``--check`` only compares the record's
table with the report's and exits non-zero where they differ.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_JSON = RESULTS / "original_causes.json"
REPORT = RESULTS / "original_benchmark.md"


def causes(envs, log=print) -> dict[str, dict[str, dict]]:
    """``{env: {experiment: agreement row}}``: the experiments of
    ``scripts/relabel_original_benchmark.py`` (:func:`~opcc_edu.build.original_report.cause_experiments`,
    the one list of them) on the shipped query sets."""
    from opcc_edu.build.original_report import cause_experiments
    from opcc_edu.queries import load_queries

    out: dict[str, dict[str, dict]] = {}
    for env in envs:
        start = time.perf_counter()
        out[env] = cause_experiments(env, load_queries(env, "original"), load_queries(env, "original-relabelled"))
        log(f"{env}: {len(out[env])} experiments ({time.perf_counter() - start:.0f} s)")
    return out


def _json_keys(row: dict) -> dict:
    return {**row, "by_horizon": {str(h): v for h, v in row["by_horizon"].items()}}


def _int_keys(row: dict) -> dict:
    return {**row, "by_horizon": {int(h): v for h, v in row["by_horizon"].items()}}


def cause_section(data: dict) -> str:
    """The report's cause table, rendered from the record alone."""
    from opcc_edu.build.original_report import cause_table

    return cause_table(
        {env: {name: _int_keys(row) for name, row in rows.items()} for env, rows in data["causes"].items()}
    )


def load(path: Path = DEFAULT_JSON) -> dict:
    return json.loads(Path(path).read_text())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument("--check", action="store_true", help="only compare the record with the report")
    args = parser.parse_args(argv)
    if not args.check:
        from opcc_edu.envs import ENV_NAMES

        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_record import provenance_record, write_json

        start = time.perf_counter()
        found = causes(ENV_NAMES)
        record = {
            "what": "agreement rows of the experiments that test why today's labels of the original "
            "queries differ from the original ones (scripts/relabel_original_benchmark.py's cause table)",
            **provenance_record(),
            "envs": list(ENV_NAMES),
            "causes": {env: {name: _json_keys(row) for name, row in rows.items()} for env, rows in found.items()},
            "wall_seconds": time.perf_counter() - start,
        }
        write_json(args.json, record)
        print(f"wrote {args.json}")
    table = cause_section(load(args.json))
    if table not in args.report.read_text():
        print(f"the cause table of {args.report} differs from {args.json}:\n{table}")
        return 1
    print(f"the cause table of {args.report} is {args.json}'s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
