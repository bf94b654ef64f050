"""Query policies and behaviour policies: small MLP actors, PPO training, export, evaluation.

The OPCC benchmark compares four hand-picked policies of distinct quality per environment
(paper Section 4, step 1; their returns are in Table 9). Here they are trained with PPO from
stable-baselines3 and exported to :class:`Actor`, a plain torch module, so that *using* them
needs neither stable-baselines3 nor pickle: weights are safetensors files under
``opcc_edu/assets/policies/<env>/level<k>.safetensors``.

One concept per module:

* :mod:`~opcc_edu.policies.actor` -- :class:`Actor`, :class:`StackedActors`, :func:`save_actor`,
  :func:`load_actor`.
* :mod:`~opcc_edu.policies.shaping` -- :class:`MazeDistance`, the mazes' dense training reward.
* :mod:`~opcc_edu.policies.ppo` -- :class:`PPOConfig` and :func:`train_ppo` (deterministic,
  checkpointed, with a per-transition callback) and :func:`actor_from_sb3`.
* :mod:`~opcc_edu.policies.assets` -- loading the shipped policies and their records.
* :mod:`~opcc_edu.policies.replay` -- :func:`replay_behavior_run` (rebuilds medium-replay).

Building them (choosing checkpoints of distinct quality, ``opcc-edu build policies ENV``) is the
asset builders' wing, :mod:`opcc_edu.build`.

Training details that differ from the original benchmark (documented, deliberate): the Gaussian
PPO policy acts through ``tanh``, so the deterministic ``tanh(mean)`` is exactly what
:class:`Actor` computes; mazes train on a dense shortest-path reward and are evaluated on the
benchmark's sparse reward.
"""

from ..utils import single_threaded
from .actor import OBS_CLIP, Actor, StackedActors, load_actor, save_actor
from .assets import (
    ASSETS_DIR,
    BEHAVIOR_FILE,
    BEHAVIOR_KINDS,
    ORIGINAL_ASSETS_DIR,
    POLICY_LEVELS,
    POLICY_TABLE_FILE,
    behavior_info,
    behavior_policy_path,
    behavior_train_args,
    load_behavior_policy,
    load_policies,
    load_policy,
    policy_checksums,
    policy_path,
    policy_table,
    policy_table_records,
)
from .ppo import (
    RUN_FORMAT,
    TRAINING_PACKAGES,
    PPOConfig,
    TransitionCallback,
    actor_from_sb3,
    default_ppo_config,
    round_up_to_multiple,
    train_ppo,
    training_package_versions,
)
from .replay import replay_behavior_run
from .shaping import MazeDistance

__all__ = [
    "ASSETS_DIR",
    "BEHAVIOR_FILE",
    "BEHAVIOR_KINDS",
    "OBS_CLIP",
    "ORIGINAL_ASSETS_DIR",
    "POLICY_LEVELS",
    "POLICY_TABLE_FILE",
    "RUN_FORMAT",
    "TRAINING_PACKAGES",
    "Actor",
    "MazeDistance",
    "PPOConfig",
    "StackedActors",
    "TransitionCallback",
    "actor_from_sb3",
    "behavior_info",
    "behavior_policy_path",
    "behavior_train_args",
    "default_ppo_config",
    "load_actor",
    "load_behavior_policy",
    "load_policies",
    "load_policy",
    "policy_checksums",
    "policy_path",
    "policy_table",
    "policy_table_records",
    "replay_behavior_run",
    "round_up_to_multiple",
    "save_actor",
    "single_threaded",
    "train_ppo",
    "training_package_versions",
]
