"""E3 of "Transformers as SVMs" (arXiv 2308.16898), chapter 5: the rank of Att-SVM solutions.

One registered experiment: ``tf_svm_rank``,
the numerical rank of the Frobenius and the nuclear-norm Att-SVM solutions over (n, T, d), and
the official notebook's protocol (SCS, absolute rank tolerance) that produced the paper's
nuclear curve. Every solution is certified (:func:`attnlib.svm.solve_each`), and each nuclear
rank is bounded by the dual (:func:`dual_matrix`). Runs at the paper's full scale in about
12 s of CPU time. Computation and declared targets only; the figure is in
:mod:`attnlib.figures.tf_svm`. See chapter 5.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch

from .._validate import to_numpy
from ..data import AttentionData, random_data
from ..examples import EPS
from ..figures.tf_svm import plot_rank
from ..metrics import correlation, numerical_rank
from ..svm import att_svm, solve_each
from ..tokens import optimal_tokens
from ..train import train
from .registry import Target, experiment

PAPER = "2308.16898"


def _subset(data: AttentionData, idx: torch.Tensor) -> AttentionData:
    """The trials ``idx`` of batched data."""
    return AttentionData(data.X[idx], data.Y[idx], data.z[idx], data.v[idx])


# ============================================================================ E3: SVM rank
RANK_CELLS = ((5, 5), (10, 5), (15, 5), (5, 10), (5, 15))  # (n, T): vary n, then vary T
ILL_CONDITIONED = 1e3  # ||W^mm||_F above this: barely feasible, solver accuracy is relative


DUAL_ONE = 1e-6  # a dual singular value within this of 1 counts as 1


def dual_matrix(X, z, alpha, lam) -> torch.Tensor:
    r"""The dual matrix of Att-SVM⋆, :math:`Y = \sum_{i,t} \lambda_{it}
    (x_{i\alpha_i} - x_{it}) z_i^\top`, (B, d, d).

    With multipliers :math:`\lambda \ge 0` of the nuclear problem, :math:`\|Y\|_2 \le 1`
    and :math:`\langle W, Y\rangle = \|W\|_*` at every optimum W, so W's singular vectors
    lie in the span of Y's singular vectors of singular value 1: their number bounds the rank
    of *every* solution.
    """
    sel = torch.gather(X, -2, alpha[..., None, None].expand(*alpha.shape, 1, X.shape[-1]))
    D = sel - X  # (B, n, T, d)
    return torch.einsum("bnt,bntj,bnk->bjk", lam.to(X), D, z)


def official_nuclear_rank(data, alpha, tol: float = 1e-7) -> np.ndarray:
    """Rank of Att-SVM⋆ solved as the official notebook does it: the primal problem
    ``min ||W||_nuc`` with cvxpy's default solver (SCS for this SDP, ~1e-4 accurate) and
    ``numpy.linalg.matrix_rank(W, tol=1e-7)`` (absolute). Kept only to reproduce the paper's
    curve and show that, with SCS (the default without MOSEK; the official code does not
    record its solver), its nuclear ranks are solver noise; the book uses
    :func:`attnlib.svm.att_svm`."""
    import cvxpy as cp

    X, z = to_numpy(data.X).astype(np.float64), to_numpy(data.z).astype(np.float64)
    a = to_numpy(alpha).astype(np.int64)
    B, n, T, d = X.shape
    ranks = np.zeros(B)
    # one problem, its rows a parameter: cvxpy canonicalises it once, and each solve starts
    # SCS cold (warm_start=False), so SCS gets the same data as a problem built per instance
    R = cp.Parameter((n * (T - 1), d * d))
    W = cp.Variable((d, d))
    prob = cp.Problem(cp.Minimize(cp.normNuc(W)), [R @ cp.vec(W, order="C") >= 1])
    for b in range(B):  # the official notebook's protocol, one instance at a time
        D = X[b][np.arange(n), a[b]][:, None, :] - X[b]  # (n, T, d)
        keep = np.arange(T)[None, :] != a[b][:, None]
        R.value = np.einsum("itj,ik->itjk", D, z[b])[keep].reshape(-1, d * d)  # <R, W> >= 1
        try:
            prob.solve(solver="SCS", warm_start=False)
            value = W.value
        except cp.error.SolverError:
            value = None
        ranks[b] = np.nan if value is None else np.linalg.matrix_rank(value, tol=tol)
    return ranks


FULL_CELLS = ((5, 5, 10), (5, 5, 20), (10, 5, 20))  # (n, T, d), d > n: room off span{z_i}
_TIGHT = dict(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)


def full_space_svm(X, z, alpha, norm: str):
    r"""Att-SVM of one instance solved in the **full** d×d space with cvxpy (Clarabel, tight
    tolerances): no reduction to span{z_i}, nothing the solver is told about the answer's
    structure. Returns the solution W (d, d) and the multipliers λ (n, T) of the margin
    constraints (0 at the selected tokens), for :func:`dual_matrix`. An independent check of
    the reduced solver of :func:`attnlib.svm.att_svm` and of the span and rank facts."""
    import cvxpy as cp

    X, z = np.asarray(X, dtype=np.float64), np.asarray(z, dtype=np.float64)
    a = np.asarray(alpha, dtype=np.int64)
    n, T, d = X.shape
    D = X[np.arange(n), a][:, None, :] - X  # (n, T, d)
    keep = np.arange(T)[None, :] != a[:, None]
    rows = np.einsum("itj,ik->itjk", D, z)[keep].reshape(-1, d * d)  # <R, W> >= 1
    W = cp.Variable((d, d))
    obj = cp.norm(cp.vec(W, order="C"), 2) if norm == "fro" else cp.normNuc(W)
    con = rows @ cp.vec(W, order="C") >= 1
    prob = cp.Problem(cp.Minimize(obj), [con])
    with warnings.catch_warnings():  # a tight solve that stalls is retried at default accuracy;
        warnings.simplefilter("ignore", UserWarning)  # the targets check the accuracy reached
        prob.solve(**_TIGHT)
        if prob.status != cp.OPTIMAL:
            prob.solve(solver="CLARABEL")
    lam = np.zeros((n, T))
    lam[keep] = np.asarray(con.dual_value).reshape(-1)
    return W.value, lam


def _full_space_check(seed: int, trials: int) -> dict:
    """The span and rank facts on solutions solved in the full d×d space: off-span share,
    agreement of the objective with the reduced solver, and the full-space nuclear
    solution's rank against its own dual certificate."""
    off, agree, dual_excess, units_max = 0.0, 0.0, -math.inf, 0
    for c, (n, T, d) in enumerate(FULL_CELLS):
        data = random_data(n, T, d, trials=trials, seed=seed + 50_000 + c, device="cpu")
        opt = optimal_tokens(data)
        for b in range(trials):
            X, z, a = data.X[b], data.z[b], opt[b]
            P = torch.linalg.pinv(z) @ z  # projection onto span{z_i}
            for norm in ("fro", "nuc"):
                Wf, lam = full_space_svm(to_numpy(X), to_numpy(z), to_numpy(a), norm)
                Wf = torch.as_tensor(Wf, dtype=torch.float64)
                off = max(off, float((Wf - Wf @ P).norm() / Wf.norm()))
                Wr = att_svm(AttentionData(X, data.Y[b], z, data.v[b]), alpha=a, norm=norm)
                val = (lambda M: torch.linalg.svdvals(M).sum()) if norm == "nuc" else torch.norm
                agree = max(agree, float(abs(val(Wf) - val(Wr.to(Wf))) / val(Wr.to(Wf))))
                if norm == "nuc":
                    sy = torch.linalg.svdvals(dual_matrix(X[None], z[None], a[None],
                                                          torch.as_tensor(lam)[None]))[0]
                    units = int((sy >= 1 - FULL_DUAL_ONE).sum())
                    r = int(numerical_rank(Wf, FULL_RANK_RTOL))
                    dual_excess = max(dual_excess, float(r - units))
                    units_max = max(units_max, units)
    return dict(full_offspan_max=off, full_agree_max=agree, full_dual_excess_max=dual_excess,
                full_units_max=float(units_max))


FULL_DUAL_ONE = 1e-5  # the full-space SDP's dual is accurate to about 1e-8
FULL_RANK_RTOL = 1e-4  # an interior-point SDP answer sits inside the optimal face: small σ_j


def _official_target(n, d, paper, lo, hi):
    return Target(f"official_nuc_rank_n{n}_d{d}",
                  f"nuclear mean rank, n={n}, T=5, d={d}, with the official formulation and "
                  "solver (cvxpy's default SCS; rank tol 1e-7)", paper, lo, hi, "±0.5",
                  "re-simulation", "reproduces the paper's curve with SCS, cvxpy's default "
                  "for this problem when no commercial solver such as MOSEK is installed (the "
                  "official code does not record which solver made the figure): with SCS its "
                  "ranks are solver noise, and the accurate, certified solution has far lower "
                  "rank (certified by the dual, nuc_dual_excess_max), "
                  f"see nuc_rank_n{n}_d{d}")


@experiment(
    "tf_svm_rank", paper=f"{PAPER} Fig. 4 (E3, svm_rank.ipynb)", chapter="05_w_vs_kq",
    title="Rank of the Frobenius and nuclear Att-SVM solutions over (n, T, d)",
    plot=plot_rank,
    seconds=11,  # measured 2026-11-29: CPU s, one process alone
    bounds={"official_trials": (0, None), "full_trials": (1, None)},
    targets=[
        Target("margin_err_max", "every feasible Frobenius solution: |min margin − 1|",
               "1 ± 1e-6", 0.0, 1e-6, "1e-6 (solver accuracy)", "paper",
               "instances at the edge of feasibility (‖W^mm‖_F > 1e3, so margins of 1 are "
               "1e-3 of the logit scale) are counted apart, see ill_conditioned"),
        Target("offspan_max", "every feasible Frobenius solution: ‖W(I − P_Z)‖/‖W‖",
               "< 1e-6", 0.0, 1e-6, "1e-6", "paper",
               "attnlib solves in the basis of span{z_i}, so this only checks that reduction; "
               "the live check is full_offspan_max", evidence="by construction"),
        Target("rank_excess_max", "every feasible solution (both norms): rank − min(n, d)",
               "≤ 0", -math.inf, 0.0, "exact", "paper",
               "W = (W in the basis of span{z_i}) · basis has rank ≤ n by construction; the live "
               "check is full_dual_excess_max", evidence="by construction"),
        Target("full_offspan_max", "Frobenius and nuclear solutions solved in the full d×d "
               "space (cvxpy, no reduction): ‖W(I − P_Z)‖/‖W‖", "< 1e-6", 0.0, 1e-6,
               "1e-6 (solver accuracy)", "paper",
               "a few instances with d > n; every nuclear optimum lies in the span too, since "
               "its row space is in the dual matrix's"),
        Target("full_agree_max", "the same instances: relative gap between the full-space "
               "and the reduced solver's optimal norm (both norms)", "0", 0.0, 1e-6,
               "1e-6 (solver accuracy)", "suggested"),
        Target("full_dual_excess_max", "the same instances: rank of the full-space nuclear "
               "solution (σ_j > 1e-4 σ_1) − #{σ_j(Σ λ_k A_k) = 1} of its own dual", "≤ 0",
               -math.inf, 0.0, "exact", "paper",
               "the dual's count bounds the rank of every optimum; the dual matrix has rank ≤ n, "
               "so this certifies rank ≤ n for a solution found without the span reduction"),
        Target("fro_rank_dev_max", "Frobenius mean rank = min(n, d) at every (n, T, d) "
               "(largest deviation over the grid)", "0 (min(n, d) exactly)", 0.0, 0.5,
               "±0.5 per point", "re-simulation",
               "feasible-only; with an accurate solver a few instances have rank < min(n, d) "
               "(an input whose constraints are all slack contributes nothing to W)"),
        Target("nuc_minus_fro_max", "nuclear rank ≤ Frobenius rank in every instance", "≤ 0",
               -math.inf, 0.0, "exact", "re-simulation"),
        Target("nuc_dual_excess_max", "every nuclear solution: rank ≤ #{σ_j(Σ_k λ_k A_k) = 1}, "
               "the dual's bound on the rank of every optimum", "≤ 0", -math.inf, 0.0,
               "exact", "paper",
               "a dual certificate (see the chapter): the numerical rank of each accurate "
               "nuclear solution is certified, not only measured; σ_j counts as 1 within 1e-6, "
               "and dual_separation_min reports how far below 1 the other σ_j stay"),
        *(_official_target(n, d, paper, lo, hi) for n, d, paper, lo, hi in (
            (5, 5, "4.5", 4.0, 5.0), (10, 10, "9.0", 8.5, 9.5), (15, 15, "13.4–13.9", 12.9, 14.4),
            (5, 20, "5.0", 4.5, 5.0), (10, 20, "9.9", 9.4, 10.0),
            (15, 20, "14.7–14.9", 14.2, 15.0))),
        Target("artefact_n15_d3", "notebook-style mean rank at n=15, T=5, d=3 (infeasible "
               "counted as rank 1)", "≈ 1", 0.7, 1.3, "±0.3", "official code",
               "the official artefact (matrix_rank(None) = 1), shown only to explain the "
               "stored figure; the book's curves are feasible-only"),
    ])
def tf_svm_rank(trials: int = 100, ds: tuple[int, ...] = (1, 2, 3, 4, 5, 10, 15, 20),
                cells: tuple[tuple[int, int], ...] = RANK_CELLS, seed: int = 0,
                rtol: float = 1e-6, official_trials: int = 20, full_trials: int = 2,
                progress: bool = True, device: str | None = None):
    r"""E3: at α = opt on ``trials`` random instances per (n, T, d), solve Att-SVM (Frobenius)
    and Att-SVM⋆ (nuclear); numerical rank with relative tolerance ``rtol``. Infeasible
    instances are counted as infeasible (and the notebook's rank-1 artefact is reported
    apart). At T = 5, n in {5, 10, 15}, d in {n, 20}, the first ``official_trials`` feasible
    instances are also solved with the official formulation and solver, to reproduce the
    paper's nuclear curve. ``full_trials`` instances per cell of ``FULL_CELLS`` are solved
    again in the full d×d space (:func:`full_space_svm`), the live check of the span and rank
    facts that the reduced solver has by construction. The rank of each nuclear solution is
    compared with the dual's
    bound :math:`\#\{j : \sigma_j(Y) = 1\}` on the rank of every optimum
    (:func:`dual_matrix`).

    .. math::

        \mathrm{rank}_{\mathrm{rtol}}(W) = \#\{k : \sigma_k(W) > \mathrm{rtol}\,\sigma_1(W)\}
        \le \min(n, d)

    See chapter 5, *Self-attention as an SVM: W versus (K, Q)*.
    """
    from tqdm.auto import tqdm

    cells, ds = tuple(tuple(c) for c in cells), tuple(ds)
    shape = (len(cells), len(ds))
    fro_mean, nuc_mean = np.full(shape, np.nan), np.full(shape, np.nan)
    infeas, art_fro, art_nuc = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    margin_err, offspan, excess, fro_dev, nuc_gap = 0.0, 0.0, -math.inf, 0.0, -math.inf
    official, failures, ill, margin_err_ill = {}, 0, 0, 0.0
    dual_excess, dual_sep = -math.inf, math.inf
    grid = [(r, j) for r in range(len(cells)) for j in range(len(ds))]
    for r, j in tqdm(grid, desc="SVM rank grid", disable=not progress):
        (n, T), d = cells[r], ds[j]
        data = random_data(n, T, d, trials=trials, seed=seed + 1000 * (r * len(ds) + j),
                           device="cpu")
        opt = optimal_tokens(data)
        sol = solve_each(data, opt, "fro")
        Wf, ok, fail = sol.W.to("cpu", torch.float64), sol.feasible.clone(), sol.failed.clone()
        Wn, lam = torch.full_like(Wf, math.nan), torch.full_like(sol.lam, math.nan)
        if ok.any():  # feasibility is the same for both norms: solve the nuclear one there
            idx = torch.nonzero(ok).flatten()
            nuc = solve_each(_subset(data, idx), opt[idx], "nuc",
                             feasible=torch.ones(len(idx), dtype=torch.bool))
            Wn[idx], lam[idx] = nuc.W.to(Wn), nuc.lam.to(lam)
            gave_up = idx[~nuc.feasible]  # the solver gave up: leave these out, count them
            ok[gave_up], fail[gave_up] = False, True
        failures += int(fail.sum())
        infeas[r, j] = float((~ok & ~fail).double().sum() / max(1, int((~fail).sum())))
        cap = min(n, d)
        if ok.any():
            F, N = Wf[ok], Wn[ok]
            rf, rn = numerical_rank(F, rtol).double(), numerical_rank(N, rtol).double()
            fro_mean[r, j], nuc_mean[r, j] = float(rf.mean()), float(rn.mean())
            X, z, a = data.X[ok], data.z[ok], opt[ok]
            marg = (torch.gather(X, -2, a[..., None, None].expand(-1, -1, 1, d)) - X) \
                @ F.unsqueeze(1) @ z.unsqueeze(-1)  # (B, n, T, 1)
            marg = marg.squeeze(-1).scatter(-1, a.unsqueeze(-1), math.inf)
            err = (marg.amin((-2, -1)) - 1).abs()  # (B,)
            well = F.flatten(-2).norm(dim=-1) <= ILL_CONDITIONED  # not at the edge of feasibility
            ill += int((~well).sum())
            margin_err = max(margin_err, float(err[well].max()) if well.any() else 0.0)
            margin_err_ill = max(margin_err_ill, float(err[~well].max()) if (~well).any() else 0.0)
            P = torch.linalg.pinv(z) @ z  # (B, d, d): projection onto span{z_i}
            off = (F - F @ P).flatten(-2).norm(dim=-1) / F.flatten(-2).norm(dim=-1)
            offspan = max(offspan, float(off.max()))
            excess = max(excess, float(torch.maximum(rf, rn).max() - cap))
            fro_dev = max(fro_dev, abs(float(rf.mean()) - cap))
            if T == 5 and n in (5, 10, 15) and d in (n, 20) and official_trials > 0:
                sub = AttentionData(X[:official_trials], data.Y[ok][:official_trials],
                                    z[:official_trials], data.v[ok][:official_trials])
                official[(n, d)] = float(np.nanmean(official_nuclear_rank(sub,
                                                                          a[:official_trials])))
            nuc_gap = max(nuc_gap, float((rn - rf).max()))
            # the dual certificate: every optimum's singular vectors lie where the dual
            # matrix Y = sum_it lam_it (x_{i alpha_i} - x_it) z_i^T has singular value 1
            sy = torch.linalg.svdvals(dual_matrix(X, z, a, lam[ok]))  # (B, d), descending
            unit = sy >= 1 - DUAL_ONE
            dual_excess = max(dual_excess, float((rn - unit.sum(-1)).max()))
            rest = torch.where(unit, -math.inf, sy).amax(-1)  # largest sigma_j < 1
            dual_sep = min(dual_sep, float((1 - rest).min()))
        # the official notebook's artefact: an infeasible instance counts as rank 1
        infeasible = (~ok & ~fail).sum().item()
        decided = max(1, int((~fail).sum()))
        for art, Wx in ((art_fro, Wf), (art_nuc, Wn)):
            ranks = to_numpy(numerical_rank(Wx[ok], rtol)).astype(float)
            art[r, j] = (np.nansum(ranks) + infeasible) / decided

    def cell(n, T, d, arr):
        if (n, T) in cells and d in ds:
            return float(arr[cells.index((n, T)), ds.index(d)])
        return math.nan

    num = dict(solver_failures=float(failures), ill_conditioned=float(ill),
               margin_err_ill=margin_err_ill, margin_err_max=margin_err, offspan_max=offspan,
               rank_excess_max=excess,
               fro_rank_dev_max=fro_dev, nuc_minus_fro_max=nuc_gap,
               nuc_dual_excess_max=dual_excess, dual_separation_min=dual_sep,
               artefact_n15_d3=cell(15, 5, 3, art_fro))
    num.update(_full_space_check(seed, full_trials))
    for n, d in ((5, 5), (10, 10), (15, 15), (5, 20), (10, 20), (15, 20)):
        num[f"nuc_rank_n{n}_d{d}"] = cell(n, 5, d, nuc_mean)
        num[f"official_nuc_rank_n{n}_d{d}"] = official.get((n, d), math.nan)
    for n, T, d in ((5, 5, 2), (5, 5, 3), (10, 5, 3), (10, 5, 4), (15, 5, 4), (15, 5, 5)):
        num[f"infeasible_n{n}_T{T}_d{d}"] = cell(n, T, d, infeas)
    arrays = dict(ds=np.array(ds), cells=np.array(cells), fro_mean=fro_mean, nuc_mean=nuc_mean,
                  infeasible=infeas, artefact_fro=art_fro, artefact_nuc=art_nuc)
    return num, arrays


# ============================================================================ non-uniqueness
def nonunique_example(trials: int = 1, dtype=torch.float64) -> AttentionData:
    r"""The smallest instance whose Att-SVM⋆ has many solutions: n = 2, T = 2, d = 2,
    :math:`x_{11} = e_1`, :math:`x_{21} = e_2`, the other tokens 0, :math:`z_i = e_i`,
    v = (1, 1), Y = +1. The constraints are :math:`W_{11} \ge 1`, :math:`W_{22} \ge 1`; since
    :math:`\|W\|_\star \ge \mathrm{tr}\,W` with equality exactly for symmetric PSD W, the
    solutions are the matrices :math:`\begin{pmatrix}1 & c\\ c & 1\end{pmatrix}`,
    :math:`c \in [-1, 1]`: rank 2 inside, rank 1 at :math:`c = \pm 1`. The Frobenius SVM is
    unique (c = 0). ``trials`` copies, for batched training."""
    X = torch.zeros(trials, 2, 2, 2, dtype=dtype)
    X[:, 0, 0, 0] = 1.0
    X[:, 1, 0, 1] = 1.0
    z = torch.eye(2, dtype=dtype).expand(trials, 2, 2).clone()
    v = torch.ones(trials, 2, dtype=dtype)
    return AttentionData(X, torch.ones(trials, 2, dtype=dtype), z, v)


def official_kq_loop(data: AttentionData, *, steps: int, lr: float = 0.1, reg: float = EPS,
                     eps: float = EPS, seed: int = 0) -> torch.Tensor:
    r"""Normalised GD on (K, Q) written as the official code writes it: torch autograd
    through :math:`\log(1 + e^{-Y_i f_i})` (no log-domain care once the softmax saturates),
    the penalty :math:`\lambda(\|K\|_F^2 + \|Q\|_F^2)`, each factor's gradient normalised
    separately, :math:`K \leftarrow K - \eta\,\nabla_K / (\|\nabla_K\|_F + \varepsilon)`,
    and the default ``nn.Linear`` initialisation :math:`U(-1/\sqrt d, 1/\sqrt d)`.

    ``data`` batched (B, n, T, d), float64. Returns :math:`KQ^\top` after ``steps`` steps,
    (B, d, d): the comparison for attnlib's log-domain gradient (chapter 5)."""
    X, Y, z, v = data.X, data.Y, data.z, data.v  # (B, n, T, d), (B, n), (B, n, d), (B, d)
    B, d = X.shape[0], X.shape[-1]
    g = torch.Generator().manual_seed(seed)
    K, Q = ((torch.rand(B, d, d, generator=g, dtype=X.dtype) * 2 - 1) / math.sqrt(d)
            for _ in range(2))
    K, Q = K.requires_grad_(True), Q.requires_grad_(True)
    for _ in range(steps):
        W = K @ Q.transpose(-1, -2)
        s = torch.softmax(torch.einsum("bntd,bde,bne->bnt", X, W, z), -1)
        f = torch.einsum("bnt,bntd,bd->bn", s, X, v)
        loss = torch.log(1 + torch.exp(-Y * f)).mean(-1).sum() \
            + reg * (K.square().sum() + Q.square().sum())
        gK, gQ = torch.autograd.grad(loss, (K, Q))
        with torch.no_grad():
            for P, G in ((K, gK), (Q, gQ)):
                P -= lr * G / (G.flatten(1).norm(dim=1)[:, None, None] + eps)
    return (K @ Q.transpose(-1, -2)).detach()


def _nuclear_gap(W: torch.Tensor) -> torch.Tensor:
    """Relative nuclear gap of each (2, 2) W of :func:`nonunique_example` at unit margin."""
    W = W.to("cpu", torch.float64)
    W = W / torch.minimum(W[:, 0, 0], W[:, 1, 1])[:, None, None]
    return (torch.linalg.svdvals(W).sum(-1) - 2.0) / 2.0


@experiment(
    "tf_nuclear_nonunique", paper=f"{PAPER} §Att-SVM⋆ (non-unique solutions)",
    chapter="05_w_vs_kq",
    title="Att-SVM⋆ can have many solutions: (K,Q) GD ends on different ones",
    seconds=1.0,
    targets=[
        Target("nuc_gap_max", "every (K,Q) run: ‖KQᵀ‖_⋆ at unit margin, relative to the "
               "nuclear optimum 2 (0: KQᵀ(2000) is an Att-SVM⋆ solution)", "0", 0.0, 1e-6,
               "1e-6", "paper",
               "numerics: the official tiny penalty λ = 2.2e-16 and attnlib's log-domain "
               "gradient; without the penalty, and with the official code's autograd "
               "gradient, the gap is larger (nuc_gap_reg0, nuc_gap_autograd)"),
        Target("nuc_gap_autograd", "the same runs with the official code's numerics (autograd "
               "through log(1 + e^(−Yf)), λ = 2.2e-16): largest relative nuclear gap",
               "> the log-domain gap (the bound above needs careful numerics)", 1e-5, math.inf,
               "≥ 1e-5", "suggested",
               "the official-style loop draws its own initialisations (nn.Linear default)"),
        Target("c_spread", "(K,Q) runs from different initialisations: spread max c − min c "
               "of the off-diagonal of the normalised KQᵀ(2000)", "> 0 (non-unique)", 0.5, 2.0,
               "≥ 0.5", "suggested",
               "different runs end on different optimal directions"),
        Target("corr_W_fro_min", "every W run: corr(W(2000), W^mm), the unique Frobenius "
               "solution I", "1", 0.99, 1.0, "≥ 0.99", "paper"),
    ])
def tf_nuclear_nonunique(trials: int = 16, steps: int = 2000, seed: int = 0,
                         device: str | None = None):
    r"""(K,Q) and W trained by normalised GD (lr 0.1; (K,Q) with the tiny penalty 2.2e-16)
    from ``trials`` random initialisations on :func:`nonunique_example`, whose Att-SVM⋆
    solutions are :math:`\begin{pmatrix}1 & c\\ c & 1\end{pmatrix}`, :math:`c \in [-1, 1]`.

    .. math::

        \min_{W_{11} \ge 1,\ W_{22} \ge 1} \|W\|_\star = 2

    Returns the nuclear gap of each normalised :math:`KQ^\top(\text{steps})`, the spread of
    c, and the correlation with the solver's solution (c = 0), which is as low as
    :math:`1/\sqrt2` for optimal directions. See chapter 5.
    """
    data = nonunique_example(trials)
    if device is not None:
        data = AttentionData(*(t.to(device) for t in (data.X, data.Y, data.z, data.v)))
    kw = dict(lr=0.1, steps=steps, eps=EPS, record_every=steps)
    rK = train(data, "KQ", reg=EPS, seed=seed, **kw)
    rW = train(data, "W", seed=seed + 1, **kw)
    Wk = rK.W.to("cpu", torch.float64)
    Wk = Wk / torch.minimum(Wk[:, 0, 0], Wk[:, 1, 1])[:, None, None]  # unit min margin
    gap = _nuclear_gap(Wk)
    gap_reg0 = _nuclear_gap(train(data, "KQ", reg=0.0, seed=seed, **kw).W)
    gap_auto = _nuclear_gap(official_kq_loop(nonunique_example(trials), steps=steps,
                                             seed=seed))
    c = 0.5 * (Wk[:, 0, 1] + Wk[:, 1, 0])
    solver = att_svm(nonunique_example(1), norm="nuc")[0]  # one solution: the solver's
    eye = torch.eye(2, dtype=torch.float64)
    num = dict(nuc_gap_max=float(gap.max()), nuc_gap_reg0=float(gap_reg0.max()),
               nuc_gap_autograd=float(gap_auto.max()),
               nuc_gap_autograd_median=float(gap_auto.median()),
               c_spread=float(c.max() - c.min()),
               c_min=float(c.min()), c_max=float(c.max()),
               corr_solver_min=float(correlation(Wk, solver, dims=2).min()),
               corr_W_fro_min=float(correlation(rW.W.to("cpu", torch.float64), eye,
                                                dims=2).min()),
               rank1_runs=float((numerical_rank(Wk, 1e-2) == 1).sum()))
    return num, dict(c=c, W_KQ=Wk, solver=solver)
