"""The autoregressive model's training objective: every target dimension per row, or one.

``ar_targets="all"`` (the default) teaches every dimension of every row with teacher forcing;
``"one"`` is the objective of the ensembles trained before the option existed. These tests
check the loss against an explicit loop, that the option changes what identifies a trained
ensemble only where it must, and that rollouts do not depend on it.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from opcc_edu.baselines import EnsembleConfig
from opcc_edu.baselines.cache import ensemble_cache_key, ensemble_cache_path
from opcc_edu.dynamics import ModelSpec, build_ensemble, load_ensemble, save_ensemble, train_dynamics
from opcc_edu.dynamics.memory import training_bytes
from opcc_edu.lab.experiments import configuration_label, get_ablation, parse_configuration

torch.set_num_threads(1)

CHOICES = dict(prior_scale=0.0, normalize=True, clip="none")


def ar_spec(ar_targets="all", stochastic=False, termination="none", m=3, prior_scale=0.0) -> ModelSpec:
    return ModelSpec(
        env_name="maze2d-umaze",
        obs_dim=4,
        act_dim=2,
        ensemble_size=m,
        hidden_sizes=(16, 16),
        model_type="ar",
        stochastic=stochastic,
        prior_scale=prior_scale,
        normalize=True,
        clip="none",
        termination=termination,
        ar_targets=ar_targets,
    )


def per_dimension_loss(model, obs, act, target, terminal, j):
    """The loss of the rows' dimension ``j`` alone, written out from the model's forward pass."""
    m, b, _ = target.shape
    dim = torch.full((m, b), j, dtype=torch.long)
    mean, logvar, logit = model(obs, act, target, dim)
    err = (mean - target[..., j]).square()
    if logvar is None:
        total = err.mean(1).sum()
    else:
        total = (err * torch.exp(-logvar) + logvar).mean(1).sum() + model._logvar_penalty()
    if logit is not None:
        total = total + F.binary_cross_entropy_with_logits(logit, terminal, reduction="none").mean(1).sum()
    return total, err.mean(1)


@pytest.mark.parametrize(
    "stochastic,termination,prior_scale", [(False, "none", 0.0), (True, "learned", 0.0), (True, "none", 2.0)]
)
def test_all_targets_loss_is_the_mean_of_the_per_dimension_losses(stochastic, termination, prior_scale):
    model = build_ensemble(ar_spec(stochastic=stochastic, termination=termination, prior_scale=prior_scale), seed=3)
    gen = torch.Generator().manual_seed(0)
    m, b, k = 3, 7, 5
    obs, act, target = (
        torch.randn(m, b, 4, generator=gen),
        torch.randn(m, b, 2, generator=gen),
        torch.randn(m, b, k, generator=gen),
    )
    terminal = (torch.rand(m, b, generator=gen) < 0.3).float()
    loss, mse = model.loss(obs, act, target, terminal)
    parts = [per_dimension_loss(model, obs, act, target, terminal, j) for j in range(k)]
    expected = torch.stack([p[0] for p in parts]).mean()
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(mse, torch.stack([p[1] for p in parts]).mean(0), rtol=1e-5, atol=1e-6)
    # The generator is not needed (nothing is drawn), and passing one changes nothing.
    again, _ = model.loss(obs, act, target, terminal, generator=torch.Generator().manual_seed(9))
    assert torch.equal(loss, again)


def test_every_dimension_is_taught_in_every_step():
    # One row per member: the one-hot input column of dimension j receives a gradient only if
    # the step taught dimension j; the earlier-target columns only if a later dimension was.
    k, d_a = 5, 6
    gen = torch.Generator().manual_seed(1)
    obs, act, target = (
        torch.randn(3, 1, 4, generator=gen),
        torch.randn(3, 1, 2, generator=gen),
        torch.randn(3, 1, k, generator=gen),
    )
    grads = {}
    for ar_targets in ("all", "one"):
        model = build_ensemble(ar_spec(ar_targets), seed=0)
        loss, _ = model.loss(obs, act, target, generator=torch.Generator().manual_seed(0))
        loss.backward()
        grads[ar_targets] = model.net.layers[0].weight.grad  # (M, in, hidden)
    taught = grads["all"][:, d_a + k :, :].abs().sum(-1) > 0  # (M, K) one-hot columns
    assert taught.all()
    conditioned = grads["all"][:, d_a : d_a + k, :].abs().sum(-1) > 0  # earlier-target columns
    assert conditioned[:, : k - 1].all() and not conditioned[:, k - 1].any()  # the last is never an input
    assert ((grads["one"][:, d_a + k :, :].abs().sum(-1) > 0).sum(1) == 1).all()


# Captured from the model before the training objective became an option: rolling out and
# predicting never depended on how the model was trained, and must not now.
GOLDEN_NEXT = [
    -1.287223,
    -0.433026,
    -4.570608,
    -2.329267,
    -1.216182,
    -0.442759,
    -4.809719,
    -3.132453,
    -0.881182,
    -0.603522,
    0.268369,
    -1.011512,
    -2.915851,
    -4.636768,
    -3.478839,
    -3.3523,
    0.700358,
    2.090786,
    0.318616,
    1.501985,
    -2.012228,
    1.491329,
    -3.1344,
    -0.280165,
]
GOLDEN_REWARD = [0.882877, 1.510643, 1.418695, 1.155566, 1.673625, 2.213324]
GOLDEN_MEAN = [
    -0.573066,
    -0.874819,
    -1.154079,
    -0.750027,
    1.324585,
    -0.654882,
    -0.9518,
    -1.252098,
    -0.812633,
    1.286354,
    -0.662339,
    -0.959128,
    -1.279438,
    -0.825312,
    1.279441,
    -0.58033,
    -0.892832,
    -1.174054,
    -0.78469,
    1.31386,
    -0.639773,
    -0.960922,
    -1.235497,
    -0.827724,
    1.291855,
    -0.65397,
    -0.969227,
    -1.244652,
    -0.831418,
    1.288635,
]


@pytest.mark.parametrize("ar_targets", ["all", "one"])
def test_rollout_and_sampling_are_unchanged(ar_targets):
    model = build_ensemble(ar_spec(ar_targets, stochastic=True, m=2, prior_scale=1.0), seed=0).eval()
    g = torch.Generator().manual_seed(1)
    obs, act = torch.randn(2, 3, 4, generator=g), torch.randn(2, 3, 2, generator=g)
    model.set_statistics(
        np.arange(40.0).reshape(10, 4) % 7,
        np.arange(20.0).reshape(10, 2) % 3,
        np.arange(40.0).reshape(10, 4) % 5,
        np.arange(10.0) % 4,
    )
    nxt, reward, done = model.step(obs, act, torch.Generator().manual_seed(2))
    mean = model.predict_mean(obs, act)
    torch.testing.assert_close(nxt.flatten(), torch.tensor(GOLDEN_NEXT), atol=2e-6, rtol=0)
    torch.testing.assert_close(reward.flatten(), torch.tensor(GOLDEN_REWARD), atol=2e-6, rtol=0)
    torch.testing.assert_close(mean.flatten(), torch.tensor(GOLDEN_MEAN), atol=2e-6, rtol=0)
    assert not done.any()


def linear_data(t=400, seed=0):
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(t, 4)).astype(np.float32)
    act = rng.uniform(-1, 1, (t, 2)).astype(np.float32)
    nxt = (0.9 * obs + act @ rng.normal(size=(2, 4)) * 0.1).astype(np.float32)
    # Dimension 1 of the change depends on dimension 0 of it: something to condition on.
    nxt[:, 1] += (nxt[:, 0] - obs[:, 0]) ** 2
    return {"observations": obs, "actions": act, "next_observations": nxt, "rewards": nxt[:, 0].copy()}


@pytest.mark.parametrize("ar_targets", ["all", "one"])
def test_same_seed_gives_the_same_weights(ar_targets):
    data = linear_data()

    def fit(seed):
        model = build_ensemble(ar_spec(ar_targets), seed=1)
        history = train_dynamics(model, data, steps=40, batch_size=32, lr=3e-3, seed=seed, progress=False)
        return model.state_dict(), history

    (one, h1), (two, _), (other, _) = fit(2), fit(2), fit(3)
    assert all(torch.equal(one[key], two[key]) for key in one)
    assert not all(torch.equal(one[key], other[key]) for key in one)
    assert h1.val_mse[-1] < h1.val_mse[0]


def test_all_targets_fit_better_than_one_at_the_same_steps():
    data = linear_data(2000)
    final = {}
    for ar_targets in ("all", "one"):
        model = build_ensemble(ar_spec(ar_targets), seed=1)
        history = train_dynamics(model, data, steps=60, batch_size=32, lr=3e-3, seed=2, progress=False)
        final[ar_targets] = float(np.mean(history.final_val_mse))
    assert final["all"] < final["one"], final


# --------------------------------------------------------------------------------------------
# What identifies a trained ensemble
# --------------------------------------------------------------------------------------------
GIVEN = {
    "observations": np.arange(24, dtype=np.float32).reshape(6, 4),
    "actions": np.zeros((6, 2), np.float32),
    "rewards": np.ones(6, np.float32),
    "next_observations": np.ones((6, 4), np.float32),
    "terminals": np.zeros(6, bool),
}
# The clip box of the default of before ("transitions", written ``true``): its keys are those of before.
SMALL = dict(ensemble_size=3, hidden_sizes=(8,), train_steps=5, batch_size=4, clip="transitions")
# Cache keys and file names captured before the option existed.
KEY_BEFORE = (
    '{"config": {"batch_size": 4, "clip": true, "ensemble_size": 3, "hidden_sizes": [8], "lr": 0.001, '
    '"model_type": "%s", "normalize": true, "prior_scale": 0.0, "seed": 0, "stochastic": false, '
    '"termination": "predefined", "train_steps": 5}, "dataset": {"name": "given", "sha256": '
    '"6f96207c533bc478da122cd2da1504634b8a3339530d1b1ceb98bdbf3f20e1ff", "size": 6}, "env": "maze2d-umaze", '
    '"format": 2}'
)
PATH_BEFORE = {"ff": "ensemble-9ef799abd8e492ee.safetensors", "ar": "ensemble-4a128906ae788e38.safetensors"}


def key_and_name(config):
    key = json.dumps(ensemble_cache_key("maze2d-umaze", "given", config, dataset=GIVEN), sort_keys=True)
    return key, ensemble_cache_path("maze2d-umaze", "given", config, dataset=GIVEN).name


def test_feed_forward_and_one_target_keys_are_those_of_before():
    assert key_and_name(EnsembleConfig(**SMALL)) == (KEY_BEFORE % "ff", PATH_BEFORE["ff"])
    one = EnsembleConfig(**SMALL, model_type="ar", ar_targets="one")
    assert key_and_name(one) == (KEY_BEFORE % "ar", PATH_BEFORE["ar"])
    key, name = key_and_name(EnsembleConfig(**SMALL, model_type="ar"))
    assert name != PATH_BEFORE["ar"] and json.loads(key)["config"]["ar_targets"] == "all"
    assert "ar_targets" not in EnsembleConfig(**SMALL).to_dict()
    assert "ar_targets" not in EnsembleConfig(**SMALL).model_spec("hopper").to_dict()


def test_dicts_without_the_field_read_as_the_objective_they_were_trained_with():
    old = EnsembleConfig(**SMALL, model_type="ar", ar_targets="one").to_dict()
    assert "ar_targets" not in old and EnsembleConfig.from_dict(old).ar_targets == "one"
    for config in (EnsembleConfig(**SMALL, model_type="ar"), EnsembleConfig(**SMALL)):
        assert EnsembleConfig.from_dict(config.to_dict()) == config
    for ar_targets in ("all", "one"):
        spec = ar_spec(ar_targets)
        assert ModelSpec.from_dict(spec.to_dict()) == spec
    legacy = {k: v for k, v in ar_spec("all").to_dict().items() if k != "ar_targets"}
    assert ModelSpec.from_dict(legacy).ar_targets == "one"


def test_saved_ensembles_keep_their_objective(tmp_path):
    for ar_targets in ("all", "one"):
        model = build_ensemble(ar_spec(ar_targets), seed=0)
        loaded, _ = load_ensemble(save_ensemble(tmp_path / f"{ar_targets}.safetensors", model), device="cpu")
        assert loaded.spec.ar_targets == ar_targets


def test_labels_name_the_new_objective_and_keep_the_old_labels():
    ar_level = next(level for level in get_ablation("model-type").levels if level.label == "ar")
    assert configuration_label(ar_level.overrides) == "ar_targets=all;model_type=ar"
    assert configuration_label({"model_type": "ar"}) == "ar_targets=all;model_type=ar"
    assert configuration_label({"model_type": "ar", "ar_targets": "one"}) == "model_type=ar"
    assert configuration_label({"model_type": "ff", "ar_targets": "all"}) == "default"
    assert parse_configuration("model_type=ar") == {"model_type": "ar", "ar_targets": "one"}
    for label in (
        "default",
        "model_type=ar",
        "ar_targets=all;model_type=ar",
        "ar_targets=all;model_type=ar;stochastic=true",
    ):
        assert configuration_label(parse_configuration(label)) == label


def test_bad_values_name_the_argument_and_the_choices():
    with pytest.raises(ValueError, match=r"ar_targets 'every'; valid choices: all, one"):
        EnsembleConfig(model_type="ar", ar_targets="every")
    with pytest.raises(ValueError, match=r"ar_targets 'every'; valid choices: all, one"):
        ar_spec("every")
    with pytest.raises(ValueError, match=r"ar_targets='one' applies to the autoregressive model only"):
        EnsembleConfig(ar_targets="one")
    with pytest.raises(ValueError, match=r"ar_targets 'every'; valid choices: all, one"):
        configuration_label({"model_type": "ar", "ar_targets": "every"})


def test_memory_estimate_counts_the_expanded_rows():
    one, every = ar_spec("one"), ar_spec("all")
    rows = 3 * 64 * (every.target_dim - 1)  # the extra rows of the expanded minibatch
    per_row = 4 * (2 * sum(every.hidden_sizes) + every.in_features + every.out_features + every.target_dim)
    assert training_bytes(every, 1000, 64) - training_bytes(one, 1000, 64) == rows * per_row
    ff = dataclasses.replace(every, model_type="ff", ar_targets="all")
    assert training_bytes(ff, 1000, 64) < training_bytes(every, 1000, 64)
