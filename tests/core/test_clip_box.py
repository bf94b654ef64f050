"""The clip box of a model rollout: its four modes, and which falls each lets a rollout have."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from opcc_edu.baselines.config import BASELINE_DEFAULTS, EnsembleConfig
from opcc_edu.dynamics import ModelSpec, build_ensemble
from opcc_edu.dynamics.models import clip_box
from opcc_edu.dynamics.spec import CLIP_BOXES, DEFAULT_CLIP, clip_text, legacy_fields
from opcc_edu.envs import HEALTH_LIMITS, health_limits, termination_fn
from opcc_edu.lab.experiments.registry import configuration_label, get_ablation, parse_configuration

torch.set_num_threads(1)


def _healthy_hopper_data(n: int = 200, seed: int = 0):
    """Transitions of a Hopper that never tilts (angle in [0, 0.13]) and falls by height only."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(0, 0.5, (n, 11))
    obs[:, 0] = rng.uniform(0.75, 1.5, n)
    obs[:, 1] = rng.uniform(0.0, 0.13, n)
    nxt = obs + rng.normal(0, 0.01, (n, 11))
    nxt[:5, 0] = 0.68  # five falls, all by height
    nxt[:, 1] = np.clip(nxt[:, 1], -0.005, 0.135)
    return obs, nxt


def _hopper_model(clip: str):
    spec = ModelSpec(env_name="hopper", obs_dim=11, act_dim=3, ensemble_size=2, hidden_sizes=(8,), clip=clip)
    model = build_ensemble(spec, seed=0).eval()
    obs, nxt = _healthy_hopper_data()
    act = np.zeros((len(obs), 3))
    model.set_statistics(obs, act, nxt, np.ones(len(obs)))
    return model, obs, nxt


def test_boxes_nest_and_reach_the_health_limits():
    obs, nxt = (torch.as_tensor(x) for x in _healthy_hopper_data())
    boxes = {mode: clip_box(mode, "hopper", obs, nxt) for mode in CLIP_BOXES}
    low, high = boxes["none"]
    assert torch.isinf(low).all() and torch.isinf(high).all()
    for inner, outer in (("observations", "transitions"), ("transitions", "health")):
        assert torch.all(boxes[outer][0] <= boxes[inner][0]) and torch.all(boxes[outer][1] >= boxes[inner][1])
    torch.testing.assert_close(boxes["observations"][0], obs.min(0).values)
    torch.testing.assert_close(boxes["transitions"][0], torch.cat([obs, nxt]).min(0).values)
    # The health box reaches the height limit below and both tilt limits, and nothing else moves.
    h_low, h_high = boxes["health"]
    assert h_low[0] == 0.68 and h_low[1] == -0.2 and h_high[1] == 0.2
    t_low, t_high = boxes["transitions"]
    torch.testing.assert_close(h_low[2:], t_low[2:])
    torch.testing.assert_close(h_high[[0, *range(2, 11)]], t_high[[0, *range(2, 11)]])
    # Without a termination rule the health box is the transitions box.
    o, n = obs[:, :4], nxt[:, :4]
    for a, b in zip(
        clip_box("health", "maze2d-umaze", o, n), clip_box("transitions", "maze2d-umaze", o, n), strict=True
    ):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize(
    "clip, can_tilt", [("transitions", False), ("observations", False), ("health", True), ("none", True)]
)
def test_which_boxes_let_a_rollout_fall_by_tilt(clip, can_tilt):
    """A prediction far past the tilt limit: only a box that reaches the limit lets it end the rollout."""
    model, obs, _ = _hopper_model(clip)
    state = torch.as_tensor(obs[:8], dtype=torch.float32).expand(2, -1, -1).clone()
    state[..., 0] = 1.2  # standing tall: only the tilt can end it
    with torch.no_grad():
        model.target_mean[1] = 5.0  # every member predicts the torso angle jumps by 5 (in data units)
        model.target_mean[0] = 0.0
    nxt, _, done = model.step(state, torch.zeros(2, 8, 3))
    assert bool(done.all()) is can_tilt
    if clip != "none":
        assert torch.all(nxt <= model.obs_high) and torch.all(nxt >= model.obs_low)


@pytest.mark.parametrize("env", ["hopper", "walker2d"])
def test_the_limits_are_the_termination_rule(env):
    """A state on a limit ends the episode and one just inside does not: the table and the rule agree."""
    dim_count = {"hopper": 11, "walker2d": 17}[env]
    healthy = torch.zeros(dim_count)
    healthy[0] = 1.2
    rule = termination_fn(env)
    assert not bool(rule(healthy))
    assert health_limits(env) == HEALTH_LIMITS[env]
    for dim, lo, hi in health_limits(env):
        for limit, inward in ((lo, 1e-3), (hi, -1e-3)):
            if limit is None:
                continue
            on, inside = healthy.clone(), healthy.clone()
            on[dim], inside[dim] = limit, limit + inward
            assert bool(rule(on)) and not bool(rule(inside)), (env, dim, limit)


def test_clip_choices_and_their_older_spellings():
    assert EnsembleConfig().clip == DEFAULT_CLIP == BASELINE_DEFAULTS["clip"] == "health"
    # The older on/off field reads back through the one upgrade, not through the live classes.
    assert EnsembleConfig.from_dict({"clip": True}).clip == "transitions"
    assert EnsembleConfig.from_dict({"clip": False}).clip == "none"
    assert legacy_fields({"clip": np.bool_(True)})["clip"] == "transitions"
    with pytest.raises(ValueError, match="clip"):
        EnsembleConfig(clip=True)
    # Dicts and cache keys keep the older spelling for the two older boxes, the name for the others.
    assert EnsembleConfig(clip="transitions").to_dict()["clip"] is True
    assert EnsembleConfig(clip="none").to_dict()["clip"] is False
    assert EnsembleConfig().to_dict()["clip"] == "health" == clip_text("health")
    for mode in CLIP_BOXES:
        config = EnsembleConfig(clip=mode)
        assert EnsembleConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="unknown clip 'box'; valid choices: none, observations, transitions, health"):
        EnsembleConfig(clip="box")
    with pytest.raises(ValueError, match="clip"):
        ModelSpec(env_name="hopper", obs_dim=11, act_dim=3, ensemble_size=2, hidden_sizes=(8,), clip="sometimes")


def test_the_clipping_ablation_varies_the_box_alone():
    ablation = get_ablation("clipping")
    overrides = [level.overrides for level in ablation.levels]
    assert all(set(o) == {"clip"} for o in overrides)  # no other factor moves with it
    assert [o["clip"] for o in overrides] == ["health", "transitions", "observations", "none"]
    labels = [configuration_label(o) for o in overrides]
    # The older runs' labels keep their meaning: clip=false is unclipped, clip=true the transitions box.
    assert labels == ["default", "clip=true", "clip=observations", "clip=false"]
    assert [parse_configuration(label) for label in labels[1:]] == overrides[1:]


def test_the_cli_names_every_box(capsys):
    from opcc_edu.cli import build_parser

    assert build_parser().parse_args(["run", "hopper"]).clip == DEFAULT_CLIP
    assert build_parser().parse_args(["run", "hopper", "--clip", "transitions"]).clip == "transitions"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "hopper", "--clip", "box"])
    assert "--clip: invalid choice: 'box'" in capsys.readouterr().err
