"""``python scripts/relabel_clip_runs.py DIR ENV [ENV ...]``: name the clip box of older runs.

Runs recorded before the clip box had modes were rolled out with the box of the data's
observations and next observations (``clip=true``, now ``"transitions"``), then the default.
Where the default box moved (``"health"``, on Hopper and Walker2d, whose termination rule has
health limits) such a run's label ``default`` (or ``prior_scale=5``, ...) would claim the new
default. This rewrites every record of the given environments whose label names no clip box as
the same run with ``clip=true`` in its label: the record (its run id, its rows), its member
values (the same arrays, their metadata's label and overrides) and the checksum files, then
re-exports the tables. Nothing is recomputed, no number changes, and a run already labelled
``clip=...`` is left alone. Runs of environments without health limits need no relabel: there
the new default box is the old one.

Used once on the committed ``tiny`` directories (``results/ablations/paper/tiny``,
``results/ablations/hard/tiny``), whose runs of the new default were then computed.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from opcc_edu.envs import health_limits
from opcc_edu.io import load_npz, save_npz
from opcc_edu.lab.experiments.records import RESULT_COLUMNS, RunRecord, atomic_write
from opcc_edu.lab.experiments.registry import configuration_label, parse_configuration
from opcc_edu.lab.experiments.store import ResultsStore


def relabel(directory: Path, environments: list[str]) -> int:
    for env in environments:
        if not health_limits(env):
            raise ValueError(f"{env} has no health limits: its runs' clip box did not change")
    store = ResultsStore(directory)
    changed = 0
    renamed: set[str] = set()
    for record in store.records():
        run = dict(record.run)
        if run["environment"] not in environments or "clip=" in run["configuration"]:
            continue
        overrides = {**parse_configuration(run["configuration"]), "clip": "transitions"}
        label = configuration_label(overrides)
        old_slug = record.slug
        run["configuration"] = label
        run["run_id"] = f"{run['environment']}/{run['dataset']}/seed{run['seed']}/{label}"
        at = {name: RESULT_COLUMNS.index(name) for name in ("configuration", "run_id")}
        rows = []
        for row in record.rows:
            row = list(row)
            row[at["configuration"]], row[at["run_id"]] = label, run["run_id"]
            rows.append(row)
        new = RunRecord(run, rows, record.sequence)
        values = directory / "values" / f"{old_slug}.npz"
        if values.exists():
            arrays, metadata = load_npz(values)
            metadata.update(configuration=label, run_id=run["run_id"], overrides=overrides)
            save_npz(directory / "values" / f"{new.slug}.npz", arrays, metadata)
            values.unlink()
            Path(f"{values}.sha256").unlink()
        atomic_write(store.record_path(new.slug), new.to_json())
        store.record_path(old_slug).unlink()
        changed += 1
        renamed.add(record.run_id)
        print(f"{record.run_id} -> {new.run_id}")
    # The tables still hold the old ids' rows, which the export would keep as rows of runs
    # without a record; they are the relabelled runs' rows, so they go.
    (directory / ".locks").mkdir(exist_ok=True)
    with store.locked():
        for table in (store.results_csv, store.runs_csv):
            lines = table.read_text().splitlines(keepends=True)
            column = lines[0].rstrip("\n").split(",").index("run_id")
            kept = [lines[0]] + [line for line in lines[1:] if next(csv.reader([line]))[column] not in renamed]
            atomic_write(table, "".join(kept).encode())
        store.export()
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("environments", nargs="+")
    args = parser.parse_args(argv)
    print(f"relabelled {relabel(args.directory, args.environments)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
