"""The generalised SVM equivalence of nonlinear heads: W(k) ≈ W_fin + R_k W_dir (chapter 7)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from attnlib._runtime import one_blas_thread
from attnlib._validate import as_tensor
from attnlib.svm.config import SolveConfig, norm_key
from attnlib.svm.engine import Rows
from attnlib.svm.problems import ATT_FEASIBLE, solve_named
from attnlib.svm.rows import matrix_rows, output
from attnlib.tokens import token_inputs

__all__ = ["Equivalence", "svm_equivalence"]


class Equivalence(NamedTuple):
    """Finite and directional parts of the generalised SVM equivalence (chapter 7).

    ``W(k) ≈ W_fin + R_k W_dir / ||W_dir||`` with :math:`R_k \\to \\infty`.

    Attributes
    ----------
    W_fin : tensor (d,d) or (B,d,d)
    W_dir : tensor (d,d) or (B,d,d)
    """

    W_fin: torch.Tensor
    W_dir: torch.Tensor

    def fit(self, W) -> torch.Tensor:
        """:math:`W^{fin} + R\\,W^{dir}` with R fitted to ``W`` by least squares (the official
        code's :math:`W^{SVMeq}`)."""
        W = torch.as_tensor(W, dtype=self.W_dir.dtype, device=self.W_dir.device)
        R = ((W - self.W_fin) * self.W_dir).sum((-2, -1), keepdim=True) \
            / (self.W_dir * self.W_dir).sum((-2, -1), keepdim=True)
        return self.W_fin + R * self.W_dir


@one_blas_thread
def svm_equivalence(data_or_X, O, s, norm="fro", *, z=None, solver="CLARABEL", config=None,
                    progress=False, device=None, dtype=None) -> Equivalence:
    """Generalised SVM equivalence for selected sets :math:`\\mathcal O_i` (nonlinear heads).

    Directional part (beat the masked tokens, no preference inside :math:`\\mathcal O_i`):

    .. math::

        W^{dir} = \\arg\\min_W \\|W\\| \\ \\text{s.t.}\\
        \\begin{cases}
        (x_{it} - x_{i\\tau})^\\top W z_i \\ge 1
            & t \\in \\mathcal O_i,\\ \\tau \\notin \\mathcal O_i \\\\
        (x_{it} - x_{i\\tau})^\\top W z_i = 0 & t, \\tau \\in \\mathcal O_i
        \\end{cases}

    and finite part, matching the softmax ratios :math:`s` inside the sets (as the official
    code builds it from the final softmax):

    .. math::

        W^{fin} = \\arg\\min_W \\|W\\| \\ \\text{s.t.}\\
        (x_{i\\tau} - x_{it})^\\top W z_i = \\log(s_{i\\tau} / s_{it}),\\ t, \\tau \\in
        \\mathcal O_i.

    The pairs are written against one reference member :math:`r_i` of each set (equivalent,
    without redundant rows). With :math:`|\\mathcal O_i| = 1` for every i, :math:`W^{fin} = 0`
    and :math:`W^{dir}` is the Att-SVM of that selection.

    Parameters
    ----------
    data_or_X : AttentionData or tensor (n,T,d) / (B,n,T,d)
    O : bool tensor (n,T) or (B,n,T)
        Selected sets (see :func:`attnlib.tokens.selected_sets`).
    s : tensor (n,T) or (B,n,T)
        Final softmax probabilities (positive on O).
    norm : {"fro", "nuc"} or float lp > 1
        Norm of both problems (the official code uses "fro"; "fro" W_fin is the
        minimum-norm least-squares solution).
    z : tensor, optional
        Queries overriding ``data.z``.
    solver, config, progress, device, dtype
        As in :func:`~attnlib.svm.att_svm`.

    Returns
    -------
    Equivalence
        ``(W_fin, W_dir)``; ``.fit(W)`` gives :math:`W^{fin} + R W^{dir}` fitted to ``W``.

    See chapter 7, *Nonlinear heads*.
    """
    key, cfg = norm_key(norm), SolveConfig.of(solver, config)
    X, z = token_inputs(data_or_X, z)
    n, T, d = X.shape[-3:]
    shp = X.shape[:-3]
    Om = torch.as_tensor(O, device="cpu")
    if Om.dtype != torch.bool:
        raise ValueError("O: expected a bool tensor (True = selected token)")
    if Om.shape[-2:] != (n, T) or Om.ndim > X.ndim - 1:
        raise ValueError(f"O: expected shape (n,T)=({n},{T}) or (B,n,T), got {tuple(Om.shape)}")
    if not bool(Om.any(-1).all()):
        raise ValueError("O: every input needs at least one selected token")
    S = as_tensor(s, "s", dtype=torch.float64, device="cpu")
    if S.shape[-2:] != (n, T) or S.ndim > X.ndim - 1:
        raise ValueError(f"s: expected shape (n,T)=({n},{T}) or (B,n,T), got {tuple(S.shape)}")
    Om, S = Om.expand(*shp, n, T), S.expand(*shp, n, T)
    if not bool((S[Om] > 0).all()):
        raise ValueError("s: probabilities must be > 0 on the selected sets O")
    Xs = X.detach().cpu().to(torch.float64).numpy().reshape(-1, n, T, d)
    zs = z.detach().cpu().to(torch.float64).expand(*shp, n, d).numpy().reshape(-1, n, d)
    On = Om.numpy().reshape(-1, n, T)
    Sn = S.numpy().reshape(-1, n, T)
    items, fins = [], []
    for b in range(len(Xs)):  # the rows of each instance, as one array
        Ob = On[b]
        if Ob.all():
            raise ValueError(f"O: selects every token{f' of trial {b}' if shp else ''}; "
                             "with no masked token W_dir is undefined (a finite solution)")
        ref = Ob.argmax(-1)  # (n,): first member r_i of each set
        D = Xs[b][np.arange(n), ref][:, None, :] - Xs[b]  # (n, T, d): x_{i r_i} - x_{i tau}
        ii, tt = np.nonzero(Ob & (np.arange(T) != ref[:, None]))  # equality pairs (i, t)
        D_eq = Xs[b][ii, tt] - Xs[b][ii, ref[ii]]  # (k, d): x_it - x_{i r_i}
        rhs = np.log(Sn[b][ii, tt] / Sn[b][ii, ref[ii]])  # log(s_it / s_{i r_i})
        items.append(matrix_rows(D, zs[b], ~Ob, key, eq=(D_eq, zs[b][ii], np.zeros(len(ii)))))
        fins.append(_finite_part(D_eq, zs[b][ii], rhs, d, key, cfg))
    def why(b):
        return (f"the directional SVM ({norm}) is infeasible for the selected sets "
                f"O={On[b].astype(int).tolist()}{f' (trial {b})' if shp else ''}: no W puts "
                f"every selected token at least 1 above the masked ones with equal logits "
                f"inside each set. {ATT_FEASIBLE} (here n={n}, T={T}, d={d}).")

    dirs = [W for W, _ in solve_named(items, key, cfg, progress, "SVM equivalence", why)]
    return Equivalence(output(np.stack(fins).reshape(*shp, d, d), X, device, dtype),
                       output(np.stack(dirs).reshape(*shp, d, d), X, device, dtype))


def _finite_part(D_eq, z_eq, rhs, d, key, cfg):
    """min ||W|| s.t. (x_it - x_ir)^T W z_i = log(s_it/s_ir): W^fin of the SVM equivalence."""
    if len(rhs) == 0:
        return np.zeros((d, d))
    C = np.einsum("kj,kl->kjl", D_eq, z_eq).reshape(len(rhs), d * d)
    if key == "fro":  # minimum-norm solution of the linear system
        return (np.linalg.pinv(C) @ rhs).reshape(d, d)
    rows = Rows(np.zeros((0, d * d)), np.zeros(0), C, rhs, (d, d))

    def why(_):
        return ("the finite part W_fin is infeasible: the log-ratios inside the selected sets "
                "are inconsistent for these tokens")

    return solve_named([rows], key, cfg, False, "SVM equivalence (finite part)", why)[0][0]
