"""The Bregman-divergence check of ``md_mechanics`` can fail.

``bregman_min`` is the smallest D_ψ(W, V) / ‖W − V‖_F² over pairs at several distances. On
far-apart random pairs only, D ≥ 0 also holds for some wrong formulas (a wrong exponent of
the dual point, or a wrong weight of ψ(V)); the near pairs catch them. Each mutant below
replaces ``bregman`` inside the experiment and must drive the number below zero.
"""

import math

import pytest
import torch

from attnlib.experiments import mirror


def _psi(W, lp):
    return W.abs().pow(lp).sum((-2, -1)) / lp


def wrong_dual_exponent(W, V, lp=2.0):  # sign(V)|V|^p instead of |V|^(p-1)
    dual = torch.sign(V) * V.abs().pow(lp)
    return _psi(W, lp) - _psi(V, lp) - (dual * (W - V)).sum((-2, -1))


def wrong_weight(W, V, lp=2.0):  # (1/p)‖V‖^p instead of ((p-1)/p)‖V‖^p
    dual = torch.sign(V) * V.abs().pow(lp - 1)
    return _psi(W, lp) + _psi(V, lp) - (dual * W).sum((-2, -1))


def wrong_sign(W, V, lp=2.0):  # + <∇ψ(V), W − V>
    dual = torch.sign(V) * V.abs().pow(lp - 1)
    return _psi(W, lp) - _psi(V, lp) + (dual * (W - V)).sum((-2, -1))


def test_bregman_min_is_nonnegative_and_scale_free():
    num, _ = mirror.mechanics()
    assert 0 <= num["bregman_min"] < 10  # a ratio, not the size of a far-apart pair
    # at p = 2 the ratio is exactly 1/2 for every pair
    num2, _ = mirror.mechanics(lps=(2.0,))
    assert math.isclose(num2["bregman_min"], 0.5, rel_tol=1e-9)


@pytest.mark.parametrize("mutant", [wrong_dual_exponent, wrong_weight, wrong_sign])
def test_bregman_min_fails_for_wrong_formulas(monkeypatch, mutant):
    monkeypatch.setattr(mirror, "bregman", mutant)
    num, _ = mirror.mechanics(lps=(1.25, 1.75, 3.0))
    assert num["bregman_min"] < -1e-6
