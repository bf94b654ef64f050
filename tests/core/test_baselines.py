"""End-to-end tests of the model-based baselines on a toy world with known values.

The toy world has the maze environments' sizes (D = 4, A = 2): the ball moves by 0.1 x the
action, its velocity becomes the action, and the reward of a step is the new x coordinate.
Its policies push in constant directions, so true values are exact sums and a trained
ensemble should rank most queries correctly.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from torch import nn

from opcc_edu import baselines
from opcc_edu.baselines import Answers, EnsembleConfig, answer_queries, estimate_values, get_or_train_ensemble
from opcc_edu.queries import QuerySet

torch.set_num_threads(1)
ENV = "maze2d-umaze"
DIRECTIONS = np.array([[0.9, 0.0], [-0.9, 0.0], [0.0, 0.9], [0.3, 0.0]])


def toy_step(obs: np.ndarray, act: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    nxt = obs.copy()
    nxt[:, :2] += 0.1 * act
    nxt[:, 2:] = act
    return nxt, nxt[:, 0]


def toy_policies() -> list[nn.Module]:
    out = []
    for direction in DIRECTIONS:
        layer = nn.Linear(4, 2)
        with torch.no_grad():
            layer.weight.zero_()
            layer.bias.copy_(torch.atanh(torch.as_tensor(direction, dtype=torch.float32)))
        out.append(nn.Sequential(layer, nn.Tanh()).eval())
    return out


def toy_dataset(t: int = 4000, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    obs = np.concatenate([rng.uniform(-2, 2, (t, 2)), rng.uniform(-1, 1, (t, 2))], 1).astype(np.float32)
    act = rng.uniform(-1, 1, (t, 2)).astype(np.float32)
    nxt, rew = toy_step(obs.astype(np.float64), act.astype(np.float64))
    return {
        "observations": obs,
        "actions": act,
        "next_observations": nxt.astype(np.float32),
        "rewards": rew.astype(np.float32),
        "terminals": np.zeros(t, bool),
        "timeouts": np.zeros(t, bool),
    }


def true_value(obs, first, level, horizon):
    x = obs[None].astype(np.float64)
    total = 0.0
    for t in range(horizon):
        act = first[None] if t == 0 else DIRECTIONS[level - 1][None]
        x, r = toy_step(x, act)
        total += float(r[0])
    return total


def toy_queries(n: int = 60, seed: int = 1) -> QuerySet:
    rng = np.random.default_rng(seed)
    rows = []
    while len(rows) < n:
        obs_a = np.concatenate([rng.uniform(-1.5, 1.5, 2), [0.0, 0.0]]).astype(np.float32)
        same = rng.random() < 0.5
        obs_b = obs_a.copy() if same else np.concatenate([rng.uniform(-1.5, 1.5, 2), [0.0, 0.0]]).astype(np.float32)
        act_a, act_b = rng.uniform(-1, 1, 2).astype(np.float32), rng.uniform(-1, 1, 2).astype(np.float32)
        pa, pb = rng.integers(1, 5, 2)
        h = int(rng.choice([3, 6]))
        va, vb = true_value(obs_a, act_a, pa, h), true_value(obs_b, act_b, pb, h)
        if abs(va - vb) > 0.3:  # drop ambiguous queries, as the benchmark does
            rows.append((obs_a, obs_b, act_a, act_b, pa, pb, h, va, vb, same))
    cols = list(zip(*rows, strict=True))
    va, vb = np.array(cols[7]), np.array(cols[8])
    states_a = np.stack(cols[0]).astype(np.float64)
    states_b = np.stack(cols[1]).astype(np.float64)
    return QuerySet(
        env_name=ENV,
        obs_a=np.stack(cols[0]),
        obs_b=np.stack(cols[1]),
        action_a=np.stack(cols[2]),
        action_b=np.stack(cols[3]),
        policy_a=np.array(cols[4]),
        policy_b=np.array(cols[5]),
        horizon=np.array(cols[6]),
        gamma=np.ones(n),
        target=(va < vb).astype(np.int8),
        value_a=va,
        value_b=vb,
        returns_a=va[:, None],
        returns_b=vb[:, None],
        state_a=states_a,
        state_b=states_b,
        same_state=np.array(cols[9]),
        metadata={"source": "toy"},
    ).validate()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPCC_EDU_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def small_config(**overrides) -> EnsembleConfig:
    base = dict(ensemble_size=5, hidden_sizes=(32, 32), train_steps=400, batch_size=128, lr=3e-3, seed=0)
    return EnsembleConfig(**{**base, **overrides})


# --------------------------------------------------------------------------------------------
def test_config_validates_and_round_trips():
    with pytest.raises(ValueError, match="model_type"):
        EnsembleConfig(model_type="gp")
    with pytest.raises(ValueError, match="termination"):
        EnsembleConfig(termination="maybe")
    with pytest.raises(ValueError, match="prior_scale"):
        EnsembleConfig(prior_scale=-2)
    with pytest.raises(ValueError, match="stochastic"):
        EnsembleConfig(stochastic="yes")
    with pytest.raises(ValueError, match="unknown EnsembleConfig field"):
        EnsembleConfig.from_profile("tiny", ensembles=3)
    config = EnsembleConfig.from_profile("tiny", prior_scale=5.0)
    assert config.ensemble_size == 10 and config.hidden_sizes == (64, 64) and config.prior_scale == 5.0
    assert EnsembleConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert "mixture" not in config.training_fields()


def test_cache_trains_once_and_ignores_rollout_only_fields(cache):
    data = toy_dataset(500)
    config = small_config(train_steps=20)
    first = get_or_train_ensemble(ENV, "toy", config, dataset=data, progress=False)
    assert not first.info["cache_hit"] and (cache / "ensembles" / ENV / "toy").is_dir()
    again = get_or_train_ensemble(ENV, "toy", dataclasses.replace(config, mixture=True), dataset=data, progress=False)
    assert again.info["cache_hit"]
    for (key, x), (_, y) in zip(first.state_dict().items(), again.state_dict().items(), strict=True):
        assert torch.equal(x, y), key
    other = get_or_train_ensemble(ENV, "toy", dataclasses.replace(config, seed=1), dataset=data, progress=False)
    assert not other.info["cache_hit"]
    # a damaged file is detected by its checksum and replaced
    path = first.info["path"]
    with open(path, "r+b") as handle:
        handle.seek(100)
        handle.write(b"\x00\x01\x02")
    with pytest.warns(UserWarning, match="unusable"):
        repaired = get_or_train_ensemble(ENV, "toy", config, dataset=data, progress=False)
    assert not repaired.info["cache_hit"]


@pytest.fixture(scope="module")
def trained():
    config = small_config()
    model, history = baselines.train_ensemble(toy_dataset(), config, ENV, progress=False)
    return config, model, history


def test_values_track_the_true_values(trained):
    config, model, history = trained
    queries = toy_queries()
    va, vb = estimate_values(model, queries, toy_policies(), progress=False)
    assert va.shape == vb.shape == (len(queries), config.ensemble_size)
    truth = np.concatenate([queries.value_a, queries.value_b])
    mean = np.concatenate([va.mean(1), vb.mean(1)])
    assert np.corrcoef(truth, mean)[0, 1] > 0.95
    assert np.median(np.abs(truth - mean)) < 0.3
    runs = estimate_values(model, queries, toy_policies(), runs=2, reduce_runs=False, progress=False)[0]
    assert runs.shape == (len(queries), config.ensemble_size, 2)
    np.testing.assert_allclose(runs[..., 0], runs[..., 1], rtol=1e-5, atol=1e-5)  # deterministic model


def test_answer_queries_end_to_end(trained, tmp_path):
    config, model, _ = trained
    queries = toy_queries()
    answers = answer_queries(ENV, "toy", config, queries=queries, policies=toy_policies(), model=model, progress=False)
    assert isinstance(answers, Answers)
    assert set(answers.metrics) == {"ev", "pci", "upci"}
    assert set(answers.metrics["ev"]) == {"all", "3", "6"}
    for name in ("ev", "pci", "upci"):
        overall = answers.metrics[name]["all"]
        assert {"aurcc", "rpp", "cr_k", "loss", "n"} <= set(overall)
        assert overall["n"] == len(queries)
        assert overall["loss"] < 0.2  # the toy world is easy: most answers are right
        assert overall["aurcc"] <= overall["loss"] + 1e-12 or overall["aurcc"] < 0.2
        assert answers.predictions[name].shape == answers.confidences[name].shape == (len(queries),)
    votes = (answers.values_a < answers.values_b).mean(1)  # EV is the members' majority vote
    clear = votes != 0.5
    np.testing.assert_array_equal(answers.predictions["ev"][clear], (votes[clear] > 0.5).astype(np.int8))
    table = answers.table()
    assert len(table) == 3 * 3 and list(table["horizon"].unique()) == ["3", "6", "all"]
    paths = answers.save(tmp_path / "out")
    summary = json.loads(paths["json"].read_text())
    assert summary["metrics"]["ev"]["all"]["aurcc"] == pytest.approx(answers.metrics["ev"]["all"]["aurcc"])
    assert summary["config"]["ensemble_size"] == config.ensemble_size


def test_member_prefix_rescoring(trained):
    config, model, _ = trained
    queries = toy_queries()
    answers = answer_queries(ENV, "toy", config, queries=queries, policies=toy_policies(), model=model, progress=False)
    two = answers.with_members(2)
    assert two.values_a.shape == (len(queries), 2) and two.config.ensemble_size == 2
    from opcc_edu.confidence import compute_confidence

    prediction, confidence = compute_confidence("pci", answers.values_a[:, :2], answers.values_b[:, :2])
    np.testing.assert_array_equal(two.predictions["pci"], prediction)
    np.testing.assert_allclose(two.confidences["pci"], confidence)
    # the prefix of a trained ensemble is the smaller ensemble: same values from its own rollout
    prefix_values = estimate_values(model.select_members(slice(0, 2)), queries, toy_policies(), progress=False)[0]
    np.testing.assert_allclose(prefix_values, answers.values_a[:, :2], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="at most"):
        answers.with_members(6)


def test_select_profile_queries_keeps_horizon_shares():
    queries = toy_queries(60)
    sub = baselines.select_profile_queries(queries, 20)
    assert len(sub) == 20
    share = np.mean(queries.horizon == 3)
    assert abs(np.mean(sub.horizon == 3) - share) <= 1 / 20 + 1e-9
    assert len(baselines.select_profile_queries(queries, 0)) == 60
    again = baselines.select_profile_queries(queries, 20)
    np.testing.assert_array_equal(sub.obs_a, again.obs_a)


def test_run_end_to_end_prints_and_writes(cache, tmp_path, monkeypatch):
    """The job behind `opcc-edu run` on the toy world: trains, answers, prints metrics, writes JSON and a plot."""
    import opcc_edu.datasets
    import opcc_edu.policies
    import opcc_edu.queries

    monkeypatch.setattr(opcc_edu.queries, "load_queries", lambda env, recipe="paper": toy_queries())
    monkeypatch.setattr(opcc_edu.policies, "load_policies", lambda env, assets_dir=None: toy_policies())
    monkeypatch.setattr(
        opcc_edu.datasets, "load_dataset", lambda env, name, size=None, seed=0, progress=True: toy_dataset(1000)
    )
    out = tmp_path / "runs"
    lines: list[str] = []
    config = EnsembleConfig.from_profile("tiny", ensemble_size=3, train_steps=30)
    answers, paths = baselines.run_end_to_end(ENV, "1k", out, config, progress=False, echo=lines.append)
    assert {"json", "npz", "plot"} <= set(paths) and paths["plot"].suffix == ".png" and paths["plot"].exists()
    summary = json.loads(paths["json"].read_text())
    assert summary["env_name"] == ENV and summary["ensemble_size"] == 3
    assert set(summary["metrics"]) == {"ev", "pci", "upci"}
    text = "\n".join(lines)
    assert "AURCC" in text and "U-PCI" in text and "trained in" in text
    assert f"{answers.metrics['ev']['all']['aurcc']:>8.4f}" in text
    again, _ = baselines.run_end_to_end(ENV, "1k", out, config, progress=False, echo=lines.append)
    assert again.cache_hit and again.metrics == answers.metrics


def test_answers_metrics_are_the_scoring_functions(trained):
    from opcc_edu.scoring import score_values

    config, model, _ = trained
    queries = toy_queries()
    answers = answer_queries(ENV, "toy", config, queries=queries, policies=toy_policies(), model=model, progress=False)
    scores = score_values(answers.values_a, answers.values_b, queries.target, queries.horizon, k=answers.k)
    assert answers.metrics == scores.table()
    for name in scores.predictions:
        np.testing.assert_array_equal(answers.predictions[name], scores.predictions[name])
    one = answers.with_members(1)
    assert set(one.metrics) == {"ev"}  # PCI and U-PCI need two members
    ax = answers.plot_risk_coverage()
    assert len(ax.get_lines()) == 3 and "AURCC" in ax.get_legend().get_texts()[0].get_text()
    import matplotlib.pyplot as plt

    plt.close(ax.figure)


# --------------------------------------------------------------------------------------------
# One source of truth for the default baseline
# --------------------------------------------------------------------------------------------
def test_baseline_defaults_are_read_from_the_config():
    from opcc_edu.baselines.config import BASELINE_DEFAULTS

    default = EnsembleConfig()
    assert BASELINE_DEFAULTS == {name: getattr(default, name) for name in BASELINE_DEFAULTS}
    assert set(BASELINE_DEFAULTS) == {
        "model_type",
        "stochastic",
        "prior_scale",
        "normalize",
        "clip",
        "termination",
        "reward",
        "mixture",
    }
    spec = EnsembleConfig(prior_scale=2.0, stochastic=True).model_spec("hopper")
    for name in ("ensemble_size", "hidden_sizes", "model_type", "normalize", "clip", "termination"):
        assert getattr(spec, name) == getattr(default, name), name
    assert spec.prior_scale == 2.0 and spec.stochastic and (spec.obs_dim, spec.act_dim) == (11, 3)


def test_a_runs_ensemble_config_is_the_profile_the_defaults_its_overrides_and_its_seed():
    from opcc_edu.lab.experiments import RunSpec, run_ensemble_config

    run = RunSpec("hopper", "medium", 2, {"model_type": "ar", "ar_targets": "all"})
    config = run_ensemble_config(run, "classroom")
    assert (config.ensemble_size, config.hidden_sizes, config.train_steps) == (20, (200, 200, 200), 3000)
    assert (config.model_type, config.ar_targets, config.seed) == ("ar", "all", 2)
    assert config.clip == EnsembleConfig().clip  # a field the run leaves alone keeps its default
    tiny = run_ensemble_config(RunSpec("hopper", "medium", 0, {}), "tiny")
    assert tiny == dataclasses.replace(EnsembleConfig.from_profile("tiny"), seed=0)
    with pytest.raises(ValueError, match=r"no field\(s\) \['depth'\].*valid fields"):
        run_ensemble_config(RunSpec("hopper", "medium", 0, {"depth": 3}), "tiny")


def test_config_module_imports_neither_torch_nor_the_simulator():
    import subprocess
    import sys

    code = (
        "import sys; from opcc_edu.baselines.config import BASELINE_DEFAULTS, EnsembleConfig; "
        "import opcc_edu.baselines; EnsembleConfig(ensemble_size=3); "
        "print(sorted(m for m in ('torch', 'gymnasium', 'mujoco') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


# --------------------------------------------------------------------------------------------
# The cache key names everything the ensemble depends on
# --------------------------------------------------------------------------------------------
def test_cache_key_changes_with_every_part_of_the_dataset_identity(monkeypatch, tmp_path):
    from opcc_edu.baselines.cache import ensemble_cache_key, ensemble_cache_path
    from opcc_edu.datasets import recipes

    config = small_config()
    env = "hopper"

    def path(**changes):
        args = {"env_name": env, "dataset_name": "medium", "config": config, "dataset_size": 5000, "dataset_seed": 0}
        return ensemble_cache_path(**{**args, **changes})

    base = path()
    assert path() == base  # deterministic
    assert path(config=dataclasses.replace(config, mixture=True)) == base  # rollout-only
    variants = {
        "name": path(dataset_name="expert"),
        "size": path(dataset_size=4000),
        "seed": path(dataset_seed=1),
        "config": path(config=dataclasses.replace(config, lr=1e-2)),
        "mixture dataset": path(dataset_name="medium-expert"),
    }
    key = ensemble_cache_key(env, "medium", config, 5000, 0)
    assert key["dataset"]["fingerprint"]["behavior_sha256"] and key["dataset"]["stream"]
    json.dumps(key)  # the explanation is plain JSON
    with monkeypatch.context() as patch:
        patch.setattr(recipes, "DATA_FORMAT_VERSION", recipes.DATA_FORMAT_VERSION + 1)
        variants["generator version"] = path()
    with monkeypatch.context() as patch:
        weights = tmp_path / "medium.safetensors"
        weights.write_bytes(recipes.behavior_weights_path(env, "medium").read_bytes() + b"\0")
        patch.setattr(recipes, "behavior_weights_path", lambda env_name, kind: weights)
        variants["behaviour policy"] = path()
        mixture_changed = path(dataset_name="medium-expert")
    variants["mixture part's behaviour policy"] = mixture_changed
    for what, changed in variants.items():
        assert changed != base, what
    assert len(set(variants.values())) == len(variants)
    assert mixture_changed != variants["mixture dataset"]


def test_given_transitions_are_keyed_by_content(cache):
    from opcc_edu.baselines.cache import ensemble_cache_path

    data = toy_dataset(300)
    config = small_config(train_steps=10)
    base = ensemble_cache_path(ENV, "toy", config, dataset=data)
    assert ensemble_cache_path(ENV, "toy", config, dataset={k: v.copy() for k, v in data.items()}) == base
    changed = dict(data, rewards=data["rewards"] + np.float32(1.0))
    assert ensemble_cache_path(ENV, "toy", config, dataset=changed) != base
    first = get_or_train_ensemble(ENV, "toy", config, dataset=data, progress=False)
    assert not first.info["cache_hit"] and first.info["trained"]["cache_key"]["dataset"]["size"] == 300
    assert not get_or_train_ensemble(ENV, "toy", config, dataset=changed, progress=False).info["cache_hit"]
    assert get_or_train_ensemble(ENV, "toy", config, dataset=data, progress=False).info["cache_hit"]


# --------------------------------------------------------------------------------------------
# Memory is checked before anything is allocated
# --------------------------------------------------------------------------------------------
def test_an_absurd_ensemble_is_refused_before_allocating(cache, monkeypatch):
    import opcc_edu.datasets
    from opcc_edu.dynamics.memory import InsufficientMemoryError

    absurd = small_config(ensemble_size=10**9)
    with pytest.raises(InsufficientMemoryError, match=r"reduce ensemble_size \(now 1000000000\)") as info:
        baselines.train_ensemble(toy_dataset(200), absurd, ENV, progress=False)
    assert isinstance(info.value, MemoryError) and isinstance(info.value, ValueError)
    assert "\n" not in str(info.value)

    def never(*args, **kwargs):
        raise AssertionError("the dataset must not be loaded for a job that cannot fit")

    monkeypatch.setattr(opcc_edu.datasets, "load_dataset", never)
    with pytest.raises(MemoryError, match="ensemble_size"):
        get_or_train_ensemble(ENV, "1k", absurd, progress=False)
