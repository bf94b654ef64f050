"""A model-free baseline: bootstrapped finite-horizon fitted Q evaluation (FQE).

The paper's baseline learns the dynamics and simulates the policies inside the model; its
error compounds over the rollout. FQE (DOPE's strongest simple estimator, Fu et al. 2021,
Section 5) learns each query policy's value directly from the offline transitions, and its
error comes from bootstrapping on its own estimates instead. For a finite horizon:

    Q(s, a, 0) = 0,    Q(s, a, k) = r + gamma (1 - terminal) Q(s', pi(s'), k - 1),   k = 1..H,

fitted by regression on the dataset's transitions ``(s, a, r, s', terminal)``. The value of a
query side is ``Q(obs, first action, h)``.

Design:

* **Steps to go select an output.** One network per member maps ``(observation, action)`` to
  H outputs, output k - 1 being ``Q(., ., k)`` -- a network of ``(observation, action,
  steps-to-go)`` with the steps to go entering as a one-hot in the last layer. Every horizon
  is fitted at once: a minibatch gives H targets per transition.
* **No target network.** Output k's target reads output k - 1 of the current network with
  the gradient stopped. The chain from k to k - 1 has no cycle, so output 1 is plain reward
  regression and every output converges once the one below it has: a fitted-Q iteration per
  gradient step, without the instability bootstrapping has in the discounted infinite case.
* **Scale.** Output k is ``Q(., ., k) / (k c)``, with ``c`` the mean absolute reward of the
  dataset, so every output has the scale of one reward and the loss weighs horizons alike;
  observations are standardised with the dataset's statistics.
* **Vectorised ensemble.** P query policies times M bootstrap members are one
  :class:`~opcc_edu.dynamics.layers.EnsembleMLP` of P M members: member ``p M + m`` is
  bootstrap ``m`` of policy ``p``, each with its own initialisation and its own bootstrap
  resample of the transitions. The policies' actions at every next observation are computed
  once before training, so the training step has no policy call and no Python loop over
  members, on CPU or GPU.

Shapes: T transitions, D observation size, A action size, P policies, M members per policy,
E = P M networks, B rows per member per step, H outputs (largest horizon), N queries.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..confidence import resolve_confidences
from ..names import CONFIDENCES, DEFAULT_QUERY_RECIPE
from ..utils import get_device, redirect_torch_caches
from .answers import Answers
from .config import FQEConfig
from .estimate import answering_env, select_profile_queries

if TYPE_CHECKING:
    import torch

    from ..dynamics.layers import EnsembleMLP
    from ..queries import QuerySet

__all__ = ["FQEConfig", "FittedQEnsemble", "answer_queries_fqe", "fqe_values", "train_fqe"]

_DATASET_KEYS = ("observations", "actions", "rewards", "next_observations", "terminals")


def _check_dataset(dataset: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The transitions as float32/bool arrays, checked for keys, shapes and finite values."""
    missing = [key for key in _DATASET_KEYS if key not in dataset]
    if missing:
        raise ValueError(f"dataset is missing {missing}; a dataset needs {list(_DATASET_KEYS)}")
    obs = np.asarray(dataset["observations"], dtype=np.float32)
    if obs.ndim != 2 or obs.shape[0] == 0:
        raise ValueError(f"dataset['observations'] must have shape (T, D) with T >= 1, got {obs.shape}")
    t = obs.shape[0]
    out = {"observations": obs}
    for key in ("actions", "next_observations"):
        out[key] = np.asarray(dataset[key], dtype=np.float32)
        if out[key].ndim != 2 or out[key].shape[0] != t:
            raise ValueError(f"dataset[{key!r}] must have shape (T={t}, .), got {out[key].shape}")
    if out["next_observations"].shape != obs.shape:
        raise ValueError(f"dataset['next_observations'] must have the shape of the observations {obs.shape}")
    for key in ("rewards", "terminals"):
        out[key] = np.asarray(dataset[key]).reshape(-1)
        if out[key].shape != (t,):
            raise ValueError(f"dataset[{key!r}] must have shape (T={t},), got {np.shape(dataset[key])}")
    out["rewards"] = out["rewards"].astype(np.float32)
    out["terminals"] = out["terminals"].astype(bool)
    for key in ("observations", "actions", "next_observations", "rewards"):
        if not np.isfinite(out[key]).all():
            raise ValueError(f"dataset[{key!r}] must be finite")
    return out


@dataclasses.dataclass
class FittedQEnsemble:
    """A trained FQE ensemble: E = P M Q-networks and the statistics they were trained with."""

    network: EnsembleMLP
    """The :class:`~opcc_edu.dynamics.layers.EnsembleMLP`, (E, B, D + A) -> (E, B, H); network
    ``p M + m`` is member m of policy p."""
    n_policies: int
    """P."""
    ensemble_size: int
    """M members per policy."""
    max_horizon: int
    """H, the largest steps-to-go with an output."""
    obs_mean: torch.Tensor
    """(D,) mean standardising observations."""
    obs_std: torch.Tensor
    """(D,) standard deviation standardising observations."""
    value_scale: float
    """``c``, the mean absolute reward of the dataset (output k is ``Q / (k c)``)."""
    gamma: float
    """The discount the values were fitted with."""
    info: dict[str, float] = dataclasses.field(default_factory=dict)
    """``train_seconds``, ``samples_per_second`` of the step loop and the final ``loss``."""

    def q_values(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """(E, B, H) Q-values of ``Q(obs, action, k)`` for k = 1..H of every network.

        Args:
            obs: (E, B, D) or (B, D) observations (the latter shared by every network).
            action: (E, B, A) or (B, A) actions.
        """
        import torch

        e = self.network.ensemble_size
        if obs.dim() == 2:
            obs, action = obs.expand(e, *obs.shape), action.expand(e, *action.shape)
        x = torch.cat([(obs - self.obs_mean) / self.obs_std, action], dim=-1)
        steps = torch.arange(1, self.max_horizon + 1, device=x.device, dtype=x.dtype)
        return self.network(x) * (self.value_scale * steps)


def _policy_actions(policies: Sequence[Callable], obs: np.ndarray, device: torch.device) -> torch.Tensor:
    """(P, T, A) actions of every policy at every observation (one pass, in chunks)."""
    import torch

    obs_t = torch.as_tensor(obs, device=device)
    out = []
    with torch.no_grad():
        for i, policy in enumerate(policies):
            if isinstance(policy, torch.nn.Module):
                # a copy on the device: the caller's policy stays where it is
                policy = copy.deepcopy(policy).to(device)
            chunks = [policy(part) for part in torch.split(obs_t, 65_536)]
            actions = torch.cat(chunks).float()
            if actions.ndim != 2 or actions.shape[0] != obs.shape[0]:
                raise ValueError(
                    f"policies[{i}] must map (T, D) observations to (T, A) actions, got {tuple(actions.shape)}"
                )
            out.append(actions)
    return torch.stack(out)


def train_fqe(
    dataset: dict[str, np.ndarray],
    policies: Sequence[Callable],
    max_horizon: int,
    config: FQEConfig | None = None,
    gamma: float = 1.0,
    device: torch.device | str | None = None,
    progress: bool = True,
) -> FittedQEnsemble:
    """Fit M bootstrapped finite-horizon Q-functions for every policy on one offline dataset.
    (A recipe, read top to bottom.)

    Args:
        dataset: D4RL-style transitions: ``observations`` (T, D), ``actions`` (T, A),
            ``rewards`` (T,), ``next_observations`` (T, D), ``terminals`` (T,); a terminal
            transition's target is its reward alone.
        policies: P deterministic policies, each a callable (torch module) from (B, D) float32
            observations to (B, A) actions.
        max_horizon: H >= 1, the largest steps-to-go to fit.
        config: sizes and seed (None: :meth:`FQEConfig.from_profile`).
        gamma: discount in (0, 1].
        device: torch device (None: :func:`opcc_edu.utils.get_device`).
        progress: show a progress bar.

    Returns:
        The :class:`FittedQEnsemble`.
    """
    import torch
    from tqdm.auto import tqdm

    from ..dynamics.layers import EnsembleMLP

    config = FQEConfig.from_profile() if config is None else config
    if isinstance(max_horizon, bool) or not isinstance(max_horizon, (int, np.integer)) or max_horizon < 1:
        raise ValueError(f"max_horizon must be an integer >= 1 (a horizon of 0 has value 0), got {max_horizon!r}")
    if not (isinstance(gamma, (int, float)) and 0 < gamma <= 1):
        raise ValueError(f"gamma must be a number in (0, 1], got {gamma!r}")
    policies = list(policies)
    if not policies:
        raise ValueError("policies must hold at least one policy")
    data = _check_dataset(dataset)
    device = get_device(device)
    h, p, m = int(max_horizon), len(policies), config.ensemble_size
    e = p * m
    t = data["observations"].shape[0]
    next_action = _policy_actions(policies, data["next_observations"], device)  # (P, T, A)
    if next_action.shape[-1] != data["actions"].shape[1]:
        raise ValueError(
            f"the policies' actions have size {next_action.shape[-1]} but the dataset's have {data['actions'].shape[1]}"
        )
    tensor = {key: torch.as_tensor(value, device=device) for key, value in data.items()}
    obs_mean = tensor["observations"].mean(0)
    obs_std = tensor["observations"].std(0).clamp_min(1e-6)
    value_scale = float(tensor["rewards"].abs().mean().clamp_min(1e-6))
    generator = torch.Generator().manual_seed(config.seed)
    network = EnsembleMLP(
        e, data["observations"].shape[1] + data["actions"].shape[1], config.hidden_sizes, h, generator=generator
    )
    network = network.to(device)
    model = FittedQEnsemble(network, p, m, h, obs_mean, obs_std, value_scale, float(gamma))
    if config.bootstrap:
        rows = torch.randint(t, (e, t), generator=generator).to(device)
    else:
        rows = torch.arange(t, device=device).expand(e, t)
    policy_of = torch.arange(p, device=device).repeat_interleave(m)[:, None]  # (E, 1)
    steps = torch.arange(1, h + 1, device=device, dtype=torch.float32)
    not_done = (~tensor["terminals"]).float() * gamma
    redirect_torch_caches()
    optimizer = torch.optim.Adam(network.parameters(), lr=config.lr)
    # the learning rate falls linearly to 0: the targets' noise (one next state per row) averages out
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - step / config.train_steps)
    sampler = torch.Generator(device=device).manual_seed(config.seed + 1)
    start = time.perf_counter()
    loss = torch.zeros((), device=device)
    for _ in tqdm(range(config.train_steps), desc="FQE", disable=not progress, leave=False):
        pick = rows.gather(1, torch.randint(t, (e, config.batch_size), generator=sampler, device=device))  # (E, B)
        with torch.no_grad():
            q_next = model.q_values(tensor["next_observations"][pick], next_action[policy_of, pick])
            below = torch.cat([torch.zeros_like(q_next[..., :1]), q_next[..., :-1]], dim=-1)  # Q(s', pi(s'), k - 1)
            target = tensor["rewards"][pick][..., None] + not_done[pick][..., None] * below
        x = torch.cat([(tensor["observations"][pick] - obs_mean) / obs_std, tensor["actions"][pick]], dim=-1)
        loss = ((network(x) - target / (value_scale * steps)) ** 2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
    seconds = time.perf_counter() - start
    model.info = {
        "train_seconds": seconds,
        "samples_per_second": e * config.batch_size * config.train_steps / max(seconds, 1e-9),
        "loss": float(loss.detach()),
    }
    network.eval()
    return model


def fqe_values(model: FittedQEnsemble, queries: QuerySet) -> tuple[np.ndarray, np.ndarray]:
    """Every member's value of both sides of every query: ``Q(obs, first action, h)``.

    Args:
        model: a :class:`FittedQEnsemble` of P policies (index i = level i + 1).
        queries: N queries with horizons up to the model's H and one discount, the model's.

    Returns:
        ``(values_a, values_b)``, each (N, M) float64.
    """
    import torch

    n = len(queries)
    level = np.concatenate([queries.policy_a, queries.policy_b]).astype(np.int64)
    horizon = np.concatenate([queries.horizon, queries.horizon]).astype(np.int64)
    if n and (level.min() < 1 or level.max() > model.n_policies):
        raise ValueError(
            f"query policy levels must lie in [1, {model.n_policies}] (the policies FQE was trained for), "
            f"got [{level.min()}, {level.max()}]"
        )
    if n and (horizon.min() < 1 or horizon.max() > model.max_horizon):
        raise ValueError(
            f"query horizons must lie in [1, {model.max_horizon}] (the horizons FQE was trained for), "
            f"got [{horizon.min()}, {horizon.max()}]"
        )
    if n and not np.allclose(queries.gamma, model.gamma):
        raise ValueError(f"the queries' discount {np.unique(queries.gamma)} differs from FQE's gamma {model.gamma}")
    device = model.obs_mean.device
    obs = torch.as_tensor(np.concatenate([queries.obs_a, queries.obs_b]), dtype=torch.float32, device=device)
    act = torch.as_tensor(np.concatenate([queries.action_a, queries.action_b]), dtype=torch.float32, device=device)
    with torch.no_grad():
        q = model.q_values(obs, act)  # (E, 2N, H)
    m = model.ensemble_size
    q = q.reshape(model.n_policies, m, 2 * n, model.max_horizon).cpu().double().numpy()
    values = q[level - 1, :, np.arange(2 * n), horizon - 1]  # (2N, M)
    return values[:n], values[n:]


def answer_queries_fqe(
    env_name: str,
    dataset_name: str | None = None,
    config: FQEConfig | None = None,
    queries: QuerySet | None = None,
    policies: Sequence[Any] | None = None,
    dataset_size: int | None = None,
    dataset_seed: int = 0,
    confidences: Sequence[str] | None = None,
    k: int = 10,
    device: torch.device | str | None = None,
    progress: bool = True,
    recipe: str | None = None,
    dataset: dict[str, np.ndarray] | None = None,
) -> Answers:
    """Train bootstrapped FQE on the offline dataset and answer the queries with it.

    The (N, M) member values flow through the same confidence functions and metrics as the
    dynamics ensemble's (:func:`opcc_edu.scoring.score_values`); :attr:`Answers.baseline` reads ``"fqe"``.

    Args:
        env_name: environment.
        dataset_name: dataset (None: the environment's default).
        config: sizes and seed (None: :meth:`FQEConfig.from_profile`).
        queries: the queries (None: the shipped set of ``recipe`` reduced to the profile's size).
        policies: query policies, index i = level i + 1 (None: the shipped ones).
        dataset_size: transitions (None: the profile's).
        dataset_seed: seed of the dataset.
        confidences: confidence functions (None: all of :data:`opcc_edu.names.CONFIDENCES`).
        k: bins of CR_K.
        device: torch device.
        progress: show progress bars.
        recipe: the shipped set's recipe when ``queries`` is None (None: the default recipe).
        dataset: use these transitions instead of loading ``dataset_name``.
    """
    from ..datasets import load_dataset, resolve_dataset

    config = FQEConfig.from_profile() if config is None else config
    dataset_name = resolve_dataset(env_name, dataset_name)
    confidences = list(CONFIDENCES if confidences is None else confidences)
    confidences = resolve_confidences(confidences)
    if queries is None:
        from ..queries import load_queries

        queries = select_profile_queries(load_queries(env_name, recipe or DEFAULT_QUERY_RECIPE))
    env = answering_env(env_name, queries)
    if policies is None:
        from ..queries import query_policies

        policies = query_policies(queries)
    if dataset is None:
        dataset = load_dataset(env, dataset_name, size=dataset_size, seed=dataset_seed, progress=progress)
    gammas = np.unique(queries.gamma)
    if gammas.size != 1:
        raise ValueError(f"FQE fits one discount; the queries have several: {gammas}")
    model = train_fqe(
        dataset, policies, int(queries.horizon.max()), config, gamma=float(gammas[0]), device=device, progress=progress
    )
    start = time.perf_counter()
    values_a, values_b = fqe_values(model, queries)
    return Answers.from_values(
        env.name,
        getattr(dataset_name, "name", dataset_name),
        config,
        queries,
        values_a,
        values_b,
        confidences,
        k,
        started=start,
        train_seconds=model.info["train_seconds"],
    )
