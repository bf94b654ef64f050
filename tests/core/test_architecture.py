"""The architecture is declared once: the config and the model spec share it and cannot drift."""

from __future__ import annotations

import dataclasses

import pytest

from opcc_edu.baselines import EnsembleConfig, FQEConfig, TrainingConfig
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
    assert own[EnsembleConfig] == ["train_steps", "batch_size", "lr", "seed", "mixture"]
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


def test_the_two_baselines_share_their_training_settings_and_cannot_drift():
    # ensemble_size, hidden_sizes, train_steps, batch_size, lr and seed are declared once
    shared = [f.name for f in dataclasses.fields(TrainingConfig)]
    assert shared == ["ensemble_size", "hidden_sizes", "train_steps", "batch_size", "lr", "seed"]
    both = {f.name: f.type for f in dataclasses.fields(EnsembleConfig)}.items()
    assert both & {f.name: f.type for f in dataclasses.fields(FQEConfig)}.items() == {
        (f.name, f.type) for f in dataclasses.fields(TrainingConfig)
    }
    for cls in (EnsembleConfig, FQEConfig):  # one validation, one profile reading, one serialisation
        assert issubclass(cls, TrainingConfig)
        assert all(name not in vars(cls) for name in ("from_profile", "to_dict", "from_dict"))
        for field, bad in [("ensemble_size", 0), ("hidden_sizes", 64), ("train_steps", 0), ("lr", 2.0), ("seed", -1)]:
            with pytest.raises(ValueError, match=field):
                cls(**{field: bad})
        config = cls.from_profile("tiny", seed=3)
        assert cls.from_dict(config.to_dict()) == config
        with pytest.raises(ValueError, match=f"unknown {cls.__name__} field"):
            cls.from_profile("tiny", widths=(8,))
    ensemble, fqe = EnsembleConfig.from_profile("tiny"), FQEConfig.from_profile("tiny")
    same = {name: ensemble.to_dict()[name] for name in shared}
    # one profile reading: the same sizes, FQE's steps times 4 (it fits a chain of H outputs)
    assert fqe.to_dict() == {**same, "train_steps": 4 * ensemble.train_steps, "bootstrap": True}
