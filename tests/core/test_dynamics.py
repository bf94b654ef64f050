"""Tests of the vectorised dynamics ensembles, their training and batched rollouts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from torch import nn

from opcc_edu.dynamics import (
    AutoregressiveEnsemble,
    EnsembleLinear,
    EnsembleMLP,
    ModelSpec,
    bootstrap_indices,
    build_ensemble,
    load_ensemble,
    rollout_values,
    save_ensemble,
    train_dynamics,
)
from opcc_edu.dynamics.memory import InsufficientMemoryError, training_bytes
from opcc_edu.envs import termination_fn

torch.set_num_threads(1)

# A plain deterministic model: its choices given explicitly.
PLAIN = dict(model_type="ff", stochastic=False, prior_scale=0.0, normalize=True, clip="transitions", termination="none")


def make_spec(env: str, obs_dim: int, act_dim: int, m: int, hidden_sizes=(8,), **choices) -> ModelSpec:
    return ModelSpec(
        env_name=env,
        obs_dim=obs_dim,
        act_dim=act_dim,
        ensemble_size=m,
        hidden_sizes=hidden_sizes,
        **{**PLAIN, **choices},
    )


# --------------------------------------------------------------------------------------------
# Fakes with known dynamics
# --------------------------------------------------------------------------------------------
class LinearEnsemble(nn.Module):
    """Exact linear dynamics per member: x' = a_m x + B u, reward = c . x'."""

    def __init__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray):
        super().__init__()
        self.register_buffer("a", torch.as_tensor(a, dtype=torch.float32)[:, None, None])
        self.register_buffer("b", torch.as_tensor(b, dtype=torch.float32))
        self.register_buffer("c", torch.as_tensor(c, dtype=torch.float32))
        self.ensemble_size, self.obs_dim, self.act_dim = len(a), b.shape[0], b.shape[1]

    @property
    def device(self):
        return self.a.device

    def step(self, obs, act, generator=None):
        nxt = self.a * obs + act @ self.b.T
        return nxt, nxt @ self.c, torch.zeros(nxt.shape[:-1], dtype=torch.bool)


class CounterEnsemble(nn.Module):
    """obs[0] counts steps; member m earns reward m each step; done when the count hits ``stop``
    for member 0 only (and is False again afterwards)."""

    def __init__(self, members: int, stop: int = 3):
        super().__init__()
        self.register_buffer("ids", torch.arange(members, dtype=torch.float32)[:, None])
        self.ensemble_size, self.obs_dim, self.act_dim, self.stop = members, 2, 1, stop

    @property
    def device(self):
        return self.ids.device

    def step(self, obs, act, generator=None):
        nxt = obs.clone()
        nxt[..., 0] += 1
        done = (nxt[..., 0] == self.stop) & (self.ids == 0)
        return nxt, self.ids.expand(-1, obs.shape[1]).clone(), done


def linear_policy(weight: np.ndarray) -> nn.Module:
    layer = nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    with torch.no_grad():
        layer.weight.copy_(torch.as_tensor(weight, dtype=torch.float32))
    return layer


def zero_policy(act_dim: int = 1):
    return lambda obs: torch.zeros(*obs.shape[:-1], act_dim)


def analytic_linear_values(a, b, c, policies, obs, first, pidx, horizon, gamma):
    """V = sum_t gamma^t c . x_{t+1} with x_1 = a x_0 + B u_0, x_{t+1} = (a I + B K) x_t."""
    out = np.zeros((len(obs), len(a)))
    d = b.shape[0]
    for m, am in enumerate(a):
        for i in range(len(obs)):
            k = policies[pidx[i]]
            transition = am * np.eye(d) + b @ k
            x = am * obs[i] + b @ first[i]
            total = 0.0
            for t in range(horizon[i]):
                if t > 0:
                    x = np.linalg.matrix_power(transition, t) @ (am * obs[i] + b @ first[i])
                total += gamma[i] ** t * c @ x
            out[i, m] = total
    return out


# --------------------------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------------------------
def test_ensemble_linear_equals_separate_linear_layers():
    torch.manual_seed(0)
    linears = [nn.Linear(5, 3) for _ in range(4)]
    layer = EnsembleLinear.from_linears(linears)
    x = torch.randn(4, 7, 5)
    expected = torch.stack([lin(x[i]) for i, lin in enumerate(linears)])
    torch.testing.assert_close(layer(x), expected)
    member = layer.member(2)
    torch.testing.assert_close(member.weight, linears[2].weight)
    torch.testing.assert_close(member.bias, linears[2].bias)


def test_ensemble_layer_members_start_different_and_reject_bad_shapes():
    layer = EnsembleLinear(3, 4, 2, generator=torch.Generator().manual_seed(0))
    assert not torch.equal(layer.weight[0], layer.weight[1])
    with pytest.raises(ValueError, match="shape"):
        layer(torch.zeros(2, 5, 4))
    with pytest.raises(ValueError, match="activation"):
        EnsembleMLP(2, 3, (4,), 1, activation="gelu")


def test_ensemble_mlp_equals_per_member_sequential():
    mlp = EnsembleMLP(3, 4, (8, 8), 2, generator=torch.Generator().manual_seed(1))
    x = torch.randn(3, 6, 4)
    for m in range(3):
        seq = nn.Sequential(
            mlp.layers[0].member(m), nn.SiLU(), mlp.layers[1].member(m), nn.SiLU(), mlp.layers[2].member(m)
        )
        torch.testing.assert_close(mlp(x)[m], seq(x[m]))
    with torch.no_grad():  # the in-place activation path must agree with the autograd path
        torch.testing.assert_close(mlp(x), mlp(x.requires_grad_(False)))


# --------------------------------------------------------------------------------------------
# Rollouts
# --------------------------------------------------------------------------------------------
def test_rollouts_reproduce_analytic_values_of_a_linear_system():
    rng = np.random.default_rng(0)
    d, a_dim, n = 3, 2, 12
    a = np.array([0.9, 0.95, 1.0, 0.8])
    b = rng.normal(scale=0.3, size=(d, a_dim))
    c = rng.normal(size=d)
    ks = [rng.normal(scale=0.2, size=(a_dim, d)) for _ in range(3)]
    obs = rng.normal(size=(n, d)).astype(np.float32)
    first = rng.normal(size=(n, a_dim)).astype(np.float32)
    pidx = rng.integers(0, 3, n)
    horizon = rng.integers(1, 9, n)
    gamma = rng.choice([1.0, 0.9], n)
    model = LinearEnsemble(a, b, c)
    values = rollout_values(model, [linear_policy(k) for k in ks], obs, pidx, horizon, first, gamma, progress=False)
    assert values.shape == (n, len(a), 1)
    expected = analytic_linear_values(
        a, b, c, ks, obs.astype(np.float64), first.astype(np.float64), pidx, horizon, gamma
    )
    np.testing.assert_allclose(values[..., 0], expected, rtol=1e-4, atol=1e-4)


def test_termination_stops_reward_accumulation_for_good():
    model = CounterEnsemble(members=3, stop=3)
    obs = np.zeros((2, 2), dtype=np.float32)
    values = rollout_values(model, [zero_policy()], obs, [0, 0], [2, 10], progress=False)[..., 0]
    # member 0 ends at its third transition (that reward counts) even though `done` is False later
    np.testing.assert_allclose(values[:, 0], [0.0, 0.0])
    np.testing.assert_allclose(values[:, 1], [2.0, 10.0])
    np.testing.assert_allclose(values[:, 2], [4.0, 20.0])

    # make member 0's reward visible: shift rewards by one
    class Shifted(CounterEnsemble):
        def step(self, obs, act, generator=None):
            nxt, reward, done = super().step(obs, act, generator)
            return nxt, reward + 1, done

    values = rollout_values(Shifted(3, 3), [zero_policy()], obs, [0, 0], [2, 10], progress=False)[..., 0]
    np.testing.assert_allclose(values[:, 0], [2.0, 3.0])


def test_the_rollout_is_return_curves_and_rollout_values_only_schedules_it():
    from opcc_edu.dynamics import return_curves

    model = CounterEnsemble(members=3, stop=3)
    obs = np.zeros((2, 2), dtype=np.float32)
    curves = return_curves(model, [zero_policy()], obs, np.array([0, 0]), steps=10)
    assert curves.shape == (10, 3, 2, 1)
    scheduled = rollout_values(model, [zero_policy()], obs, [0, 0], [2, 10], progress=False)
    # the value at horizon h is the curve after h actions, for every member
    np.testing.assert_array_equal(scheduled[0], curves[1, :, 0])
    np.testing.assert_array_equal(scheduled[1], curves[9, :, 1])
    np.testing.assert_array_equal(curves[:, 0, 0, 0], 0.0)  # member 0 ends before any reward counts
    assert curves[9, 2, 0, 0] == 20.0


def test_mixture_mode_mixes_members():
    m, n, h = 5, 40, 6
    model = CounterEnsemble(members=m, stop=-1)
    obs = np.zeros((n, 2), dtype=np.float32)
    obs[:, 1] = np.arange(n)  # distinct rows
    plain = rollout_values(model, [zero_policy()], obs, np.zeros(n), np.full(n, h), progress=False)[..., 0]
    np.testing.assert_allclose(plain, np.broadcast_to(h * np.arange(m), (n, m)))
    mixed = rollout_values(
        model, [zero_policy()], obs, np.zeros(n), np.full(n, h), mixture=True, seed=3, progress=False
    )[..., 0]
    # every step each member advances exactly one trajectory of a row: row sums are preserved
    np.testing.assert_allclose(mixed.sum(1), h * m * (m - 1) / 2)
    # ... but trajectories no longer belong to one member
    assert not np.allclose(mixed, plain)
    assert np.mean(np.abs(mixed - h * (m - 1) / 2)) < np.mean(np.abs(plain - h * (m - 1) / 2))


def small_model(
    stochastic=False, model_type="ff", prior_scale=0.0, termination="none", m=4, seed=0, env="maze2d-umaze"
):
    spec = make_spec(
        env,
        4,
        2,
        m,
        (16, 16),
        model_type=model_type,
        stochastic=stochastic,
        prior_scale=prior_scale,
        termination=termination,
    )
    model = build_ensemble(spec, seed=seed).eval()
    return model


def tanh_policies(count=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        layer = nn.Linear(4, 2)
        with torch.no_grad():
            layer.weight.copy_(torch.randn(2, 4, generator=gen))
        out.append(nn.Sequential(layer, nn.Tanh()))
    return out


def random_rows(n=30, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(n, 4)).astype(np.float32),
        rng.integers(0, 3, n),
        rng.integers(1, 12, n),
        rng.uniform(-1, 1, (n, 2)).astype(np.float32),
    )


@pytest.mark.parametrize("model_type", ["ff", "ar"])
def test_chunked_and_unchunked_rollouts_agree(model_type):
    model = small_model(model_type=model_type, prior_scale=1.0)
    obs, pidx, hor, first = random_rows()
    pols = tanh_policies()
    whole = rollout_values(model, pols, obs, pidx, hor, first, chunk_rows=10_000, progress=False)
    chunked, plan = rollout_values(
        model, pols, obs, pidx, hor, first, chunk_rows=7, member_block=3, progress=False, return_plan=True
    )
    assert len(plan.chunks) == 5 and plan.member_block == 3
    assert max(s for _, s in plan.chunks) == hor.max() and min(s for _, s in plan.chunks) < hor.max()
    np.testing.assert_allclose(chunked, whole, rtol=1e-5, atol=1e-5)
    small_budget = rollout_values(model, pols, obs, pidx, hor, first, memory_budget=20_000, progress=False)
    np.testing.assert_allclose(small_budget, whole, rtol=1e-5, atol=1e-5)


def test_identical_rows_are_rolled_out_once_and_read_at_each_horizon():
    model = small_model()
    obs, pidx, _, first = random_rows(5)
    obs, pidx, first = np.repeat(obs, 3, 0), np.repeat(pidx, 3), np.repeat(first, 3, 0)
    hor = np.tile([3, 7, 11], 5)
    pols = tanh_policies()
    fast, plan = rollout_values(model, pols, obs, pidx, hor, first, progress=False, return_plan=True)
    slow = rollout_values(model, pols, obs, pidx, hor, first, dedupe=False, progress=False)
    assert plan.unique_rows == 5
    np.testing.assert_allclose(fast, slow, rtol=1e-5, atol=1e-5)


def test_same_seed_same_result_and_seed_matters():
    model = small_model(stochastic=True)
    obs, pidx, hor, first = random_rows()
    pols = tanh_policies()
    kwargs = dict(runs=3, mixture=True, progress=False)
    one = rollout_values(model, pols, obs, pidx, hor, first, seed=5, **kwargs)
    two = rollout_values(model, pols, obs, pidx, hor, first, seed=5, **kwargs)
    other = rollout_values(model, pols, obs, pidx, hor, first, seed=6, **kwargs)
    assert one.shape == (30, 4, 3)
    np.testing.assert_array_equal(one, two)
    assert not np.allclose(one, other)
    assert not np.allclose(one[..., 0], one[..., 1])  # runs of a stochastic model differ


def test_rollout_rejects_bad_input():
    model = small_model()
    obs, pidx, hor, first = random_rows(4)
    pols = tanh_policies()
    with pytest.raises(ValueError, match="policy_index"):
        rollout_values(model, pols, obs, pidx + 5, hor, first, progress=False)
    with pytest.raises(ValueError, match="horizon"):
        rollout_values(model, pols, obs, pidx, hor * 0, first, progress=False)
    with pytest.raises(ValueError, match="obs"):
        rollout_values(model, pols, obs[:, :3], pidx, hor, first, progress=False)
    with pytest.raises(ValueError, match="first_action"):
        rollout_values(model, pols, obs, pidx, hor, first[:, :1], progress=False)


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------
def test_model_spec_validates_choices():
    with pytest.raises(ValueError, match="model_type"):
        make_spec("hopper", 11, 3, 2, model_type="rnn")
    with pytest.raises(ValueError, match="termination"):
        make_spec("hopper", 11, 3, 2, termination="sometimes")
    with pytest.raises(ValueError, match="prior_scale"):
        make_spec("hopper", 11, 3, 2, prior_scale=-1.0)
    with pytest.raises(ValueError, match="hidden_sizes"):
        make_spec("hopper", 11, 3, 2, hidden_sizes=())
    with pytest.raises(ValueError, match="activation"):
        make_spec("hopper", 11, 3, 2, activation="gelu")
    with pytest.raises(ValueError, match="obs_dim"):
        make_spec("hopper", 0, 3, 2)
    with pytest.raises(TypeError, match="env_name"):  # the environment's sizes have no defaults
        ModelSpec(obs_dim=11, act_dim=3)


def test_predefined_termination_and_clipping():
    spec = make_spec("hopper", 11, 3, 2, (8,), termination="predefined", clip="transitions")
    model = build_ensemble(spec, seed=0).eval()
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(50, 11)).astype(np.float32)
    act = rng.uniform(-1, 1, (50, 3)).astype(np.float32)
    model.set_statistics(obs, act, obs + 0.1, rng.uniform(1, 2, 50))
    x = torch.as_tensor(obs[:10]).expand(2, -1, -1) * 5  # far outside the data
    nxt, reward, done = model.step(x, torch.as_tensor(act[:10]).expand(2, -1, -1))
    assert torch.all(nxt <= model.obs_high) and torch.all(nxt >= model.obs_low)
    assert torch.all(reward >= 1) and torch.all(reward <= 2)
    torch.testing.assert_close(done, termination_fn("hopper")(nxt))


def test_prior_is_frozen_and_changes_predictions():
    plain = small_model(seed=3)
    prior = small_model(seed=3, prior_scale=2.0)
    assert not any(p.requires_grad for p in prior.prior.parameters())
    obs, act = torch.randn(4, 5, 4), torch.randn(4, 5, 2)
    assert not torch.allclose(plain(obs, act)[0], prior(obs, act)[0])


def test_stochastic_log_variance_is_softly_bounded():
    model = small_model(stochastic=True)
    raw = torch.linspace(-100, 100, 11)[None, :, None].expand(4, 11, 5)
    logvar = model._bound_logvar(raw)
    # soft bounds: within a hair of [min, max], and still increasing in the raw output
    assert torch.all(logvar < model.max_logvar + 1e-3) and torch.all(logvar > model.min_logvar - 1e-3)
    assert torch.all(logvar[:, 1:] >= logvar[:, :-1])
    mid = model._bound_logvar(torch.full((4, 1, 5), -5.0))
    torch.testing.assert_close(mid, torch.full_like(mid, -5.0), atol=0.05, rtol=0)  # mid-range kept


def test_autoregressive_output_ignores_later_dimensions():
    model = small_model(model_type="ar")
    assert isinstance(model, AutoregressiveEnsemble)
    obs, act = torch.randn(4, 6, 4), torch.randn(4, 6, 2)
    prev = torch.randn(4, 6, 5)
    dim = torch.full((4, 6), 2)
    changed = prev.clone()
    changed[..., 2:] += 10.0
    torch.testing.assert_close(model(obs, act, prev, dim)[0], model(obs, act, changed, dim)[0])
    changed[..., 0] += 1.0
    assert not torch.allclose(model(obs, act, prev, dim)[0], model(obs, act, changed, dim)[0])


def test_select_members_is_a_prefix_and_save_load_round_trips(tmp_path):
    model = small_model(stochastic=True, prior_scale=1.0, m=5)
    model.set_statistics(np.random.rand(20, 4), np.random.rand(20, 2), np.random.rand(20, 4), np.random.rand(20))
    obs, act = torch.randn(5, 3, 4), torch.randn(5, 3, 2)
    prefix = model.select_members(slice(0, 2))
    assert prefix.ensemble_size == 2
    torch.testing.assert_close(prefix(obs[:2], act[:2])[0], model(obs, act)[0][:2])
    path = save_ensemble(tmp_path / "ens.safetensors", model, {"note": "test"})
    loaded, meta = load_ensemble(path)
    assert meta == {"note": "test"} and loaded.spec == model.spec
    for x, y in zip(loaded(obs, act), model(obs, act), strict=True):
        if x is not None:
            torch.testing.assert_close(x, y)
    with pytest.raises(ValueError, match="members"):
        model.select_members([7])


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------
def linear_dataset(t=3000, seed=0):
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(t, 4)).astype(np.float32)
    act = rng.uniform(-1, 1, (t, 2)).astype(np.float32)
    nxt = obs + 0.1 * np.concatenate([act, -act], 1) + 0.05 * obs[:, ::-1]
    return {
        "observations": obs,
        "actions": act,
        "next_observations": nxt.astype(np.float32),
        "rewards": (obs[:, 0] - obs[:, 1]).astype(np.float32),
        "terminals": obs[:, 2] > 1.5,
    }


def test_bootstrap_indices_differ_across_members():
    idx = bootstrap_indices(1000, 4, torch.Generator().manual_seed(0))
    assert idx.shape == (4, 1000) and int(idx.min()) >= 0 and int(idx.max()) < 1000
    assert all(not torch.equal(idx[0], idx[i]) for i in range(1, 4))
    unique_share = np.mean([len(torch.unique(row)) / 1000 for row in idx])
    assert 0.59 < unique_share < 0.67  # 1 - 1/e of the data appears in a bootstrap sample


@pytest.mark.parametrize("model_type,termination", [("ff", "learned"), ("ar", "none")])
def test_training_learns_and_is_deterministic(model_type, termination):
    data = linear_dataset()

    def fit():
        model = small_model(model_type=model_type, termination=termination, seed=1)
        history = train_dynamics(model, data, steps=150, batch_size=64, lr=3e-3, seed=2, progress=False)
        return model, history

    one, h1 = fit()
    two, _ = fit()
    for (k, x), (_, y) in zip(one.state_dict().items(), two.state_dict().items(), strict=True):
        assert torch.equal(x, y), k
    assert h1.val_size == 300 and len(h1.final_val_mse) == 4
    assert h1.val_mse[-1][0] < 0.5 * h1.val_mse[0][0] or h1.final_val_mse.max() < 0.1
    assert len(set(np.round(h1.final_val_mse, 7))) > 1  # members really differ


def test_training_rejects_mismatched_data():
    data = linear_dataset(100)
    with pytest.raises(ValueError, match="D=4"):
        train_dynamics(build_ensemble(make_spec("hopper", 11, 3, 2, (8,))), data, steps=1, progress=False)
    bad = dict(data, rewards=data["rewards"][:-1])
    with pytest.raises(ValueError, match="disagree"):
        train_dynamics(small_model(), bad, steps=1, progress=False)
    with pytest.raises(ValueError, match="steps"):
        train_dynamics(small_model(), data, steps=0, progress=False)


def test_spec_round_trips_through_dict():
    spec = make_spec("walker2d", 17, 6, 3, (32,), model_type="ar", stochastic=True, prior_scale=5.0)
    assert ModelSpec.from_dict(spec.to_dict()) == spec
    assert dataclasses.replace(spec, ensemble_size=1).ensemble_size == 1


@pytest.mark.parametrize("model_type", ["ff", "ar"])
def test_predict_mean_is_the_noise_free_step(model_type):
    model = small_model(stochastic=True, model_type=model_type)
    model.set_statistics(np.random.rand(30, 4), np.random.rand(30, 2), np.random.rand(30, 4), np.random.rand(30))
    model.spec = dataclasses.replace(model.spec, clip="none")
    obs, act = torch.randn(4, 6, 4), torch.randn(4, 6, 2)
    mean = model.predict_mean(obs, act)
    assert mean.shape == (4, 6, 5)
    gen = torch.Generator().manual_seed(0)
    samples = torch.stack([model.step(obs, act, gen)[0] - obs for _ in range(200)])
    assert not torch.allclose(samples[0], samples[1])
    torch.testing.assert_close(samples.mean(0), mean[..., :4], atol=0.5, rtol=0)


@pytest.mark.parametrize(
    "choices",
    [
        {},
        {"model_type": "ar"},
        {"stochastic": True, "termination": "learned"},
        {"model_type": "ar", "stochastic": True},
    ],
)
def test_spec_parameter_count_matches_the_built_model(choices):
    spec = make_spec("hopper", 11, 3, 3, (16, 8), **choices)
    model = build_ensemble(spec, seed=0)
    assert spec.parameter_count() == sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert training_bytes(spec, 1000, 64) > 4 * 4 * spec.parameter_count()


class HugeEnsemble(nn.Module):
    """An ensemble that claims more members than any machine could hold values for."""

    ensemble_size, obs_dim, act_dim = 10**12, 4, 2

    @property
    def device(self):
        return torch.device("cpu")

    def step(self, obs, act, generator=None):  # pragma: no cover - never reached
        raise AssertionError("the memory check must refuse the rollout before any step")


def test_rollout_refuses_what_cannot_fit_before_allocating():
    obs = np.zeros((8, 4), np.float32)
    with pytest.raises(InsufficientMemoryError, match="ensemble_size") as info:
        rollout_values(HugeEnsemble(), [lambda x: x[..., :2]], obs, np.zeros(8), np.full(8, 5), progress=False)
    assert isinstance(info.value, MemoryError) and isinstance(info.value, ValueError)
    assert "\n" not in str(info.value)  # one line
    model = small_model()
    with pytest.raises(InsufficientMemoryError, match="chunk_rows"):
        rollout_values(model, tanh_policies(), obs, np.zeros(8), np.full(8, 5), chunk_rows=10**14, progress=False)
