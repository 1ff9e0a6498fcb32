"""The mirror-descent explorer says what its data show, at every setting of the website.

The page opens on the chapter's call (``al.explorers.mirror_descent(lp=1.75)``: lp = 1.75,
1500 steps). The caption names no number; the line under the figure (``mirror_note``) is
recomputed here from the experiment ``md_path`` with an independent numpy directional
Bregman divergence, and its verdict (within ``MD_CLOSE``, still converging, stalled) is
checked against those numbers.
"""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from attnlib.experiments import run
from attnlib.explorers import Explorer
from attnlib.explorers import mirror as M

BOOK = Path(__file__).resolve().parents[1] / "book" / "09_mirror_descent.ipynb"


@pytest.fixture(autouse=True)
def _cache(module_cache):
    M.mirror_data.cache_clear()
    yield
    M.mirror_data.cache_clear()


def ddir(A, B, p):
    A = A / (np.abs(A) ** p).sum((-2, -1), keepdims=True) ** (1 / p)
    B = B / (np.abs(B) ** p).sum((-2, -1), keepdims=True) ** (1 / p)
    return 1 - (np.sign(B) * np.abs(B) ** (p - 1) * A).sum((-2, -1))


def test_the_page_opens_on_the_chapter_call(monkeypatch):
    cells = json.loads(BOOK.read_text())["cells"]
    calls = ["".join(c["source"]) for c in cells if "explorer" in c["metadata"].get("tags", [])]
    assert calls == ["al.explorers.mirror_descent(lp=1.75)"]
    # a static page opens on its explorer's defaults (test_explorers_static.py): the Explorer
    # of the call, not shown, is enough (its page, 12 frames, is not rendered)
    monkeypatch.setattr(Explorer, "show", lambda self, mode=None: self)
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
    # the case: lp = 1.1 ends far from its SVM; the page must not say it follows it
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
