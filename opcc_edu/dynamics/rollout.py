"""Batched Monte-Carlo rollouts of policies inside a learned ensemble.

The method is :func:`return_curves`: every member, row and run advanced together for a number
of steps, rewards summed under a discount and a termination mask. :func:`rollout_values` is the
scheduler around it (checks, identical rows once, chunks that fit memory, blocks of members)
and estimates, for B start rows (a query side each: observation, first
action, policy, horizon, discount), the discounted return under every member of an ensemble
and every Monte-Carlo run -- an array of shape (B, M, R) -- with all members, rows and runs
advanced together:

* The state is one (M, n, D) tensor per chunk of rows (n = rows x runs); one
  :meth:`~opcc_edu.dynamics.DynamicsEnsemble.step` moves every member and row.
* Rows are sorted by policy inside a chunk, so each policy runs once per step on a
  contiguous slice of rows (P policy calls per step, never one per query).
* Returns accumulate under a cumulative "still alive" mask: once the termination function
  fires for a trajectory, it earns nothing more, ever.
* The running discounted sum is recorded after every step, so one rollout to the largest
  horizon answers every smaller horizon: the value at horizon h is the sum after h steps.
  Identical rows (same observation, first action, policy and discount) are rolled out once.
* Rows are processed in chunks that fit a memory budget; chunks hold rows of similar
  horizon, so a chunk of h = 10 queries stops after 10 steps.
* Nothing inside the step loop reads a value back to the host (no ``.item()``, no
  ``.cpu()``, no data-dependent Python branching), so on a GPU the loop only enqueues
  kernels; results come back once per chunk.

In "mixture" mode every trajectory is advanced at every step by a member drawn at random
(the OPCC reference's ``--mixture``): the M trajectories of a row are shuffled across the
members by a random permutation each step, so each member still processes exactly n rows
(one batched matmul) while each trajectory sees a uniformly random member per step.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..utils import check_positive_int, get_device
from .memory import check_memory, rollout_bytes

if TYPE_CHECKING:
    from .models import DynamicsEnsemble

DEFAULT_CPU_BUDGET = 16 * 2**20
"""Bytes of activations per chunk on a CPU: small enough to stay in the cache hierarchy."""
MIN_ROWS_PER_MEMBER = 1024
"""Smallest rows per member in a CPU chunk: below it a member's matmul gets inefficient."""
DEFAULT_GPU_BUDGET = 4 * 2**30
"""Bytes of activations per chunk on a GPU (further capped by half the free memory)."""


@dataclasses.dataclass(frozen=True)
class RolloutPlan:
    """How :func:`rollout_values` split its work (returned for inspection and benchmarks)."""

    unique_rows: int
    """Distinct (observation, first action, policy, discount) rows actually simulated."""
    chunks: tuple[tuple[int, int], ...]
    """(rows, steps) of every chunk, rows counted before multiplying by the runs R."""
    member_steps: int
    """Member transitions simulated in total: sum over chunks of M * rows * R * steps."""
    member_block: int
    """Members advanced together in one batched call (M unless the budget splits them)."""


def rollout_values(
    model: DynamicsEnsemble,
    policies: Sequence[Callable[[torch.Tensor], torch.Tensor]],
    obs: np.ndarray,
    policy_index: np.ndarray,
    horizon: np.ndarray,
    first_action: np.ndarray | None = None,
    gamma: np.ndarray | float = 1.0,
    runs: int = 1,
    mixture: bool = False,
    seed: int = 0,
    chunk_rows: int | None = None,
    member_block: int | None = None,
    memory_budget: int | None = None,
    device: Any = None,
    dedupe: bool = True,
    progress: bool = True,
    return_plan: bool = False,
) -> np.ndarray | tuple[np.ndarray, RolloutPlan]:
    """Discounted returns of policies simulated in every member of an ensemble. (A recipe, read top to bottom.)

    Each row starts at ``obs[i]``, takes ``first_action[i]`` (when given) and then follows
    ``policies[policy_index[i]]`` until ``horizon[i]`` actions were taken; the value is
    ``sum_t gamma^t r_t`` over those steps, stopped for good at the model's termination.

    Args:
        model: a :class:`~opcc_edu.dynamics.DynamicsEnsemble` (or any module with
            ``ensemble_size``, ``obs_dim``, ``act_dim``, ``device`` and
            ``step(obs (M, n, D), act (M, n, A), generator) -> (next_obs, reward, done)``).
        policies: P callables (e.g. :class:`opcc_edu.policies.Actor`) mapping observations
            (..., D) float32 to actions (..., A); they are copied to ``device`` if needed.
        obs: (B, D) start observations.
        policy_index: (B,) int, 0-based index into ``policies``.
        horizon: (B,) int >= 1, actions taken per row (including the first action).
        first_action: (B, A) first actions, or None to let the policy act at step 0 too.
        gamma: discount, scalar or (B,).
        runs: Monte-Carlo runs R per member and row (useful for stochastic models/mixtures).
        mixture: draw a random member per trajectory and step (see the module docs).
        seed: seeds model noise and the mixture; same seed and chunking, same result.
        chunk_rows: rows (times R) per chunk; default from ``memory_budget``.
        member_block: members advanced per batched call (default: all M, unless the memory
            budget asks for fewer; always M in mixture mode).
        memory_budget: bytes of activations per chunk (default: 16 MiB on a CPU,
            ``min(4 GiB, free / 2)`` on a GPU).
        device: torch device (default: the model's).
        dedupe: roll out identical rows once.
        progress: show a tqdm progress bar (steps of all chunks).
        return_plan: also return the :class:`RolloutPlan`.

    Returns:
        (B, M, R) float64 values (and the plan when ``return_plan``).

    Raises:
        InsufficientMemoryError: the (B, M, R) values (or a chunk of ``chunk_rows``) clearly
            cannot fit the free memory; checked before anything is allocated
            (:mod:`opcc_edu.dynamics.memory`).
    """
    from tqdm.auto import tqdm

    device = get_device(device) if device is not None else model.device
    if model.device != device:
        raise ValueError(f"model is on {model.device} but device={device}; move the model with .to(device) first")
    runs = check_positive_int(runs, "runs")
    m, d, a = model.ensemble_size, model.obs_dim, model.act_dim
    obs, policy_index, horizon, first_action, gamma = _rollout_inputs(
        obs, policy_index, horizon, first_action, gamma, len(policies), d, a
    )
    b = len(obs)
    if b == 0:
        empty = np.zeros((0, m, runs))
        return (empty, RolloutPlan(0, (), 0, m)) if return_plan else empty
    _check_rollout_memory(m, b, runs, d, a, chunk_rows, device)

    first_of, inverse, u_horizon = _unique_rows(obs, policy_index, first_action, gamma, horizon, dedupe)
    u = len(first_of)

    # --- chunking: a chunk is (a block of rows) x (a block of members) that fits the budget;
    # rows are sorted by horizon so short chunks stop early, and by policy inside a chunk.
    if chunk_rows is None:
        chunk_rows, auto_block = _chunk_shape(model, u * runs, int(horizon.max()), memory_budget, device, mixture)
        member_block = auto_block if member_block is None else member_block
    if member_block is None or mixture or not hasattr(model, "select_members"):
        member_block = m
    member_block = min(m, check_positive_int(member_block, "member_block"))
    chunk_rows = max(1, check_positive_int(chunk_rows, "chunk_rows") // runs)
    by_horizon = np.argsort(u_horizon, kind="stable")
    chunks = [by_horizon[s : s + chunk_rows] for s in range(0, u, chunk_rows)]
    chunks = [c[np.argsort(policy_index[first_of[c]], kind="stable")] for c in chunks]
    blocks = [(s, min(m, s + member_block)) for s in range(0, m, member_block)]
    plan = RolloutPlan(
        u,
        tuple((len(c), int(u_horizon[c].max())) for c in chunks),
        sum(m * len(c) * runs * int(u_horizon[c].max()) for c in chunks),
        member_block,
    )

    policies = [_on_device(p, device) for p in policies]
    # Members of a block are a contiguous prefix-style slice: copy their weights once per call.
    models = [model if (s, e) == (0, m) else model.select_members(slice(s, e)) for s, e in blocks]
    generator = torch.Generator(device=device).manual_seed(int(seed))
    values = np.zeros((b, m, runs), dtype=np.float64)
    position = np.empty(u, dtype=np.int64)  # row of each unique start inside its chunk
    chunk_of = np.empty(u, dtype=np.int64)
    for ci, c in enumerate(chunks):
        position[c] = np.arange(len(c))
        chunk_of[c] = ci
    total = sum(steps for _, steps in plan.chunks) * len(blocks)
    bar = tqdm(total=total, desc=f"rollouts ({m} members)", disable=not progress, leave=False)
    with torch.inference_mode():
        for ci, c in enumerate(chunks):
            rows = first_of[c]
            steps = int(u_horizon[c].max())
            curve = np.empty((steps, m, len(c), runs))
            for (s, e), block in zip(blocks, models, strict=True):
                curve[:, s:e] = return_curves(
                    block,
                    policies,
                    obs[rows],
                    policy_index[rows],
                    steps,
                    None if first_action is None else first_action[rows],
                    gamma[rows],
                    runs,
                    mixture,
                    generator,
                    bar,
                )
            mine = np.nonzero(chunk_of[inverse] == ci)[0]
            values[mine] = curve[horizon[mine] - 1, :, position[inverse[mine]], :]
    bar.close()
    return (values, plan) if return_plan else values


def _rollout_inputs(
    obs: np.ndarray,
    policy_index: np.ndarray,
    horizon: np.ndarray,
    first_action: np.ndarray | None,
    gamma: np.ndarray | float,
    n_policies: int,
    d: int,
    a: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """The arguments of :func:`rollout_values`, checked and converted to their dtypes and shapes."""
    obs = np.asarray(obs, dtype=np.float32)
    b = len(obs)
    if obs.ndim != 2 or obs.shape[1] != d:
        raise ValueError(f"obs must have shape (B, D={d}), got {obs.shape}")
    policy_index = np.asarray(policy_index, dtype=np.int64).reshape(-1)
    horizon = np.asarray(horizon, dtype=np.int64).reshape(-1)
    gamma = np.broadcast_to(np.asarray(gamma, dtype=np.float64), (b,)).copy()
    if len(policy_index) != b or len(horizon) != b:
        raise ValueError(f"policy_index {policy_index.shape} and horizon {horizon.shape} must have shape (B={b},)")
    if b == 0:
        return obs, policy_index, horizon, first_action, gamma
    if n_policies == 0 or policy_index.min() < 0 or policy_index.max() >= n_policies:
        raise ValueError(
            f"policy_index must lie in [0, {n_policies}) (one per policy), "
            f"got range [{policy_index.min()}, {policy_index.max()}]"
        )
    if horizon.min() < 1:
        raise ValueError(f"horizon must be >= 1 for every row, got minimum {horizon.min()}")
    if first_action is not None:
        first_action = np.asarray(first_action, dtype=np.float32)
        if first_action.shape != (b, a):
            raise ValueError(f"first_action must have shape (B={b}, A={a}), got {first_action.shape}")
    return obs, policy_index, horizon, first_action, gamma


def _unique_rows(
    obs: np.ndarray,
    policy_index: np.ndarray,
    first_action: np.ndarray | None,
    gamma: np.ndarray,
    horizon: np.ndarray,
    dedupe: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One rollout per distinct start row, run to the largest horizon asked of it.

    Returns ``(first_of (U,), inverse (B,), u_horizon (U,))``: the first row of each distinct
    start, the distinct start of each row, and the horizon each distinct start is rolled to.
    """
    parts = [obs.astype(np.float64), policy_index[:, None].astype(np.float64), gamma[:, None]]
    if first_action is not None:
        parts.insert(1, first_action.astype(np.float64))
    keys = np.concatenate(parts, axis=1)
    if dedupe:
        _, first_of, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
    else:
        first_of, inverse = np.arange(len(obs)), np.arange(len(obs))
    u_horizon = np.zeros(len(first_of), dtype=np.int64)
    np.maximum.at(u_horizon, inverse, horizon)
    return first_of, inverse, u_horizon


def _check_rollout_memory(
    m: int, b: int, runs: int, d: int, a: int, chunk_rows: int | None, device: torch.device
) -> None:
    """Refuse, before allocating, a rollout whose values or chunk cannot fit."""
    host, chunk = rollout_bytes(m, b, runs, d, a, chunk_rows or 1)
    what = f"rolling out {b} rows x {m} members x {runs} runs"
    check_memory(host, "cpu", what, f"runs (now {runs}), the number of queries or ensemble_size (now {m})")
    if chunk_rows is not None:
        check_memory(chunk, device, what, f"chunk_rows (now {chunk_rows}) or runs (now {runs})")


def return_curves(
    model: DynamicsEnsemble,
    policies: Sequence[Callable[[torch.Tensor], torch.Tensor]],
    obs: np.ndarray,
    policy_index: np.ndarray,
    steps: int,
    first_action: np.ndarray | None = None,
    gamma: np.ndarray | float = 1.0,
    runs: int = 1,
    mixture: bool = False,
    generator: torch.Generator | None = None,
    bar: Any = None,
) -> np.ndarray:
    """The rollout itself: every member's running discounted return, step by step.

    All M members advance all n = rows x runs trajectories at once: the policy of each row acts
    (after ``first_action`` at step 0, when given), the model steps, and the reward is added
    under the discount while the trajectory is alive; once the termination flag fires, the
    trajectory earns nothing more. Rows must be sorted by policy (one call per policy and
    step). On the model's device; nothing is read back until the end.

    Args:
        model: the ensemble (its ``step`` gives ``next_obs, reward, done``).
        policies: the policies, indexed by ``policy_index``, on the model's device.
        obs: (k, D) start observations; policy_index: (k,) sorted policy of each row.
        steps: actions taken (the largest horizon of the rows).
        first_action: (k, A) or None; gamma: discount, scalar or (k,).
        runs: Monte-Carlo runs per row; mixture: a random member per trajectory and step.
        generator: the random stream of model noise and the mixture; bar: a progress bar.

    Returns:
        (steps, M, k, runs) float64: entry t is the discounted sum after t + 1 actions.
    """
    device = model.device
    generator = torch.Generator(device=device).manual_seed(0) if generator is None else generator
    gamma = np.broadcast_to(np.asarray(gamma, dtype=np.float64), (len(obs),)).copy()
    m = model.ensemble_size
    n = len(obs) * runs
    # Runs of one row are adjacent, so rows of one policy stay contiguous after repeating.
    state = torch.as_tensor(obs, device=device).repeat_interleave(runs, 0).expand(m, -1, -1).contiguous()
    disc_factor = torch.as_tensor(gamma, dtype=torch.float32, device=device).repeat_interleave(runs)
    first = None
    if first_action is not None:
        first = torch.as_tensor(first_action, device=device).repeat_interleave(runs, 0).expand(m, -1, -1)
    groups = _policy_groups(np.repeat(policy_index, runs))
    value = torch.zeros(m, n, device=device)
    alive = torch.ones(m, n, dtype=torch.bool, device=device)
    discount = torch.ones(n, device=device)
    curve = torch.empty(steps, m, n, device=device)
    zero = torch.zeros((), device=device)
    for t in range(steps):
        if t == 0 and first is not None:
            action = first
        else:
            action = torch.empty(m, n, model.act_dim, device=device)
            for p, s, e in groups:
                action[:, s:e] = policies[p](state[:, s:e])
        if mixture:
            # member j advances trajectory slot perm[j, i] of row i
            perm = torch.rand(n, m, generator=generator, device=device).argsort(dim=1).t()
            inp_obs = state.gather(0, perm[..., None].expand(-1, -1, state.shape[-1]))
            inp_act = action.gather(0, perm[..., None].expand(-1, -1, action.shape[-1]))
            nxt, reward, done = model.step(inp_obs, inp_act, generator)
            back = perm.argsort(dim=0)
            nxt = nxt.gather(0, back[..., None].expand(-1, -1, nxt.shape[-1]))
            reward, done = reward.gather(0, back), done.gather(0, back)
        else:
            nxt, reward, done = model.step(state, action, generator)
        # where(), not a product: a dead trajectory may drift to inf/nan and 0 * inf is nan
        value += discount * torch.where(alive, reward, zero)
        curve[t] = value
        alive &= ~done
        discount = discount * disc_factor
        state = nxt
        if bar is not None:
            bar.update(1)
    k = len(obs)
    return curve.reshape(steps, m, k, runs).cpu().double().numpy()  # float64 only on the host


def _policy_groups(policy_index: np.ndarray) -> list[tuple[int, int, int]]:
    """(policy, start, end) of each run of equal, sorted policy indices."""
    change = np.flatnonzero(np.diff(policy_index)) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [len(policy_index)]])
    return [(int(policy_index[s]), int(s), int(e)) for s, e in zip(starts, ends, strict=True)]


def _on_device(policy, device: torch.device):
    if isinstance(policy, torch.nn.Module):
        params = list(policy.parameters()) + list(policy.buffers())
        if params and params[0].device != device:
            return copy.deepcopy(policy).to(device)
    return policy


def _chunk_shape(
    model, rows: int, steps: int, budget: int | None, device: torch.device, mixture: bool
) -> tuple[int, int]:
    """(rows per chunk, members per block) whose activations fit ``budget`` bytes.

    A chunk keeps every member when the budget allows at least :data:`MIN_ROWS_PER_MEMBER`
    rows each; otherwise (large M on a CPU) it advances a block of members over those rows,
    which keeps each member's matmul large and the activations cache-resident. Mixture mode
    needs every member in one call.
    """
    if budget is None:
        if device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(device)  # once per call, outside any step loop
            budget = int(min(DEFAULT_GPU_BUDGET, free // 2))
        else:
            budget = DEFAULT_CPU_BUDGET
    net = getattr(model, "net", None)
    widest = max(getattr(net, "hidden_sizes", (256,)) or (256,))
    k = model.obs_dim + 1
    # per member-row: a few live hidden activations, inputs/outputs, the state and the curve
    floats = 3 * widest + 3 * (model.obs_dim + model.act_dim) + 2 * k + steps + 8
    if getattr(model, "prior", None) is not None:
        floats += 2 * widest
    member_rows = max(1, int(budget) // (4 * floats))
    m = model.ensemble_size
    per_member = member_rows // m
    if per_member >= min(rows, MIN_ROWS_PER_MEMBER) or mixture:
        return max(1, min(rows, per_member)), m
    per_member = min(rows, MIN_ROWS_PER_MEMBER)
    return per_member, max(1, min(m, member_rows // per_member))
