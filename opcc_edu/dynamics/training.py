"""Training a dynamics ensemble: every member at once, each on its own bootstrap sample.

One gradient step draws a minibatch of ``batch_size`` rows for each of the M members from
that member's bootstrap sample (the dataset resampled with replacement), stacks them into
(M, batch_size, ...) tensors and takes one Adam step on the sum of the members' losses. The
members share no parameters, so the sum's gradient is each member's own gradient and Adam,
being elementwise, updates each member as if it were trained alone.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ..utils import check_positive_int, get_device, redirect_torch_caches
from .memory import check_memory, training_bytes
from .models import AutoregressiveEnsemble, DynamicsEnsemble
from .spec import ModelSpec


@dataclasses.dataclass
class TrainHistory:
    """What happened during :func:`train_dynamics`."""

    steps: list[int]
    """Gradient steps at which the losses below were recorded."""
    train_loss: list[float]
    """Training loss (summed over members, averaged since the previous record)."""
    val_mse: list[list[float]]
    """Held-out mean squared error of each member in standardised target units."""
    train_size: int
    """Transitions used for training (before bootstrapping)."""
    val_size: int
    """Held-out transitions."""
    seconds: float
    """Wall time of the gradient steps."""
    samples_per_second: float
    """Member-samples processed per second: M * batch_size * steps / seconds."""

    @property
    def final_val_mse(self) -> np.ndarray:
        """(M,) held-out MSE of each member at the end of training (NaN without holdout)."""
        return np.asarray(self.val_mse[-1] if self.val_mse else [], dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def bootstrap_indices(n: int, ensemble_size: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Bootstrap samples: each member draws ``n`` indices from ``range(n)`` with replacement.

    Args:
        n: dataset size.
        ensemble_size: members M.
        generator: torch generator (CPU) for reproducibility.

    Returns:
        (M, n) long tensor; row m is member m's resampled dataset.
    """
    check_positive_int(n, "n")
    check_positive_int(ensemble_size, "ensemble_size")
    return torch.randint(n, (ensemble_size, n), generator=generator)


def transition_arrays(dataset: Mapping[str, np.ndarray], spec: ModelSpec | None = None) -> dict[str, np.ndarray]:
    """Check a D4RL-format dataset and return float32 transition arrays.

    Args:
        dataset: mapping with ``observations`` (T, D), ``actions`` (T, A), ``rewards`` (T,),
            ``next_observations`` (T, D) and optionally ``terminals`` (T,) (and ``timeouts``,
            ``infos/qpos`` for a predefined-reward locomotion model).
        spec: the model's spec; in predefined-reward mode ``reward`` holds the reward feature
            (:func:`opcc_edu.rewards.dataset_reward_feature`) the model learns in its place.

    Returns:
        dict with ``obs``, ``act``, ``next_obs``, ``reward`` (the model's last target column),
        ``terminal`` (float 0/1).
    """
    required = ("observations", "actions", "rewards", "next_observations")
    missing = [key for key in required if key not in dataset]
    if missing:
        raise ValueError(f"dataset is missing keys {missing}; required: {list(required)}")
    obs = np.asarray(dataset["observations"], dtype=np.float32)
    act = np.asarray(dataset["actions"], dtype=np.float32)
    nxt = np.asarray(dataset["next_observations"], dtype=np.float32)
    rew = np.asarray(dataset["rewards"], dtype=np.float32).reshape(-1)
    term = np.asarray(dataset.get("terminals", np.zeros(len(obs))), dtype=np.float32).reshape(-1)
    t = len(obs)
    if obs.ndim != 2 or act.ndim != 2 or nxt.shape != obs.shape or len(act) != t or len(rew) != t or len(term) != t:
        raise ValueError(
            f"dataset arrays disagree: observations {obs.shape}, actions {act.shape}, "
            f"next_observations {nxt.shape}, rewards {rew.shape}, terminals {term.shape}"
        )
    if t < 2:
        raise ValueError(f"dataset must hold at least 2 transitions, got {t}")
    if spec is not None and spec.reward == "predefined":
        from ..rewards import dataset_reward_feature

        rew = dataset_reward_feature(spec.env_name, dataset).astype(np.float32)
    return {"obs": obs, "act": act, "next_obs": nxt, "reward": rew, "terminal": term}


def _check_training_inputs(
    model: DynamicsEnsemble,
    data: Mapping[str, np.ndarray],
    batch_size: int,
    lr: float,
    holdout_fraction: float,
    device: torch.device,
) -> None:
    """Refuse bad arguments, and training that clearly cannot fit ``device``, before any work."""
    if not 0.0 <= holdout_fraction < 1.0:
        raise ValueError(f"holdout_fraction must be in [0, 1), got {holdout_fraction!r}")
    if lr <= 0:
        raise ValueError(f"lr must be > 0, got {lr!r}")
    if data["obs"].shape[1] != model.obs_dim or data["act"].shape[1] != model.act_dim:
        raise ValueError(
            f"dataset has D={data['obs'].shape[1]}, A={data['act'].shape[1]} but the model expects "
            f"D={model.obs_dim}, A={model.act_dim}"
        )
    spec = getattr(model, "spec", None)
    if spec is not None:
        m = model.ensemble_size
        check_memory(
            training_bytes(spec, len(data["obs"]), batch_size),
            device,
            f"training a {m}-member ensemble on {len(data['obs'])} transitions",
            f"ensemble_size (now {m}), hidden_sizes, batch_size or the dataset size",
        )


def _training_tensors(
    model: DynamicsEnsemble, data: Mapping[str, np.ndarray], idx: np.ndarray, device: torch.device
) -> dict[str, torch.Tensor]:
    """Rows ``idx`` of the transitions on ``device``, with standardised (delta obs, reward) targets."""
    obs = torch.as_tensor(data["obs"][idx], device=device)
    target = torch.cat(
        [torch.as_tensor(data["next_obs"][idx] - data["obs"][idx]), torch.as_tensor(data["reward"][idx])[:, None]],
        dim=1,
    ).to(device)
    return {
        "obs": obs,
        "act": torch.as_tensor(data["act"][idx], device=device),
        "target": (target - model.target_mean) / model.target_std,
        "terminal": torch.as_tensor(data["terminal"][idx], device=device),
    }


def holdout_split(
    n: int, seed: int = 0, holdout_fraction: float = 0.1, max_holdout: int = 5000
) -> tuple[np.ndarray, np.ndarray]:
    """``(validation, training)`` row indices of :func:`train_dynamics`'s split of n transitions.

    A permutation from ``numpy.random.default_rng(seed)``; the first
    ``min(max_holdout, round(holdout_fraction * n))`` rows are held out (none when n < 20).
    """
    n_val = min(int(max_holdout), int(round(holdout_fraction * n))) if n >= 20 else 0
    order = np.random.default_rng(seed).permutation(n)
    return order[:n_val], order[n_val:]


def _adam_with_weight_decay(model: DynamicsEnsemble, lr: float, weight_decay: float) -> torch.optim.Adam:
    """Adam with an L2 penalty on the weight matrices only, not on biases (as in MBPO)."""
    redirect_torch_caches()
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if param.requires_grad:
            (decay if name.endswith("weight") else no_decay).append(param)
    return torch.optim.Adam(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=lr
    )


def train_dynamics(
    model: DynamicsEnsemble,
    dataset: Mapping[str, np.ndarray],
    steps: int,
    batch_size: int = 256,
    lr: float = 1e-3,
    weight_decay: float = 5e-5,
    seed: int = 0,
    holdout_fraction: float = 0.1,
    max_holdout: int = 5000,
    eval_every: int | None = None,
    device: Any = None,
    progress: bool = True,
) -> TrainHistory:
    """Fit all members of ``model`` at once with Adam (in place) and return the history. (A recipe, read top to bottom.)

    Args:
        model: an untrained ensemble from :func:`~opcc_edu.dynamics.build_ensemble`.
        dataset: D4RL-format transitions (see :func:`transition_arrays`).
        steps: gradient steps.
        batch_size: rows per member per step.
        lr: Adam learning rate.
        weight_decay: L2 penalty on the weight matrices (not biases), as in MBPO.
        seed: seeds the holdout split, the bootstrap samples and the minibatches; the same
            seed gives bit-identical weights on a CPU.
        holdout_fraction: share of transitions kept out of training for validation.
        max_holdout: cap on the number of held-out transitions.
        eval_every: record losses every this many steps (default: 10 records per run).
        device: torch device (default: CUDA when available).
        progress: show a tqdm progress bar.

    Returns:
        A :class:`TrainHistory`. The model is left in eval mode on ``device``.

    Raises:
        InsufficientMemoryError: training clearly cannot fit the free memory of ``device``
            (:func:`opcc_edu.dynamics.memory.training_bytes`), checked before moving anything.
    """
    from tqdm.auto import tqdm

    steps = check_positive_int(steps, "steps")
    batch_size = check_positive_int(batch_size, "batch_size")
    data = transition_arrays(dataset, getattr(model, "spec", None))
    device = get_device(device)
    _check_training_inputs(model, data, batch_size, lr, holdout_fraction, device)
    eval_every = max(1, steps // 10) if eval_every is None else check_positive_int(eval_every, "eval_every")

    t = len(data["obs"])
    val_idx, train_idx = holdout_split(t, seed, holdout_fraction, max_holdout)
    n_val = len(val_idx)

    model.set_statistics(*(data[k][train_idx] for k in ("obs", "act", "next_obs", "reward")))
    model.to(device).train()

    train = _training_tensors(model, data, train_idx, device)
    val = _training_tensors(model, data, val_idx, device) if n_val else None
    m = model.ensemble_size
    cpu_gen = torch.Generator().manual_seed(int(seed))
    boot = bootstrap_indices(len(train_idx), m, cpu_gen).to(device)
    gen = cpu_gen if device.type == "cpu" else torch.Generator(device=device).manual_seed(int(seed) + 1)

    optimizer = _adam_with_weight_decay(model, lr, weight_decay)
    extra = {"generator": gen} if isinstance(model, AutoregressiveEnsemble) else {}

    history = TrainHistory([], [], [], len(train_idx), n_val, 0.0, 0.0)
    running = torch.zeros((), device=device)
    since = 0
    bar = tqdm(total=steps, desc=f"training {m} members", disable=not progress, leave=False)
    start = time.perf_counter()
    for step in range(1, steps + 1):
        pick = torch.randint(boot.shape[1], (m, batch_size), generator=gen, device=device)
        idx = boot.gather(1, pick)  # (M, batch): rows of each member's own bootstrap sample
        loss, _ = model.loss(
            train["obs"][idx], train["act"][idx], train["target"][idx], train["terminal"][idx], **extra
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        running += loss.detach()
        since += 1
        bar.update(1)
        if step % eval_every == 0 or step == steps:
            history.steps.append(step)
            history.train_loss.append(float(running) / since)  # one sync per record, not per step
            running.zero_()
            since = 0
            if val is not None:
                history.val_mse.append(validation_mse(model, val).tolist())
                model.train()
            bar.set_postfix(loss=f"{history.train_loss[-1]:.4g}")
    history.seconds = time.perf_counter() - start
    history.samples_per_second = m * batch_size * steps / max(history.seconds, 1e-12)
    bar.close()
    model.eval()
    return history


@torch.no_grad()
def validation_mse(model: DynamicsEnsemble, data: Mapping[str, torch.Tensor], chunk: int = 8192) -> np.ndarray:
    """Each member's mean squared error (standardised targets) on held-out rows: (M,).

    Every member sees all held-out rows. For the autoregressive model the earlier target
    dimensions are the true ones (teacher forcing), as in training.
    """
    model.eval()
    m = model.ensemble_size
    total = torch.zeros(m, device=model.device)
    n = len(data["obs"])
    for s in range(0, n, chunk):
        obs = data["obs"][s : s + chunk].expand(m, -1, -1)
        act = data["act"][s : s + chunk].expand(m, -1, -1)
        target = data["target"][s : s + chunk].expand(m, -1, -1)
        if isinstance(model, AutoregressiveEnsemble):
            k = target.shape[-1]
            err = torch.zeros(m, device=model.device)
            for j in range(k):
                dim = torch.full(target.shape[:2], j, dtype=torch.long, device=model.device)
                mean, _, _ = model(obs, act, target, dim)
                err += (mean - target[..., j]).square().sum(1)
            total += err / k
        else:
            mean, _, _ = model(obs, act)
            total += (mean - target).square().mean(-1).sum(1)
    return (total / n).cpu().numpy().astype(np.float64)
