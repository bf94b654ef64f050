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

Besides the values it measures prediction error directly: the **one-step** error of each
observation dimension and of the reward on the held-out transitions of the model's dataset
(the split :func:`opcc_edu.dynamics.train_dynamics` kept out), and the **h-step** error of
an open-loop rollout that replays the simulator's actions along the query trajectories.

Every variant is also turned into EV answers, so the table reads directly as "the PCQ loss
the ensemble would have with a perfect reward / perfect dynamics".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..names import ALL_HORIZONS

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from ..dynamics import DynamicsEnsemble
    from ..queries import QuerySet

__all__ = ["ValueErrorDecomposition", "decompose_value_error", "holdout_indices", "one_step_errors"]

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


def _with_true_reward(model: DynamicsEnsemble) -> DynamicsEnsemble:
    """The same members in predefined-reward mode: a maze model's steps then pay the maze's
    true reward on its own predicted states (its reward column is learned but not used)."""
    from ..dynamics import build_ensemble

    copy = build_ensemble(dataclasses.replace(model.spec, reward="predefined"), init=False).to(model.device)
    copy.load_state_dict(model.state_dict())
    return copy.eval()


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

    # ------------------------------------------------------------------------------------
    def _variants(self) -> dict[str, np.ndarray]:
        """(2N, M) member values of each variant."""
        out = {
            "model (learned dynamics + reward)": self.model,
            "learned reward on true states": self.model_reward_true_states,
        }
        if self.true_reward_model_states is not None:
            out["true reward on model states"] = self.true_reward_model_states
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
        from ..confidence import compute_confidence

        rows = []
        for name, members in self._variants().items():
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

    def plot(self, fig: Figure | None = None) -> Figure:
        """Two panels: value error by horizon per variant, and open-loop error by step."""
        import matplotlib.pyplot as plt

        fig = fig or plt.figure(figsize=(10, 3.6), layout="constrained")
        left, right = fig.subplots(1, 2)
        horizons = sorted(set(self.horizon.tolist()))
        for name, members in self._variants().items():
            mae = [np.abs(members.mean(1) - self.true)[self.horizon == h].mean() for h in horizons]
            left.plot(horizons, mae, marker="o", label=name)
        left.set_xlabel("horizon h")
        left.set_ylabel("mean |value error|")
        left.set_title(f"{self.env_name}: value error by source")
        left.legend(fontsize=8)
        steps = sorted(self.open_loop)
        right.plot(steps, [self.open_loop[s] for s in steps], marker="o", color="C3")
        right.set_xlabel("steps replayed open loop")
        right.set_ylabel("mean |observation error|")
        right.set_title("prediction error along true trajectories")
        return fig


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

    from ..dynamics import rollout_values
    from ..envs import get_spec
    from ..simulate.values import simulate_trajectories
    from .estimate import estimate_values

    if policies is None:
        from ..policies import load_policies

        policies = load_policies(queries.env_name)
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
            if model.spec.clip:
                r = r.clamp(model.reward_low, model.reward_high)
            reward[:, s : s + 8192] = r.cpu().double().numpy()
    reward = reward.reshape(m, rows, steps)
    learned_on_true = np.where(valid[None], reward, 0.0).sum(-1).T

    true_on_model = None
    if spec.is_maze:
        true_on_model = rollout_values(
            _with_true_reward(model), policies, obs, level - 1, horizon, first, gamma, seed=seed, progress=progress
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
    )
