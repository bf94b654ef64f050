"""plot_start_frames: a maze seen from straight above, the ball visible wherever it starts."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.patches import Circle

from opcc_edu.envs import MAZE_NAMES, get_spec
from opcc_edu.plotting import plot_start_frames
from opcc_edu.queries import load_queries


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _frames(queries, index):
    axes = plot_start_frames(queries, index)
    if axes is None:
        pytest.skip("no OpenGL backend here")
    return axes


def _pixel(image, extent, xy):
    """The pixel of ``image`` (drawn over ``extent``) at the maze point ``xy``."""
    left, right, bottom, top = extent
    rows, cols = image.shape[:2]
    col = int((xy[0] - left) / (right - left) * cols)
    row = int((top - xy[1]) / (top - bottom) * rows)
    return image[row, col].astype(int)


@pytest.mark.parametrize("env", MAZE_NAMES)
def test_a_maze_is_drawn_from_above_in_its_frame_with_the_ball_ringed_and_visible(env):
    queries = load_queries(env)
    layout_rows, layout_cols = np.asarray(get_spec(env).maze_map).shape
    goal = get_spec(env).goal_xy
    seen = 0
    for index in range(3):
        axes = _frames(queries, index)
        assert len(axes) == 2
        states = (queries.state_a[index], queries.state_b[index])
        for ax, state in zip(axes, states, strict=True):
            (picture,) = ax.get_images()
            extent = picture.get_extent()
            assert np.allclose(extent, (-layout_cols / 2, layout_cols / 2, -layout_rows / 2, layout_rows / 2))
            (ring,) = [p for p in ax.patches if isinstance(p, Circle)]
            assert np.allclose(ring.center, state[:2])
            if np.linalg.norm(state[:2] - goal) > 0.5:  # away from the red goal: the green ball shows
                red, green, blue = _pixel(np.asarray(picture.get_array()), extent, state[:2])[:3]
                assert green > red + 30 and green > blue + 30, (env, index, (red, green, blue))
                seen += 1
        plt.close("all")
    assert seen >= 3


def test_a_locomotion_query_keeps_its_own_camera():
    queries = load_queries("hopper")
    axes = _frames(queries, 0)
    for ax in axes:
        (picture,) = ax.get_images()
        assert not ax.patches
        assert picture.get_array().shape[:2] == (240, 240)  # render_states' default size
