"""The original benchmark's released queries and policies, converted (opcc_edu.build.original)."""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch

from opcc_edu.build.original import (
    ORIGINAL_NAMES,
    AllowListUnpickler,
    convert_policy,
    original_network_actions,
    read_original_queries,
)
from opcc_edu.build.original_report import agreement
from opcc_edu.envs import ENV_NAMES, d4rl_goal_env, get_spec
from opcc_edu.policies import ORIGINAL_ASSETS_DIR, load_actor, load_policies
from opcc_edu.queries import load_queries, query_policies, recipe_env, recompute_values, verify_policies
from opcc_edu.simulate.rollout import stacked_policy

EXPECTED = {name: 121 if name == "maze2d-large" else 1500 for name in ENV_NAMES}


@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_every_original_set_loads_with_its_targets_and_policies(env_name):
    queries = load_queries(env_name, "original")
    assert len(queries) == EXPECTED[env_name]
    assert queries.env_name == (d4rl_goal_env(env_name) if get_spec(env_name).is_maze else env_name)
    assert queries.metadata["commit"] == "55c96a938be074c0fe95ca68ecbfda07bd8ae867"
    assert queries.metadata["original_env"] == ORIGINAL_NAMES[env_name]
    assert queries.runs == 10 and set(queries.horizons) <= {10, 20, 30, 40, 50}
    # The targets are the original ones, consistent with the original values (validated on load).
    assert np.array_equal(queries.target, (queries.value_a < queries.value_b).astype(np.int8))
    verify_policies(queries)  # the converted policies the set names are the shipped ones
    assert len(query_policies(queries)) == 4


def test_start_observations_are_in_this_package_frame():
    """A maze start's observation is what today's simulator observes in its stored state."""
    from opcc_edu.queries import observations

    for env_name in ("maze2d-medium", "hopper"):
        queries = load_queries(env_name, "original").select(np.arange(40))
        observed = observations(queries.env_name, queries.state_a)
        assert np.allclose(observed, queries.obs_a, atol=1e-5)


def test_import_record_shows_every_policy_reproduced_to_float64_rounding():
    record = json.loads((ORIGINAL_ASSETS_DIR / "import.json").read_text())
    assert set(record["environments"]) == set(ENV_NAMES)
    for entry in record["environments"].values():
        assert entry["max_action_difference"] < 1e-12
        assert len(entry["policies_sha256"]) == 4


def _fake_state_dict(obs_dim: int, act_dim: int, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    sizes = [(64, obs_dim), (64, 64), (act_dim, 64)]
    out = {}
    for k, (rows, cols) in enumerate(sizes, start=1):
        out[f"actor.linear{k}.weight"] = torch.randn(rows, cols, generator=gen) * 0.5
        out[f"actor.linear{k}.bias"] = torch.randn(rows, generator=gen) * 0.5
    out["critic.linear1.weight"] = torch.zeros(64, obs_dim)  # ignored
    return out


@pytest.mark.parametrize("env_name", ["maze2d-umaze", "maze2d-large", "walker2d"])
def test_converted_actor_reproduces_the_original_network(env_name):
    """The original network on D4RL-frame observations == the converted actor on ours, to 1e-12."""
    from opcc_edu.build.original import _env_actions, _to_env_frame

    spec = get_spec(env_name)
    state_dict = _fake_state_dict(spec.obs_dim, spec.act_dim, seed=3)
    rng = np.random.default_rng(0)
    obs = rng.uniform(-2, 8, size=(256, spec.obs_dim))
    ours = _to_env_frame(env_name, obs, np.zeros((256, 2), np.float32))[0] if spec.is_maze else obs
    actor = convert_policy(state_dict, env_name)
    with torch.no_grad():
        single = actor.double()(torch.from_numpy(ours)).numpy()
    expected = _env_actions(env_name, original_network_actions(state_dict, obs))
    assert np.abs(single - expected).max() < 1e-12
    # The batched path the simulator uses gives the same actions.
    stacked = stacked_policy([convert_policy(state_dict, env_name)] * 2)
    with torch.no_grad():
        batched = stacked(torch.from_numpy(ours), torch.zeros(256, dtype=torch.long)).numpy()
    assert np.abs(batched - expected).max() < 1e-12


def test_maze_actor_keeps_its_float64_shift_through_a_file(tmp_path):
    from opcc_edu.policies import save_actor

    actor = convert_policy(_fake_state_dict(4, 2, seed=1), "maze2d-medium")
    save_actor(tmp_path / "a.safetensors", actor)
    loaded, _ = load_actor(tmp_path / "a.safetensors")
    assert loaded.obs_mean.dtype == torch.float64
    assert torch.equal(loaded.obs_mean, actor.obs_mean)
    obs = torch.rand(5, 4)
    assert loaded(obs).dtype == torch.float32  # a float32 caller still gets float32 actions


def test_convert_policy_refuses_a_state_dict_that_does_not_fit():
    with pytest.raises(ValueError, match="does not fit hopper"):
        convert_policy(_fake_state_dict(17, 6, seed=0), "hopper")
    with pytest.raises(ValueError, match="lacks the original actor's layer"):
        convert_policy({}, "hopper")


class _Hostile:
    def __reduce__(self):
        return (os.system, ("echo owned",))


def test_allow_list_unpickler_refuses_code_and_reads_arrays(tmp_path):
    with pytest.raises(pickle.UnpicklingError, match="refused to load"):
        AllowListUnpickler(io.BytesIO(pickle.dumps({"x": _Hostile()}))).load()
    path = tmp_path / "queries.p"
    path.write_bytes(pickle.dumps({(("Hopper-v2", 1), ("Hopper-v2", 2)): {"horizon": np.arange(3)}}))
    data = read_original_queries(path)
    assert np.array_equal(data[(("Hopper-v2", 1), ("Hopper-v2", 2))]["horizon"], np.arange(3))
    path.write_bytes(pickle.dumps([1, 2]))
    with pytest.raises(ValueError, match="expected a dict"):
        read_original_queries(path)


@pytest.mark.parametrize("env_name", ["maze2d-umaze", "hopper", "halfcheetah"])
def test_shipped_relabelled_values_are_what_the_simulator_gives_today(env_name):
    """Re-simulating a sample of queries reproduces the shipped re-labelled values exactly."""
    original = load_queries(env_name, "original")
    relabelled = load_queries(env_name, "original-relabelled")
    assert np.array_equal(relabelled.state_a, original.state_a) and np.array_equal(relabelled.horizon, original.horizon)
    sample = np.random.default_rng(0).choice(len(original), size=24, replace=False)
    value_a, value_b = recompute_values(relabelled.select(sample))
    assert np.array_equal(value_a, relabelled.value_a[sample]) and np.array_equal(value_b, relabelled.value_b[sample])


def test_agreement_figures_of_the_report():
    """The agreement the report states, recomputed from the shipped sets."""
    floor = {"maze2d-open": 1.0, "maze2d-umaze": 1.0, "maze2d-medium": 1.0, "maze2d-large": 1.0}
    floor |= {"hopper": 0.99, "walker2d": 0.99, "halfcheetah": 0.93}
    for env_name, low in floor.items():
        row = agreement(load_queries(env_name, "original"), load_queries(env_name, "original-relabelled"))
        assert row["agreement"] >= low, (env_name, row["agreement"])
        assert set(row["by_horizon"]) == set(load_queries(env_name, "original").horizons)


def test_recipe_env_sends_original_maze_queries_to_the_d4rl_goal_variant():
    assert recipe_env("maze2d-umaze", "original") == "maze2d-umaze-d4rl-goal"
    assert recipe_env("maze2d-umaze-d4rl-goal", "original-relabelled") == "maze2d-umaze-d4rl-goal"
    assert recipe_env("maze2d-umaze", "paper") == "maze2d-umaze"
    assert recipe_env("hopper", "original") == "hopper"
    with pytest.raises(ValueError, match="recipe"):
        recipe_env("hopper", "originals")


def test_original_policies_are_not_the_package_policies():
    ours = load_policies("hopper")[0]
    theirs = load_policies("hopper", ORIGINAL_ASSETS_DIR)[0]
    assert ours.obs_clip is not None and theirs.obs_clip is None


def test_licence_and_notice_ship_in_the_wheel(tmp_path):
    import shutil

    root = ORIGINAL_ASSETS_DIR.parents[2]
    source = tmp_path / "source"  # a copy, so that building leaves nothing in the checkout
    shutil.copytree(root / "opcc_edu", source / "opcc_edu", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("opcc_edu-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("LICENSE", "NOTICE", "import.json", "policies/hopper/level1.safetensors"):
        assert f"opcc_edu/assets/original/{name}" in names
    assert "opcc_edu/assets/queries/original/maze2d-large.npz" in names
    assert "opcc_edu/assets/queries/original-relabelled/walker2d.npz" in names
    notice = (ORIGINAL_ASSETS_DIR / "NOTICE").read_text()
    assert "https://github.com/koulanurag/opcc" in notice and "Apache License 2.0" in notice
    assert "Apache License" in (ORIGINAL_ASSETS_DIR / "LICENSE").read_text()


def test_no_model_rule_ranks_original_policies_by_the_original_table():
    """The original hopper's level 3 returned more than its level 2 (opcc/config.py); the rule follows."""
    from opcc_edu.baselines.heuristic import heuristic_answers

    queries = load_queries("hopper", "original")
    returns = queries.metadata["policy_returns"]
    assert returns["3"] > returns["2"] > returns["4"]
    pair = queries.select((queries.policy_a == 2) & (queries.policy_b == 3))
    assert len(pair) and np.all(heuristic_answers(pair).prediction == 1)  # side b (level 3) is judged better


def _fake_source(root, rng):
    """A checkout of the original repository in miniature: Hopper-v2 and the U-maze, 8 queries each."""
    (root / "opcc").mkdir(parents=True)
    (root / "LICENSE").write_text("Apache License\nVersion 2.0\n")
    stats = {
        "Hopper-v2": {1: {"score_mean": 4.0}, 2: {"score_mean": 3.0}, 3: {"score_mean": 2.0}, 4: {"score_mean": 1.0}}
    }
    stats["d4rl:maze2d-umaze-v1"] = {k: {"score_mean": float(5 - k)} for k in (1, 2, 3, 4)}
    (root / "opcc" / "config.py").write_text(f"import os\nENV_PERFORMANCE_STATS = {stats!r}\n")
    shapes = {"hopper": (11, 3, 12), "maze2d-umaze": (4, 2, 4)}
    for env_name, (obs_dim, act_dim, state_dim) in shapes.items():
        folder = root / "opcc" / "assets" / ORIGINAL_NAMES[env_name]
        (folder / "models").mkdir(parents=True)
        for level in (1, 2, 3, 4):
            torch.save(_fake_state_dict(obs_dim, act_dim, seed=level), folder / "models" / f"model_{level}.p")
        n = 8
        returns = {s: rng.uniform(0, 20, size=(n, 10)) for s in "ab"}
        block = {
            "obs_a": rng.uniform(0.5, 2.5, size=(n, obs_dim)),
            "obs_b": rng.uniform(0.5, 2.5, size=(n, obs_dim)),
            "action_a": rng.uniform(-1, 1, size=(n, act_dim)).astype(np.float32),
            "action_b": rng.uniform(-1, 1, size=(n, act_dim)).astype(np.float32),
            "horizon": np.full(n, 20),
            "target": returns["a"].mean(1) < returns["b"].mean(1),
            "info": {
                "return_a": returns["a"].mean(1),
                "return_b": returns["b"].mean(1),
                "return_list_a": returns["a"],
                "return_list_b": returns["b"],
                "state_a": rng.uniform(0.5, 2.5, size=(n, 1 + state_dim)),
                "state_b": rng.uniform(0.5, 2.5, size=(n, 1 + state_dim)),
                "runs": 10,
            },
        }
        key = ((ORIGINAL_NAMES[env_name], 2), (ORIGINAL_NAMES[env_name], 3))
        (folder / "queries.p").write_bytes(pickle.dumps({key: block}))
    return shapes


def test_import_converts_a_source_checkout_without_touching_the_package(tmp_path):
    """The whole import on a miniature source: files, provenance, frames, policies to 1e-12."""
    from opcc_edu.build.original import import_original
    from opcc_edu.io import sha256_file
    from opcc_edu.queries import QuerySet

    source = tmp_path / "opcc"
    _fake_source(source, np.random.default_rng(0))
    manifest = ORIGINAL_ASSETS_DIR.parent / "MANIFEST.json"
    before = sha256_file(manifest)
    record = import_original(
        source, "0" * 40, "test", envs=("hopper", "maze2d-umaze"), assets_dir=tmp_path / "a", queries_dir=tmp_path / "q"
    )
    assert sha256_file(manifest) == before  # the package's own assets are untouched
    assert (tmp_path / "a" / "LICENSE").read_text().startswith("Apache License")
    for env_name in ("hopper", "maze2d-umaze"):
        assert record["environments"][env_name]["max_action_difference"] < 1e-12
        assert record["environments"][env_name]["queries"] == 8
        queries = QuerySet.load(tmp_path / "q" / "original" / f"{env_name}.npz")
        raw = read_original_queries(source / "opcc" / "assets" / ORIGINAL_NAMES[env_name] / "queries.p")
        (block,) = raw.values()
        assert np.array_equal(queries.target, block["target"].astype(np.int8))
        assert np.array_equal(queries.returns_a, block["info"]["return_list_a"])
        assert set(queries.policy_a) == {2} and set(queries.policy_b) == {3}
        assert queries.metadata["commit"] == "0" * 40 and queries.metadata["policy_returns"]["1"] > 0
    maze = QuerySet.load(tmp_path / "q" / "original" / "maze2d-umaze.npz")
    (block,) = read_original_queries(source / "opcc" / "assets" / ORIGINAL_NAMES["maze2d-umaze"] / "queries.p").values()
    # D4RL's observed (row, column) = (x_d, y_d) lands at x = column + 0.7 - W/2, y = H/2 - row - 0.7.
    assert np.allclose(maze.obs_a[:, 0], block["obs_a"][:, 1] + 0.7 - 2.5, atol=1e-6)
    assert np.allclose(maze.obs_a[:, 1], 2.5 - block["obs_a"][:, 0] - 0.7, atol=1e-6)
    assert maze.env_name == "maze2d-umaze-d4rl-goal"


def test_import_refuses_a_folder_that_is_not_a_checkout(tmp_path):
    from opcc_edu.build.original import import_original, original_policy_returns

    with pytest.raises(FileNotFoundError, match="checkout of"):
        import_original(tmp_path, "0" * 40, "test", assets_dir=tmp_path / "a", queries_dir=tmp_path / "q")
    (tmp_path / "config.py").write_text("X = 1\n")
    with pytest.raises(ValueError, match="no ENV_PERFORMANCE_STATS"):
        original_policy_returns(tmp_path / "config.py")


def test_agreement_and_its_experiments_refuse_what_they_cannot_compare():
    from opcc_edu.build.original_report import agreement_table, friction_values

    queries = load_queries("maze2d-umaze", "original")
    with pytest.raises(ValueError, match="same queries"):
        agreement(queries, queries.select(np.arange(10)))
    with pytest.raises(ValueError, match="no geom 'no_such_geom'"):
        friction_values(load_queries("walker2d", "original").select(np.arange(4)), geom="no_such_geom")
    table = agreement_table({"maze2d-umaze": agreement(queries, queries)})
    assert "| maze2d-umaze | 1500 | 100.00% |" in table
