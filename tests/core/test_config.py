import os

import pytest

from opcc_edu import config
from opcc_edu.config import PROFILES, get_profile, set_profile, use_profile


def test_profiles_scale_monotonically():
    tiny, classroom, paper = (PROFILES[n] for n in ("tiny", "classroom", "paper"))
    for field in ("dataset_size", "ensemble_size", "dynamics_train_steps", "policy_train_steps", "mdp_rollouts"):
        assert getattr(tiny, field) < getattr(classroom, field) < getattr(paper, field), field
    assert paper.ensemble_size == 100 and paper.n_seeds == 5 and paper.dataset_size == 1_000_000
    assert len(paper.environments) == 7


def test_env_var_selects_profile(monkeypatch):
    monkeypatch.setattr(config, "_active", None)
    monkeypatch.setenv("OPCC_EDU_PROFILE", "classroom")
    assert get_profile().name == "classroom"
    monkeypatch.setenv("OPCC_EDU_PROFILE", " Paper ")
    assert get_profile().name == "paper"


def test_unknown_profile_lists_choices(monkeypatch):
    monkeypatch.setattr(config, "_active", None)
    monkeypatch.setenv("OPCC_EDU_PROFILE", "huge")
    with pytest.raises(ValueError, match=r"OPCC_EDU_PROFILE 'huge'.*tiny, classroom, paper"):
        get_profile()
    with pytest.raises(ValueError, match="valid choices"):
        set_profile("gpu")


def test_use_profile_restores_previous_state(monkeypatch):
    monkeypatch.setattr(config, "_active", None)
    monkeypatch.setenv("OPCC_EDU_PROFILE", "tiny")
    with use_profile("paper") as profile:
        assert profile.name == "paper"
        assert get_profile().name == "paper"
        assert os.environ["OPCC_EDU_PROFILE"] == "paper"
    assert get_profile().name == "tiny"
    assert os.environ["OPCC_EDU_PROFILE"] == "tiny"
