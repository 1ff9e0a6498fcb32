"""The explorers of arXiv 2306.13596 (attnlib.explorers.max_margin).

Each explorer reads a cached experiment result; here: its default frame draws, a control change
changes the frame, and the logic it adds to the result (which ray each run approaches, the
selection table) is checked against a direct computation from the result's arrays.
"""

import numpy as np
import pytest

import attnlib.experiments as E
from attnlib.explorers import max_margin as X

pytestmark = pytest.mark.usefixtures("module_cache")  # one experiment cache for the module


def test_approached_ray_is_the_largest_final_cosine():
    cos = np.array([[[0.1, 0.99], [0.2, 0.30], [0.0, 0.5]],   # ray 0: runs 0, 1, 2 over 2 steps
                    [[0.9, 0.20], [0.1, 0.95], [0.9, 0.5]]])  # ray 1
    assert X.approached_ray(cos).tolist() == [0, 1, 0]  # the tie (run 2) goes to the first ray


def test_token_plane_target_is_the_selection_each_run_ends_on():
    X.token_plane_data.cache_clear()
    d = X.token_plane_data("e1-local")
    a = E.run("mm_token_plane", example="e1-local").arrays
    # the oracle: a run approaches the ray of the selection its final p attends to
    own = [int(np.flatnonzero((a["alphas"] == s).all(-1))[0]) for s in a["selected"]]
    assert d["target"].tolist() == own
    assert sorted(set(own)) == [0, 1]  # e1-local: the runs split between the two rays
    assert d["labels"] == ["pᵐᵐ(α=1), global", "pᵐᵐ(α=2), local"]
    assert np.array_equal(d["P"], a["P"]) and np.array_equal(d["cos"], a["cos"])


@pytest.mark.slow
def test_token_plane_draws_and_follows_its_controls():
    e = X.token_plane(example="e1-global", mode="live")
    png = e.png
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    e.update(iterations=20)
    assert e.png != png


def test_selection_table_and_frame():
    e = X.selection(alpha=2, mode="live")
    ax = e.figure.axes[1]
    table = ax.tables[0]
    # score 0 at x3 = (0, 0): α = 1, 2 locally optimal, α = 3 not (experiment mm_selection)
    res = E.run("mm_selection")
    col = [table[r, 4].get_text().get_text() for r in (1, 2, 3)]
    assert col == ["yes" if lo else "no" for lo in res.arrays["locally_optimal"]]
    assert col == ["yes", "yes", "no"]
    png = e.png
    e.update(score=0.9)
    assert e.png != png


def test_softmax_explorer_shows_the_ray_losses():
    e = X.softmax_explorer(mode="live")
    bars = e.figure.axes[1].patches
    assert sum(b.get_height() for b in bars) == pytest.approx(1.0)  # a softmax
    png = e.png
    e.update(norm=16.0, angle=96)
    heights = [b.get_height() for b in e.figure.axes[1].patches]
    assert heights[0] > 0.99 and e.png != png  # along x1's max-margin direction


def test_joint_explorer_draws_the_given_result():
    res = E.run("mm_e3_joint", cache=False, steps=40)
    e = X.joint_explorer(res, mode="live")
    ax0 = e.figure.axes[0]
    k = int(np.searchsorted(res.arrays["steps"], 200, side="right"))  # default: 200 (all 41)
    p = res.arrays["p_path"][1, :k]  # non-tight is the default example
    assert any(line.get_xydata().shape == p.shape and np.allclose(line.get_xydata(), p)
               for line in ax0.lines)
    png = e.png
    e.update(example="tight", iterations=20)
    assert e.png != png


def test_every_score_of_the_selection_explorer_is_an_allowed_setting():
    """The static site renders the chapter 3 explorer at every score of its slider: each must
    pass mm_selection's declared bounds (a bound of [-1, 1] refused the slider's 1.2 and broke
    the build's run of the chapter)."""
    from attnlib.experiments import get
    from attnlib.explorers.max_margin import _SEL_SCORES

    for score in _SEL_SCORES:
        get("mm_selection").check_settings({"score": score})
