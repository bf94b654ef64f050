"""Figures of the benchmark: maze layouts, query scatter plots, value gaps, query trajectories.

Every ``plot_*`` function takes ``ax=None`` (or ``axes=None``) and returns what it drew on, so
figures compose in notebooks. :func:`query_explorer` wraps :func:`plot_query` in an ipywidgets
picker with a static twin (its first query drawn as an ordinary figure).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..display import explore
from ..names import HORIZONS
from .check import place_legend
from .style import PAGE_WIDTH, figure_size

if TYPE_CHECKING:
    from ipywidgets import Widget
    from matplotlib.axes import Axes

    from ..simulate import Trajectories

ANSWER_COLORS = {0: "tab:orange", 1: "tab:blue"}
"""Scatter colours: target 1 (V_a < V_b) blue, target 0 orange."""
SIDE_COLORS = {"a": "tab:red", "b": "tab:green"}
"""Trajectory colours of the two sides of a query."""
SIDE_LINES = {"a": dict(color=SIDE_COLORS["a"], lw=2.5), "b": dict(color=SIDE_COLORS["b"], lw=1.5, ls="--")}
"""How :func:`plot_query` draws the two sides: side b narrow and dashed over side a's wide line, so
that two paths that coincide (one start state, the same policy) both stay visible."""


def _get_spec(env_name: str) -> Any:
    """:func:`opcc_edu.envs.get_spec`, imported on first use (the simulator stays unloaded until then)."""
    from ..envs import get_spec as spec

    return spec(env_name)


def _value_unit(env_name: str) -> str:
    return "steps in goal" if _get_spec(env_name).is_maze else "return"


def maze_geometry(env_name: str) -> dict[str, Any]:
    """Cell centres, walls and goal of a maze in the environment's frame (1 cell = 1 m).

    gymnasium-robotics centres the maze on the origin: cell (row, col) has centre
    ``x = col + 0.5 - n_cols / 2``, ``y = n_rows / 2 - row - 0.5``.

    Returns:
        dict with ``walls`` (W, 2) and ``free`` (F, 2) cell centres, ``goal`` (2,), ``extent``
        (xmin, xmax, ymin, ymax).
    """
    spec = _get_spec(env_name)
    if not spec.is_maze:
        raise ValueError(f"env_name must be a maze, got {env_name!r}")
    layout = np.asarray(spec.maze_map)
    rows, cols = layout.shape

    def centre(r, c):
        return np.stack([np.asarray(c) + 0.5 - cols / 2, rows / 2 - np.asarray(r) - 0.5], axis=-1)

    walls = centre(*np.nonzero(layout == 1))
    free = centre(*np.nonzero(layout == 0))
    goal = np.asarray(spec.goal_xy)  # the goal cell's centre, shifted in the -d4rl-goal variants
    return {"walls": walls, "free": free, "goal": goal, "extent": (-cols / 2, cols / 2, -rows / 2, rows / 2)}


#: zorder of a colour map drawn over a maze (above its floor, below its walls).
MAP_ZORDER = 1.0
#: zorder of a maze's walls and goal: above any colour map, below lines and points (zorder 2).
WALL_ZORDER = 1.5
#: Colour of a maze's walls: a grey that no colour map of the book uses.
WALL_COLOR = "0.35"


def draw_maze(env_name: str, ax: Axes | None = None) -> Axes:
    """Draw a maze top-down: walls, free cells, the goal region; axes in metres.

    Args:
        env_name: a maze (``maze2d-open``, ``-umaze``, ``-medium``, ``-large``).
        ax: matplotlib Axes (default: a new figure).

    Returns:
        The Axes.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Circle, Rectangle

    from ..envs import GOAL_RADIUS

    geometry = maze_geometry(env_name)
    if ax is None:
        _, ax = plt.subplots(figsize=figure_size(width=0.55 * PAGE_WIDTH, panel_aspect=1.0))
    # layers: free floor, then a colour map (zorder MAP_ZORDER), then walls and the goal, then the
    # data (lines and points, zorder 2): a map never hides a wall, a wall never hides a path
    for x, y in geometry["free"]:
        floor = Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor="white", edgecolor="0.9", lw=0.5, zorder=0.5)
        ax.add_patch(floor).set_gid("maze")
    for x, y in geometry["walls"]:
        wall = Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=WALL_COLOR, edgecolor=WALL_COLOR, zorder=WALL_ZORDER)
        ax.add_patch(wall).set_gid("maze")
    style = dict(facecolor="gold", edgecolor="darkgoldenrod", alpha=0.6, label="goal region", zorder=WALL_ZORDER)
    ax.add_patch(Circle(geometry["goal"], GOAL_RADIUS, **style)).set_gid("maze")
    xmin, xmax, ymin, ymax = geometry["extent"]
    ax.set(xlim=(xmin, xmax), ylim=(ymin, ymax), aspect="equal", xlabel="x (m)", ylabel="y (m)", title=env_name)
    return ax


def set_gap_threshold(queries: Any, horizon: int) -> float:
    """The gap a query of ``horizon`` needed to enter this set: the recipe's filter.

    ``paper`` sets record ``min_gap`` (kept when the gap exceeds it); other sets use
    :func:`opcc_edu.queries.gap_threshold`, the ``hard`` recipe's rule.
    """
    from ..queries import gap_threshold

    if queries.metadata.get("recipe") == "paper" and "min_gap" in queries.metadata:
        return float(queries.metadata["min_gap"])
    return gap_threshold(queries.env_name, horizon)


def plot_value_scatter(
    queries: Any, horizons: Sequence[int] | None = None, axes: Any = None, max_points: int | None = None, seed: int = 0
) -> np.ndarray:
    """The paper's Figure 4/7: V^pi(s, h) against V^pi_hat(s_hat, h), one panel per horizon.

    Points are coloured by the answer; the grey band around the diagonal is the region the
    ambiguity filter removed (its half-width is the gap threshold of that horizon).

    Args:
        queries: a :class:`opcc_edu.queries.QuerySet`.
        horizons: horizons to show (default: all present).
        axes: a sequence of Axes, one per horizon (default: a new figure of at most three
            panels a row; a panel left over holds the legend).
        max_points: draw at most this many points per panel (a random subset).
        seed: seeds that subset.

    Returns:
        The array of Axes.
    """
    import matplotlib.pyplot as plt

    horizons = list(queries.horizons if horizons is None else horizons)
    spare: list[Any] = []
    if axes is None:  # at most three panels a row, so that text keeps its size at page width
        columns = min(3, max(1, len(horizons)))
        rows = -(-len(horizons) // columns)
        size = figure_size(columns=columns, rows=rows, panel_aspect=1.0)
        _, grid = plt.subplots(rows, columns, figsize=size, squeeze=False, layout="constrained")
        axes, spare = grid.ravel()[: len(horizons)], list(grid.ravel()[len(horizons) :])
        for ax in spare:
            ax.axis("off")
    axes = np.atleast_1d(np.asarray(axes, dtype=object))
    if len(axes) != len(horizons):
        raise ValueError(f"axes must hold one Axes per horizon ({len(horizons)}), got {len(axes)}")
    rng = np.random.default_rng(seed)
    unit = _value_unit(queries.env_name)
    for ax, h in zip(axes, horizons, strict=True):
        sub = queries.by_horizon(h)
        rows = np.arange(len(sub))
        if max_points is not None and len(rows) > max_points:
            rows = np.sort(rng.choice(len(rows), max_points, replace=False))
        lo = min(sub.value_a.min(), sub.value_b.min())
        hi = max(sub.value_a.max(), sub.value_b.max())
        pad = 0.05 * (hi - lo + 1e-9)
        line = np.array([lo - pad, hi + pad])
        width = set_gap_threshold(queries, h)
        ax.fill_between(line, line - width, line + width, color="0.85", lw=0, label="removed (ambiguous)")
        ax.plot(line, line, color="0.5", lw=0.8, ls="--")
        value_a, value_b = sub.value_a[rows], sub.value_b[rows]
        for answer in (1, 0):
            mask = sub.target[rows] == answer
            label = "$V^{\\pi} < V^{\\hat\\pi}$" if answer == 1 else "$V^{\\pi} > V^{\\hat\\pi}$"
            ax.scatter(value_a[mask], value_b[mask], s=6, alpha=0.6, color=ANSWER_COLORS[answer], label=label)
        ax.set(xlim=line, ylim=line, aspect="equal", title=f"h = {h} ({len(sub)} queries)")
        ax.set_xlabel(f"$V^{{\\pi}}(s, h)$ ({unit})")
        spec = ax.get_subplotspec()
        if spec is None or spec.is_first_col():
            ax.set_ylabel(f"$V^{{\\hat\\pi}}(\\hat s, h)$ ({unit})")
    if spare:  # the legend gets a panel of its own
        spare[0].legend(*axes[0].get_legend_handles_labels(), loc="center", markerscale=2)
    else:
        place_legend(axes[0], markerscale=2)
    return axes


def plot_gap_histogram(queries: Any, ax: Axes | None = None, bins: int = 30, log: bool = False) -> Axes:
    """Histogram of the value gaps |V_a - V_b|, one outline per horizon, and the filter threshold
    (dashed: black where every horizon shares it, else in each horizon's colour); the title is the
    environment's name. A horizon's colour is fixed by its place in
    :data:`opcc_edu.queries.HORIZONS`, so that panels of one figure agree and share a legend.

    Args:
        queries: a :class:`opcc_edu.queries.QuerySet`.
        ax: matplotlib Axes (default: a new figure).
        bins: number of bins shared by all horizons.
        log: logarithmic count axis.

    Returns:
        The Axes.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figure_size(width=0.75 * PAGE_WIDTH, panel_aspect=0.64))
    gaps = queries.gap
    edges = np.linspace(0.0, gaps.max() if len(gaps) else 1.0, bins + 1)
    cmap = plt.get_cmap("viridis")
    horizons = queries.horizons
    order = sorted(set(HORIZONS) | set(horizons))  # one colour per horizon, whatever the set holds
    thresholds = {h: set_gap_threshold(queries, h) for h in horizons}
    shared = len(set(thresholds.values())) == 1
    for h in horizons:
        color = cmap(order.index(h) / max(len(order) - 1, 1))
        ax.hist(gaps[queries.horizon == h], bins=edges, histtype="step", lw=1.4, color=color, label=f"h = {h}", log=log)
        if not shared:
            ax.axvline(thresholds[h], color=color, lw=1.5, ls="--")
    if horizons:  # one legend entry, in black, for the threshold line(s)
        line = dict(color="k", lw=1.2, ls="--", label="filter threshold")
        if shared:
            ax.axvline(thresholds[horizons[0]], **line)
        else:  # a proxy: the lines themselves carry the horizons' colours
            ax.plot([], [], **line)
    unit = _value_unit(queries.env_name)
    ax.set_xlabel(f"value gap $|V^{{\\pi}} - V^{{\\hat\\pi}}|$ ({unit})")
    ax.set_ylabel("queries (count)")
    ax.set_title(queries.env_name)
    place_legend(ax)
    return ax


# --------------------------------------------------------------------------------------------
# One query, both sides simulated
# --------------------------------------------------------------------------------------------


def query_trajectories(queries: Any, index: int, policies: Sequence[Any] | None = None) -> Trajectories:
    """Simulate both sides of one query step by step.

    Returns:
        :class:`opcc_edu.simulate.Trajectories` with two rows (side a, side b).
    """
    from ..simulate import simulate_trajectories

    if not 0 <= int(index) < len(queries):
        raise ValueError(f"index must lie in [0, {len(queries)}), got {index!r}")
    if policies is None:
        from ..queries import query_policies

        policies = query_policies(queries)
    i = int(index)
    return simulate_trajectories(
        queries.env_name,
        np.stack([queries.state_a[i], queries.state_b[i]]),
        policies,
        np.array([queries.policy_a[i], queries.policy_b[i]]) - 1,
        int(queries.horizon[i]),
        np.stack([queries.action_a[i], queries.action_b[i]]),
    )


def _side_label(queries: Any, i: int, side: str) -> str:
    """A query side in words: its first action, the policy level that follows it and its value."""
    level = int(getattr(queries, f"policy_{side}")[i])
    value = float(getattr(queries, f"value_{side}")[i])
    first = np.asarray(getattr(queries, f"action_{side}")[i])
    action = ", ".join(f"{x:.2f}".replace("-0.00", "0.00") for x in first)
    return f"side {side}: first action ({action}), then level {level}; V = {value:.1f}"


def plot_query(queries: Any, index: int, policies: Sequence[Any] | None = None, axes: Any = None) -> np.ndarray:
    """Both sides of one query: their paths and their accumulated rewards.

    Mazes: a top-down drawing with the two paths (circle: start, cross: end; side b dashed over
    side a's wider line) and the cumulative reward. Locomotion: the root's x position and height,
    and the cumulative reward, against the step (the start states' body pose is in the simulator
    state; see :func:`render_states` for pictures where OpenGL is available).

    Args:
        queries: a :class:`opcc_edu.queries.QuerySet`.
        index: which query.
        policies: the policies of its levels (default: the shipped ones).
        axes: Axes to draw on (2 for mazes, 3 for locomotion; default: a new figure).

    Returns:
        The array of Axes.
    """
    import matplotlib.pyplot as plt

    spec = _get_spec(queries.env_name)
    n_axes = 2 if spec.is_maze else 3
    own_figure = axes is None
    if axes is None:
        _, axes = plt.subplots(1, n_axes, figsize=figure_size(columns=n_axes, panel_aspect=1.0), layout="constrained")
    axes = np.atleast_1d(np.asarray(axes, dtype=object))
    if len(axes) != n_axes:
        raise ValueError(f"axes must hold {n_axes} Axes for {queries.env_name}, got {len(axes)}")
    traj = query_trajectories(queries, index, policies)
    i = int(index)
    h = int(queries.horizon[i])
    labels = {side: _side_label(queries, i, side) for side in "ab"}
    steps = np.arange(h + 1)
    cumulative = np.concatenate([np.zeros((2, 1)), np.cumsum(np.nan_to_num(traj.rewards), axis=1)], axis=1)
    valid = np.concatenate([np.ones((2, 1), dtype=bool), traj.valid], axis=1)
    if spec.is_maze:
        draw_maze(queries.env_name, ax=axes[0])
        for row, side in enumerate("ab"):
            xy = traj.observations[row, valid[row], :2]
            axes[0].plot(xy[:, 0], xy[:, 1], label=labels[side], **SIDE_LINES[side])
            axes[0].plot(*xy[0], "o", color=SIDE_COLORS[side], ms=8 if side == "a" else 5)
            axes[0].plot(*xy[-1], "x", color=SIDE_COLORS[side], ms=8 if side == "a" else 5, mew=2)
        reward_ax = axes[1]
    else:
        for row, side in enumerate("ab"):
            states = traj.states[row]
            axes[0].plot(steps[valid[row]], states[valid[row], 0], label=labels[side], **SIDE_LINES[side])
            axes[1].plot(steps[valid[row]], states[valid[row], 1], **SIDE_LINES[side])
        axes[0].set_xlabel("time step")
        axes[0].set_ylabel("root x position (m)")
        axes[1].set_xlabel("time step")
        axes[1].set_ylabel("root height (m)" if spec.name != "halfcheetah" else "root z (m)")
        reward_ax = axes[2]
    for row, side in enumerate("ab"):
        reward_ax.step(
            steps[valid[row]], cumulative[row, valid[row]], where="post", label=labels[side], **SIDE_LINES[side]
        )
    reward_ax.set_xlabel("time step")
    # two lines: one is taller than a short panel and runs into the figure's title
    reward_ax.set_ylabel(f"reward so far\n({_value_unit(queries.env_name)})")
    answer = "V_a < V_b" if queries.target[i] else "V_a > V_b"
    form = "same start state" if queries.same_state[i] else "two start states"
    title = f"query {i}: h = {h}, {form}, {answer}"
    if own_figure:  # the whole figure's title: one panel is too narrow for it
        reward_ax.figure.suptitle(title)
    else:
        reward_ax.set_title(title)
    # one legend for both sides, below the panels: never over a trajectory or a reward curve
    handles, names = reward_ax.get_legend_handles_labels()
    if own_figure:
        # side by side where both labels fit the figure's width (a 2-D maze action), else stacked
        ncols = 2 if max(map(len, names)) < 50 else 1
        reward_ax.figure.legend(handles, names, loc="outside lower center", ncols=ncols)
    else:
        reward_ax.legend(handles, names, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    return axes


def render_states(env_name: str, states: np.ndarray, width: int = 240, height: int = 240) -> np.ndarray | None:
    """Rendered pictures of simulator states, or None where MuJoCo cannot open OpenGL.

    Locomotion bodies are drawn at forward position 0 (their pose, not their distance
    travelled). Rendering needs an OpenGL backend: set ``MUJOCO_GL=egl`` (GPU or Mesa EGL) or ``osmesa``
    before MuJoCo is first imported. Without one this returns None instead of failing.

    Args:
        env_name: environment.
        states: (N, S) simulator states.

    Returns:
        (N, height, width, 3) uint8 images, or None.
    """
    from ..envs import make_env, set_state

    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        env = make_env(env_name, render_mode="rgb_array")
        core = env.unwrapped
        renderer = getattr(getattr(core, "core", core), "mujoco_renderer", None)
        if renderer is not None:
            renderer.width, renderer.height = width, height
        env.reset(seed=0)
        images = []
        for state in np.array(states, dtype=np.float64):
            if not _get_spec(env_name).is_maze:
                # The pose does not depend on the forward position, and the default cameras
                # of Hopper and Walker2d look at the origin: move the body there.
                state[0] = 0.0
            set_state(env, state)
            images.append(np.asarray(env.render()))
        env.close()
        return np.stack(images)
    except Exception:  # any OpenGL/EGL failure means "no pictures here"
        return None


def plot_start_frames(queries: Any, index: int, axes: Any = None) -> np.ndarray | None:
    """Rendered pictures of the two start states of a query, if OpenGL works.

    A locomotion body is drawn by :func:`render_states`; a maze straight from above, in its own
    frame (metres), with an orthographic camera so that no wall hides the ball, ringed in white.

    Args:
        queries: a :class:`opcc_edu.queries.QuerySet`.
        index: which query.
        axes: two Axes (default: a new figure).

    Returns:
        The array of two Axes, or None when no OpenGL backend is available
        (see :func:`render_states`).
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Circle

    i, spec = int(index), _get_spec(queries.env_name)
    states = np.stack([queries.state_a[i], queries.state_b[i]])
    images = None if spec.is_maze else render_states(queries.env_name, states)
    if spec.is_maze:  # a camera above its centre (the origin), x to the right; the image has its shape
        rows, cols = np.shape(spec.maze_map)
        os.environ.setdefault("MUJOCO_GL", "egl")
        try:
            import mujoco

            from ..envs import make_env, mujoco_handles, set_state

            env = make_env(queries.env_name)
            model, data = mujoco_handles(env)
            model.vis.global_.fovy = rows  # an orthographic view's height, in metres
            camera = mujoco.MjvCamera()
            camera.orthographic, camera.azimuth, camera.elevation, camera.distance = 1, 90.0, -90.0, 2.0 * cols
            scale = min(model.vis.global_.offwidth / cols, model.vis.global_.offheight / rows, 60.0)
            with mujoco.Renderer(model, int(rows * scale), int(cols * scale)) as renderer:
                images = []
                for state in states:
                    set_state(env, state)
                    renderer.update_scene(data, camera)
                    images.append(renderer.render())
        except Exception:  # any OpenGL/EGL failure means "no pictures here"
            images = None
    if images is None:
        return None
    if axes is None:
        aspect = images[0].shape[0] / images[0].shape[1]
        _, axes = plt.subplots(1, 2, figsize=figure_size(columns=2, width=0.7 * PAGE_WIDTH, panel_aspect=aspect))
    axes = np.atleast_1d(np.asarray(axes, dtype=object))
    for ax, image, state, side in zip(axes, images, states, "ab", strict=True):
        ax.imshow(image, extent=(-cols / 2, cols / 2, -rows / 2, rows / 2) if spec.is_maze else None)
        if spec.is_maze:  # in the maze's frame: ring the ball
            ax.add_patch(Circle(state[:2], 0.45, fill=False, color="white", lw=1.5))
        ax.set_title(f"start of side {side}", color=SIDE_COLORS[side])
        ax.axis("off")
    return axes


def query_explorer(
    queries: Any, policies: Sequence[Any] | None = None, frames: bool = False, env_name: str | None = None
) -> Widget:
    """An ipywidgets picker over the queries: choose a horizon and a query, see both sides.

    The first query is drawn at once as an ordinary output, the figure a static page keeps
    (:func:`opcc_edu.display.explore`); the controls redraw below themselves.

    Args:
        queries: a :class:`opcc_edu.queries.QuerySet`, or a mapping of environment names to
            query sets (the picker then offers an environment too).
        policies: the policies of its levels (default: the shipped ones; only with one set).
        frames: also show rendered start states (locomotion; needs an OpenGL backend such as
            ``MUJOCO_GL=egl``, silently skipped without one).
        env_name: with a mapping, the environment shown first (default: the first).

    Returns:
        The ``ipywidgets`` widget (display it in a notebook).

    Raises:
        ValueError: for an empty mapping, an ``env_name`` not in it, or ``policies`` with a mapping.
    """
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    if isinstance(queries, Mapping):
        sets = dict(queries)
        if not sets:
            raise ValueError("queries must hold at least one query set")
        if policies is not None:
            raise ValueError("policies can be given for one query set only (a mapping loads each set's own)")
        first = next(iter(sets)) if env_name is None else env_name
        if first not in sets:
            raise ValueError(f"env_name {env_name!r} is not one of the query sets: {sorted(sets)}")
    else:
        first = queries.env_name
        sets = {first: queries}
    loaded = {} if policies is None else {first: policies}

    def policies_of(name: str) -> Sequence[Any]:
        if name not in loaded:
            from ..policies import load_policies

            loaded[name] = load_policies(name)
        return loaded[name]

    def rows_of(name: str, h: Any) -> np.ndarray:
        q = sets[name]
        return np.arange(len(q)) if h == "all" else np.flatnonzero(q.horizon == h)

    env = widgets.Dropdown(options=list(sets), value=first, description="env")
    horizon = widgets.Dropdown(options=["all", *sets[first].horizons], value="all", description="horizon")
    number = widgets.IntSlider(value=0, min=0, max=len(sets[first]) - 1, description="query")

    def update_horizons(change: Any) -> None:
        horizon.options = ["all", *sets[change["new"]].horizons]
        horizon.value = "all"
        update_range(None)

    def update_range(change: Any) -> None:
        number.max = max(0, len(rows_of(env.value, horizon.value)) - 1)
        number.value = min(number.value, number.max)

    env.observe(update_horizons, names="value")
    horizon.observe(update_range, names="value")

    def show(name: str, h: Any, k: int) -> None:
        q = sets[name]
        rows = rows_of(name, h)
        if h not in ("all", *q.horizons) or not len(rows):
            return  # the controls are between two consistent states
        row = int(rows[min(int(k), len(rows) - 1)])
        if frames and not _get_spec(name).is_maze:
            plot_start_frames(q, row)
            plt.show()
        plot_query(q, row, policies_of(name))
        plt.show()

    controls = {"name": env} if len(sets) > 1 else {"name": widgets.fixed(first)}
    return explore(show, **controls, h=horizon, k=number)
