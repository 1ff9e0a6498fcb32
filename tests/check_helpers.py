"""Shared by the tests of attnlib.check (tests/test_check*.py): float64 tensors, the toy
instance whose Att-SVM is solved by hand, the lp instance X_LP (solved by hand below) with
the 2-d lp least-norm solver that checks it, and ``says``, which reads a feedback in full (the
message is what a learner reads)."""

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
