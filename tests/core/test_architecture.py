"""The architecture is declared once: the config and the model spec share it and cannot drift."""

from __future__ import annotations

import dataclasses

import pytest

from opcc_edu.baselines import EnsembleConfig
from opcc_edu.dynamics import ModelSpec
from opcc_edu.dynamics.spec import ARCHITECTURE_FIELDS, Architecture, architecture_of

# A value other than the default for every architecture field (a new field must be added here,
# and the test below fails until it is).
OTHER = {
    "ensemble_size": 3,
    "hidden_sizes": (7, 5),
    "model_type": "ar",
    "stochastic": True,
    "prior_scale": 2.5,
    "normalize": False,
    "clip": "observations",
    "termination": "learned",
    "reward": "predefined",
    "ar_targets": "one",
}


def test_both_classes_are_the_architecture_and_add_only_their_own_fields():
    assert issubclass(EnsembleConfig, Architecture) and issubclass(ModelSpec, Architecture)
    own = {
        cls: [f.name for f in dataclasses.fields(cls) if f.name not in ARCHITECTURE_FIELDS]
        for cls in (EnsembleConfig, ModelSpec)
    }
    assert own[EnsembleConfig] == ["mixture", "train_steps", "batch_size", "lr", "seed"]
    assert own[ModelSpec] == ["env_name", "obs_dim", "act_dim", "activation"]
    assert set(OTHER) == set(ARCHITECTURE_FIELDS)


def test_model_spec_carries_every_architecture_field_of_the_config():
    config = EnsembleConfig(**OTHER)
    spec = config.model_spec("hopper")
    assert architecture_of(spec) == architecture_of(config) == OTHER
    for name, value in OTHER.items():  # each field on its own, against the defaults
        needs = {"model_type": "ar"} if name == "ar_targets" else {}  # the objective is the AR model's
        assert getattr(EnsembleConfig(**needs, **{name: value}).model_spec("hopper"), name) == value
    assert architecture_of(EnsembleConfig().model_spec("hopper")) != OTHER  # the check can fail


@pytest.mark.parametrize("cls", [EnsembleConfig, ModelSpec])
def test_both_validate_the_shared_fields_the_same_way(cls):
    sizes = {"env_name": "hopper", "obs_dim": 11, "act_dim": 3} if cls is ModelSpec else {}
    for field, bad in [("model_type", "rnn"), ("clip", "sometimes"), ("prior_scale", -1.0), ("stochastic", "yes")]:
        with pytest.raises(ValueError, match=field):
            cls(**sizes, **{field: bad})
    with pytest.raises(ValueError, match="ar_targets"):
        cls(**sizes, ar_targets="one")  # the feed-forward model takes the default objective only
