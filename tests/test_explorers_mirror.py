"""The mirror-descent explorer (attnlib.explorers.mirror.mirror_descent).

Its default frame is checked against a direct computation from the iterates and the SVMs of
the experiment ``md_path`` (entries, divergences in closed form, histogram counts); a slider
move only redraws from the cached result (the training is never rerun): the Explorer's
figures (``Explorer.figure``, not shown live) and static pages (at 40 dpi) are read.

The page opens on the chapter's call (``al.explorers.mirror_descent(lp=1.75)``: lp = 1.75,
1500 steps). The caption names no number; the line under the figure (``mirror_note``) is
recomputed here from the experiment ``md_path`` with an independent numpy directional
Bregman divergence, and its verdict (within ``MD_CLOSE``, still converging, stalled) is
checked against those numbers, at every setting of the website.
"""

import json
import re
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest

from attnlib.experiments import mirror_path, run
from attnlib.explorers import mirror as M

matplotlib.use("Agg")

BOOK = Path(__file__).resolve().parents[1] / "book" / "09_mirror_descent.ipynb"


@pytest.fixture(autouse=True)
def _cache(module_cache, unshown):
    M.mirror_data.cache_clear()
    yield
    M.mirror_data.cache_clear()
    plt.close("all")


def ddir(A, B, p):
    A = A / (np.abs(A) ** p).sum((-2, -1), keepdims=True) ** (1 / p)
    B = B / (np.abs(B) ** p).sum((-2, -1), keepdims=True) ** (1 / p)
    return 1 - (np.sign(B) * np.abs(B) ** (p - 1) * A).sum((-2, -1))


def _curves(ax):
    return {ln.get_label(): np.asarray(ln.get_ydata()) for ln in ax.get_lines()}


def test_default_frame_against_a_direct_computation():
    fig = M.mirror_descent().figure()  # lp = 1.75, 1500 iterations, seed 1
    a = run("md_path", lp=1.75, seed=1, normalized=True).arrays
    H, svm = a["W"], a["svm_lp"]
    # (a) the iterates on the two largest entries of the l1.75-SVM
    (r0, c0), (r1, c1) = [divmod(int(j), 10) for j in np.argsort(np.abs(svm).ravel())[-2:][::-1]]
    ax0, ax1, ax2 = fig.axes[:3]
    assert ax0.get_xlabel() == f"W[{r0 + 1},{c0 + 1}]"
    assert ax0.get_ylabel() == f"W[{r1 + 1},{c1 + 1}]"
    path = [ln for ln in ax0.get_lines() if ln.get_label() == "W(k)"][0]
    np.testing.assert_allclose(path.get_xdata(), H[:, r0, c0])
    np.testing.assert_allclose(path.get_ydata(), H[:, r1, c1])
    # (b) histogram of |W_ij| / max|W| of the last iterate: 20 bins over [0, 1]
    rel = np.abs(H[-1]) / np.abs(H[-1]).max()
    counts = np.histogram(rel, bins=20, range=(0, 1))[0]
    np.testing.assert_array_equal([p.get_height() for p in ax1.patches][:20], counts)
    # (c) the directional Bregman divergence to both SVMs, in closed form
    c = _curves(ax2)
    np.testing.assert_allclose(c["to ℓ1.75-AttSVM"][1:], ddir(svm, H[1:], 1.75), rtol=1e-8)
    np.testing.assert_allclose(c["to ℓ2-AttSVM"][1:], ddir(a["svm_2"], H[1:], 1.75), rtol=1e-8)
    assert c["to ℓ1.75-AttSVM"][-1] < c["to ℓ2-AttSVM"][-1]  # the matched SVM is closer


@pytest.mark.slow
def test_slider_moves_redraw_from_the_cached_result(monkeypatch):
    ex = M.mirror_descent(lp=2.0)
    fig = ex.figure()
    assert _curves(fig.axes[2])["to ℓ2-AttSVM"][-1] < 0.01  # GD: Frobenius direction
    hist2 = [p.get_height() for p in fig.axes[1].patches][:20]
    run("md_path", lp=1.5, seed=1, normalized=True)  # computed once (as the chapter would)
    M.mirror_data.cache_clear()

    def no_training(*args, **kwargs):
        raise AssertionError("the explorer retrained")

    monkeypatch.setattr(mirror_path, "train", no_training)
    fig = ex.figure(lp=1.5, iterations=100)
    c = _curves(fig.axes[2])
    assert len(c["to ℓ1.5-AttSVM"]) == 100 // 10 + 1  # the records up to iteration 100
    fig = ex.figure(lp=1.5, iterations=1500)
    c = _curves(fig.axes[2])
    assert c["to ℓ1.5-AttSVM"][-1] < c["to ℓ2-AttSVM"][-1]
    hist15 = [p.get_height() for p in fig.axes[1].patches][:20]
    assert hist15[0] > hist2[0]  # more near-zero entries for lp < 2
    with pytest.raises(AssertionError, match="retrained"):
        ex.figure(lp=1.2)  # a setting not computed yet needs the training


def _static(**kw):
    ex = M.mirror_descent(**kw)
    ex.static_dpi = 40
    return ex.static()


def test_static_renders_one_frame_per_lp():
    st = _static(lp=2.0, static={"lp": (1.5, 2.0), "seed": (1,), "normalized": (True,),
                                 "iterations": (1500,), "eps": ("0",)})  # the default
    assert len(st.frames) == 2 and st.values[0] == (1.5, 2.0) and st.start == (1, 0, 0, 0, 0)
    assert st.notes == [M.mirror_note(1.5, 1500), M.mirror_note(2.0, 1500)]


def test_static_renders_both_eps_and_notes_follow_eps():
    st = _static(lp=1.5, static={"lp": (1.5,), "seed": (1,), "normalized": (True,),
                                 "iterations": (1500,)})
    assert len(st.frames) == 2 and st.values[-1] == tuple(M.MD_EPS_NAMES)
    assert sorted(st.notes) == sorted([M.mirror_note(1.5, 1500, eps=2.0 ** -52),
                                       M.mirror_note(1.5, 1500, eps=0.0)])
    assert M.mirror_note(1.5, 1500) == M.mirror_note(1.5, 1500, eps=0.0)  # the default
    assert M.mirror_note(1.5, 1500, eps="0") == M.mirror_note(1.5, 1500, eps=0.0)


def test_bad_static_control_is_refused():
    with pytest.raises(ValueError, match="static"):
        M.mirror_descent(static={"p": (1.5,)})


# -- the page, its note and the chapter ---------------------------------------------------------

def test_the_page_opens_on_the_chapter_call():
    cells = json.loads(BOOK.read_text())["cells"]
    calls = ["".join(c["source"]) for c in cells if "explorer" in c["metadata"].get("tags", [])]
    assert calls == ["al.explorers.mirror_descent(lp=1.75)"]
    # a static page opens on its explorer's defaults (test_explorers_static.py): the Explorer
    # of the call, not shown, is enough (its page, 12 frames, is not rendered)
    ex = M.mirror_descent(lp=1.75)
    assert ex.defaults() == dict(lp=1.75, iterations=1500, seed=1, normalized=True, eps="0")
    assert not re.search(r"\d", M.MD_CAPTION.replace("ℓ2", "").replace("ℓp", ""))


@pytest.mark.parametrize("lp", [1.1, 1.75, 3.0])
def test_note_numbers_and_verdict_follow_the_data(lp):
    a = run("md_path", lp=lp, seed=1, normalized=True, steps=1500, record_every=10).arrays
    H = np.asarray(a["W"])
    for it in M.MD_ITERATIONS_STATIC:
        k = it // 10
        d_lp = float(ddir(np.asarray(a["svm_lp"]), H[k], lp))
        d_2 = float(ddir(np.asarray(a["svm_2"]), H[k], lp))
        note = M.mirror_note(lp, it)
        shown = [float(x) for x in re.findall(r"divergence ([\d.e+-]+) from .*?, ([\d.e+-]+) from",
                                              note)[0]]
        assert shown == pytest.approx([d_lp, d_2], abs=6e-4), note
        if d_lp < M.MD_CLOSE:
            assert note.endswith(f"within {M.MD_CLOSE:g} of the ℓ{lp:g}-AttSVM."), note
        elif it >= 200:
            half = float(ddir(np.asarray(a["svm_lp"]), H[k // 2], lp))
            stalled = 1 - d_lp / half < M.MD_STALL
            assert ("stalled" in note) == stalled and ("converging" in note) != stalled, note
        assert ("closer to the ℓ2" in note) == (d_2 <= d_lp), note


def test_near_one_the_page_says_it_stalls():
    # lp = 1.1 ends far from its SVM; the page must not say it follows it
    note = M.mirror_note(1.1, 1500, eps=2.0 ** -52)
    assert "stalled short of the ℓ1.1-AttSVM" in note
    assert "within" not in note
    # a frozen direction is said in words, not as "fell by only 0%"; the setting reads "p = "
    assert "only 0%" not in note and note.startswith("p = 1.1, after 1500 steps")


@pytest.mark.slow
def test_a_stall_with_eps_is_put_down_to_eps_and_eps_zero_keeps_turning():
    # seed 1, p = 1.1: with the official eps the gradient falls below it and the direction
    # freezes; the note names eps and the step it was crossed, from the recorded gradients
    frozen = M.mirror_note(1.1, 1500, eps=2.0 ** -52)
    a = run("md_path", lp=1.1, seed=1, normalized=True, steps=1500, record_every=10,
            eps=2.0 ** -52).arrays
    k = int(a["steps"][np.flatnonzero(np.asarray(a["grad"]) < 2.0 ** -52)[0]])
    assert "stalled" in frozen and f"at step {k}," in frozen
    free = M.mirror_note(1.1, 1500, eps=0.0)
    b = run("md_path", lp=1.1, seed=1, normalized=True, steps=1500, record_every=10,
            eps=0.0).numbers
    assert "stalled" not in free and b["ddir_lp"] < 1e-3 and b["numerics_eps"] == 0.0
