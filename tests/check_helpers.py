"""Shared by the tests of attnlib.check (tests/test_check*.py): float64 tensors, the toy
instance whose Att-SVM is solved by hand, the lp instance X_LP (solved by hand below) with
the 2-d lp least-norm solver that checks it, ``says``, which reads a feedback in full (the
message is what a learner reads), and ``assert_no_leak``, which reads every number of a
message against the expected answer."""

import re

import numpy as np
import torch

from attnlib import data as D


def f64(*a):
    """A float64 tensor of one nested list, or of several numbers."""
    return torch.tensor(a[0] if len(a) == 1 else a, dtype=torch.float64)


# One sample, three tokens in the plane, query z = e1: the Att-SVM for alpha = 0 is
# W z = (1, 0), i.e. W_mm = [[1, 0], [0, 0]] (constraints w0 - w1 >= 1 and w0 + w1 >= 1).
X1 = f64([[[1.0, 0.0], [0.0, 1.0], [0.0, -1.0]]])
W_MM = f64([[1.0, 0.0], [0.0, 0.0]])


def toy_data():
    """The toy instance; a test module makes it a fixture: ``toy = pytest.fixture(toy_data,
    name="toy")``."""
    return D.AttentionData(X1, f64([1.0]), z=f64([[1.0, 0.0]]), v=f64(1.0, 0.0))


def says(fb, ok, text, **details):
    """``fb`` passes (``ok``) or fails with exactly ``text`` after its mark, and the given
    details."""
    assert bool(fb) is ok and fb.ok is ok, str(fb)
    assert str(fb) == ("✓ correct" if ok else "✗ not yet") + f" {text}"
    for k, v in details.items():
        assert fb.details[k] == v


T_LOC = "(local optimality): "
# One sample, x0 = 0, x1 = (-2, -1), x2 = (-2.6, 0): for alpha = 0 the constraint rows are
# a1 = x0 - x1 = (2, 1), a2 = x0 - x2 = (2.6, 0). Scores with v = (-1, 3): gamma = (0, -1, 2.6).
#   l2 (fro): min |p| s.t. a1.p >= 1 alone gives p = a1/|a1|^2 = (0.4, 0.2), and a2.p = 1.04 > 1:
#     only token 1 (score -1 < 0) is a support token -> selection 0 is locally optimal.
#   l3: a1 alone gives p ~ sign(a1)|a1|^(1/2) = (1.414, 1)/3.828 = (0.369, 0.261), a2.p = 0.96
#     < 1, so a2 is active: p0 = 1/2.6, and a1 is active too (p1 = 1 - 2/2.6 = 0.2308 is the
#     smallest |p1| allowed): token 2 (score 2.6 >= 0) is a support token -> not locally optimal.
# The W-model with z = e1 is the same problem in W's first column (the other column is 0).
X_LP = f64([[[0.0, 0.0], [-2.0, -1.0], [-2.6, 0.0]]])
V_LP = f64(-1.0, 3.0)
E1 = f64([[1.0, 0.0]])  # the query of the W-model that makes it the prompt problem


def lp_min_norm_2d(rows, q):
    """min |p|_q s.t. rows @ p >= 1 for 2 rows in 2-d: each row alone or both equal to 1."""
    cands = [np.linalg.solve(rows, np.ones(2))]
    for a in rows:
        u = np.sign(a) * np.abs(a) ** (1 / (q - 1))
        cands.append(u / (a @ u))
    ok = [p for p in cands if (rows @ p >= 1 - 1e-12).all()]
    return min(ok, key=lambda p: (np.abs(p) ** q).sum())


# a number as a message writes it: optional sign (ASCII or U+2212), digits, decimals, exponent
_NUMBER = re.compile(r"[-\u2212]?(\d+(?:\.\d+)?|\.\d+)(?:[eE]([-+\u2212]?\d+))?")


def _shown_numbers(message):
    """Each number of ``message`` with at least 2 significant digits, other than a plain
    integer (a count or an index): (its value, half a unit of its last shown digit)."""
    out = []
    for m in _NUMBER.finditer(message):
        mant, exp = m.group(1), int((m.group(2) or "0").replace("\u2212", "-"))
        if "." not in mant and m.group(2) is None:
            continue  # "3 of 9", "X[0, 2]", "(0, 2)": counts and indices
        digits = mant.replace(".", "").lstrip("0")
        if len(digits) < 2:
            continue
        decimals = len(mant.split(".")[1]) if "." in mant else 0
        out.append((m.group(0), float(mant) * 10.0 ** exp, 0.5 * 10.0 ** (exp - decimals)))
    return out


def _flat(a):
    """The numbers of an array, or of a (nested) tuple or list of arrays of any shapes."""
    if isinstance(a, (tuple, list)) and any(np.ndim(b) > 0 for b in a):
        return np.concatenate([_flat(b) for b in a] or [np.zeros(0)])
    return np.asarray(a, dtype=float).ravel()


def assert_no_leak(message, expected, own=()):
    """No entry of ``expected`` is shown in ``message`` at any precision.

    Every number the message shows with k >= 2 significant digits (``0.19``, ``-1.234``,
    ``1.23e-02``; plain integers such as "3 of 9" are counts or indices and are skipped) is
    the rounding of any value within half a unit of its last digit; the message leaks if the
    magnitude of an expected entry rounds to it, i.e. lies in that interval, unless an entry
    of ``own`` (the learner's answer, or another number the message may rightly quote) rounds
    to it too."""
    exp, mine = np.abs(_flat(expected)), np.abs(_flat(own))
    for text, x, half in _shown_numbers(message):
        tol = half * (1 + 1e-9)
        hit = exp[np.abs(exp - abs(x)) <= tol]
        if hit.size and not (np.abs(mine - abs(x)) <= tol).any():
            raise AssertionError(f"{text} shows the expected {hit[0]!r}: {message}")
