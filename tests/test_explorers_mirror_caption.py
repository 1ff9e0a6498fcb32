"""The mirror-descent explorer's static frames and caption say what its data show.

The static player opens at its first frame: it must be the chapter's default (lp = 1.75, the
value ``al.widgets.mirror_descent`` is called with in chapter 9). Every claim of the caption
is recomputed from the experiment ``md_path`` (numpy D_dir of the iterates to both SVMs).
"""

import json
from pathlib import Path

import numpy as np
import pytest

from attnlib.experiments import run
from attnlib.explorers import mirror as M

BOOK = Path(__file__).resolve().parents[1] / "book" / "09_mirror_descent.ipynb"


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path))
    M.mirror_data.cache_clear()
    yield
    M.mirror_data.cache_clear()


def ddir(A, B, p):
    A = A / (np.abs(A) ** p).sum((-2, -1), keepdims=True) ** (1 / p)
    B = B / (np.abs(B) ** p).sum((-2, -1), keepdims=True) ** (1 / p)
    return 1 - (np.sign(B) * np.abs(B) ** (p - 1) * A).sum((-2, -1))


def test_opening_frame_is_the_chapter_default():
    cells = json.loads(BOOK.read_text())["cells"]
    calls = ["".join(c["source"]) for c in cells if "explorer" in c["metadata"].get("tags", [])]
    assert calls == ["al.widgets.mirror_descent(lp=1.75)"]
    assert M.MD_LP_STATIC[0] == 1.75
    assert list(M.MD_LP_STATIC) == sorted(M.MD_LP_STATIC, reverse=True)  # toward 1


def test_caption_claims_hold():
    assert "1.75" in M.MD_CAPTION and "0.03 of it after 1,500 steps for lp ≥ 1.5" in M.MD_CAPTION
    final = {}
    for lp in sorted(set(M.MD_LP_STATIC) | {1.3, 2.5, 3.0}):
        a = run("md_path", lp=lp, seed=1, normalized=True).arrays
        H = np.asarray(a["W"])
        d_lp = ddir(np.asarray(a["svm_lp"]), H[-1], lp)
        d_2 = ddir(np.asarray(a["svm_2"]), H[-1], lp)
        assert d_lp < d_2, lp  # closer to its own SVM at every lp != 2
        final[lp] = d_lp
        # sparser toward 1: more entries below 1% of the largest
        final[(lp, "sparse")] = float((np.abs(H[-1]) < 0.01 * np.abs(H[-1]).max()).mean())
    assert all(final[lp] < 0.03 for lp in (1.5, 1.75, 2.5, 3.0))  # within 0.03 for lp >= 1.5
    assert final[1.1] > 0.1  # ... and stalls near 1
    sp = [final[(lp, "sparse")] for lp in M.MD_LP_STATIC]
    assert sp == sorted(sp) and sp[-1] > sp[0]
