"""The lines under the website's explorers (``note=``) and the chapters' prose around them say
what the data show: recomputed here with numpy from the paths and the SVM directions."""

import re

import numpy as np
import pytest

from attnlib import plots
from attnlib.explorers import max_margin as M


@pytest.fixture(autouse=True)
def _cache(module_cache):
    M.token_plane_data.cache_clear()
    yield
    M.token_plane_data.cache_clear()


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
    d = M.token_plane_data(example, lr, normalized, "logistic")
    k = it // 5
    gap, ray = _gaps(d, k)
    note = M.token_plane_note(example, "all", it, lr, normalized, "logistic")
    lo, hi = _range(note, "1 − cos to that ray")
    assert lo == pytest.approx(gap.min(), rel=0.06) and hi == pytest.approx(gap.max(), rel=0.06)
    lo, hi = _range(note, "largest softmax probability")
    assert (lo, hi) == pytest.approx((d["prob"][:, k].min(), d["prob"][:, k].max()), abs=6e-4)
    if len(set(ray)) > 1:
        for b in range(len(ray)):
            assert f"run {b + 1} → {d['short'][ray[b]]}" in note
    one = M.token_plane_note(example, 3, it, lr, normalized, "logistic")
    assert f"run 3 → {d['short'][ray[2]]}" in one


@pytest.mark.slow
def test_chapter3_runs_5_and_6_end_on_the_blue_ray_under_every_loss_and_step():
    # ch3's prose: "runs 5 and 6 (c = -1, -1.5) end on the blue ray", the others on the red
    for loss in ("logistic", "exp", "correlation"):
        for lr in (0.1, 1.0):
            d = M.token_plane_data("e1-local", lr, True, loss)
            _, ray = _gaps(d, 1000 // 5)
            assert list(ray) == [0, 0, 0, 0, 1, 1], (loss, lr)
    assert plots.COLORS[1] == plots.PALETTE["other"] == "#1f77b4"  # ray 2 is drawn blue


def test_chapter2_unnormalised_step_one_turns_much_more_slowly():
    # ch2's prose: with normalized=False and step 1 the paths still turn to the ray, slower
    slow, _ = _gaps(M.token_plane_data("e2", 1.0, False, "logistic"), 1000 // 5)
    fast, _ = _gaps(M.token_plane_data("e2", 1.0, True, "logistic"), 1000 // 5)
    early, _ = _gaps(M.token_plane_data("e2", 1.0, False, "logistic"), 50 // 5)
    assert slow.max() < early.max()  # still turning toward the ray
    assert slow.min() > 100 * fast.max()  # but far behind the normalised runs
