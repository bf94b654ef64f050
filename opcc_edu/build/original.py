"""The original benchmark (``koulanurag/opcc``) on today's simulators: import and re-labelling.

The paper's authors released, for each of the seven environments, a query set
(``opcc/assets/<ENV>/queries.p``) and four query policies (``models/model_{1..4}.p``) under the
Apache-2.0 licence. They need gym 0.21, mujoco-py and d4rl, which no longer install, so
:func:`import_original` converts them once, from a checkout of that repository, into this
package's own formats:

* **Queries** are pickles of numpy arrays in builtin containers. They are read with an
  allow-list unpickler (:class:`AllowListUnpickler`) that refuses every other class, so a
  hostile file cannot run code. Each becomes a :class:`~opcc_edu.queries.QuerySet` of recipe
  ``original``: the original targets, values and ten Monte-Carlo returns unchanged, start
  observations, first actions and simulator states moved into this package's frame.
* **Policies** are torch state dicts, loaded with ``torch.load(weights_only=True)`` (no code
  runs). The original ``ActorNetwork`` is ``tanh(W3 tanh(W2 tanh(W1 x + b1) + b2) + b3)``, an
  :class:`~opcc_edu.policies.Actor` with no normalisation and no clipping. Maze policies read
  D4RL's frame, where ``x`` runs down the rows and the origin sits 0.2 cells before the first
  cell's centre: their first layer's columns are permuted and negated (exact), the frame's origin
  becomes the actor's ``obs_mean`` (float64), and the output rows are permuted and negated back
  (exact: tanh is odd). Given the same physical state, the converted actor reproduces the
  original network's action to float64 rounding.
* **Goals.** D4RL rewards a maze step within 0.5 of a point 0.2 cells off the goal cell's centre;
  the original maze queries therefore live in the ``<maze>-d4rl-goal`` variants
  (:func:`opcc_edu.envs.d4rl_goal_env`), whose reward disc sits where D4RL put it.

:func:`relabel_original` then simulates every original query again, in today's simulators with
the converted policies (recipe ``original-relabelled``); :mod:`opcc_edu.build.original_report`
compares the two labels.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import io
import json
import pickle
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..datasets.real import d4rl_maze_to_env_frame
from ..envs import ENV_NAMES, d4rl_goal_env, get_spec
from ..io import atomic_write_text
from ..policies import ORIGINAL_ASSETS_DIR, POLICY_LEVELS, Actor, load_policies, policy_checksums, save_actor
from ..queries import QUERIES_DIR, QuerySet, recompute_values
from ..utils import check_choice

SOURCE_REPOSITORY = "https://github.com/koulanurag/opcc"
"""Where the original benchmark is published (Apache-2.0)."""

ORIGINAL_NAMES: dict[str, str] = {
    "maze2d-open": "d4rl:maze2d-open-v0",
    "maze2d-umaze": "d4rl:maze2d-umaze-v1",
    "maze2d-medium": "d4rl:maze2d-medium-v1",
    "maze2d-large": "d4rl:maze2d-large-v1",
    "halfcheetah": "HalfCheetah-v2",
    "hopper": "Hopper-v2",
    "walker2d": "Walker2d-v2",
}
"""The original benchmark's environment name of each of ours."""

HIDDEN_SIZES = (64, 64)
"""Hidden widths of the original ``ActorNetwork`` (``hidden_dim`` 64 in every environment)."""

CHANGES = (
    "queries: pickles read with an allow-list unpickler, stored as .npz; targets, values and the ten "
    "Monte-Carlo returns unchanged; mujoco-py states [time, qpos, qvel] stored as concat(qpos, qvel)",
    "mazes: observations, first actions and states moved from D4RL's frame (x down the rows, origin 0.2 "
    "cells before the first cell's centre) into this package's frame (x right, y up, the maze centred)",
    "policies: the actor's three layers of each state dict (the critic dropped) stored as safetensors; "
    "maze actors take this package's frame (first-layer columns and output rows permuted and negated, "
    "D4RL's origin as a float64 input shift)",
)
"""What the conversion changed, as the NOTICE and every converted file record it."""


class AllowListUnpickler(pickle.Unpickler):
    """Unpickles numpy arrays, scalars and builtin containers only; any other class is refused.

    ``pickle.load`` would import and call whatever a file names, so an untrusted pickle can run
    arbitrary code. The original query files hold only numpy arrays inside dicts, lists and
    tuples, so this reader resolves exactly the globals those need and raises
    :class:`pickle.UnpicklingError` naming any other.
    """

    ALLOWED = frozenset(
        {
            ("builtins", "dict"),
            ("builtins", "list"),
            ("builtins", "tuple"),
            ("collections", "OrderedDict"),
            ("numpy", "ndarray"),
            ("numpy", "dtype"),
            ("numpy.core.multiarray", "_reconstruct"),
            ("numpy.core.multiarray", "scalar"),
            ("numpy._core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "scalar"),
        }
    )

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"refused to load {module}.{name}: only numpy arrays and builtin containers")
        return super().find_class(module, name)


def read_original_queries(path: str | Path) -> dict[tuple, dict[str, Any]]:
    """The original query pickle of one environment, read with :class:`AllowListUnpickler`.

    Returns:
        ``{((env, level_a), (env, level_b)): {"obs_a", "action_a", "obs_b", "action_b",
        "horizon", "target", "info": {...}}}`` as the original benchmark stores it.
    """
    data = AllowListUnpickler(io.BytesIO(Path(path).read_bytes())).load()
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a dict of policy pairs, got {type(data).__name__}")
    return data


def _to_env_frame(env_name: str, obs: np.ndarray, actions: np.ndarray, state: np.ndarray | None = None):
    """Observations, actions (and ``[qpos, qvel]`` states) of a maze moved from D4RL's frame."""
    data = {"observations": obs, "actions": actions}
    if state is not None:
        data["infos/qpos"], data["infos/qvel"] = state[:, :2], state[:, 2:]
    out = d4rl_maze_to_env_frame(data, env_name)
    moved = np.concatenate([out["infos/qpos"], out["infos/qvel"]], axis=1) if state is not None else None
    return out["observations"], out["actions"], moved


def convert_policy(state_dict: Mapping[str, torch.Tensor], env_name: str) -> Actor:
    """The original ``ActorNetwork`` of ``state_dict`` as an :class:`~opcc_edu.policies.Actor`.

    Args:
        state_dict: the original checkpoint's tensors (keys ``actor.linear{1,2,3}.{weight,bias}``;
            the critic's are ignored).
        env_name: one of ours (mazes get the frame change described in the module docstring).

    Raises:
        ValueError: a missing layer or a shape that does not fit the environment.
    """
    spec = get_spec(env_name)
    try:
        layers = [
            (state_dict[f"actor.linear{k}.weight"].double(), state_dict[f"actor.linear{k}.bias"].double())
            for k in (1, 2, 3)
        ]
    except KeyError as err:
        raise ValueError(f"state_dict lacks the original actor's layer {err}") from None
    if layers[0][0].shape != (HIDDEN_SIZES[0], spec.obs_dim) or layers[2][0].shape != (spec.act_dim, HIDDEN_SIZES[1]):
        raise ValueError(f"state_dict does not fit {env_name}: first layer {tuple(layers[0][0].shape)}")
    actor = Actor(spec.obs_dim, spec.act_dim, HIDDEN_SIZES, obs_clip=None)
    if spec.is_maze:
        (w1, b1), (w3, b3) = layers[0], layers[2]
        # D4RL obs (row, column, v_row, v_column) = (-y, x, -vy, vx) + origin shift, in our frame.
        w1 = torch.stack([w1[:, 1], -w1[:, 0], w1[:, 3], -w1[:, 2]], dim=1)
        # Our action (fx, fy) = (a_column, -a_row).
        layers[0], layers[2] = (w1, b1), (torch.stack([w3[1], -w3[0]]), torch.stack([b3[1], -b3[0]]))
        origin, _, _ = _to_env_frame(env_name, np.zeros((1, 4)), np.zeros((1, 2), np.float32))
        actor.obs_mean = torch.zeros(spec.obs_dim, dtype=torch.float64)
        actor.obs_std = torch.ones(spec.obs_dim, dtype=torch.float64)
        actor.obs_mean[:2] = torch.from_numpy(origin[0, :2])
    with torch.no_grad():
        for layer, (weight, bias) in zip(actor.layers, layers, strict=True):
            layer.weight.copy_(weight.float())  # every entry came from a float32 file: exact
            layer.bias.copy_(bias.float())
    return actor.eval()


def original_network_actions(state_dict: Mapping[str, torch.Tensor], obs: np.ndarray) -> np.ndarray:
    """Actions of the original ``ActorNetwork`` in float64, as ``opcc.get_policy`` runs it: obs
    (N, D) in its own frame (D4RL's for mazes) -> (N, A). Used to check :func:`convert_policy`."""
    x = torch.as_tensor(np.asarray(obs, dtype=np.float64))
    for k in (1, 2, 3):
        x = torch.tanh(
            x @ state_dict[f"actor.linear{k}.weight"].double().T + state_dict[f"actor.linear{k}.bias"].double()
        )
    return x.numpy()


def _env_actions(env_name: str, actions: np.ndarray) -> np.ndarray:
    """Actions of the original frame in ours (mazes: ``(a_column, -a_row)``)."""
    return np.stack([actions[:, 1], -actions[:, 0]], axis=1) if get_spec(env_name).is_maze else actions


def convert_queries(raw: Mapping[tuple, Mapping[str, Any]], env_name: str, metadata: Mapping[str, Any]) -> QuerySet:
    """The original queries of one environment as a :class:`~opcc_edu.queries.QuerySet`.

    Pairs are taken in the file's order; policy levels come from the pair keys. Mazes are moved
    into our frame and named by their ``-d4rl-goal`` variant.
    """
    spec = get_spec(env_name)
    parts: dict[str, list[np.ndarray]] = {}
    for (side_a, side_b), block in raw.items():
        info = block["info"]
        n = len(block["horizon"])
        fields = {"horizon": np.asarray(block["horizon"]), "target": np.asarray(block["target"])}
        for side, key in (("a", side_a), ("b", side_b)):
            state = np.asarray(info[f"state_{side}"], dtype=np.float64)[:, 1:]  # drop mujoco-py's time
            obs = np.asarray(block[f"obs_{side}"], dtype=np.float64)
            action = np.asarray(block[f"action_{side}"], dtype=np.float32)
            if spec.is_maze:
                obs, action, state = _to_env_frame(env_name, obs, action, state)
            fields |= {
                f"obs_{side}": obs,
                f"action_{side}": action,
                f"state_{side}": state,
                f"policy_{side}": np.full(n, int(key[1])),
                f"returns_{side}": np.asarray(info[f"return_list_{side}"], dtype=np.float64),
                f"value_{side}": np.asarray(info[f"return_{side}"], dtype=np.float64),
            }
        for name, value in fields.items():
            parts.setdefault(name, []).append(value)
    arrays = {name: np.concatenate(values) for name, values in parts.items()}
    n = len(arrays["horizon"])
    arrays["same_state"] = np.all(arrays["state_a"] == arrays["state_b"], axis=1)
    arrays["target"] = arrays["target"].astype(np.int8)
    name = d4rl_goal_env(env_name) if spec.is_maze else env_name
    return QuerySet(env_name=name, gamma=np.ones(n), metadata=dict(metadata), **arrays).validate()


def original_policy_returns(config_file: str | Path) -> dict[str, dict[str, float]]:
    """``{original env: {level: mean return}}`` of the original policies, as ``opcc/config.py``
    records them (``ENV_PERFORMANCE_STATS``), read with :func:`ast.literal_eval` (nothing runs)."""
    for node in ast.parse(Path(config_file).read_text()).body:
        if isinstance(node, ast.Assign) and any(
            getattr(t, "id", None) == "ENV_PERFORMANCE_STATS" for t in node.targets
        ):
            stats = ast.literal_eval(node.value)
            return {env: {str(k): float(v["score_mean"]) for k, v in levels.items()} for env, levels in stats.items()}
    raise ValueError(f"{config_file} defines no ENV_PERFORMANCE_STATS")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def import_original(
    source: str | Path,
    commit: str,
    command: str,
    envs: tuple[str, ...] = ENV_NAMES,
    assets_dir: str | Path | None = None,
    queries_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Convert the original benchmark's queries and policies (see the module docstring).

    Args:
        source: a checkout of ``koulanurag/opcc`` (holding ``opcc/assets`` and ``LICENSE``).
        commit: the checkout's commit, recorded in every file.
        command: the command that ran this, recorded in every file.
        envs: the environments to convert (ours).
        assets_dir: where the policies, LICENSE and NOTICE go (default: the package's).
        queries_dir: where ``original/<env>.npz`` goes (default: the package's query folder).

    Returns:
        The import record (also written as ``import.json``): per environment, the source files'
        digests, the converted files' digests and the largest difference between the converted
        and the original actors' actions on the queries' start states (float64).
    """
    source = Path(source)
    assets = Path(assets_dir or ORIGINAL_ASSETS_DIR)
    qdir = Path(queries_dir or QUERIES_DIR) / "original"
    licence = source / "LICENSE"
    if not (source / "opcc" / "assets").is_dir() or not licence.is_file():
        raise FileNotFoundError(f"source must be a checkout of {SOURCE_REPOSITORY} (opcc/assets and LICENSE)")
    assets.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(licence, assets / "LICENSE")
    record: dict[str, Any] = {"source": SOURCE_REPOSITORY, "commit": commit, "command": command, "environments": {}}
    returns = original_policy_returns(source / "opcc" / "config.py")
    for env_name in envs:
        check_choice(env_name, ENV_NAMES, "envs entry")
        folder = source / "opcc" / "assets" / ORIGINAL_NAMES[env_name]
        provenance = {"source": SOURCE_REPOSITORY, "commit": commit, "command": command, "license": "Apache-2.0"}
        entry: dict[str, Any] = {"queries_sha256": _digest(folder / "queries.p"), "policies_sha256": {}}
        state_dicts = {}
        for level in POLICY_LEVELS:
            path = folder / "models" / f"model_{level}.p"
            state_dicts[level] = torch.load(path, map_location="cpu", weights_only=True)
            entry["policies_sha256"][str(level)] = _digest(path)
            out = assets / "policies" / env_name / f"level{level}.safetensors"
            meta = provenance | {"file": f"opcc/assets/{ORIGINAL_NAMES[env_name]}/models/model_{level}.p"}
            save_actor(out, convert_policy(state_dicts[level], env_name), meta | {"changes": list(CHANGES)})
        raw = read_original_queries(folder / "queries.p")
        metadata = provenance | {
            "recipe": "original",
            "original_env": ORIGINAL_NAMES[env_name],
            "file": f"opcc/assets/{ORIGINAL_NAMES[env_name]}/queries.p",
            "file_sha256": entry["queries_sha256"],
            "changes": list(CHANGES),
            "policy_assets": "original",
            "policy_sha256": policy_checksums(env_name, assets),
            "policy_returns": returns[ORIGINAL_NAMES[env_name]],  # opcc/config.py's mean returns
        }
        queries = convert_queries(raw, env_name, metadata)
        queries.save(qdir / f"{env_name}.npz")
        entry["queries"] = len(queries)
        entry["max_action_difference"] = _check_policies(raw, state_dicts, env_name, assets)
        record["environments"][env_name] = entry
    atomic_write_text(assets / "import.json", json.dumps(record, indent=2) + "\n")
    return record


def _check_policies(raw, state_dicts, env_name: str, assets: Path) -> float:
    """Largest |converted - original| action (float64) over the queries' start observations."""
    actors = load_policies(env_name, assets)
    obs = np.concatenate([np.asarray(block[f"obs_{s}"], dtype=np.float64) for block in raw.values() for s in "ab"])
    ours, _, _ = (
        _to_env_frame(env_name, obs, np.zeros((len(obs), 2), np.float32)) if get_spec(env_name).is_maze else (obs, 0, 0)
    )
    worst = 0.0
    for level, actor in zip(POLICY_LEVELS, actors, strict=True):
        with torch.no_grad():
            converted = actor.double()(torch.from_numpy(np.asarray(ours, dtype=np.float64))).numpy()
        original = _env_actions(env_name, original_network_actions(state_dicts[level], obs))
        worst = max(worst, float(np.abs(converted - original).max()))
    return worst


def relabel_original(env_name: str, progress: bool = False) -> QuerySet:
    """Every original query of ``env_name`` simulated again today, with the converted policies.

    Returns:
        A :class:`~opcc_edu.queries.QuerySet` of recipe ``original-relabelled``: the original
        set's queries with values, returns (one run: the rollouts are deterministic) and targets
        of today's simulators; its metadata keeps the original file's provenance.
    """
    from ..queries import load_queries

    original = load_queries(env_name, "original")
    # The rollouts are deterministic: one run is every run.
    one_run = dataclasses.replace(original, returns_a=original.returns_a[:, :1], returns_b=original.returns_b[:, :1])
    value_a, value_b = recompute_values(one_run, progress=progress)
    return dataclasses.replace(
        one_run,
        target=(value_a < value_b).astype(np.int8),
        value_a=value_a,
        value_b=value_b,
        returns_a=value_a[:, None],
        returns_b=value_b[:, None],
        metadata=dict(original.metadata) | {"recipe": "original-relabelled", "relabelled_from": "original"},
    ).validate()
