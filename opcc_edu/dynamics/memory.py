"""Up-front memory checks: refuse, in one clear line, work that cannot fit.

Training a 100-member ensemble or rolling out thousands of queries in every member can need
more memory than a laptop has. Finding out after minutes of dataset generation, or from an
operating system that kills the process, teaches nothing; these helpers estimate the bytes a
job needs from its sizes alone (nothing is allocated) and compare them with what the device
has free. The estimates are lower bounds of the big buffers, so a job refused here could
never have run; a job that passes may still run short when other programs take memory.
"""

from __future__ import annotations

import os
from typing import Any

from .spec import ModelSpec

FLOAT_BYTES = 4
"""Models, activations and rollout states are float32."""
INDEX_BYTES = 8
"""Bootstrap indices are int64."""
ADAM_COPIES = 4
"""Numbers kept per trainable parameter while training: weight, gradient, two Adam moments."""


class InsufficientMemoryError(MemoryError, ValueError):
    """A job's estimated memory exceeds what its device has free (raised before allocating)."""


def format_bytes(n: float) -> str:
    """``n`` bytes in binary units, e.g. ``"1.5 GiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover - the loop always returns


def available_bytes(device: Any = None) -> int | None:
    """Free memory of a device in bytes (None when it cannot be read).

    CUDA: ``torch.cuda.mem_get_info``. CPU and other devices: the physical memory the
    operating system reports available (``psutil`` when installed, else ``sysconf``).
    """
    kind = getattr(device, "type", None) or str(device or "cpu").split(":")[0]
    if kind == "cuda":
        import torch

        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        import psutil
    except ImportError:
        try:
            return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
        except (AttributeError, OSError, ValueError):
            return None
    return int(psutil.virtual_memory().available)


def training_bytes(spec: ModelSpec, transitions: int, batch_size: int) -> int:
    """Bytes that training ``spec`` on ``transitions`` rows needs at least.

    Counts the parameters with their gradients and Adam moments (and the frozen prior), each
    member's bootstrap indices (M x T int64), the transition tensors on the device and one
    minibatch of hidden activations per member (kept for the backward pass) -- K rows per
    minibatch row for an autoregressive model taught every target dimension.
    """
    params = spec.parameter_count()
    prior = params if spec.prior_scale > 0 else 0
    model = FLOAT_BYTES * (ADAM_COPIES * params + prior)
    bootstrap = INDEX_BYTES * spec.ensemble_size * transitions
    data = FLOAT_BYTES * transitions * (spec.obs_dim + spec.act_dim + spec.target_dim + 1)
    rows = spec.ensemble_size * batch_size
    if spec.model_type == "ar" and spec.ar_targets == "all":
        rows *= spec.target_dim
    activations = (
        FLOAT_BYTES * rows * (2 * sum(spec.hidden_sizes) + spec.in_features + spec.out_features + spec.target_dim)
    )
    return int(model + bootstrap + data + activations)


def rollout_bytes(
    ensemble_size: int, rows: int, runs: int, obs_dim: int, act_dim: int, chunk_rows: int = 1
) -> tuple[int, int]:
    """``(host, device)`` bytes that rolling out ``rows`` start rows in every member needs.

    Host: the (rows, M, runs) float64 values, returned whatever the chunking. Device: one
    chunk of ``chunk_rows`` trajectories per member (runs included, as in
    :func:`~opcc_edu.dynamics.rollout_values`) -- an (M, n, D) state and its successor, an
    (M, n, A) action and the (M, n) running sums.
    """
    host = 8 * rows * ensemble_size * runs
    device = FLOAT_BYTES * ensemble_size * chunk_rows * (2 * obs_dim + act_dim + 4)
    return int(host), int(device)


def check_memory(required: int, device: Any, what: str, reduce: str) -> None:
    """Raise :class:`InsufficientMemoryError` when ``required`` bytes exceed the free memory.

    Args:
        required: estimated bytes.
        device: where they would be allocated (a torch device or its name).
        what: the job, e.g. ``"training a 100-member ensemble"``.
        reduce: the options that shrink it, e.g. ``"ensemble_size (now 100) or batch_size"``.
    """
    free = available_bytes(device)
    if free is not None and required > free:
        raise InsufficientMemoryError(
            f"{what} needs at least {format_bytes(required)} on {device} "
            f"but only {format_bytes(free)} is free; reduce {reduce}"
        )
