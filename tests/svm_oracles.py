"""Oracles of the SVM tests (tests/test_svm_engine*.py, tests/test_svm_problems*.py) that share
no code with attnlib.svm.engine: random tiny instances, the Att-SVM constraint rows written with
plain loops, the Lawson-Hanson least-distance program (one scipy NNLS) and a relative closeness
check."""

import numpy as np
import scipy.optimize
import torch

from attnlib.svm import SolveConfig

F64 = dict(dtype=torch.float64)
TIGHT = dict(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
CONIC = SolveConfig(fast=False)  # the cvxpy path (chunks, compiled problems), not svm.fast


def tiny(seed, n=2, T=3, d=2, B=None):
    g = np.random.default_rng(seed)
    shape = (n, T, d) if B is None else (B, n, T, d)
    X = g.standard_normal(shape)
    z = g.standard_normal(shape[:-2] + (d,))
    return torch.tensor(X, **F64), torch.tensor(z, **F64)


def att_rows(X, z, alpha, mask=None):
    """Rows vec((x_{i a_i} - x_it) z_i^T), one per visible (i, t != a_i), with plain loops."""
    n, T, _ = X.shape
    keep = [(i, t) for i in range(n) for t in range(T)
            if t != alpha[i] and (mask is None or mask[i][t])]
    return np.array([np.outer(X[i, alpha[i]] - X[i, t], z[i]).ravel() for i, t in keep]), keep


def ldp(A, b):
    """min ||w|| s.t. Aw >= b by one NNLS (Lawson & Hanson, ch. 23): (w, lam) or None if
    infeasible. E = [A'; b'], u = argmin_{u>=0} ||Eu - e||, r = Eu - e; w = -r[:D] / r[D],
    lam = u / (1 - b'u) (so that w = A'lam)."""
    D = A.shape[1]
    E = np.vstack([A.T, b[None, :]])
    f = np.zeros(D + 1)
    f[-1] = 1.0
    u, _ = scipy.optimize.nnls(E, f)
    r = E @ u - f
    if np.linalg.norm(r) < 1e-10:
        return None
    return -r[:D] / r[D], u / (1.0 - b @ u)


def close(got, want, rel):
    """max |got - want| <= rel * max |want| (the certified accuracy is relative)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    err = np.abs(got - want).max()
    assert err <= rel * np.abs(want).max(), f"error {err:.3e}, scale {np.abs(want).max():.3e}"


def att_oracle(X, z, alpha, mask=None):
    """Att-SVM (fro) by the least-distance program: W (d,d) and the multipliers (n,T)."""
    X, z = np.asarray(X, dtype=np.float64), np.asarray(z, dtype=np.float64)
    A, keep = att_rows(X, z, np.asarray(alpha), mask)
    w, lam = ldp(A, np.ones(len(A)))
    d = X.shape[-1]
    L = np.zeros(X.shape[:2])
    for (i, t), v in zip(keep, lam):
        L[i, t] = v
    return w.reshape(d, d), L
