"""Our default dynamics-model ensemble answering the ORIGINAL benchmark's released queries.

For each environment (one process each, in parallel) and each seed in order, this runs
``opcc_edu.baselines.run.run_end_to_end(env, queries="original", ...)`` at a profile (``classroom``
by default), plus the no-model heuristic once per environment, and writes ONE JSON file with
the metrics per confidence and horizon, the setup and the timings. The JSON is rewritten after
every finished (env, seed), so a run stopped at a time limit still leaves what finished.

Usage (the device run)::

    OPCC_EDU_CACHE=/tmp/opcc-cache PYTHONUNBUFFERED=1 \\
        python benchmarks/original_device/classroom_original.py --out "$OUT"

Smoke test (CPU, a minute)::

    python benchmarks/original_device/classroom_original.py --profile tiny --envs maze2d-umaze --seeds 0 --out /tmp/x
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import platform
import shlex
import sys
import tempfile
import time
import traceback
from pathlib import Path

ENVS = ("maze2d-open", "maze2d-umaze", "maze2d-medium", "maze2d-large", "halfcheetah", "hopper", "walker2d")
METRIC_KEYS = ("aurcc", "rpp", "cr_k", "loss", "n")


def _metrics(answers) -> dict:
    """``{confidence: {horizon: {aurcc, rpp, cr_k, loss, n}}}`` of an Answers (JSON-ready)."""
    out = {}
    for name, by_h in answers.metrics.items():
        out[name] = {}
        for h, row in by_h.items():
            out[name][str(h)] = {k: (None if row.get(k) is None else float(row[k])) for k in METRIC_KEYS if k in row}
    return out


def _dataset_size(env_name: str, dataset_name: str) -> int | None:
    try:
        from opcc_edu.datasets import get_recipe, resolve_size

        return int(resolve_size(get_recipe(env_name, dataset_name), None))
    except Exception:
        return None


def run_env(env: str, seeds: list[int], profile: str, cache: str, out: str, queue) -> None:
    """One environment: the heuristic, then the ensemble for each seed; results go on ``queue``."""
    os.environ["OPCC_EDU_PROFILE"] = profile
    os.environ["OPCC_EDU_CACHE"] = cache
    import torch

    torch.set_num_threads(2)
    from opcc_edu.baselines.config import EnsembleConfig
    from opcc_edu.baselines.run import run_end_to_end

    device = "cuda" if torch.cuda.is_available() else "cpu"
    lines: list[str] = []

    t_env = time.perf_counter()

    def echo(line: str) -> None:  # streamed to the parent's log at once (timings survive a time limit)
        queue.put({"kind": "log", "env": env, "log": [f"[{env} +{time.perf_counter() - t_env:.1f}s] {line}"]})

    def flush_log() -> list[str]:
        taken = list(lines)
        lines.clear()
        return taken

    # the no-model heuristic (instant)
    try:
        t0 = time.perf_counter()
        answers, _ = run_end_to_end(
            env, queries="original", baseline="heuristic", progress=False, out=out, echo=echo, device=device
        )
        queue.put(
            {
                "kind": "heuristic",
                "env": env,
                "env_name": answers.env_name,
                "n_queries": int(len(answers.target)),
                "metrics": _metrics(answers),
                "wall_seconds": time.perf_counter() - t0,
                "log": flush_log(),
            }
        )
    except Exception:
        queue.put({"kind": "error", "env": env, "seed": None, "error": traceback.format_exc(), "log": flush_log()})

    for seed in seeds:
        try:
            t0 = time.perf_counter()
            config = EnsembleConfig.from_profile(seed=seed)
            answers, paths = run_end_to_end(
                env, queries="original", config=config, device=device, progress=False, out=out, echo=echo
            )
            wall = time.perf_counter() - t0
            queue.put(
                {
                    "kind": "ensemble",
                    "env": env,
                    "seed": seed,
                    "env_name": answers.env_name,
                    "dataset": answers.dataset_name,
                    "dataset_size": _dataset_size(answers.env_name, answers.dataset_name),
                    "n_queries": int(len(answers.target)),
                    "ensemble_size": int(answers.ensemble_size),
                    "train_steps": int(config.train_steps),
                    "hidden_sizes": list(config.hidden_sizes),
                    "batch_size": int(config.batch_size),
                    "train_seconds": float(answers.train_seconds),
                    "answer_seconds": float(answers.answer_seconds),
                    "wall_seconds": wall,
                    "cache_hit": bool(answers.cache_hit),
                    "metrics": _metrics(answers),
                    "log": flush_log(),
                }
            )
        except Exception:
            queue.put({"kind": "error", "env": env, "seed": seed, "error": traceback.format_exc(), "log": flush_log()})
    queue.put({"kind": "done", "env": env})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="classroom")
    parser.add_argument("--envs", nargs="+", default=list(ENVS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--out", default=os.environ.get("OUT", "benchmarks/original_device"))
    parser.add_argument(
        "--cache", default=None, help="OPCC_EDU_CACHE (default: $OPCC_EDU_CACHE, else a fresh /tmp dir)"
    )
    parser.add_argument("--workers", type=int, default=7)
    args = parser.parse_args(argv)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = args.cache or os.environ.get("OPCC_EDU_CACHE") or tempfile.mkdtemp(prefix="opcc-cache-")
    runs_dir = tempfile.mkdtemp(prefix="opcc-runs-")
    json_path = out / "classroom_original.json"
    log_path = out / "log.txt"
    log = open(log_path, "a", buffering=1)

    def say(line: str) -> None:
        stamp = f"{time.perf_counter() - t_start:8.1f}s"
        text = f"{stamp} {line}"
        print(text, flush=True)
        log.write(text + "\n")

    t_start = time.perf_counter()
    import torch

    cuda = torch.cuda.is_available()
    record = {
        "what": "default dynamics-model ensemble answering the original benchmark's released queries",
        "command": " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]),
        "profile": args.profile,
        "envs": args.envs,
        "seeds": args.seeds,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "cache": cache,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "results": [],
        "heuristic": [],
        "errors": [],
        "finished": False,
        "wall_seconds": None,
    }

    def flush() -> None:
        record["wall_seconds"] = time.perf_counter() - t_start
        tmp = json_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(record, indent=1, sort_keys=False) + "\n")
        tmp.replace(json_path)

    say(f"profile {args.profile}, envs {args.envs}, seeds {args.seeds}, device {record['device']}, cache {cache}")
    flush()
    ctx = mp.get_context("spawn")
    manager = ctx.Manager()
    queue = manager.Queue()
    pending = set(args.envs)
    with cf.ProcessPoolExecutor(max_workers=min(args.workers, len(args.envs)), mp_context=ctx) as pool:
        futures = {
            pool.submit(run_env, env, args.seeds, args.profile, cache, runs_dir, queue): env for env in args.envs
        }
        while pending:
            try:
                msg = queue.get(timeout=5)
            except Exception:
                for fut, env in futures.items():
                    if fut.done() and env in pending:
                        exc = fut.exception()
                        say(f"{env}: worker ended without 'done' ({exc!r})")
                        record["errors"].append({"env": env, "seed": None, "error": repr(exc)})
                        pending.discard(env)
                        flush()
                continue
            for line in msg.pop("log", []):
                log.write(line + "\n")
                if "\n" not in line and line.strip() and not line.rstrip().endswith("]"):
                    print(line, flush=True)  # the one-line progress notes; tables only in the log
            kind = msg["kind"]
            if kind == "log":
                continue
            if kind == "done":
                pending.discard(msg["env"])
                say(f"{msg['env']}: all done")
                continue
            if kind == "error":
                record["errors"].append(msg)
                say(f"{msg['env']} seed {msg['seed']}: ERROR\n{msg['error']}")
            elif kind == "heuristic":
                record["heuristic"].append(msg)
                a = msg["metrics"].get("heuristic", {}).get("all", {})
                say(f"{msg['env']}: heuristic aurcc {a.get('aurcc')} loss {a.get('loss')}")
            else:
                record["results"].append(msg)
                row = " ".join(
                    f"{c} aurcc {msg['metrics'][c]['all']['aurcc']:.4f} loss {msg['metrics'][c]['all']['loss']:.4f};"
                    for c in ("ev", "pci", "upci")
                    if c in msg["metrics"]
                )
                say(
                    f"{msg['env']} seed {msg['seed']}: {row} train {msg['train_seconds']:.1f}s "
                    f"answer {msg['answer_seconds']:.1f}s wall {msg['wall_seconds']:.1f}s"
                )
            flush()
    record["finished"] = True
    flush()
    say(
        f"finished in {time.perf_counter() - t_start:.1f}s: {len(record['results'])} ensemble runs, "
        f"{len(record['errors'])} errors"
    )
    log.close()
    return 0 if not record["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
