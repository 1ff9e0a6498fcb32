"""attnlib.widgets: the book's explorers (to move to tests/test_explorers_<paper>.py)."""

import re

import numpy as np
import pytest

from attnlib import widgets


# -- the book's explorers -----------------------------------------------------------------------
def _paths(fig):
    """Lines of the token-plane axes that are trajectories (more than 2 points)."""
    return [ln.get_xydata() for ln in fig.axes[0].get_lines() if len(ln.get_xdata()) > 2]


def test_token_plane_live_follows_its_controls():
    live = widgets.token_plane("e1-local", mode="live")
    full = _paths(live.figure)
    assert len(full) == 6 and all(len(p) == 200 // 5 + 1 for p in full)  # 6 runs, 200 its
    few = _paths(live.update(iterations=20))
    assert all(len(p) == 5 for p in few)
    np.testing.assert_allclose(few[0], full[0][:5])  # the same runs, cut shorter
    fig = live.update(init=5)
    widths = [ln.get_linewidth() for ln in fig.axes[0].get_lines() if len(ln.get_xdata()) > 2]
    assert widths[4] > widths[0]  # run 5 highlighted
    # the local example: runs 5, 6 (c = -1, -1.5) end on the local ray (1, 0), the others on p^mm
    fig = live.update(iterations=1000, init="all")
    ends = np.array([p[-1] for p in _paths(fig)])
    assert (ends[4:, 0] > 10 * np.abs(ends[4:, 1])).all()
    assert (ends[:4, 1] > 5 * np.abs(ends[:4, 0])).all()
    other = _paths(live.update(loss="correlation", iterations=200))
    assert not np.allclose(other[0], full[0])  # another loss retrains: other paths


def test_token_plane_static_plays_the_iterations():
    st = widgets.token_plane("e1-local", mode="static", static={"iterations": (0, 100, 200)})
    assert len(st.panels) == 1 and st.panels[0].frames == 3
    assert "iterations" in st.html and st.html.count("data:image/png;base64,") == 3
    # the multi-input example: one ray, the global selection, which every run approaches
    fig = widgets.token_plane("e2", mode="live").figure
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()][-1] == \
        "pᵐᵐ(α=1,1,1), global"
    assert all(ln.get_ydata()[-1] < 0.01 for ln in fig.axes[1].get_lines())  # 1 - cos at 200
    with pytest.raises(ValueError, match="static"):
        widgets.token_plane(static={"speed": (1,)})
    with pytest.raises(ValueError, match="example"):
        widgets.token_plane("e9")


def test_parameterisation_each_parameterisation_meets_its_own_svm():
    live = widgets.parameterisation(mode="live", iterations=1000)
    fig = live.figure
    ax1 = fig.axes[1]
    final = {ln.get_label(): ln.get_ydata()[-1] for ln in ax1.get_lines()}  # 1 - corr at 1000
    assert final["W vs Frobenius"] < 0.01 and final["KQᵀ vs nuclear"] < 0.01
    assert final["W vs nuclear"] > final["W vs Frobenius"]
    assert final["KQᵀ vs Frobenius"] > final["KQᵀ vs nuclear"]
    n_all = len(fig.axes[0].get_lines())
    fig = live.update(param="W", iterations=50)
    labels = [ln.get_label() for ln in fig.axes[1].get_lines()]
    assert labels == ["W vs Frobenius", "W vs nuclear"]
    assert len(fig.axes[0].get_lines()) < n_all  # only W's paths and rays
    assert all(len(ln.get_xdata()) == 6 for ln in fig.axes[1].get_lines())  # k = 0..50


def _table(fig):
    """The selection table as rows of strings."""
    cells = fig.axes[1].tables[0].get_celld()
    rows = 1 + max(r for r, _ in cells)
    return [[cells[r, c].get_text().get_text() for c in range(6)] for r in range(1, rows)]


def test_selection_labels_the_papers_example_and_follows_the_score():
    live = widgets.selection(mode="live")  # x3 = (0, 0) with score 0: the "local" example
    rows = _table(live.figure)
    assert [r[4] for r in rows] == ["yes", "yes", "no"]  # alpha = 1, 2 locally optimal
    assert rows[0][2] == "0.995" and rows[1][3] == "x3" and rows[2][3] == "x1, x2"
    rows = _table(live.update(score=0.9))  # the "global" example: a tie with the support x3
    assert [r[4] for r in rows] == ["yes", "no", "no"]
    rows = _table(live.update(position="(0.45, 0.5)", score=0.95))  # x3 between x1 and x2
    assert rows[2][1] == "no"  # selecting x3 is infeasible
    st = widgets.selection(mode="static", static={"score": (0.0, 0.9)})
    assert st.panels[0].frames == 2 and "score of x3" in st.html


def test_mirror_descent_explorer_sparsity_and_matching_svm():
    live = widgets.mirror_descent(lp=2.0, mode="live")
    ax2 = live.figure.axes[2]
    div = {ln.get_label(): ln.get_ydata() for ln in ax2.get_lines()}
    assert div["to ℓ2-AttSVM"][-1] < 0.01  # GD: the Frobenius SVM direction
    hist2 = [p.get_height() for p in live.figure.axes[1].patches][:20]
    fig = live.update(lp=1.5)
    div = {ln.get_label(): ln.get_ydata() for ln in fig.axes[2].get_lines()}
    assert div["to ℓ1.5-AttSVM"][-1] < div["to ℓ2-AttSVM"][-1]  # the matching SVM is closer
    hist15 = [p.get_height() for p in fig.axes[1].patches][:20]
    assert hist15[0] > hist2[0]  # more near-zero entries for lp < 2


def test_sweep_explorer_marks_the_current_point():
    arr = dict(ds=np.array([2, 4, 6]), cells=np.array([[4, 5], [6, 5]]),
               fro_mean=np.array([[2.0, 4, 4], [2, 4, 6]]),
               nuc_mean=np.array([[2.0, 3.5, 4], [2, 3.9, 5.5]]),
               infeasible=np.array([[0.5, 0.1, 0], [0.8, 0.3, 0]]))
    live = widgets.sweep(arr, mode="live")
    marked = live.figure.axes[0].collections[-1].get_offsets()
    np.testing.assert_allclose(marked, [[4, 4], [4, 3.5]])
    fig = live.update(cell="n=6, T=5", d=6)
    np.testing.assert_allclose(fig.axes[0].collections[-1].get_offsets(), [[6, 6], [6, 5.5]])
    np.testing.assert_allclose(fig.axes[1].collections[-1].get_offsets(), [[6, 0]])
    st = widgets.sweep(arr, mode="static")
    assert len(st.panels) == 2 and st.panels[0].frames == 3
    with pytest.raises(ValueError, match="no array"):
        widgets.sweep(arr, curves={"x": "missing"})
    one = dict(ds=np.array([2, 4]), cells=np.array([[6, 8]]), glob=np.array([[0.1, 0.4]]))
    fig = widgets.sweep(one, curves={"global": "glob"}, aside=None, mode="live").figure
    assert len(fig.axes) == 1 and fig.axes[0].get_title() == "n=6, T=8"


@pytest.mark.parametrize("make", [
    lambda: widgets.parameterisation(mode="static", static={"iterations": (0, 1000)}),
    lambda: widgets.mirror_descent(lp=2.0, mode="static", static={"lp": (1.5, 2.0)}),
])
def test_every_explorer_renders_static(make):
    st = make()
    html = st.html
    assert 'class="anim-slider"' in html and "new Array(2)" in html
    assert len(set(re.findall(r'frames\[\d+\] = "([^"]{200})', html))) == 2  # two frames differ
    assert st.nbytes < 2.5e6
