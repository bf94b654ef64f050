"""Summarize the datasets behind the classroom grids: the tiny profile's and the classroom's.

The two classroom grids of the dataset-type ablation (``results/ablations/paper/classroom``,
which read the tiny profile's 20,000 transitions, and ``results/ablations-classroom/paper/
classroom``, at the classroom profile's own 200,000) differ in their data. A cut dataset is the
first transitions of its recipe's stream, so the cut is not always a smaller sample of the same
behaviour: medium-replay is the behaviour policy's training run in order, and its first 20,000
transitions are the start of training alone. This script records, for every dataset the grid
reads, what each size holds (transitions, episodes, mean episode length and return, reward per
step) in ``datasets.json`` beside it, so that the chapters can say so without generating
200,000-transition datasets.

Usage: python results/ablations-classroom/summarize_datasets.py [ENV ...]
    Loads each dataset from the cache (generating it where missing, seed 0 as the grids do) at
    both profiles' sizes and merges the environments' rows into datasets.json (written
    atomically, with the command and the package versions).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from opcc_edu.datasets import dataset_names, dataset_summary
from opcc_edu.datasets.recipes import get_recipe, resolve_size
from opcc_edu.envs import ENV_NAMES
from opcc_edu.io import atomic_write_text
from opcc_edu.provenance import package_versions

PROFILES = ("tiny", "classroom")
OUT = Path(__file__).with_name("datasets.json")


def main(environments: list[str]) -> None:
    unknown = sorted(set(environments) - set(ENV_NAMES))
    if unknown:
        raise SystemExit(f"unknown environment(s) {unknown}; valid choices: {', '.join(ENV_NAMES)}")
    table = json.loads(OUT.read_text()) if OUT.exists() else {"rows": []}
    rows = [row for row in table["rows"] if row["environment"] not in environments]
    for env in environments:
        for name in dataset_names(env):
            recipe = get_recipe(env, name)
            for profile in PROFILES:
                size = resolve_size(recipe, None, profile)
                summary = dataset_summary(env, name, size, seed=0)
                rows.append({"environment": env, "dataset": name, "profile": profile, **dataclasses.asdict(summary)})
                print(env, name, profile, summary)
    table = {
        "command": "python results/ablations-classroom/summarize_datasets.py " + " ".join(environments),
        "seed": 0,
        "versions": package_versions(),
        "rows": sorted(rows, key=lambda r: (r["environment"], r["dataset"], r["profile"])),
    }
    atomic_write_text(OUT, json.dumps(table, indent=1) + "\n")
    print("written", OUT)


if __name__ == "__main__":
    main(sys.argv[1:] or list(ENV_NAMES))
