"""Query sets: the data contract, the construction recipe, the shipped sets, the plots."""

import numpy as np
import pytest
import torch

from opcc_edu import envs
from opcc_edu.build import PaperRecipe, QueryRecipe, build_and_save_query_set, build_query_set, paper_filter
from opcc_edu.io import CorruptFileError
from opcc_edu.policies import Actor
from opcc_edu.queries import (
    CALLER_POLICIES,
    HORIZONS,
    QuerySet,
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


# One small build of the hard recipe, used by the fixture and re-run by the determinism test.
SMALL_BUILD = dict(
    recipe="hard",
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
    assert ax.get_ylabel() == "queries (count)"
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


def test_gap_histogram_colours_a_horizon_alike_in_every_panel(small_set):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba

    from opcc_edu.plotting import plot_gap_histogram

    def colours(queries):  # legend label -> colour of the histogram outline
        ax = plot_gap_histogram(queries, ax=plt.figure().subplots())
        return {p.get_label(): p.get_edgecolor() for p in ax.patches if p.get_label().startswith("h = ")}

    without_10 = small_set.select(small_set.horizon != 10)  # a maze set of the paper recipe has no h = 10
    full, part = colours(small_set), colours(without_10)
    assert set(part) == {f"h = {h}" for h in HORIZONS[1:]}
    for label, colour in part.items():
        np.testing.assert_allclose(colour, full[label], err_msg=label)
    # The threshold: one black dashed line where every horizon shares it (the paper recipe's gap > 10).
    ax = plot_gap_histogram(load_queries("maze2d-umaze"), ax=plt.figure().subplots())
    (line,) = [x for x in ax.lines if x.get_label() == "filter threshold"]
    assert to_rgba(line.get_color()) == to_rgba("k") and line.get_linestyle() == "--"
    np.testing.assert_allclose(line.get_xdata(), 10.0)
    plt.close("all")


# --------------------------------------------------------------------------------------------
# The shipped query sets
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", envs.ENV_NAMES)
def test_shipped_query_set(name):
    q = load_queries(name)  # the default: the paper recipe; loads and validates
    assert q.env_name == name and q.metadata["recipe"] == "paper"
    assert len(q) == 1500
    # The paper's filter at every horizon: no maze query of horizon 10 can pass it.
    assert np.all(q.gap > 10)
    assert q.horizons == (list(HORIZONS[1:]) if envs.get_spec(name).is_maze else list(HORIZONS))
    # The 6 pairs of distinct policies, 250 queries each; never a policy against itself.
    assert np.all(q.policy_a != q.policy_b)
    pairs, counts = np.unique(np.sort(np.stack([q.policy_a, q.policy_b], axis=1), axis=1), axis=0, return_counts=True)
    assert len(pairs) == 6 and np.all(counts == 250)
    assert 0 < q.same_state.mean() < 0.2, "same state with probability 0.2 before filtering"
    meta = q.metadata
    assert meta["command"] == f"opcc-edu build queries {name} --recipe paper --seed 0"
    assert all(c["kept"] == 250 and c["passed"] >= 250 for c in meta["counts"].values())
    assert meta["start_states"]["total"] == 2000 and meta["runs"] == 1
    assert query_set_path(name).with_name(name + ".npz.sha256").exists()


@pytest.mark.parametrize("name", envs.ENV_NAMES)
def test_shipped_hard_query_set(name):
    q = load_queries(name, "hard")
    assert q.env_name == name and q.metadata["recipe"] == "hard"
    assert len(q) == 1500 and q.horizons == list(HORIZONS)
    assert q.same_state.mean() == 0.5
    thresholds = np.array([gap_threshold(name, int(h)) for h in q.horizon])
    assert np.all(q.gap >= thresholds)
    assert q.metadata["command"].startswith("opcc-edu build queries " + name)


# SHA-256 of the seven sets shipped before recipes had names: the hard sets are those files, unchanged.
HARD_SET_SHA256 = {
    "halfcheetah": "cc608bdc2a687e85d6ed2fc244df91e7f19f3dec06547c3162d3ac46ab3fea45",
    "hopper": "b9298a7fb74f895a268a2774c6a6c3063b49bc6e031f674b3ddf46975c1211d8",
    "maze2d-large": "972ee0723fbe57bc7af8a3d45e149af760a250d228bb85bf1c1d64e8b5036a62",
    "maze2d-medium": "2b8326df6df83283f7ce19bdbbf39c4a12bc571c161ed80bd186ee2ab3db47db",
    "maze2d-open": "fe14d463b050779f7a58a110276099047319e6ef4fa7f8a0665942574f99f680",
    "maze2d-umaze": "6152eb0bb68d6362d015b650e3b775da5554ad63dc6008dfc466465155d781c4",
    "walker2d": "ff2b35f3c9112e2ebf1ee0ed46735a9dcb54536b42b396521f3664e088e61e3c",
}


def test_hard_sets_are_the_earlier_files_bit_for_bit():
    from opcc_edu.io import read_manifest, sha256_file

    manifest = read_manifest()
    for name, digest in HARD_SET_SHA256.items():
        path = query_set_path(name, "hard")
        assert sha256_file(path) == digest
        assert manifest[f"queries/hard/{name}.npz"] == digest
        assert path.with_name(name + ".npz.sha256").read_text().split()[0] == digest


def test_load_queries_names_the_recipes():
    with pytest.raises(ValueError, match="recipe.*paper, hard"):
        load_queries("hopper", "easy")
    with pytest.raises(ValueError, match="unknown recipe False; valid choices: paper, hard"):
        load_queries("hopper", False)  # the former second argument, verify
    with pytest.raises(ValueError, match="verify must be True or False"):
        load_queries("hopper", "paper", "no")


@pytest.mark.parametrize("recipe", ["paper", "hard"])
@pytest.mark.parametrize("name", envs.ENV_NAMES)
def test_shipped_values_recomputed_with_shipped_policies(name, recipe):
    q = load_queries(name, recipe)
    rng = np.random.default_rng(0)
    # A few queries of every horizon keeps this fast while touching every horizon.
    rows = np.concatenate([rng.choice(np.flatnonzero(q.horizon == h), 2, replace=False) for h in q.horizons])
    sample = q.select(rows)
    value_a, value_b = recompute_values(sample)
    np.testing.assert_allclose(value_a, sample.value_a, rtol=0, atol=1e-6)
    np.testing.assert_allclose(value_b, sample.value_b, rtol=0, atol=1e-6)


def test_build_and_save_writes_a_valid_set(tmp_path):
    path = build_and_save_query_set(
        "maze2d-open", tmp_path, "hard", n_queries=20, candidates_per_round=200, max_rounds=20, progress=False
    )
    assert path == tmp_path / "maze2d-open.npz" and path.with_name("maze2d-open.npz.sha256").exists()
    q = QuerySet.load(path)
    assert len(q) == 20 and q.horizons == list(HORIZONS) and q.metadata["recipe"] == "hard"
    assert (
        q.metadata["command"]
        == "opcc-edu build queries maze2d-open --recipe hard --seed 0 --n-queries 20 --candidates 200 --max-rounds 20"
    )
    assert q.metadata["policy_sha256"] == policy_checksums("maze2d-open")
    assert set(q.metadata["policy_sha256"]) == {"1", "2", "3", "4"}
    assert q.metadata["build_seconds"] >= 0
    verify_policies(q)


# --------------------------------------------------------------------------------------------
# The recipe's knobs
# --------------------------------------------------------------------------------------------


def test_recipe_object_builds_the_same_set_as_keywords(small_set, open_maze_policies):
    knobs = {k: v for k, v in SMALL_BUILD.items() if k not in ("recipe", "seed", "progress", "command")}
    recipe = QueryRecipe(**knobs)
    assert recipe.horizons == HORIZONS and recipe.n_queries == 50
    again = build_query_set("maze2d-open", recipe, seed=3, policies=open_maze_policies, progress=False, command="test")
    for name in ("state_a", "state_b", "action_b", "policy_a", "horizon", "returns_a", "returns_b"):
        np.testing.assert_array_equal(getattr(again, name), getattr(small_set, name))
    assert again.metadata == small_set.metadata


def test_recipe_rejects_bad_knobs(open_maze_policies):
    with pytest.raises(ValueError, match="unknown query recipe field.*n_querys.*valid fields: n_queries"):
        build_query_set("maze2d-open", "hard", n_querys=10, policies=open_maze_policies)
    with pytest.raises(ValueError, match="unknown paper recipe field.*n_queries.*valid fields: queries_per_pair"):
        build_query_set("maze2d-open", n_queries=10, policies=open_maze_policies)
    with pytest.raises(ValueError, match="unknown recipe 'easy'; valid choices: paper, hard"):
        build_query_set("maze2d-open", "easy", policies=open_maze_policies)
    with pytest.raises(ValueError, match="candidates_per_round must be an integer >= 2"):
        QueryRecipe(candidates_per_round=1)
    with pytest.raises(ValueError, match="horizons must be distinct"):
        QueryRecipe(horizons=(10, 10))
    with pytest.raises(ValueError, match="gamma"):
        QueryRecipe(gamma=1.5)
    with pytest.raises(ValueError, match="recipe must be one of paper, hard, a PaperRecipe, a QueryRecipe"):
        build_query_set("maze2d-open", 50, policies=open_maze_policies)
    for bad in (dict(same_state_probability=1.5), dict(keep_probability=0.0), dict(min_gap=-1.0)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            PaperRecipe(**bad)


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
    monkeypatch.setattr(metadata, "policy_checksums", lambda env_name, assets_dir=None: changed)
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


# --------------------------------------------------------------------------------------------
# The paper recipe
# --------------------------------------------------------------------------------------------
PAPER_BUILD = dict(
    queries_per_pair=4, pool_size=300, batch_size=64, episodes_per_batch=2, seed=5, progress=False, command="test"
)


@pytest.fixture(scope="module")
def paper_set(open_maze_policies):
    return build_query_set("maze2d-open", policies=open_maze_policies, **PAPER_BUILD)


def test_paper_build_follows_the_original_recipe(paper_set):
    q = paper_set
    assert len(q) == 24 and q.metadata["recipe"] == "paper"
    assert np.all(q.gap > 10) and 10 not in q.horizons, "gap above 10 at every horizon, mazes too"
    assert np.all(q.policy_a != q.policy_b)
    pairs = {tuple(sorted(p)) for p in zip(q.policy_a.tolist(), q.policy_b.tolist(), strict=True)}
    assert len(pairs) == 6
    np.testing.assert_array_equal(q.state_a[q.same_state], q.state_b[q.same_state])
    # both orders of a pair occur: the side of a policy carries no information
    assert np.any(q.policy_a < q.policy_b) and np.any(q.policy_a > q.policy_b)
    meta = q.metadata
    assert meta["start_states"]["total"] == 300 and meta["start_states"]["noise_std"] == 0.5
    assert set(meta["counts"]) == {"1-2", "1-3", "1-4", "2-3", "2-4", "3-4"}
    for c in meta["counts"].values():
        assert c["candidates"] >= c["passed"] >= c["kept"] and c["kept"] <= 4
    assert sum(c["kept"] for c in meta["counts"].values()) == meta["n_queries"] == len(q)
    assert "> 10" in meta["filter_rule"] and meta["command"] == "test"


def test_paper_build_is_deterministic_and_relabels_from_its_states(paper_set, open_maze_policies):
    again = build_query_set("maze2d-open", policies=open_maze_policies, **PAPER_BUILD)
    for name in ("state_a", "state_b", "action_a", "action_b", "policy_a", "policy_b", "horizon", "returns_a"):
        np.testing.assert_array_equal(getattr(again, name), getattr(paper_set, name))
    value_a, value_b = recompute_values(paper_set, open_maze_policies)
    np.testing.assert_allclose(value_a, paper_set.value_a, rtol=0, atol=1e-6)
    np.testing.assert_allclose(value_b, paper_set.value_b, rtol=0, atol=1e-6)


def test_paper_filter_drops_small_gaps_and_overlapping_runs():
    one_run = np.array([[[0.0], [0.0], [5.0]], [[10.0], [10.5], [30.0]]])  # (2, 3, 1)
    np.testing.assert_array_equal(paper_filter(one_run), [False, True, True])
    # With several runs, the two sides' ranges of returns must not overlap either.
    runs = np.array([[[0.0, 2.0], [0.0, 30.0]], [[20.0, 24.0], [20.0, 24.0]]])  # (2, 2, 2)
    np.testing.assert_array_equal(paper_filter(runs), [True, False])
    with pytest.raises(ValueError, match="shape"):
        paper_filter(np.zeros((3, 2, 1)))


def test_a_pair_short_of_its_budget_is_named(open_maze_policies):
    with pytest.warns(RuntimeWarning, match="kept fewer than 50 queries within the budget of 20"):
        q = build_query_set(
            "maze2d-open",
            policies=open_maze_policies,
            queries_per_pair=50,
            max_candidates_per_pair=20,
            pool_size=100,
            batch_size=20,
            progress=False,
        )
    assert all(c["candidates"] == 20 for c in q.metadata["counts"].values()) and len(q) < 300
