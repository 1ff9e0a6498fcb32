"""Shared by the tests of attnlib.check (tests/test_check*.py): float64 tensors, the toy
instance whose Att-SVM is solved by hand, and ``says``, which reads a feedback in full (the
message is what a learner reads)."""

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
