"""The shipped policies: where they live, how to load them, what was recorded about them.

Query policies are ``<assets>/policies/<env>/level<k>.safetensors`` (k = 1 best ... 4 worst)
with their returns in ``policy_table.json``; the behaviour policies of the locomotion datasets
are ``<assets>/behavior/<env>/{medium,expert}.safetensors`` with ``behavior.json``. Every
loader takes ``assets_dir`` (default: the package's own assets) so that tests and experiments
can read a directory they built themselves.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..envs import ENV_NAMES, LOCOMOTION_NAMES
from ..io import sha256_file
from ..utils import check_choice
from .actor import Actor, load_actor
from .ppo import PPOConfig

if TYPE_CHECKING:
    import pandas as pd

POLICY_LEVELS: tuple[int, ...] = (1, 2, 3, 4)
"""Query-policy levels; level 1 is the best policy and 4 the worst (the order of Table 9)."""
BEHAVIOR_KINDS: tuple[str, ...] = ("medium", "expert")
"""Behaviour policies of the locomotion datasets (D4RL's recipe)."""
ASSETS_DIR = Path(__file__).resolve().parent.parent / "assets"
"""The package's shipped assets."""
ORIGINAL_ASSETS_DIR = ASSETS_DIR / "original"
"""The original benchmark's query policies, converted (``opcc_edu.build.original``): pass it as
``assets_dir`` to the loaders below; LICENSE and NOTICE lie beside them."""
POLICY_TABLE_FILE = "policy_table.json"
"""Returns of every query policy, under ``<assets>/policies``."""
BEHAVIOR_FILE = "behavior.json"
"""Returns and training runs of the behaviour policies, under ``<assets>/behavior``."""


def _assets(assets_dir: str | os.PathLike | None) -> Path:
    return Path(assets_dir or ASSETS_DIR)


def policy_path(env_name: str, level: int, assets_dir: str | os.PathLike | None = None) -> Path:
    """The file of the query policy of ``env_name`` at ``level`` (it may not exist yet)."""
    check_choice(env_name, ENV_NAMES, "env_name")
    check_choice(level, POLICY_LEVELS, "level")
    return _assets(assets_dir) / "policies" / env_name / f"level{level}.safetensors"


def behavior_policy_path(env_name: str, kind: str, assets_dir: str | os.PathLike | None = None) -> Path:
    """The file of a behaviour policy: ``kind`` in {"medium", "expert"} (it may not exist yet)."""
    check_choice(env_name, LOCOMOTION_NAMES, "env_name (locomotion environments have behaviour policies)")
    check_choice(kind, BEHAVIOR_KINDS, "kind")
    return _assets(assets_dir) / "behavior" / env_name / f"{kind}.safetensors"


def policy_checksums(env_name: str, assets_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """SHA-256 of each shipped query-policy file of ``env_name``, keyed by level as a string.

    Levels whose file is missing are left out. Query sets record these digests, so a query set
    can be matched to the exact policies that labelled it.
    """
    paths = {str(level): policy_path(env_name, level, assets_dir) for level in POLICY_LEVELS}
    return {level: sha256_file(path) for level, path in paths.items() if path.exists()}


def load_policy(env_name: str, level: int, assets_dir: str | os.PathLike | None = None) -> Actor:
    """The shipped query policy of ``env_name`` at ``level`` (1 = best, 4 = worst).

    Returns:
        An :class:`Actor` in eval mode, float32, on the CPU.

    Raises:
        ValueError: unknown environment or level (the message lists the valid choices).
        FileNotFoundError: the policy was never built.
    """
    path = policy_path(env_name, level, assets_dir)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; build it with `opcc-edu build policies {env_name}`")
    return load_actor(path)[0]


def load_policies(env_name: str, assets_dir: str | os.PathLike | None = None) -> list[Actor]:
    """The four query policies of ``env_name``; index i holds level i + 1."""
    return [load_policy(env_name, level, assets_dir) for level in POLICY_LEVELS]


def load_behavior_policy(env_name: str, kind: str, assets_dir: str | os.PathLike | None = None) -> Actor:
    """A behaviour policy of the locomotion datasets: ``kind`` in {"medium", "expert"}."""
    path = behavior_policy_path(env_name, kind, assets_dir)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; build it with `opcc-edu build policies {env_name} --behavior`")
    return load_actor(path)[0]


def behavior_info(env_name: str | None = None, assets_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """Contents of ``assets/behavior/behavior.json`` (for one environment, or all).

    Each environment's entry holds the returns of its medium and expert policies, the training
    step of the medium checkpoint (``medium_step``) and ``train_ppo_args``: call
    ``train_ppo(**args, total_steps=medium_step, ...)`` to replay that run up to the checkpoint.
    """
    path = _assets(assets_dir) / "behavior" / BEHAVIOR_FILE
    data = json.loads(path.read_text()) if path.exists() else {"environments": {}}
    if env_name is None:
        return data
    check_choice(env_name, LOCOMOTION_NAMES, "env_name")
    if env_name not in data["environments"]:
        raise FileNotFoundError(
            f"no behaviour policies for {env_name} in {path}; run `opcc-edu build policies {env_name} --behavior`"
        )
    return data["environments"][env_name]


def behavior_train_args(env_name: str, assets_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """Keyword arguments of :func:`~opcc_edu.policies.ppo.train_ppo` for the behaviour run of
    ``env_name`` (``config`` as a :class:`PPOConfig`)."""
    args = dict(behavior_info(env_name, assets_dir)["train_ppo_args"])
    args["config"] = PPOConfig.from_dict(args["config"])
    return args


def policy_table_records(assets_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """The raw JSON of the policy table (per-episode returns, seeds, commands, versions)."""
    path = _assets(assets_dir) / "policies" / POLICY_TABLE_FILE
    return json.loads(path.read_text()) if path.exists() else {"rows": []}


def policy_table(env_name: str | None = None, assets_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """The Table 9 analogue: mean and standard deviation of each query policy's return.

    Args:
        env_name: restrict to one environment (``None``: all that were built).
        assets_dir: read from another assets directory (tests).

    Returns:
        ``pandas.DataFrame`` with columns env, level, mean_return, std_return, episodes,
        train_step (returns over ``episodes`` evaluation episodes; sparse reward for mazes).
    """
    import pandas as pd

    columns = ["env", "level", "mean_return", "std_return", "episodes", "train_step"]
    rows = policy_table_records(assets_dir)["rows"]
    frame = pd.DataFrame([{c: row[c] for c in columns} for row in rows], columns=columns)
    if env_name is not None:
        check_choice(env_name, ENV_NAMES, "env_name")
        frame = frame[frame["env"] == env_name]
    order = {name: i for i, name in enumerate(ENV_NAMES)}
    frame = frame.sort_values(["env", "level"], key=lambda s: s.map(order) if s.name == "env" else s)
    return frame.reset_index(drop=True)
