"""Query sets: the data contract, the construction recipe, the shipped sets, the plots."""

import numpy as np
import pytest
import torch

from opcc_edu import envs
from opcc_edu.io import CorruptFileError
from opcc_edu.policies import Actor
from opcc_edu.queries import (
    CALLER_POLICIES,
    HORIZONS,
    QueryRecipe,
    QuerySet,
    build_and_save_query_set,
    build_query_set,
    gap_threshold,
    load_queries,
    policy_checksums,
    query_set_path,
    recompute_values,
    verify_policies,
)


def goal_seeking_actor(env_name, gain):
    """An Actor whose weights implement a saturated PD controller towards the maze goal.

    ``gain`` sets its quality: large gains reach the goal fast, a negative gain flees it.
    """
    goal = envs.make_env(env_name).unwrapped.goal
    actor = Actor(4, 2, hidden_sizes=(4, 4), obs_clip=None)
    with torch.no_grad():
        actor.obs_mean.copy_(torch.tensor([goal[0], goal[1], 0.0, 0.0]))
        for layer in actor.layers:
            layer.weight.zero_()
            layer.bias.zero_()
        # hidden 1: tanh(-0.5 * (pos - goal) - 0.1 * vel) per axis
        actor.layers[0].weight[0, 0], actor.layers[0].weight[0, 2] = -0.5, -0.1
        actor.layers[0].weight[1, 1], actor.layers[0].weight[1, 3] = -0.5, -0.1
        actor.layers[1].weight[0, 0] = actor.layers[1].weight[1, 1] = 1.0
        actor.layers[2].weight[0, 0] = actor.layers[2].weight[1, 1] = 4.0 * gain
    return actor.eval()


@pytest.fixture(scope="module")
def open_maze_policies():
    return [goal_seeking_actor("maze2d-open", g) for g in (3.0, 1.0, 0.2, -1.0)]


# One small build, used by the fixture and re-run by the determinism test.
SMALL_BUILD = dict(
    n_queries=50,
    seed=3,
    runs=2,
    candidates_per_round=200,
    episodes_per_behavior=2,
    episode_steps=150,
    progress=False,
    command="test",
)


@pytest.fixture(scope="module")
def small_set(open_maze_policies):
    return build_query_set("maze2d-open", policies=open_maze_policies, **SMALL_BUILD)


def test_build_follows_the_recipe(small_set):
    q = small_set
    assert len(q) == 50
    assert q.horizons == list(HORIZONS)
    assert np.all(np.bincount(q.horizon)[list(HORIZONS)] == 10)
    assert q.same_state.any() and (~q.same_state).any()
    # The ambiguity filter of the mazes: a gap of at least a tenth of the horizon.
    assert np.all(q.gap >= 0.1 * q.horizon - 1e-12)
    assert np.all([gap_threshold("maze2d-open", h) == 0.1 * h for h in HORIZONS])
    np.testing.assert_array_equal(q.state_a[q.same_state], q.state_b[q.same_state])
    assert np.all(np.abs(q.action_a) <= 1) and np.all(np.abs(q.action_b) <= 1)
    assert np.all((q.value_a >= 0) & (q.value_a <= q.horizon)), "maze values count steps in the goal"
    assert set(np.unique(q.policy_a)) <= {1, 2, 3, 4}
    assert q.returns_a.shape == (50, 2)
    meta = q.metadata
    assert meta["seed"] == 3 and meta["command"] == "test" and "opcc_edu" in meta["versions"]
    assert meta["gap_thresholds"] == {str(h): 0.1 * h for h in HORIZONS}
    assert "0.1 * horizon" in meta["filter_rule"]


def test_build_is_deterministic_given_seed(small_set, open_maze_policies):
    again = build_query_set("maze2d-open", policies=open_maze_policies, **SMALL_BUILD)
    for name in ("state_a", "state_b", "action_a", "policy_b", "horizon", "value_a", "value_b", "returns_b"):
        np.testing.assert_array_equal(getattr(again, name), getattr(small_set, name))


def test_stored_values_are_reproduced_from_stored_states(small_set, open_maze_policies):
    value_a, value_b = recompute_values(small_set, open_maze_policies)
    np.testing.assert_allclose(value_a, small_set.value_a, rtol=0, atol=1e-6)
    np.testing.assert_allclose(value_b, small_set.value_b, rtol=0, atol=1e-6)
    obs = small_set.obs_a[:, :2]
    np.testing.assert_allclose(obs, small_set.state_a[:, :2], rtol=0, atol=1e-6)


def test_save_load_roundtrip_and_corruption(small_set, tmp_path):
    path = small_set.save(tmp_path / "q.npz")
    loaded = QuerySet.load(path)
    assert loaded.env_name == "maze2d-open" and loaded.metadata == small_set.metadata
    for name in ("obs_a", "returns_a", "same_state", "target", "gamma"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(small_set, name))
        assert getattr(loaded, name).dtype == getattr(small_set, name).dtype
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError):
        QuerySet.load(path)


def test_validate_catches_inconsistent_labels(small_set):
    broken = small_set.select(np.arange(len(small_set)))
    broken.target = 1 - broken.target
    with pytest.raises(ValueError, match="target"):
        broken.validate()
    broken = small_set.select(np.arange(len(small_set)))
    broken.obs_b = broken.obs_b[:, :3]
    with pytest.raises(ValueError, match="obs_b"):
        broken.validate()
    broken = small_set.select(np.arange(len(small_set)))
    broken.policy_a = broken.policy_a.copy()
    broken.policy_a[0] = 7
    with pytest.raises(ValueError, match="policy_a"):
        broken.validate()


def test_selection_helpers(small_set):
    q = small_set
    sub = q.by_horizon(30)
    assert len(sub) == 10 and np.all(sub.horizon == 30)
    with pytest.raises(ValueError, match="horizon"):
        q.by_horizon(35)
    mask = q.same_state
    assert len(q.select(mask)) == int(mask.sum())
    np.testing.assert_array_equal(q.select([3, 1]).value_a, q.value_a[[3, 1]])
    seen = 0
    for (a, b), part in q.policy_pairs():
        assert np.all(part.policy_a == a) and np.all(part.policy_b == b)
        seen += len(part)
    assert seen == len(q)
    frame = q.to_frame()
    assert list(frame["gap"]) == list(q.gap)


def test_plots_draw_the_expected_panels(small_set, open_maze_policies):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from opcc_edu.plotting import draw_maze, maze_geometry, plot_gap_histogram, plot_query, plot_value_scatter

    axes = plot_value_scatter(small_set)
    assert len(axes) == 5 and axes[0].get_xlabel().endswith("(steps in goal)")
    ax = plot_gap_histogram(small_set)
    assert ax.get_ylabel() == "queries"
    axes = plot_query(small_set, 0, open_maze_policies)
    assert len(axes) == 2 and axes[0].get_xlabel() == "x (m)"
    plt.close("all")
    # The maze drawing uses the simulator's own frame.
    for name in envs.MAZE_NAMES:
        core = envs.make_env(name).unwrapped
        geometry = maze_geometry(name)
        np.testing.assert_allclose(np.sort(geometry["free"], axis=0), np.sort(core.free_cell_centers, axis=0))
        np.testing.assert_allclose(geometry["goal"], core.goal)
    ax = draw_maze("maze2d-large")
    assert ax.get_xlabel() == "x (m)" and ax.get_ylabel() == "y (m)"
    plt.close("all")


# --------------------------------------------------------------------------------------------
# The shipped query sets
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", envs.ENV_NAMES)
def test_shipped_query_set(name):
    q = load_queries(name)  # loads and validates
    assert q.env_name == name
    assert len(q) >= 1500
    assert q.horizons == list(HORIZONS)
    assert q.same_state.any() and (~q.same_state).any()
    thresholds = np.array([gap_threshold(name, int(h)) for h in q.horizon])
    assert np.all(q.gap >= thresholds)
    meta = q.metadata
    assert meta["command"].startswith("opcc-edu build queries " + name)
    assert isinstance(meta["seed"], int) and meta["versions"]["opcc_edu"]
    assert query_set_path(name).with_name(name + ".npz.sha256").exists()


@pytest.mark.parametrize("name", envs.ENV_NAMES)
def test_shipped_values_recomputed_with_shipped_policies(name):
    q = load_queries(name)
    rng = np.random.default_rng(0)
    # A few queries of every horizon keeps this fast while touching every horizon.
    rows = np.concatenate([rng.choice(np.flatnonzero(q.horizon == h), 2, replace=False) for h in HORIZONS])
    sample = q.select(rows)
    value_a, value_b = recompute_values(sample)
    np.testing.assert_allclose(value_a, sample.value_a, rtol=0, atol=1e-6)
    np.testing.assert_allclose(value_b, sample.value_b, rtol=0, atol=1e-6)


def test_build_and_save_writes_a_valid_set(tmp_path):
    path = build_and_save_query_set("maze2d-open", tmp_path, n_queries=20, candidates_per_round=200, progress=False)
    assert path == tmp_path / "maze2d-open.npz" and path.with_name("maze2d-open.npz.sha256").exists()
    q = QuerySet.load(path)
    assert len(q) == 20 and q.horizons == list(HORIZONS)
    assert (
        q.metadata["command"]
        == "opcc-edu build queries maze2d-open --seed 0 --n-queries 20 --candidates 200 --max-rounds 20"
    )
    assert q.metadata["policy_sha256"] == policy_checksums("maze2d-open")
    assert set(q.metadata["policy_sha256"]) == {"1", "2", "3", "4"}
    assert q.metadata["build_seconds"] >= 0
    verify_policies(q)


# --------------------------------------------------------------------------------------------
# The recipe's knobs
# --------------------------------------------------------------------------------------------


def test_recipe_object_builds_the_same_set_as_keywords(small_set, open_maze_policies):
    knobs = {k: v for k, v in SMALL_BUILD.items() if k not in ("seed", "progress", "command")}
    recipe = QueryRecipe(**knobs)
    assert recipe.horizons == HORIZONS and recipe.n_queries == 50
    again = build_query_set("maze2d-open", recipe, seed=3, policies=open_maze_policies, progress=False, command="test")
    for name in ("state_a", "state_b", "action_b", "policy_a", "horizon", "returns_a", "returns_b"):
        np.testing.assert_array_equal(getattr(again, name), getattr(small_set, name))
    assert again.metadata == small_set.metadata


def test_recipe_rejects_bad_knobs(open_maze_policies):
    with pytest.raises(ValueError, match="unknown query recipe field.*n_querys.*valid fields: n_queries"):
        build_query_set("maze2d-open", n_querys=10, policies=open_maze_policies)
    with pytest.raises(ValueError, match="candidates_per_round must be an integer >= 2"):
        QueryRecipe(candidates_per_round=1)
    with pytest.raises(ValueError, match="horizons must be distinct"):
        QueryRecipe(horizons=(10, 10))
    with pytest.raises(ValueError, match="gamma"):
        QueryRecipe(gamma=1.5)
    with pytest.raises(ValueError, match="recipe must be a QueryRecipe"):
        build_query_set("maze2d-open", 50, policies=open_maze_policies)


def test_build_reports_horizons_short_of_queries(open_maze_policies):
    # One round draws at most 16 candidates per cell, far fewer than the 50 each cell needs.
    with pytest.raises(RuntimeError, match=r"maze2d-open: after 1 rounds .*horizons \[10, 20, 30, 40, 50\] lack"):
        build_query_set(
            "maze2d-open",
            QueryRecipe(
                n_queries=500, runs=1, candidates_per_round=2, max_rounds=1, episodes_per_behavior=1, episode_steps=20
            ),
            policies=open_maze_policies,
            progress=False,
        )


# --------------------------------------------------------------------------------------------
# Policy checksums
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", envs.ENV_NAMES)
def test_shipped_sets_match_the_shipped_policies(name):
    q = load_queries(name, verify=False)
    assert q.metadata["policy_sha256"] == policy_checksums(name)
    verify_policies(q)  # the shipped files
    verify_policies(q, dict(q.metadata["policy_sha256"]))  # the same digests, given explicitly


def test_tampered_checksums_are_caught():
    q = load_queries("hopper", verify=False)
    recorded = q.metadata["policy_sha256"]
    tampered = dict(recorded, **{"2": "0" * 64})
    with pytest.raises(ValueError, match=f"hopper: policy level 2 .*{recorded['2']}.*{'0' * 64}"):
        verify_policies(q, tampered)
    missing = {k: v for k, v in recorded.items() if k != "4"}
    with pytest.raises(ValueError, match="hopper: policy level 4 .*<missing>"):
        verify_policies(q, missing)
    extra = dict(recorded, **{"5": "f" * 64})
    with pytest.raises(ValueError, match="policy level 5 .*<none recorded>"):
        verify_policies(q, extra)


def test_load_queries_refuses_a_set_whose_policies_changed(monkeypatch):
    import opcc_edu.queries.metadata as metadata

    changed = dict(policy_checksums("maze2d-umaze"), **{"1": "a" * 64})
    monkeypatch.setattr(metadata, "policy_checksums", lambda env_name: changed)
    with pytest.raises(ValueError, match="maze2d-umaze: policy level 1 .*stale"):
        load_queries("maze2d-umaze")
    assert len(load_queries("maze2d-umaze", verify=False)) >= 1500


def test_sets_with_caller_policies_are_skipped_and_unrecorded_sets_refused(small_set):
    assert small_set.metadata["policy_sha256"] == CALLER_POLICIES
    verify_policies(small_set, {"1": "0" * 64})  # nothing recorded to compare: skipped
    bare = small_set.select(np.arange(3))
    bare.metadata = {}
    with pytest.raises(ValueError, match="maze2d-open: the query set records no policy checksums"):
        verify_policies(bare)
