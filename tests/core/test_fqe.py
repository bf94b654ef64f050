"""Bootstrapped finite-horizon FQE: exact values on a tabular MDP, terminals, members, seeds, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from opcc_edu.baselines.fqe import FQEConfig, fqe_values, train_fqe
from opcc_edu.mdp import TabularMDP, q_value

torch.set_num_threads(1)
S, K, H = 4, 2, 4
NEXT = np.array([[1, 2], [3, 0], [0, 3], [2, 1]])  # deterministic successor of (s, a)
REWARD = np.array([[0.3, 0.9], [0.1, 0.5], [0.8, 0.2], [0.6, 0.4]])
TERMINAL = (0, 1)  # the transition (s=0, a=1) ends the episode
POLICIES = [np.array([0, 1, 0, 1]), np.array([1, 1, 0, 0])]


class TablePolicy(nn.Module):
    """A deterministic tabular policy on one-hot observations: one-hot action of table[s]."""

    def __init__(self, table: np.ndarray):
        super().__init__()
        self.register_buffer("choice", torch.as_tensor(np.eye(K, dtype=np.float32)[table]))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return obs[..., : self.choice.shape[0]] @ self.choice


def one_hot_dataset(copies: int = 1) -> dict[str, np.ndarray]:
    """Every (s, a) once (one-hot features), its successor, reward and terminal flag."""
    s, a = np.meshgrid(np.arange(S), np.arange(K), indexing="ij")
    s, a = np.tile(s.ravel(), copies), np.tile(a.ravel(), copies)
    eye_s, eye_a = np.eye(S, dtype=np.float32), np.eye(K, dtype=np.float32)
    return {
        "observations": eye_s[s],
        "actions": eye_a[a],
        "rewards": REWARD[s, a].astype(np.float32),
        "next_observations": eye_s[NEXT[s, a]],
        "terminals": (s == TERMINAL[0]) & (a == TERMINAL[1]),
    }


def exact_mdp() -> TabularMDP:
    """The same MDP with an absorbing zero-reward state S where the terminal transition goes."""
    transitions = np.zeros((S + 1, K, S + 1))
    for s in range(S):
        for a in range(K):
            transitions[s, a, S if (s, a) == TERMINAL else NEXT[s, a]] = 1.0
    transitions[S, :, S] = 1.0
    return TabularMDP(transitions, np.vstack([REWARD, np.zeros(K)]))


def all_q(model) -> np.ndarray:
    """(E, S, K, H) FQE Q-values of every state and action."""
    obs = torch.as_tensor(np.repeat(np.eye(S, dtype=np.float32), K, axis=0))
    act = torch.as_tensor(np.tile(np.eye(K, dtype=np.float32), (S, 1)))
    with torch.no_grad():
        return model.q_values(obs, act).numpy().reshape(-1, S, K, H)


def test_fqe_recovers_exact_finite_horizon_values_with_terminals():
    config = FQEConfig(
        ensemble_size=1, hidden_sizes=(128,), train_steps=1500, batch_size=S * K, lr=3e-3, bootstrap=False
    )
    model = train_fqe(one_hot_dataset(), [TablePolicy(p) for p in POLICIES], H, config, progress=False, device="cpu")
    q = all_q(model)
    mdp = exact_mdp()
    for p, table in enumerate(POLICIES):
        policy = np.append(table, 0)  # any action in the absorbing state
        for h in range(1, H + 1):
            exact = q_value(mdp, policy, h)[:S]
            np.testing.assert_allclose(q[p, :, :, h - 1], exact, atol=1e-3, err_msg=f"policy {p}, horizon {h}")
    # the terminal matters: without it the value of (0, 1) at h = 2 would add the successor's reward
    assert q[0, 0, 1, 1] == pytest.approx(REWARD[0, 1], abs=1e-3)


def test_members_differ_and_a_seed_repeats_itself():
    config = FQEConfig(ensemble_size=3, hidden_sizes=(16,), train_steps=40, batch_size=8, seed=7)
    policies = [TablePolicy(p) for p in POLICIES]
    data = one_hot_dataset(copies=3)
    first = all_q(train_fqe(data, policies, H, config, progress=False, device="cpu"))
    again = all_q(train_fqe(data, policies, H, config, progress=False, device="cpu"))
    np.testing.assert_array_equal(first, again)
    assert first.shape == (2 * 3, S, K, H)
    spread = first.reshape(2, 3, S, K, H).std(axis=1)
    assert (spread > 1e-4).mean() > 0.9  # bootstrap and initialisation make members differ
    other = all_q(train_fqe(data, policies, H, FQEConfig(**{**config.to_dict(), "seed": 8}), progress=False))
    assert not np.array_equal(first, other)


def test_one_network_per_policy_and_member():
    config = FQEConfig(ensemble_size=2, hidden_sizes=(8,), train_steps=3, batch_size=4)
    model = train_fqe(one_hot_dataset(), [TablePolicy(p) for p in POLICIES], H, config, progress=False)
    assert model.network.ensemble_size == 4 and model.n_policies == 2 and model.max_horizon == H
    assert model.info["samples_per_second"] > 0


@pytest.fixture(scope="module")
def hopper_queries():
    from opcc_edu.queries import load_queries

    return load_queries("hopper", "paper").select(np.arange(40))


def random_dataset(d: int = 11, a: int = 3, t: int = 64) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "observations": rng.normal(size=(t, d)).astype(np.float32),
        "actions": rng.uniform(-1, 1, (t, a)).astype(np.float32),
        "rewards": rng.normal(size=t).astype(np.float32),
        "next_observations": rng.normal(size=(t, d)).astype(np.float32),
        "terminals": np.zeros(t, bool),
    }


class Zero(nn.Module):
    def __init__(self, a: int = 3):
        super().__init__()
        self.a = a

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.zeros(obs.shape[0], self.a)


def test_fqe_answers_queries_with_member_values(hopper_queries):
    config = FQEConfig(ensemble_size=3, hidden_sizes=(8,), train_steps=2, batch_size=8)
    model = train_fqe(random_dataset(), [Zero()] * 4, 50, config, progress=False)
    values_a, values_b = fqe_values(model, hopper_queries)
    assert values_a.shape == values_b.shape == (40, 3) and np.isfinite(values_a).all()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: train_fqe(random_dataset(), [Zero()], 0, progress=False), "max_horizon must be an integer >= 1"),
        (lambda: train_fqe(random_dataset(), [], 5, progress=False), "policies must hold at least one policy"),
        (
            lambda: train_fqe({**random_dataset(), "actions": np.zeros((5, 3))}, [Zero()], 5, progress=False),
            r"dataset\['actions'\] must have shape \(T=64",
        ),
        (
            lambda: train_fqe({k: v for k, v in random_dataset().items() if k != "rewards"}, [Zero()], 5),
            r"dataset is missing \['rewards'\]",
        ),
        (lambda: train_fqe(random_dataset(), [Zero(a=2)], 5, progress=False), "the policies' actions have size 2"),
        (lambda: train_fqe(random_dataset(), [Zero()], 5, gamma=0.0, progress=False), r"gamma must be a number in"),
        (lambda: FQEConfig(ensemble_size=0), "ensemble_size must be an integer >= 1"),
    ],
)
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_queries_outside_what_was_trained_are_refused(hopper_queries):
    config = FQEConfig(ensemble_size=2, hidden_sizes=(8,), train_steps=1, batch_size=4)
    one_policy = train_fqe(random_dataset(), [Zero()], 50, config, progress=False)
    with pytest.raises(ValueError, match=r"query policy levels must lie in \[1, 1\]"):
        fqe_values(one_policy, hopper_queries)
    short = train_fqe(random_dataset(), [Zero()] * 4, 5, config, progress=False)
    with pytest.raises(ValueError, match=r"query horizons must lie in \[1, 5\]"):
        fqe_values(short, hopper_queries)
    discounted = train_fqe(random_dataset(), [Zero()] * 4, 50, config, gamma=0.9, progress=False)
    with pytest.raises(ValueError, match="discount"):
        fqe_values(discounted, hopper_queries)


def maze_dataset(t: int = 256) -> dict[str, np.ndarray]:
    """Transitions with the mazes' sizes (D = 4, A = 2): reward = the next x coordinate."""
    rng = np.random.default_rng(1)
    obs = rng.uniform(-1, 1, (t, 4)).astype(np.float32)
    act = rng.uniform(-1, 1, (t, 2)).astype(np.float32)
    nxt = obs.copy()
    nxt[:, :2] += 0.1 * act
    nxt[:, 2:] = act
    return {
        "observations": obs,
        "actions": act,
        "rewards": nxt[:, 0].copy(),
        "next_observations": nxt,
        "terminals": np.zeros(t, bool),
        "timeouts": np.zeros(t, bool),
    }


@pytest.fixture
def small_maze(monkeypatch):
    """The maze's shipped queries and policies, a small synthetic dataset in place of the real one."""
    import opcc_edu.datasets

    monkeypatch.setattr(
        opcc_edu.datasets, "load_dataset", lambda env, name=None, size=None, seed=0, progress=True: maze_dataset()
    )


def test_opcc_edu_run_with_the_fqe_baseline(small_maze, tmp_path, capsys):
    import json

    from opcc_edu.cli import main

    argv = ["run", "maze2d-umaze", "--baseline", "fqe", "--ensemble-size", "3", "--train-steps", "4"]
    assert main([*argv, "--out", str(tmp_path), "--quiet", "--seed", "2"]) == 0
    text = capsys.readouterr().out
    assert "fitted Q evaluation" in text and "3 bootstrap members per policy" in text and "rank corr" in text
    summary = json.loads((tmp_path / "maze2d-umaze" / "1m" / "fqe" / "results.json").read_text())
    assert summary["baseline"] == "fqe" and summary["ensemble_size"] == 3
    assert summary["config"]["train_steps"] == 4 and summary["config"]["seed"] == 2
    assert set(summary["metrics"]) == {"ev", "pci", "upci"}
    assert summary["predictor_metrics"]["all"]["n_sides"] > 0


def test_the_ablation_runner_answers_with_fqe_on_the_same_runs(small_maze, tmp_path):
    from opcc_edu.lab.experiments import RunSpec, fqe_answer_function
    from opcc_edu.lab.experiments.runner import results_dir

    answer = fqe_answer_function("tiny")
    overrides = {"ensemble_size": 2, "train_steps": 3, "batch_size": 16, "prior_scale": 5.0}
    run = RunSpec(environment="maze2d-umaze", dataset="1m", seed=1, overrides=overrides)
    values = answer(run, progress=False)
    assert values.values_a.shape[1] == 2 and values.info["baseline"] == "fqe"
    assert values.info["ignored_overrides"] == ["prior_scale"]
    assert results_dir(tmp_path, "tiny", "paper", "fqe").name == "tiny-fqe"


def test_compare_fqe_writes_each_environment_and_resumes(tmp_path, monkeypatch, capsys):
    """scripts/compare_fqe.py writes <env>.json per environment, skips one already written, --force redoes it."""
    import importlib.util
    import json
    import types
    from pathlib import Path

    import opcc_edu.baselines
    import opcc_edu.baselines.fqe
    from opcc_edu import get_profile

    spec = importlib.util.spec_from_file_location(
        "compare_fqe", Path(__file__).resolve().parents[2] / "scripts" / "compare_fqe.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    calls = []

    def fake(baseline):
        def answer(env, config=None, progress=True):
            calls.append((baseline, env, config.seed))
            return types.SimpleNamespace(
                summary=lambda: {"baseline": baseline, "env_name": env},
                metrics={"pci": {"all": {"loss": 0.25}}},
                train_seconds=1.0,
                cache_hit=False,
            )

        return answer

    monkeypatch.setattr(opcc_edu.baselines, "answer_queries", fake("ensemble"))
    monkeypatch.setattr(opcc_edu.baselines.fqe, "answer_queries_fqe", fake("fqe"))
    done = tmp_path / "maze2d-open.json"
    done.write_text("{}\n")
    assert script.main(["maze2d-open", "maze2d-umaze", "--out", str(tmp_path), "--seed", "3"]) == 0
    assert done.read_text() == "{}\n"  # left as it was
    assert calls == [("ensemble", "maze2d-umaze", 3), ("fqe", "maze2d-umaze", 3)]
    record = json.loads((tmp_path / "maze2d-umaze.json").read_text())
    assert record["seed"] == 3 and record["profile"] == get_profile().name
    assert record["ensemble"]["baseline"] == "ensemble" and record["fqe"]["env_name"] == "maze2d-umaze"
    assert "maze2d-open: " in capsys.readouterr().out
    calls.clear()
    assert script.main(["maze2d-open", "--out", str(tmp_path), "--force"]) == 0
    assert calls == [("ensemble", "maze2d-open", 0), ("fqe", "maze2d-open", 0)]
    assert json.loads(done.read_text())["fqe"]["env_name"] == "maze2d-open"
