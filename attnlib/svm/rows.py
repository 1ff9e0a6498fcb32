"""Constraint rows of the SVM problems, built as one array per instance (no loop over rows).

A W-problem's row (i, t) is :math:`\\mathrm{vec}(D_{it} (U^\\top z_i)^\\top)` with
:math:`D_{it} = x_{i\\alpha_i} - x_{it}`; the constraints see W only through :math:`W z_i`, so
for the unitarily invariant norms (Frobenius, nuclear) :math:`W = M U^\\top` with U an
orthonormal basis of :math:`\\mathrm{span}\\{z_i\\}` (chapter 5, *W versus (K, Q)*).
"""

from __future__ import annotations

import numpy as np
import torch

from attnlib._runtime import resolve_device, resolve_dtype
from attnlib.svm.engine import Rows

__all__ = ["row_basis", "matrix_rows", "vector_rows", "output"]


def row_basis(z: np.ndarray, rtol: float = 1e-12) -> np.ndarray:
    """Orthonormal basis (d, r) of span{z_i}, r = numerical rank of the queries."""
    U, s, _ = np.linalg.svd(z.T, full_matrices=False)
    r = max(1, int((s > rtol * s.max()).sum())) if s.size and s.max() > 0 else 1
    return U[:, :r]


def matrix_rows(D, z, active, norm, eq=None) -> Rows:
    """Rows of a W-problem: D (n,T,d) differences x_sel - x_t, z (n,d) queries, active (n,T).

    Inactive rows become the harmless ``0 >= -1`` (fixed shapes, strictly feasible).
    ``eq`` = (D_eq (k,d), z_eq (k,d), rhs (k,)) adds equality rows.
    """
    n, T, d = D.shape
    U = row_basis(z) if norm in ("fro", "nuc") else None
    zq = z if U is None else z @ U  # (n, r)
    A = np.einsum("ntj,nk->ntjk", D, zq).reshape(n * T, -1) * active.reshape(-1, 1)
    b = np.where(active.reshape(-1), 1.0, -1.0)
    C = c = None
    if eq is not None and len(eq[0]):
        zq_eq = eq[1] if U is None else eq[1] @ U
        C = np.einsum("kj,kl->kjl", eq[0], zq_eq).reshape(len(eq[0]), -1)
        c = eq[2]
    return Rows(A, b, C, c, (d, zq.shape[-1]), U)


def vector_rows(rows, rhs, active) -> Rows:
    """min ||w|| s.t. rows w >= rhs on active rows. rows (m,d), rhs (m,), active (m,) bool."""
    return Rows(rows * active[:, None], np.where(active, rhs, -1.0), None, None,
                (rows.shape[1],))


def output(x: np.ndarray, like: torch.Tensor, device, dtype) -> torch.Tensor:
    """``x`` as a tensor on ``device``/``dtype``, default those of ``like`` (float64 if not
    floating)."""
    dev = like.device if device is None else resolve_device(device)
    dt = (like.dtype if like.is_floating_point() else torch.float64) if dtype is None \
        else resolve_dtype(dtype)
    return torch.as_tensor(x, dtype=torch.float64).to(device=dev, dtype=dt)
