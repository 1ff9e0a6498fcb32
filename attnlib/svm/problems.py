"""The SVM problems of attention: Att-SVM, Att-SVM⋆, ℓp-AttSVM, SAtt-SVM, p-SVM and v-SVM.

Each problem builds its constraint rows as one array per instance (:mod:`attnlib.svm.rows`)
and hands them to the one solve path (:mod:`attnlib.svm.engine`), which compiles once per
shape, certifies every answer and falls back. The same problems written one cvxpy constraint
per token, as in the papers, are in :mod:`attnlib.svm.primal` (the documentation and the
tests' oracle).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from attnlib._runtime import one_blas_thread
from attnlib._validate import as_tensor, number
from attnlib.svm.config import InfeasibleError, SolveConfig, UncertifiedError, norm_key
from attnlib.svm.engine import Infeasible, solve_all
from attnlib.svm.rows import matrix_rows, output, vector_rows
from attnlib.tokens import as_mask, as_selection, optimal_tokens, token_inputs

__all__ = ["att_svm", "att_rows", "sequence_svm", "prompt_svm", "head_svm", "relaxed_prompt_svm",
           "solve_named", "ATT_FEASIBLE"]


def solve_named(items, key, cfg, progress, what, why) -> list:
    """:func:`~attnlib.svm.engine.solve_all`, with errors that name the problem: ``why(b)``
    says why instance b is infeasible."""
    try:
        return solve_all(items, key, cfg, progress, what)
    except Infeasible as err:
        raise InfeasibleError(why(err.index)) from None
    except UncertifiedError as err:
        raise UncertifiedError(f"{what}: {err}") from None


ATT_FEASIBLE = ("For data in general position Att-SVM is feasible for every selection when "
                 "d >= max(T-1, n)")


def att_rows(data_or_X, z, alpha, key, mask):
    """The rows of Att-SVM, one :class:`~attnlib.svm.engine.Rows` per instance (see
    :func:`att_svm`); also returns X, the selections (B', n), the active tokens (B', n, T),
    the batch shape and the mask."""
    X, z = token_inputs(data_or_X, z)
    if alpha is None:
        if not hasattr(data_or_X, "X"):
            raise ValueError("alpha: required when X is given without data (no head v to "
                             "find the optimal tokens)")
        alpha = optimal_tokens(data_or_X, mask=mask)
    alpha = as_selection(alpha, X)
    m = as_mask(mask, X)
    n, T, d = X.shape[-3:]
    shp = X.shape[:-3]
    alpha = alpha.expand(*shp, n)
    vis = torch.ones(*shp, n, T, dtype=torch.bool, device=X.device) if m is None \
        else m.expand(*shp, n, T)
    if not bool(torch.gather(vis, -1, alpha.unsqueeze(-1)).all()):
        raise ValueError("alpha: a selected token is not visible under mask")
    active = vis.clone()
    active.scatter_(-1, alpha.unsqueeze(-1), False)  # (..., n, T): t != alpha_i and visible
    Xs = X.detach().cpu().to(torch.float64).numpy().reshape(-1, n, T, d)
    zs = z.detach().cpu().to(torch.float64).expand(*shp, n, d).numpy().reshape(-1, n, d)
    al = alpha.cpu().numpy().reshape(-1, n)
    ac = active.cpu().numpy().reshape(-1, n, T)
    items = []
    for b in range(len(Xs)):  # the rows of each instance, as one array
        D = Xs[b][np.arange(n), al[b]][:, None, :] - Xs[b]  # (n, T, d): x_{i alpha_i} - x_it
        items.append(matrix_rows(D, zs[b], ac[b], key))
    return items, X, al, ac, shp, m


def att_svm(data_or_X, z=None, alpha=None, norm="fro", mask=None, *, return_dual=False,
            solver="CLARABEL", config=None, progress=False, device=None, dtype=None):
    """Att-SVM: the max-margin key-query matrix of a token selection.

    .. math::

        W^{mm}_\\alpha = \\arg\\min_W \\|W\\| \\quad\\text{s.t.}\\quad
        (x_{i\\alpha_i} - x_{it})^\\top W z_i \\ge 1
        \\quad\\text{for all visible } t \\ne \\alpha_i,\\ i \\in [n].

    ``norm="fro"`` is the Att-SVM of the W parameterisation and ``"nuc"`` the Att-SVM⋆ of
    the (K, Q) parameterisation (chapter 5, feasibility in chapter 6), a float ``lp > 1`` the
    ℓp-AttSVM of mirror descent (chapter 9). With ``mask`` (visible tokens) it is the SVM of
    sequence / causal attention (see :func:`sequence_svm`).

    Parameters
    ----------
    data_or_X : AttentionData or tensor (n,T,d) / (B,n,T,d)
        A leading trials dimension B solves B instances with one compiled problem (the
        Frobenius ones 8 at a time as one QP, the others one by one).
    z : tensor (n,d) or (B,n,d), optional
        Queries; default ``data.z``.
    alpha : int tensor (n,) or (B,n), optional
        Selection (0-based); default the optimal tokens (needs ``data.Y`` and ``data.v``).
    norm : {"fro", "nuc"} or float lp > 1
    mask : bool tensor (n,T) or (B,n,T), optional
        Visible tokens (True); invisible tokens get no constraint. ``alpha`` must be visible.
    return_dual : bool
        Also return the multipliers :math:`\\lambda_{it} \\ge 0` of the margin constraints,
        (n,T) or (B,n,T), 0 at selected and invisible tokens; :math:`\\lambda_{it} > 0` marks a
        support vector. For "fro" they satisfy :math:`W = \\sum_{it}\\lambda_{it}
        (x_{i\\alpha_i} - x_{it}) z_i^\\top`; for "nuc" those of :math:`\\min\\|W\\|_*`
        (:math:`\\sum_{it}\\lambda_{it} = \\|W\\|_*`), for lp those of
        :math:`\\min\\sum_{jk}|W_{jk}|^p` (:math:`\\sum_{it}\\lambda_{it} = p\\|W\\|_p^p`).
    solver : str
        cvxpy solver (default "CLARABEL"); the answer is certified (see :class:`SolveConfig`).
    config : SolveConfig, optional
        Solver order and certification tolerances; overrides ``solver``.
    progress : bool
        tqdm progress bar over the trials.
    device, dtype
        Of the result; default the device and floating dtype of ``X`` (float64 for arrays).

    Returns
    -------
    W : tensor (d,d) or (B,d,d)
    lam : tensor (n,T) or (B,n,T), only with ``return_dual=True``

    Raises
    ------
    InfeasibleError
        If no W satisfies the constraints, confirmed by a Farkas certificate (the message
        names the selection and trial).
    UncertifiedError
        If no solver's answer could be certified (and infeasibility is not confirmed).
    """
    key, cfg = norm_key(norm), SolveConfig.of(solver, config)
    items, X, al, ac, shp, m = att_rows(data_or_X, z, alpha, key, mask)
    n, T, d = X.shape[-3:]
    def why(b):
        trial = f" (trial {b})" if shp else ""
        return (
            f"Att-SVM ({norm}) is infeasible for the selection alpha={al[b].tolist()}"
            f"{trial}: no W gives each selected token a logit margin >= 1 over the other "
            f"{'visible ' if m is not None else ''}tokens of its input. {ATT_FEASIBLE} "
            f"(here n={n}, T={T}, d={d}).")

    sols = solve_named(items, key, cfg, progress, "Att-SVM", why)
    Ws = [W for W, _ in sols]
    lams = [lam.reshape(n, T) * ac[b] for b, (_, lam) in enumerate(sols)]
    W = output(np.stack(Ws).reshape(*shp, d, d), X, device, dtype)
    if not return_dual:
        return W
    return W, output(np.stack(lams).reshape(*shp, n, T), X, device, dtype)


def sequence_svm(data_or_X, alpha=None, *, Y=None, v=None, causal=False, norm="fro",
                 return_dual=False, solver="CLARABEL", config=None, progress=False,
                 device=None, dtype=None):
    """SAtt-SVM: the Att-SVM of sequence-to-sequence (and causal) self-attention.

    Every position k of sequence i is a query :math:`z = x_{ik}` with its own selection
    :math:`\\alpha_{ik}`:

    .. math::

        \\min_W \\|W\\| \\quad\\text{s.t.}\\quad
        (x_{i\\alpha_{ik}} - x_{it})^\\top W x_{ik} \\ge 1
        \\quad\\text{for all } t \\ne \\alpha_{ik} \\text{ visible to } k,

    where a causal query k sees only :math:`t \\le k`. It is :func:`att_svm` on the nT
    (sequence, query) pairs, pair ``i*T + k``, with truncated token sets (a mask).

    Parameters
    ----------
    data_or_X : tensor (n,T,d) / (B,n,T,d), or an object with ``.X`` (e.g. SequenceData)
    alpha : int tensor (n,T) or (B,n,T), optional
        ``alpha[i, k]``: token selected by query k; default the optimal visible tokens
        :math:`\\arg\\max_{t} Y_{ik} v^\\top x_{it}` (needs Y and v).
    Y : tensor (n,T) or (B,n,T), optional
        Labels per position (default ``data.Y``).
    v : tensor (d,) or (B,d), optional
        Head (default ``data.v``).
    causal : bool
    norm, return_dual, solver, config, progress, device, dtype
        As in :func:`att_svm`; the multipliers come back as (n,T,T) = (sequence, query,
        token).

    Returns
    -------
    W : tensor (d,d) or (B,d,d)

    See chapter 8, *Sequences and causal attention*.
    """
    X, _ = token_inputs(data_or_X, need_z=False)
    *batch, n, T, d = X.shape
    vis = torch.ones(T, T, dtype=torch.bool, device=X.device)
    vis = torch.tril(vis) if causal else vis  # (T_query, T_token)
    if alpha is None:
        Y = getattr(data_or_X, "Y", None) if Y is None else Y
        v = getattr(data_or_X, "v", None) if v is None else v
        if Y is None or v is None:
            raise ValueError("alpha: give the selection, or labels Y (n,T) and head v")
        Y = as_tensor(Y, "Y", dtype=X.dtype, device=X.device)
        v = as_tensor(v, "v", dtype=X.dtype, device=X.device)
        if Y.shape[-2:] != (n, T):
            raise ValueError(f"Y: expected one label per position, shape (n,T)=({n},{T}), "
                             f"got {tuple(Y.shape)}")
        g = (X @ v.unsqueeze(-2).unsqueeze(-1)).squeeze(-1)  # (..., n, T): v^T x_it
        gam = Y.unsqueeze(-1) * g.unsqueeze(-2)  # (..., n, k, t)
        alpha = gam.masked_fill(~vis, -math.inf).argmax(-1)
    a = torch.as_tensor(alpha, device=X.device)
    if a.shape[-2:] != (n, T):
        raise ValueError(f"alpha: expected shape (n,T)=({n},{T}) or (B,n,T), "
                         f"got {tuple(a.shape)}")
    if a.is_floating_point() and not bool((a == a.round()).all()):
        raise ValueError("alpha: expected integer token indices")
    a = a.long()
    if bool(((a < 0) | (a >= T)).any()):
        raise ValueError(f"alpha: token indices must lie in [0, {T})")
    if causal and bool((a > torch.arange(T, device=X.device)).any()):
        raise ValueError("alpha: with causal=True query k can only select a token t <= k")
    Xp = X.unsqueeze(-3).expand(*batch, n, T, T, d).reshape(*batch, n * T, T, d)
    zp = X.reshape(*batch, n * T, d)
    mask = vis.repeat(n, 1)  # (nT, T)
    try:
        out = att_svm(Xp, z=zp, alpha=a.reshape(*a.shape[:-2], n * T), norm=norm, mask=mask,
                      return_dual=return_dual, solver=solver, config=config, progress=progress,
                      device=device, dtype=dtype)
    except InfeasibleError:
        raise InfeasibleError(
            f"SAtt-SVM ({norm}, causal={causal}) is infeasible for the selection "
            f"alpha={a.tolist()}: no W separates every query's selected token. The nT "
            f"queries play the role of the n inputs: for tokens in general position it is "
            f"feasible when d >= max(T-1, nT) (here n={n}, T={T}, d={d}).") from None
    if not return_dual:
        return out
    W, lam = out
    return W, lam.reshape(*lam.shape[:-2], n, T, T)


# ----------------------------------------------------------------------------- p-SVM and v-SVM
def _fixed_W(W, d, X):
    if W is None:
        return None
    W = as_tensor(W, "W", dtype=torch.float64, device="cpu")
    if W.shape[-2:] != (d, d) or W.ndim not in (2, 3):
        raise ValueError(f"W: expected shape (d,d)=({d},{d}) or (B,d,d), got {tuple(W.shape)}")
    if W.ndim == 3 and (X.ndim != 4 or W.shape[0] != X.shape[0]):
        raise ValueError("W: a batch of W needs data with the same trials dimension B")
    return W


def _prompt(data_or_X, alpha, W, norm, mask, rhs, what, cfg, progress, device, dtype,
            return_dual):
    """The p-SVM family: keys k_it = W^T x_it, rows (k_{i alpha_i} - k_it).

    ``rhs`` (B', n): the margin required of each input (default 1 everywhere).
    """
    key = norm_key(norm, matrix=False)
    X, _ = token_inputs(data_or_X, need_z=False)
    if alpha is None:
        if not hasattr(data_or_X, "X"):
            raise ValueError("alpha: required when X is given without data (no head v)")
        alpha = optimal_tokens(data_or_X, mask=mask)
    alpha = as_selection(alpha, X)
    m = as_mask(mask, X)
    n, T, d = X.shape[-3:]
    shp = X.shape[:-3]
    W = _fixed_W(W, d, X)
    Xs = X.detach().cpu().to(torch.float64)
    K = Xs if W is None else Xs @ W.unsqueeze(-3) if W.ndim == 3 else Xs @ W  # keys W^T x
    K = K.numpy().reshape(-1, n, T, d)
    alpha = alpha.expand(*shp, n)
    vis = torch.ones(*shp, n, T, dtype=torch.bool) if m is None \
        else m.cpu().expand(*shp, n, T)
    if not bool(torch.gather(vis, -1, alpha.cpu().unsqueeze(-1)).all()):
        raise ValueError("alpha: a selected token is not visible under mask")
    active = vis.clone()
    active.scatter_(-1, alpha.cpu().unsqueeze(-1), False)
    al = alpha.cpu().numpy().reshape(-1, n)
    ac = active.numpy().reshape(-1, n, T)
    items = []
    for b in range(len(K)):  # the rows of each instance, as one array
        D = K[b][np.arange(n), al[b]][:, None, :] - K[b]  # (n, T, d)
        need = np.ones(n) if rhs is None else rhs[b]  # (n,)
        items.append(vector_rows(D.reshape(n * T, d), np.repeat(need, T),
                                  ac[b].reshape(-1)))
    def why(b):
        trial = f" (trial {b})" if shp else ""
        return (
            f"{what} ({norm}) is infeasible for the selection alpha={al[b].tolist()}"
            f"{trial}: no single prompt p gives each selected key the required margin "
            f"over the other keys of its input. For keys in general position it is "
            f"feasible for every selection when d >= n(T-1) (here n={n}, T={T}, d={d}; "
            f"Att-SVM with queries z_i is feasible when d >= max(T-1, n)).")

    sols = solve_named(items, key, cfg, progress, what, why)
    ps = [p for p, _ in sols]
    lams = [lam.reshape(n, T) * ac[b] for b, (_, lam) in enumerate(sols)]  # 0 where inactive
    p = output(np.stack(ps).reshape(*shp, d), X, device, dtype)
    if not return_dual:
        return p
    return p, output(np.stack(lams).reshape(*shp, n, T), X, device, dtype)


def prompt_svm(data_or_X, alpha=None, W=None, norm="fro", mask=None, *, return_dual=False,
               solver="CLARABEL", config=None, progress=False, device=None, dtype=None):
    """p-SVM: the max-margin prompt token of the prompt model, with W fixed.

    .. math::

        p^{mm}(\\alpha) = \\arg\\min_p \\|p\\| \\quad\\text{s.t.}\\quad
        (k_{i\\alpha_i} - k_{it})^\\top p \\ge 1 \\quad\\text{for all } t \\ne \\alpha_i,
        \\qquad k_{it} = W^\\top x_{it}.

    Parameters
    ----------
    data_or_X : AttentionData or tensor (n,T,d) / (B,n,T,d)
    alpha : int tensor (n,) or (B,n), optional
        Default the optimal tokens.
    W : tensor (d,d) or (B,d,d), optional
        The fixed key-query matrix (default identity).
    norm : "fro" (Euclidean) or float lp > 1
    mask, return_dual, solver, config, progress, device, dtype
        As in :func:`att_svm` (multipliers (n,T) of the problem solved as
        :math:`\\min\\tfrac12\\|p\\|^2` for "fro").

    Returns
    -------
    p : tensor (d,) or (B,d)

    See chapter 2, *The Att-SVM and gradient descent*.
    """
    return _prompt(data_or_X, alpha, W, norm, mask, None, "p-SVM",
                   SolveConfig.of(solver, config), progress, device, dtype, return_dual)


def head_svm(data_or_X, Y=None, alpha=None, norm="fro", *, return_dual=False,
             solver="CLARABEL", config=None, progress=False, device=None, dtype=None):
    """v-SVM: the hard-margin head on the selected tokens (no intercept).

    .. math::

        v^{mm} = \\arg\\min_v \\|v\\| \\quad\\text{s.t.}\\quad
        Y_i\\, v^\\top x_{i\\alpha_i} \\ge 1 \\quad\\text{for all } i \\in [n].

    Parameters
    ----------
    data_or_X : AttentionData or tensor (n,T,d) / (B,n,T,d)
    Y : tensor (n,) or (B,n), optional
        Labels (default ``data.Y``).
    alpha : int tensor (n,) or (B,n), optional
        Default the optimal tokens (needs ``data.v``).
    norm : "fro" (Euclidean) or float lp > 1
    return_dual : bool
        Also return the multipliers (n,) or (B,n); :math:`\\lambda_i > 0` marks a support
        vector.
    solver, config, progress, device, dtype
        As in :func:`att_svm`.

    Returns
    -------
    v : tensor (d,) or (B,d)

    See chapter 4, *Training the head too*.
    """
    key, cfg = norm_key(norm, matrix=False), SolveConfig.of(solver, config)
    X, _ = token_inputs(data_or_X, need_z=False)
    Y = getattr(data_or_X, "Y", None) if Y is None else Y
    if Y is None:
        raise ValueError("Y: the labels are needed (pass Y= or data with data.Y)")
    Y = as_tensor(Y, "Y", dtype=torch.float64, device="cpu")
    n, T, d = X.shape[-3:]
    shp = X.shape[:-3]
    if Y.shape[-1:] != (n,) or Y.ndim > X.ndim - 2:
        raise ValueError(f"Y: expected shape (n,)=({n},) or (B,n), got {tuple(Y.shape)}")
    if not bool(((Y == 1) | (Y == -1)).all()):
        raise ValueError("Y: labels must be -1 or +1")
    if alpha is None:
        if getattr(data_or_X, "v", None) is None:
            raise ValueError("alpha: required when the data has no head v (data.v is None)")
        alpha = optimal_tokens(data_or_X)
    alpha = as_selection(alpha, X).cpu().expand(*shp, n)
    Xs = X.detach().cpu().to(torch.float64)
    sel = torch.gather(Xs, -2, alpha[..., None, None].expand(*shp, n, 1, d)).squeeze(-2)
    rows = (Y.expand(*shp, n).unsqueeze(-1) * sel).numpy().reshape(-1, n, d)  # Y_i x_{i a_i}
    al = alpha.numpy().reshape(-1, n)
    items = [vector_rows(rows[b], np.ones(n), np.ones(n, dtype=bool))
             for b in range(len(rows))]
    def why(b):
        trial = f" (trial {b})" if shp else ""
        return (
            f"v-SVM ({norm}) is infeasible for the selection alpha={al[b].tolist()}"
            f"{trial}: the selected tokens are not linearly separable by their labels "
            f"through the origin. For tokens in general position it is feasible when "
            f"d >= n (here n={n}, d={d}).")

    sols = solve_named(items, key, cfg, progress, "v-SVM", why)
    vs = [v for v, _ in sols]
    lams = [lam for _, lam in sols]
    v = output(np.stack(vs).reshape(*shp, d), X, device, dtype)
    if not return_dual:
        return v
    return v, output(np.stack(lams).reshape(*shp, n), X, device, dtype)


def relaxed_prompt_svm(data, alpha=None, W=None, v_mm=None, norm="fro", *, tol=1e-6,
                       return_dual=False, solver="CLARABEL", config=None, progress=False,
                       device=None, dtype=None):
    """The p-SVM of joint (v, p) training: full margin only for v's support inputs.

    .. math::

        p^{relax} = \\arg\\min_p \\|p\\| \\quad\\text{s.t.}\\quad
        (k_{i\\alpha_i} - k_{it})^\\top p \\ge
        \\begin{cases} 1 & i \\in \\mathcal S \\\\ 0 & i \\notin \\mathcal S \\end{cases}
        \\quad t \\ne \\alpha_i,

    where :math:`\\mathcal S = \\{i : Y_i\\, v^{mm\\top} x_{i\\alpha_i} = 1\\}` are the support
    vectors of the v-SVM (:func:`head_svm`). When every input is a support vector (the tight
    case) this is :func:`prompt_svm`.

    Parameters
    ----------
    data : AttentionData
    alpha : int tensor (n,) or (B,n), optional
        Default the optimal tokens.
    W : tensor (d,d), optional
        Fixed key-query matrix (default identity).
    v_mm : tensor (d,) or (B,d), optional
        The v-SVM solution (default :func:`head_svm` of ``data`` and ``alpha``).
    norm : "fro" or float lp > 1
    tol : float > 0
        A v-margin within ``1 + tol`` counts as a support vector. When ``v_mm`` is solved
        here, at least the certification tolerance of that solve (:class:`SolveConfig`):
        its margins are accurate to no more.
    return_dual, solver, config, progress, device, dtype
        As in :func:`prompt_svm`.

    Returns
    -------
    p : tensor (d,) or (B,d)

    See chapter 4, *Training the head too*.
    """
    cfg = SolveConfig.of(solver, config)
    # v_mm's margins are certified to the solve's tolerance: a smaller tol cannot tell its
    # support vectors apart (a support margin may read 1 + 1e-9)
    tol = number("tol", tol, lo=0, lo_open=True)
    X, _ = token_inputs(data, need_z=False)
    n, T, d = X.shape[-3:]
    shp = X.shape[:-3]
    if alpha is None:
        alpha = optimal_tokens(data)
    alpha = as_selection(alpha, X)
    if v_mm is None:
        v_mm = head_svm(data, alpha=alpha, solver=solver, config=config)
        tol = max(tol, max(cfg.tol_of(s) for s in cfg.solvers))
    v_mm = as_tensor(v_mm, "v_mm", dtype=torch.float64, device="cpu")
    if v_mm.shape[-1:] != (d,) or v_mm.ndim > X.ndim - 2:
        raise ValueError(f"v_mm: expected shape (d,)=({d},) or (B,d), got {tuple(v_mm.shape)}")
    Y = as_tensor(data.Y, "data.Y", dtype=torch.float64, device="cpu")
    Xs = X.detach().cpu().to(torch.float64)
    a = alpha.cpu().expand(*shp, n)
    sel = torch.gather(Xs, -2, a[..., None, None].expand(*shp, n, 1, d)).squeeze(-2)
    vmarg = Y * (sel @ v_mm.unsqueeze(-1)).squeeze(-1).expand(*shp, n)  # (..., n)
    rhs = (vmarg <= 1 + tol).double().numpy().reshape(-1, n)  # 1: v-support input, else 0
    return _prompt(data, alpha, W, norm, None, rhs, "relaxed p-SVM", cfg, progress, device,
                   dtype, return_dual)


# the small solves run on one BLAS thread; applied without the @ syntax so that mutation testing
# reaches the bodies (mutmut 3 skips decorated functions); functools.wraps keeps the name,
# docstring and signature that autodoc and the public API show
att_svm, sequence_svm = one_blas_thread(att_svm), one_blas_thread(sequence_svm)
prompt_svm, head_svm = one_blas_thread(prompt_svm), one_blas_thread(head_svm)
relaxed_prompt_svm = one_blas_thread(relaxed_prompt_svm)
