"""Training throughput of the stacked ensemble against a Python loop over separate members.

Both train M = 20 locomotion-sized members (D = 17, A = 6, four hidden layers of 200 SiLU
units, deterministic MSE, batch 256 per member, Adam) on the same synthetic transitions:

* ``batched`` -- :func:`opcc_edu.dynamics.train_dynamics`: one stacked forward/backward and
  one Adam step for all members per gradient step.
* ``member_loop`` -- M separate ``nn.Sequential`` members, each with its own Adam, trained one
  after another inside every gradient step (the usual way to write an ensemble).

Throughput is member-samples per second: M x batch x steps / seconds. Repeats are interleaved
and the best counts (the machine is shared). Both wall time and process CPU time are recorded.

``--model-type ar`` measures instead the training budget of the autoregressive model on real
data at a profile's sizes (default ``tiny``): the feed-forward model, the autoregressive model
taught one random target dimension per row (``ar_targets="one"``) and every dimension
(``"all"``), each trained as the baselines train it (:func:`opcc_edu.baselines.training.train_ensemble`)
on maze2d-umaze (1m) and hopper (medium). It records the training time (wall and CPU) and the
held-out one-step mean squared error per target dimension, in standardised units, on the
split training holds out (:func:`opcc_edu.dynamics.training.holdout_split`); the
autoregressive model predicts each dimension from its own earlier predictions, as in a
rollout. The results go to ``training_ar.json`` and to a section of ``training.md``.

Usage::

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_training.py --threads 1
    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_training.py --threads 1 --model-type ar
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from opcc_edu.baselines import EnsembleConfig
from opcc_edu.dynamics import build_ensemble, train_dynamics
from opcc_edu.io import atomic_write_text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_record import model_sizes, provenance_record, write_json  # noqa: E402
from bench_rollout import RESULTS, machine, synthetic_transitions  # noqa: E402

D, A, HIDDEN = 17, 6, (200, 200, 200, 200)


def dataset(t: int, seed: int = 0) -> dict[str, np.ndarray]:
    return synthetic_transitions(t, D, A, seed)


def run_batched(data, m: int, steps: int, batch: int) -> float:
    spec = EnsembleConfig(ensemble_size=m, hidden_sizes=HIDDEN, termination="none").model_spec("halfcheetah")
    model = build_ensemble(spec, seed=0)
    start = time.perf_counter()
    train_dynamics(model, data, steps=steps, batch_size=batch, seed=0, holdout_fraction=0.0, progress=False)
    return time.perf_counter() - start


def run_member_loop(data, m: int, steps: int, batch: int) -> float:
    """Separate members with separate optimisers, each on its own bootstrap sample."""
    gen = torch.Generator().manual_seed(0)
    obs = torch.as_tensor(data["observations"])
    inputs = torch.cat([obs, torch.as_tensor(data["actions"])], 1)
    targets = torch.cat(
        [torch.as_tensor(data["next_observations"]) - obs, torch.as_tensor(data["rewards"])[:, None]], 1
    )
    mean, std = inputs.mean(0), inputs.std(0)
    tmean, tstd = targets.mean(0), targets.std(0)
    members, optimizers = [], []
    for _ in range(m):
        sizes = (D + A, *HIDDEN, D + 1)
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            layers.append(nn.Linear(a, b))
            if i < len(sizes) - 2:
                layers.append(nn.SiLU())
        net = nn.Sequential(*layers)
        members.append(net)
        optimizers.append(torch.optim.Adam(net.parameters(), lr=1e-3))
    boot = torch.randint(len(obs), (m, len(obs)), generator=gen)
    start = time.perf_counter()
    for _ in range(steps):
        for i, (net, opt) in enumerate(zip(members, optimizers, strict=True)):
            idx = boot[i, torch.randint(len(obs), (batch,), generator=gen)]
            pred = net((inputs[idx] - mean) / std)
            loss = (pred - (targets[idx] - tmean) / tstd).square().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return time.perf_counter() - start


AR_SECTION = "## Autoregressive training budget"
AR_DATASETS = (("maze2d-umaze", "1m"), ("hopper", "medium"))
AR_VARIANTS = {
    "ff": {"model_type": "ff"},
    "ar-one": {"model_type": "ar", "ar_targets": "one"},
    "ar-all": {"model_type": "ar", "ar_targets": "all"},
}


def held_out_mse_per_dim(model, data: dict[str, np.ndarray], seed: int) -> np.ndarray:
    """(K,) one-step MSE of each target dimension on training's held-out rows (standardised
    units, mean over members); the autoregressive model conditions on its own predictions."""
    from opcc_edu.dynamics.training import holdout_split, transition_arrays

    arrays = transition_arrays(data, model.spec)
    val, _ = holdout_split(len(arrays["obs"]), seed)
    obs, act = torch.as_tensor(arrays["obs"][val]), torch.as_tensor(arrays["act"][val])
    target = torch.cat(
        [torch.as_tensor(arrays["next_obs"][val]) - obs, torch.as_tensor(arrays["reward"][val])[:, None]], 1
    )
    m = model.ensemble_size
    pred = model.predict_mean(obs.expand(m, -1, -1), act.expand(m, -1, -1))
    return ((pred - target) / model.target_std).square().mean(1).mean(0).numpy().astype(np.float64)


def run_ar_budget(args) -> dict:
    from opcc_edu.baselines.training import train_ensemble
    from opcc_edu.config import get_profile
    from opcc_edu.datasets import get_recipe, load_dataset
    from opcc_edu.datasets.recipes import max_size

    results: dict = {}
    for env, name in AR_DATASETS:
        size = min(get_profile(args.profile).dataset_size, max_size(get_recipe(env, name)))
        data = load_dataset(env, name, size=size, progress=False)
        cells = results.setdefault(f"{env}/{name}", {"transitions": int(len(data["observations"]))})
        for _ in range(args.repeats):
            for variant, overrides in AR_VARIANTS.items():
                config = EnsembleConfig.from_profile(args.profile, **overrides)
                c = time.process_time()
                model, history = train_ensemble(data, config, env, device="cpu", progress=False)
                cpu = time.process_time() - c
                cell = cells.setdefault(variant, {"config": config.to_dict(), "wall_s": np.inf, "cpu_s": np.inf})
                cell["wall_s"] = min(cell["wall_s"], history.seconds)
                cell["cpu_s"] = min(cell["cpu_s"], cpu)
                cell["val_mse_teacher_forced"] = float(np.mean(history.final_val_mse))
                cell["mse_per_dim"] = held_out_mse_per_dim(model, data, config.seed).tolist()
                print(f"  {env} {variant:<7} wall {history.seconds:6.2f}s cpu {cpu:6.2f}s", flush=True)
    return results


def ar_text(record: dict) -> str:
    """The ``--model-type ar`` section, from its raw record alone (a record written before the
    profile's sizes were recorded reads them from the profile)."""
    results, host, c = record["results"], record["machine"], record["config"]
    prof = record.get("profile_sizes") or model_sizes(c["profile"])
    command = record.get("command") or f"python benchmarks/bench_training.py --model-type ar --profile {c['profile']}"
    load = tuple(round(x, 2) for x in host["load_average_start"])
    lines = [
        AR_SECTION,
        "",
        f"`{command}` on {host['cpu']}, "
        f"{host['logical_cpus']} logical CPUs, torch {host['torch']}, load average at start {load} (shared "
        f"machine; best of {c['repeats']} interleaved repeats, {c['threads']} torch thread). Profile `{c['profile']}`: "
        f"{prof['ensemble_size']} members of {prof['hidden_sizes']} SiLU, {prof['dynamics_train_steps']} gradient "
        f"steps of {prof['batch_size']} rows per member, the same for every model. `ar-one` teaches one random "
        "target dimension per row (the objective before `ar_targets` existed, bit-for-bit the same weights), "
        "`ar-all` every dimension of every row (teacher forcing; the default).",
        "",
        "Training time (the gradient steps; CPU time is the process's, the machine is shared):",
        "",
        "| data | transitions | model | wall s | CPU s | CPU vs ff |",
        "|---|---|---|---|---|---|",
    ]
    for data, cells in results.items():
        for variant in AR_VARIANTS:
            c = cells[variant]
            lines.append(
                f"| {data} | {cells['transitions']:,} | {variant} | {c['wall_s']:.1f} | {c['cpu_s']:.1f} | "
                f"{c['cpu_s'] / cells['ff']['cpu_s']:.1f}x |"
            )
    lines += [
        "",
        "Held-out one-step MSE per target dimension after training (standardised units, mean over members; "
        "the autoregressive models predict each dimension from their own earlier predictions, as in a "
        "rollout). The last line of each table is the mean over dimensions, and the teacher-forced "
        "validation MSE that training reports in brackets.",
    ]
    for data, cells in results.items():
        k = len(cells["ff"]["mse_per_dim"])
        names = [f"Δobs[{i}]" for i in range(k - 1)] + ["reward"]
        lines += ["", f"**{data}**", "", "| dimension | " + " | ".join(AR_VARIANTS) + " |", "|---|---|---|---|"]
        for i, dim in enumerate(names):
            lines.append(f"| {dim} | " + " | ".join(f"{cells[v]['mse_per_dim'][i]:.4f}" for v in AR_VARIANTS) + " |")
        lines.append(
            "| mean | "
            + " | ".join(
                f"{np.mean(cells[v]['mse_per_dim']):.4f} ({cells[v]['val_mse_teacher_forced']:.4f})"
                for v in AR_VARIANTS
            )
            + " |"
        )
    lines += ["", "Mean over dimensions:"]
    for data, cells in results.items():
        mean = {v: float(np.mean(cells[v]["mse_per_dim"])) for v in AR_VARIANTS}
        lines.append(
            f"- {data}: `ar-all` {mean['ar-one'] / mean['ar-all']:.1f}x lower than `ar-one`, still "
            f"{mean['ar-all'] / mean['ff']:.1f}x the feed-forward model's, at "
            f"{cells['ar-all']['cpu_s'] / cells['ar-one']['cpu_s']:.1f}x the CPU time of `ar-one`."
        )
    return "\n".join(lines) + "\n"


def ff_text(results: dict) -> str:
    """The feed-forward section, from its raw record alone."""
    wall, cpu, c, m = results["samples_per_s_wall"], results["samples_per_s_cpu"], results["config"], results["machine"]
    command = []
    if results.get("command"):
        command = [f"Command: `{results['command']}` at commit `{str(results.get('git_commit'))[:12]}`.", ""]
    return "\n".join(
        [
            "# Training throughput (benchmarks/bench_training.py)",
            "",
            f"Machine: {m['cpu']}, {m['logical_cpus']} logical CPUs, torch "
            f"{m['torch']} with {m['torch_threads']} thread(s); "
            "load average at start "
            f"{tuple(round(x, 2) for x in m['load_average_start'])} (shared machine: best of "
            f"{c['repeats']} interleaved repeats). GPU: the measurement is still open (no GPU on this machine); "
            "tests/core/test_device_clean.py checks without one that the step loop never waits for the device.",
            "",
            *command,
            f"M = {c['members']} members, D = {D}, A = {A}, 4x200 SiLU, batch {c['batch_size']} per member, "
            f"{c['steps']} gradient steps; member-samples per second.",
            "",
            "| design | samples/s (wall) | samples/s (CPU time) |",
            "|---|---|---|",
            f"| batched (train_dynamics) | {wall['batched']:,.0f} | {cpu['batched']:,.0f} |",
            f"| member loop | {wall['member_loop']:,.0f} | {cpu['member_loop']:,.0f} |",
            "",
            f"Speed-up of the batched design: {wall['batched'] / wall['member_loop']:.2f}x (wall), "
            f"{cpu['batched'] / cpu['member_loop']:.2f}x (CPU time).",
            "",
        ]
    )


def render(ff: dict, ar: dict | None) -> str:
    """``training.md``: the feed-forward section, then the autoregressive one when recorded."""
    return ff_text(ff) + ("\n" + ar_text(ar) if ar is not None else "")


def _write_report(out: Path) -> None:
    ff_path, ar_path = out.with_suffix(".json"), out.with_name(out.name + "_ar.json")
    ff = json.loads(ff_path.read_text())
    ar = json.loads(ar_path.read_text()) if ar_path.exists() else None
    atomic_write_text(out.with_suffix(".md"), render(ff, ar))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-type", choices=("ff", "ar"), default="ff", help="ar: the autoregressive budget")
    parser.add_argument("--profile", default="tiny", help="sizes of the --model-type ar measurement")
    parser.add_argument("--members", type=int, default=20)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--transitions", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS / "training")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.model_type == "ar":
        results = run_ar_budget(args)
        meta = {
            **provenance_record(),
            "machine": {**machine(), "load_average_end": os.getloadavg()},
            "config": {**vars(args), "out": str(args.out)},
            "profile_sizes": model_sizes(args.profile),
        }
        write_json(args.out.with_name(args.out.name + "_ar.json"), {**meta, "results": results})
        _write_report(args.out)
        print(ar_text({**meta, "results": results}))
        return 0
    data = dataset(args.transitions)
    best = {"batched": [np.inf, np.inf], "member_loop": [np.inf, np.inf]}
    designs = {"batched": run_batched, "member_loop": run_member_loop}
    for _ in range(args.repeats):
        for name, fn in designs.items():
            c = time.process_time()
            wall = fn(data, args.members, args.steps, args.batch_size)
            cpu = time.process_time() - c  # includes set-up (small next to the steps)
            best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]
            print(f"  {name:<12} wall {wall:6.2f}s cpu {cpu:6.2f}s", flush=True)
    samples = args.members * args.batch_size * args.steps
    results = {
        **provenance_record(),
        "machine": {**machine(), "load_average_end": os.getloadavg()},
        "config": {**vars(args), "out": str(args.out)},
        "samples_per_s_wall": {k: samples / v[0] for k, v in best.items()},
        "samples_per_s_cpu": {k: samples / v[1] for k, v in best.items()},
    }
    write_json(args.out.with_suffix(".json"), results)
    _write_report(args.out)
    print(ff_text(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
