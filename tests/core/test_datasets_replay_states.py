"""Medium-replay records simulator states, so everything that needs them works on it too."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from opcc_edu.datasets.locomotion import generate_replay_dataset
from opcc_edu.rewards import dataset_reward_feature, reward_fn


@pytest.fixture(scope="module")
def replay():
    from opcc_edu.policies import PPOConfig

    args = {"env_name": "hopper", "seed": 3, "config": PPOConfig(n_envs=2, n_steps=64, batch_size=64, n_epochs=1)}
    return generate_replay_dataset("hopper", 300, args, progress=False)


def test_reward_feature_from_the_replay_states_reproduces_the_rewards(replay):
    done = replay["terminals"] | replay["timeouts"]
    assert done.sum() >= 3
    feature = dataset_reward_feature("hopper", replay, "medium-replay")
    reward = reward_fn("hopper")(
        *(torch.as_tensor(replay[k], dtype=torch.float64) for k in ("observations", "actions", "next_observations")),
        torch.as_tensor(feature),
    )
    # float32 positions: about 1e-4 inside episodes; episode ends are inverted from the reward
    np.testing.assert_allclose(reward.numpy(), replay["rewards"], rtol=0, atol=5e-4)
    inside = np.flatnonzero(~done[:-1])
    expected = (replay["infos/qpos"][inside + 1, 0].astype(np.float64) - replay["infos/qpos"][inside, 0]) / 0.008
    np.testing.assert_array_equal(feature[inside], expected)


def test_predefined_reward_trains_on_medium_replay_and_still_refuses_stateless_arrays(replay, tmp_path, monkeypatch):
    from opcc_edu.baselines import EnsembleConfig, get_or_train_ensemble

    monkeypatch.setenv("OPCC_EDU_CACHE", str(tmp_path))
    config = EnsembleConfig(ensemble_size=2, hidden_sizes=(8,), train_steps=2, reward="predefined")
    stateless = {k: v for k, v in replay.items() if not k.startswith("infos/")}
    with pytest.raises(ValueError, match="'given' of hopper has none"):
        get_or_train_ensemble("hopper", "given", config, dataset=stateless, device="cpu", progress=False)
    assert not (tmp_path / "ensembles").exists()
    model = get_or_train_ensemble("hopper", "medium-replay", config, dataset_size=100, device="cpu", progress=False)
    assert model.spec.reward == "predefined" and not model.info["cache_hit"]
    assert model.info["trained"]["dataset"] == "medium-replay"
