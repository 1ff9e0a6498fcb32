"""The explorers of arXiv 2306.13596 (attnlib.explorers.max_margin).

Each explorer reads a cached experiment result; here: its default frame draws, a control change
changes the frame, and the logic it adds to the result (which ray each run approaches, the
selection table) is checked against a direct computation from the result's arrays.

The lines under the website's explorers (``note=``) and the chapters' prose around them say
what the data show: recomputed here with numpy from the paths and the SVM directions.
"""

import re

import numpy as np
import pytest

import attnlib.experiments as E
from attnlib import plots
from attnlib.explorers import max_margin as X


@pytest.fixture(autouse=True)
def _cache(module_cache):  # one experiment cache for the module, read in every test
    X.token_plane_data.cache_clear()
    yield
    X.token_plane_data.cache_clear()


def test_approached_ray_is_the_largest_final_cosine():
    cos = np.array([[[0.1, 0.99], [0.2, 0.30], [0.0, 0.5]],   # ray 0: runs 0, 1, 2 over 2 steps
                    [[0.9, 0.20], [0.1, 0.95], [0.9, 0.5]]])  # ray 1
    assert X.approached_ray(cos).tolist() == [0, 1, 0]  # the tie (run 2) goes to the first ray


def test_token_plane_target_is_the_selection_each_run_ends_on():
    d = X.token_plane_data("e1-local")
    a = E.run("mm_token_plane", example="e1-local").arrays
    # the oracle: a run approaches the ray of the selection its final p attends to
    own = [int(np.flatnonzero((a["alphas"] == s).all(-1))[0]) for s in a["selected"]]
    assert d["target"].tolist() == own
    assert sorted(set(own)) == [0, 1]  # e1-local: the runs split between the two rays
    assert d["labels"] == ["pᵐᵐ(α=1), global", "pᵐᵐ(α=2), local"]
    assert np.array_equal(d["P"], a["P"]) and np.array_equal(d["cos"], a["cos"])


def test_token_plane_draws_and_follows_its_controls(unshown):
    ex = X.token_plane(example="e1-global")
    d = X.token_plane_data("e1-global")
    B = len(d["P"])
    for it in (200, 20):  # the default, then another iteration: each run's path up to it
        paths = ex.figure(iterations=it).axes[0].lines[0:2 * B:2]
        k = int(np.searchsorted(d["steps"], it, side="right"))
        assert len(paths) == B and k < d["P"].shape[1]
        for line, P in zip(paths, d["P"]):
            np.testing.assert_array_equal(line.get_xydata(), P[:k])


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


def test_softmax_explorer_shows_the_ray_losses(unshown):
    ex = X.softmax_explorer()
    first = [b.get_height() for b in ex.figure().axes[1].patches]
    assert sum(first) == pytest.approx(1.0)  # a softmax
    heights = [b.get_height() for b in ex.figure(norm=16.0, angle=96).axes[1].patches]
    assert heights[0] > 0.99 and heights != first  # along x1's max-margin direction


def test_joint_explorer_draws_the_given_result(unshown):
    res = E.run("mm_e3_joint", cache=False, steps=40)
    ex = X.joint_explorer(res)
    # the default: non-tight (1), 200 iterations (all 41 records); then tight (0), 20
    for j, setting in ((1, {}), (0, dict(example="tight", iterations=20))):
        ax0 = ex.figure(**setting).axes[0]
        k = int(np.searchsorted(res.arrays["steps"], setting.get("iterations", 200), "right"))
        p = res.arrays["p_path"][j, :k]
        assert any(line.get_xydata().shape == p.shape and np.allclose(line.get_xydata(), p)
                   for line in ax0.lines)


def test_every_score_of_the_selection_explorer_is_an_allowed_setting():
    """The static site renders the chapter 3 explorer at every score of its slider: each must
    pass mm_selection's declared bounds (a bound of [-1, 1] refused the slider's 1.2 and broke
    the build's run of the chapter)."""
    from attnlib.experiments import get
    from attnlib.explorers.max_margin import _SEL_SCORES

    for score in _SEL_SCORES:
        get("mm_selection").check_settings({"score": score})


# -- the notes and the chapters' prose ---------------------------------------------------------
def _gaps(d, k):
    """1 - cos of each run's p(k) to its closest ray, and that ray (numpy oracle)."""
    P = d["P"][:, k]  # (runs, 2)
    U = d["dirs"] / np.linalg.norm(d["dirs"], axis=1, keepdims=True)
    cos = (P / np.linalg.norm(P, axis=1, keepdims=True)) @ U.T  # (runs, rays)
    return 1 - cos.max(1), cos.argmax(1)


def _range(note, what):
    lo, hi = re.search(rf"{what} ([0-9.e+-]+) … ([0-9]+\.?[0-9]*(?:e[+-][0-9]+)?)", note).groups()
    return float(lo), float(hi)


@pytest.mark.parametrize("example,lr,normalized,it", [("e1-local", 0.1, True, 1000),
                                                      ("e2", 1.0, False, 50)])
def test_token_plane_note_reads_the_paths(example, lr, normalized, it):
    d = X.token_plane_data(example, lr, normalized, "logistic")
    k = it // 5
    gap, ray = _gaps(d, k)
    note = X.token_plane_note(example, "all", it, lr, normalized, "logistic")
    lo, hi = _range(note, "1 − cos to that ray")
    assert lo == pytest.approx(gap.min(), rel=0.06) and hi == pytest.approx(gap.max(), rel=0.06)
    lo, hi = _range(note, "largest softmax probability")
    assert (lo, hi) == pytest.approx((d["prob"][:, k].min(), d["prob"][:, k].max()), abs=6e-4)
    if len(set(ray)) > 1:
        for b in range(len(ray)):
            assert f"run {b + 1} → {d['short'][ray[b]]}" in note
    one = X.token_plane_note(example, 3, it, lr, normalized, "logistic")
    assert f"run 3 → {d['short'][ray[2]]}" in one


@pytest.mark.slow
def test_chapter3_runs_5_and_6_end_on_the_blue_ray_under_every_loss_and_step():
    # ch3's prose: "runs 5 and 6 (c = -1, -1.5) end on the blue ray", the others on the red
    for loss in ("logistic", "exp", "correlation"):
        for lr in (0.1, 1.0):
            d = X.token_plane_data("e1-local", lr, True, loss)
            _, ray = _gaps(d, 1000 // 5)
            assert list(ray) == [0, 0, 0, 0, 1, 1], (loss, lr)
    assert plots.COLORS[1] == plots.PALETTE["other"] == "#1f77b4"  # ray 2 is drawn blue


def test_chapter2_unnormalised_step_one_turns_much_more_slowly():
    # ch2's prose: with normalized=False and step 1 the paths still turn to the ray, slower
    slow, _ = _gaps(X.token_plane_data("e2", 1.0, False, "logistic"), 1000 // 5)
    fast, _ = _gaps(X.token_plane_data("e2", 1.0, True, "logistic"), 1000 // 5)
    early, _ = _gaps(X.token_plane_data("e2", 1.0, False, "logistic"), 50 // 5)
    assert slow.max() < early.max()  # still turning toward the ray
    assert slow.min() > 100 * fast.max()  # but far behind the normalised runs
