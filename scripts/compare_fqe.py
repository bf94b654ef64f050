"""FQE against the dynamics ensemble on the same data, seed and queries: results/fqe/<profile>/.

For every environment, both baselines answer the profile's query subset of the shipped set
(default recipe) from the environment's default dataset with one seed; each answer's
``Answers.summary()`` (every metric per confidence and horizon, the predictor metrics, the
calibration, configuration and timings) is written to ``<env>.json`` as
``{"ensemble": ..., "fqe": ...}``. An environment whose file exists is skipped unless
``--force``, so an interrupted run resumes where it stopped; each file is written when its
environment is done.

Usage::

    OPCC_EDU_PROFILE=tiny OMP_NUM_THREADS=1 nice -n 10 python scripts/compare_fqe.py maze2d-open maze2d-umaze \\
        maze2d-medium maze2d-large hopper
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results" / "fqe"


def main(argv: list[str] | None = None) -> int:
    from opcc_edu import get_profile
    from opcc_edu.baselines import EnsembleConfig, answer_queries
    from opcc_edu.baselines.fqe import FQEConfig, answer_queries_fqe
    from opcc_edu.envs import ENV_NAMES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("envs", nargs="+", choices=list(ENV_NAMES), metavar="ENV")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="default results/fqe/<profile>")
    parser.add_argument("--force", action="store_true", help="recompute environments whose file exists")
    parser.add_argument("--progress", action="store_true", help="progress bars (stderr)")
    args = parser.parse_args(argv)
    profile = get_profile()
    out = args.out or RESULTS / profile.name
    out.mkdir(parents=True, exist_ok=True)
    for env in args.envs:
        path = out / f"{env}.json"
        if path.exists() and not args.force:
            print(f"{env}: {path} exists, skipped (--force recomputes it)", flush=True)
            continue
        start = time.perf_counter()
        ensemble = answer_queries(env, config=EnsembleConfig.from_profile(seed=args.seed), progress=args.progress)
        print(
            f"{env}: ensemble done after {time.perf_counter() - start:.0f} s "
            f"(training {ensemble.train_seconds:.0f} s, cache hit {ensemble.cache_hit})",
            flush=True,
        )
        fqe = answer_queries_fqe(env, config=FQEConfig.from_profile(seed=args.seed), progress=args.progress)
        record = {"profile": profile.name, "seed": args.seed, "ensemble": ensemble.summary(), "fqe": fqe.summary()}
        path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        loss = {name: a.metrics["pci"]["all"]["loss"] for name, a in (("ensemble", ensemble), ("fqe", fqe))}
        print(
            f"{env}: PCI loss {loss}, FQE trained in {fqe.train_seconds:.0f} s, "
            f"{time.perf_counter() - start:.0f} s in all -> {path}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
