"""Where does an ensemble's value error come from? Dynamics against reward, step by step.

The ensemble answers a query by rolling each side out in its learned model, so a wrong
answer starts as an error in a value estimate, and that error has two sources: the learned
*dynamics* (the states the model visits are not the states the simulator visits) and the
learned *reward* (the reward the model pays for a state is not the environment's). They are
separated here by swapping one learned part for the true one at a time, on every side of
every query:

* ``true`` -- the simulator's value: true states, true reward (the query's label).
* ``model`` -- the ensemble's estimate: model states, model reward.
* ``model_reward_true_states`` -- the simulator's trajectory, paid with each member's
  learned reward (clipped as in the model's rollouts). Its error against ``true`` is the
  **reward error** alone; ``model`` minus it is the **dynamics error** (the same learned
  reward, paid along the model's states instead of the true ones).
* ``true_reward_model_states`` -- the model's trajectory, paid with the environment's reward
  function (:mod:`opcc_edu.rewards`). Exact only where the reward is a function of
  observations (the mazes); for the locomotion tasks the reward needs the x-velocity, which
  observations lack, so this column is absent (``None``) unless the model predicts that
  feature itself (``reward="predefined"``, where ``model`` already is this column).
* ``model_true_termination`` -- the model's own rollouts (learned dynamics and reward), with
  the model's termination switched off and each side stopped after as many steps as the
  simulator's trajectory lasted. Its difference from ``model`` is the **termination error**
  alone: a policy that falls in the simulator but not in the model (or the reverse). Computed
  for the environments that terminate (Hopper, Walker2d) when the model's termination is the
  predefined rule or none; ``None`` elsewhere (a learned termination head changes the
  network's shape, so it cannot be switched off on the same weights).

Besides the values it measures prediction error directly: the **one-step** error of each
observation dimension and of the reward on the held-out transitions of the model's dataset
(the split :func:`opcc_edu.dynamics.train_dynamics` kept out), and the **h-step** error of
an open-loop rollout that replays the simulator's actions along the query trajectories.

Every variant is also turned into EV answers, so the table reads directly as "the PCQ loss
the ensemble would have with a perfect reward / perfect dynamics".

On the mazes it also keeps the reward error *step by step* along the simulator's trajectories,
so :meth:`ValueErrorDecomposition.reward_map` can say **where** the learned reward is wrong:
a map of the mean learned-minus-true reward per patch of the maze, beside how often the
model's dataset visited that patch (:class:`RewardErrorMap`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..baselines.estimate import estimate_values
from ..confidence import compute_confidence
from ..dynamics import build_ensemble, rollout_values
from ..names import ALL_HORIZONS
from ..plotting import plot_reward_map, plot_value_error

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from ..dynamics import DynamicsEnsemble
    from ..queries import QuerySet

__all__ = [
    "RewardErrorMap",
    "ValueErrorDecomposition",
    "decompose_value_error",
    "holdout_indices",
    "one_step_errors",
]

OPEN_LOOP_STEPS: tuple[int, ...] = (1, 2, 5, 10, 20, 30, 40, 50)
"""Steps at which :func:`decompose_value_error` reports the open-loop prediction error."""


def holdout_indices(n: int, seed: int = 0, holdout_fraction: float = 0.1, max_holdout: int = 5000) -> np.ndarray:
    """The transitions :func:`opcc_edu.dynamics.train_dynamics` keeps out of training: (n_val,) int.

    The validation half of :func:`opcc_edu.dynamics.training.holdout_split`, so with the
    training seed and defaults these are exactly the rows the model never saw.
    """
    from ..dynamics.training import holdout_split

    return holdout_split(n, seed, holdout_fraction, max_holdout)[0]


def one_step_errors(
    model: DynamicsEnsemble, dataset: Mapping[str, np.ndarray], index: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Mean absolute one-step error of the ensemble-mean prediction, per target dimension.

    Args:
        model: a trained ensemble.
        dataset: D4RL-format transitions (``observations``, ``actions``, ``next_observations``,
            ``rewards``).
        index: rows to score (default: all).

    Returns:
        ``{"obs": (D,), "reward": (), "obs_scale": (D,), "reward_scale": ()}``: the errors in
        data units, and as a yardstick the mean absolute size of the true change of each
        observation dimension and of the reward (an error as large as its scale predicts
        nothing).
    """
    import torch

    index = np.arange(len(dataset["observations"])) if index is None else np.asarray(index)
    obs = np.asarray(dataset["observations"])[index].astype(np.float32)
    act = np.asarray(dataset["actions"])[index].astype(np.float32)
    nxt = np.asarray(dataset["next_observations"])[index].astype(np.float64)
    rew = np.asarray(dataset["rewards"])[index].astype(np.float64)
    m = model.ensemble_size
    parts = []
    with torch.no_grad():
        for s in range(0, len(obs), 4096):
            o = torch.as_tensor(obs[s : s + 4096], device=model.device)
            a = torch.as_tensor(act[s : s + 4096], device=model.device)
            parts.append(model.predict_mean(o.expand(m, -1, -1), a.expand(m, -1, -1)).mean(0).cpu().double().numpy())
    pred = np.concatenate(parts) if parts else np.zeros((0, model.obs_dim + 1))
    delta = nxt - obs
    return {
        "obs": np.abs(pred[:, :-1] - delta).mean(0),
        "reward": np.abs(pred[:, -1] - rew).mean(),
        "obs_scale": np.abs(delta).mean(0),
        "reward_scale": np.abs(rew).mean(),
    }


def _with_spec(model: DynamicsEnsemble, **changes: Any) -> DynamicsEnsemble:
    """The same members (same weights) under a spec with ``changes`` applied."""
    copy = build_ensemble(dataclasses.replace(model.spec, **changes), init=False).to(model.device)
    copy.load_state_dict(model.state_dict())
    return copy.eval()


def _with_true_reward(model: DynamicsEnsemble) -> DynamicsEnsemble:
    """The same members in predefined-reward mode: a maze model's steps then pay the maze's
    true reward on its own predicted states (its reward column is learned but not used)."""
    return _with_spec(model, reward="predefined")


@dataclasses.dataclass
class RewardErrorMap:
    """The learned reward's error per patch of a maze (:meth:`ValueErrorDecomposition.reward_map`).

    Arrays are (rows, cols) over the maze with row 0 at the top, as
    :func:`opcc_edu.datasets.coverage.visitation_histogram`; ``imshow(a, extent=extent)``
    draws them in the environment's frame.
    """

    env_name: str
    extent: tuple[float, float, float, float]
    steps: np.ndarray
    """Query-trajectory steps that ended in each patch (count)."""
    error_sum: np.ndarray
    """Sum over those steps of learned minus true reward."""
    abs_error_sum: np.ndarray
    """Sum over those steps of |learned minus true reward|."""
    data_visits: np.ndarray | None
    """Dataset transitions that ended in each patch (None: no dataset given)."""

    @property
    def bias(self) -> np.ndarray:
        """Mean learned minus true reward per patch (NaN where no query step ended)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.steps > 0, self.error_sum / np.maximum(self.steps, 1), np.nan)

    def error_share_in_sparse_patches(self, max_data_share: float = 1e-3) -> dict[str, float]:
        """How much of the reward error lies where the dataset hardly went.

        Args:
            max_data_share: a patch is *sparse* when it holds at most this fraction of the
                dataset's transitions.

        Returns:
            ``{"error_share": share of the total |reward error| in sparse patches,
            "step_share": share of the query steps there, "data_share": share of the dataset
            there}``.

        Raises:
            ValueError: without data visits, or for a share outside [0, 1].
        """
        if self.data_visits is None:
            raise ValueError("this map has no data visits; pass dataset= to reward_map()")
        if not 0.0 <= float(max_data_share) <= 1.0:
            raise ValueError(f"max_data_share must lie in [0, 1], got {max_data_share!r}")
        total_data = max(float(self.data_visits.sum()), 1.0)
        sparse = self.data_visits / total_data <= float(max_data_share)
        total_error = float(self.abs_error_sum.sum())
        return {
            "error_share": float(self.abs_error_sum[sparse].sum() / total_error) if total_error > 0 else 0.0,
            "step_share": float(self.steps[sparse].sum() / max(float(self.steps.sum()), 1.0)),
            "data_share": float(self.data_visits[sparse].sum() / total_data),
        }

    def plot(self, fig: Figure | None = None) -> Figure:
        """The mean reward error per patch beside the dataset's visits (:func:`opcc_edu.plotting.plot_reward_map`)."""
        return plot_reward_map(self, fig)


@dataclasses.dataclass
class ValueErrorDecomposition:
    """Values of every query side under every mix of learned and true parts (2N sides)."""

    env_name: str
    horizon: np.ndarray
    """(2N,) horizon of each side (sides a then b)."""
    same_state: np.ndarray
    """(2N,) the side belongs to a same-state query."""
    target: np.ndarray
    """(N,) true answers of the queries."""
    true: np.ndarray
    """(2N,) simulator values."""
    model: np.ndarray
    """(2N, M) ensemble estimates."""
    model_reward_true_states: np.ndarray
    """(2N, M) learned reward paid along the simulator's trajectories."""
    true_reward_model_states: np.ndarray | None
    """(2N, M) true reward paid along the model's trajectories (None where not computable)."""
    one_step: dict[str, np.ndarray] | None
    """:func:`one_step_errors` on the held-out transitions (None without a dataset)."""
    open_loop: dict[int, float]
    """Step -> mean absolute observation error of the ensemble mean replaying true actions."""
    step_xy: np.ndarray | None = None
    """(2N, H, 2) position after each simulator step (mazes; NaN past a side's horizon)."""
    step_reward: np.ndarray | None = None
    """(2N, H) the simulator's reward of each step (mazes; NaN past a side's horizon)."""
    step_learned_reward: np.ndarray | None = None
    """(2N, H) the members' mean learned (clipped) reward for the same steps (mazes)."""
    model_true_termination: np.ndarray | None = None
    """(2N, M) the model's rollouts stopped where the simulator's stopped (None where the
    environment never terminates or the model's termination is learned)."""
    true_steps: np.ndarray | None = None
    """(2N,) steps the simulator's trajectory of each side lasted (its horizon unless it
    terminated earlier)."""

    # ------------------------------------------------------------------------------------
    def variants(self) -> dict[str, np.ndarray]:
        """(2N, M) member values of each variant."""
        out = {
            "model (learned dynamics + reward)": self.model,
            "learned reward on true states": self.model_reward_true_states,
        }
        if self.true_reward_model_states is not None:
            out["true reward on model states"] = self.true_reward_model_states
        if self.model_true_termination is not None:
            out["model, the simulator's termination"] = self.model_true_termination
        return out

    def table(self) -> pd.DataFrame:
        """Bias and mean absolute error of each variant's mean values, and its EV loss (the
        members' majority vote, as :func:`opcc_edu.confidence.ensemble_voting`).

        Rows: variant x subset (every horizon, ``all``, and same-/different-state queries).
        """
        import pandas as pd

        n = len(self.target)
        subsets: list[tuple[str, np.ndarray]] = [
            (str(h), self.horizon[:n] == h) for h in sorted(set(self.horizon[:n].tolist()))
        ]
        subsets += [(ALL_HORIZONS, np.ones(n, bool))]
        if self.same_state.any():
            subsets += [("same state", self.same_state[:n]), ("different state", ~self.same_state[:n])]

        rows = []
        for name, members in self.variants().items():
            values = members.mean(1)
            err = values - self.true
            pred, _ = compute_confidence("ev", members[:n], members[n:])  # the members' majority
            for label, mask in subsets:
                if not mask.any():
                    continue
                both = np.concatenate([mask, mask])
                rows.append(
                    {
                        "variant": name,
                        "subset": label,
                        "bias": float(err[both].mean()),
                        "mae": float(np.abs(err[both]).mean()),
                        "ev_loss": float((pred[mask] != self.target[mask]).mean()),
                        "n": int(mask.sum()),
                    }
                )
        return pd.DataFrame(rows)

    def shares(self) -> dict[str, float]:
        """Mean absolute value error of the model, of its reward part and of its dynamics part.

        ``reward`` = |learned reward on true states - true|, ``dynamics`` = |model - learned
        reward on true states| (the two parts add up to the model's signed error, so their
        absolute values bound it).
        """
        reward = self.model_reward_true_states.mean(1) - self.true
        dynamics = self.model.mean(1) - self.model_reward_true_states.mean(1)
        return {
            "total": float(np.abs(self.model.mean(1) - self.true).mean()),
            "reward": float(np.abs(reward).mean()),
            "dynamics": float(np.abs(dynamics).mean()),
        }

    def reward_map(self, dataset: Mapping[str, np.ndarray] | None = None, bins_per_cell: int = 5) -> RewardErrorMap:
        """Where in the maze the learned reward is wrong, along the simulator's trajectories.

        Args:
            dataset: the model's training data; its ``next_observations`` (where each of its
                rewards was paid) give the data visits per patch. None: no visit counts.
            bins_per_cell: patches per maze cell and axis (5: 0.2 m patches).

        Returns:
            A :class:`RewardErrorMap`.

        Raises:
            ValueError: for a locomotion environment (no positions to map).
        """
        from ..datasets.coverage import visitation_histogram

        if self.step_xy is None or self.step_reward is None or self.step_learned_reward is None:
            raise ValueError(f"a reward map needs a maze; {self.env_name!r} has no positions to map")
        bins_per_cell = int(bins_per_cell)
        if bins_per_cell < 1:
            raise ValueError(f"bins_per_cell must be a positive integer, got {bins_per_cell!r}")
        ok = np.isfinite(self.step_reward)
        xy = self.step_xy[ok]
        err = self.step_learned_reward[ok] - self.step_reward[ok]
        steps, extent = visitation_histogram({"observations": xy}, self.env_name, bins_per_cell)
        error, _ = visitation_histogram({"observations": xy}, self.env_name, bins_per_cell, weights=err)
        abs_error, _ = visitation_histogram({"observations": xy}, self.env_name, bins_per_cell, weights=np.abs(err))
        data = None
        if dataset is not None:
            positions = {"observations": np.asarray(dataset["next_observations"])}
            data, _ = visitation_histogram(positions, self.env_name, bins_per_cell)
        return RewardErrorMap(self.env_name, extent, steps, error, abs_error, data)

    def plot(self, fig: Figure | None = None) -> Figure:
        """Value error by horizon per variant, open-loop error by step (:func:`opcc_edu.plotting.plot_value_error`)."""
        return plot_value_error(self, fig)


def decompose_value_error(
    model: DynamicsEnsemble,
    queries: QuerySet,
    policies: Sequence[Any] | None = None,
    dataset: Mapping[str, np.ndarray] | None = None,
    holdout: np.ndarray | None = None,
    seed: int = 0,
    progress: bool = False,
) -> ValueErrorDecomposition:
    """Split the ensemble's value error on ``queries`` into dynamics and reward parts.

    Args:
        model: a trained ensemble (termination and clipping as configured).
        queries: labelled queries (their simulator states are replayed).
        policies: the query policies (None: :func:`opcc_edu.policies.load_policies`).
        dataset: the model's training dataset, for the one-step error on its held-out split.
        holdout: rows of ``dataset`` to score (default: :func:`holdout_indices` with the
            training defaults and ``seed``).
        seed: rollout seed (and the training seed the held-out split is drawn with).
        progress: show progress bars.

    Returns:
        A :class:`ValueErrorDecomposition`.
    """
    import torch

    from ..envs import get_spec
    from ..simulate.values import simulate_trajectories

    if policies is None:
        from ..queries import query_policies

        policies = query_policies(queries)
    spec = get_spec(queries.env_name)
    n = len(queries)
    if n == 0:
        raise ValueError("queries is empty; at least one query is needed")
    values_a, values_b = estimate_values(model, queries, policies, seed=seed, progress=progress)
    estimate = np.concatenate([values_a, values_b])
    states = np.concatenate([queries.state_a, queries.state_b])
    obs = np.concatenate([queries.obs_a, queries.obs_b]).astype(np.float32)
    first = np.concatenate([queries.action_a, queries.action_b])
    level = np.concatenate([queries.policy_a, queries.policy_b]).astype(np.int64)
    horizon = np.concatenate([queries.horizon, queries.horizon])
    gamma = np.concatenate([queries.gamma, queries.gamma])
    if not np.all(gamma == 1.0):
        raise ValueError("decompose_value_error supports undiscounted queries (gamma = 1) only")

    trajectories = simulate_trajectories(queries.env_name, states, policies, level - 1, horizon, first, progress)
    valid = trajectories.valid
    rows, steps = valid.shape
    m = model.ensemble_size
    flat_obs = np.nan_to_num(trajectories.observations[:, :-1]).reshape(-1, spec.obs_dim).astype(np.float32)
    flat_act = np.nan_to_num(trajectories.actions).reshape(-1, spec.act_dim).astype(np.float32)
    reward = np.empty((m, rows * steps))
    with torch.no_grad():
        for s in range(0, len(flat_obs), 8192):
            o = torch.as_tensor(flat_obs[s : s + 8192], device=model.device).expand(m, -1, -1)
            a = torch.as_tensor(flat_act[s : s + 8192], device=model.device).expand(m, -1, -1)
            r = model.predict_mean(o, a)[..., -1]
            if model.spec.clip != "none":
                r = r.clamp(model.reward_low, model.reward_high)
            reward[:, s : s + 8192] = r.cpu().double().numpy()
    reward = reward.reshape(m, rows, steps)
    learned_on_true = np.where(valid[None], reward, 0.0).sum(-1).T
    step_maps: dict[str, np.ndarray] = {}
    if spec.is_maze:
        # The maze reward is paid on the position after the step; keep the error step by step.
        step_maps = {
            "step_xy": np.where(valid[..., None], trajectories.observations[:, 1:, :2], np.nan),
            "step_reward": np.where(valid, trajectories.rewards, np.nan),
            "step_learned_reward": np.where(valid, reward.mean(0), np.nan),
        }

    true_on_model = None
    if spec.is_maze:
        true_on_model = rollout_values(
            _with_true_reward(model), policies, obs, level - 1, horizon, first, gamma, seed=seed, progress=progress
        )[..., 0]

    true_steps = valid.sum(1).astype(np.int64)
    true_termination = None
    if spec.termination != "none" and model.spec.termination != "learned":
        # The model's dynamics and reward, the simulator's termination: no model rule stops a
        # rollout, and each side runs exactly as many steps as the simulator's did.
        true_termination = rollout_values(
            _with_spec(model, termination="none"),
            policies,
            obs,
            level - 1,
            np.maximum(true_steps, 1),
            first,
            gamma,
            seed=seed,
            progress=progress,
        )[..., 0]

    open_loop: dict[int, float] = {}
    with torch.no_grad():
        state = torch.as_tensor(trajectories.observations[:, 0], dtype=torch.float32, device=model.device)
        state = state.expand(m, -1, -1).contiguous()
        generator = torch.Generator(device=model.device).manual_seed(int(seed))
        for t in range(steps):
            action = torch.as_tensor(np.nan_to_num(trajectories.actions[:, t]), device=model.device)
            state, _, _ = model.step(state, action.expand(m, -1, -1), generator)
            if t + 1 in OPEN_LOOP_STEPS and valid[:, t].any():
                ok = valid[:, t]
                mean = state.mean(0).cpu().double().numpy()
                open_loop[t + 1] = float(np.abs(mean[ok] - trajectories.observations[ok, t + 1]).mean())

    one_step = None
    if dataset is not None:
        index = holdout_indices(len(dataset["observations"]), seed) if holdout is None else holdout
        one_step = one_step_errors(model, dataset, index)

    return ValueErrorDecomposition(
        env_name=queries.env_name,
        horizon=horizon,
        same_state=np.concatenate([queries.same_state, queries.same_state]),
        target=np.asarray(queries.target, dtype=np.int64),
        true=np.concatenate([queries.value_a, queries.value_b]).astype(np.float64),
        model=estimate,
        model_reward_true_states=learned_on_true,
        true_reward_model_states=true_on_model,
        one_step=one_step,
        open_loop=open_loop,
        model_true_termination=true_termination,
        true_steps=true_steps,
        **step_maps,
    )
