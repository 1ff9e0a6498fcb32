"""Experiments of "Transformers as Support Vector Machines" (arXiv 2308.16898), chapters 5-8.

One registered experiment per official experiment (E1-E5 of the paper's code, numbered as in
the book's reproduction report) plus the book's causal-attention check:

=========================  ===============================================  ==========
name                       what                                             chapter
=========================  ===============================================  ==========
``tf_visualization``       E1: 2-D GD paths of W and (K,Q) vs both SVMs     5
``tf_local_convergence``   E2: W vs (K,Q), 100 runs, correlation curves     5
``tf_svm_rank``            E3: rank of Frobenius vs nuclear solutions       5
``tf_feasibility``         feasibility of Att-SVM above/below max(T-1,n)    6
``tf_global_fraction``     E5: global vs local convergence as d grows       6
``tf_multi_token``         E4: ReLU head, several selected tokens, SVM-eq   7
``tf_causal``              sequence / causal self-attention vs its SVM      8
=========================  ===============================================  ==========

All training is batched (one :func:`attnlib.train` call per setting, the runs as the trials
dimension); the SVMs are solved by :mod:`attnlib.svm` (one cvxpy solve per instance).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from .. import models as M
from .. import sequences as SQ
from ..data import lambda_head_example, random_data, resolve_device, visualization_example
from ..svm import InfeasibleError, att_svm, sequence_svm, svm_equivalence
from ..tokens import (
    attention_logits,
    cleanly_masked,
    optimal_tokens,
    scores,
    selected_sets,
    selected_tokens,
    support_tokens,
)
from ..train import train
from ._registry import Target, experiment

EPS = float(torch.finfo(torch.float64).eps)  # the official normalisation epsilon and (K,Q) reg
PAPER = "2308.16898"


# ----------------------------------------------------------------------------- helpers
def _corr(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """corr(A, B) = <A, B> / (||A|| ||B||) over the last two dims (broadcast)."""
    num = (A * B).sum((-2, -1))
    return num / (A.flatten(-2).norm(dim=-1) * B.flatten(-2).norm(dim=-1))


def _rank(W: torch.Tensor, rtol: float) -> torch.Tensor:
    """Numerical rank with a relative tolerance: #{sigma_k > rtol * sigma_1}."""
    return torch.linalg.matrix_rank(W, rtol=rtol)


def _solve_each(data, alpha, norm, progress=False, desc="SVM"):
    """Att-SVM per trial, infeasible ones kept: W (B,d,d) with NaN there, feasible (B,) and
    failed (B,): instances where the solver gave up (neither solved nor proved infeasible)."""
    B, d = data.B, data.d
    W = torch.full((B, d, d), math.nan, dtype=torch.float64)
    ok = torch.zeros(B, dtype=torch.bool)
    failed = torch.zeros(B, dtype=torch.bool)
    it = range(B)
    if progress:
        from tqdm.auto import tqdm
        it = tqdm(it, desc=desc, leave=False)
    for b in it:  # one cvxpy solve per instance; an infeasible one must not stop the rest
        try:
            W[b] = att_svm(data.trial(b), alpha=alpha[b], norm=norm).cpu().double()
            ok[b] = True
        except InfeasibleError:
            pass
        except RuntimeError:  # numerical failure of the solver: counted apart
            failed[b] = True
    return W, ok, failed


def _locally_optimal(data, W_mm, alpha, tol=1e-4):
    """Local optimality from an SVM solution: every support token scores below alpha_i.

    Support tokens are the constraints active within ``tol`` (relative), as in the digest's
    re-simulation; (B,) bool.
    """
    sup = support_tokens(data, W_mm.to(data.X), alpha, tol=tol).cpu()  # (B, n, T)
    gam = scores(data).cpu()  # (B, n, T)
    best = torch.gather(gam, -1, alpha.cpu().unsqueeze(-1))  # (B, n, 1)
    bad = sup & (gam >= best - 1e-10)
    return ~bad.flatten(-2).any(-1)


def _at(steps: np.ndarray, k: int) -> int:
    """Index of the recorded step k."""
    idx = np.nonzero(np.asarray(steps) == k)[0]
    if len(idx) == 0:
        raise ValueError(f"step {k} was not recorded (recorded every {steps[1] - steps[0]})")
    return int(idx[0])


def _np(t):
    return t.detach().cpu().numpy() if torch.is_tensor(t) else np.asarray(t)


# ============================================================================ E1: 2-D picture
def _layouts(B: int, seed: int, device):
    """Random layouts in the style of ``visualization2``: n=2, T=5, d=2, Y=+1.

    x_11 = (1, .5) and x_21 = (1, -.5); the other tokens 0.5 N(0, I) - (1, 0); v, z_i random
    unit vectors.
    """
    from ..data import AttentionData

    g = torch.Generator().manual_seed(int(seed))
    v = torch.randn(B, 2, generator=g, dtype=torch.float64)
    X = 0.5 * torch.randn(B, 2, 5, 2, generator=g, dtype=torch.float64)
    X[:, :, 1:] -= torch.tensor([1.0, 0.0], dtype=torch.float64)
    X[:, 0, 0] = torch.tensor([1.0, 0.5], dtype=torch.float64)
    X[:, 1, 0] = torch.tensor([1.0, -0.5], dtype=torch.float64)
    z = torch.randn(B, 2, 2, generator=g, dtype=torch.float64)
    v, z = v / v.norm(dim=-1, keepdim=True), z / z.norm(dim=-1, keepdim=True)
    K0 = 0.1 * torch.randn(B, 2, 2, generator=g, dtype=torch.float64)
    dev = resolve_device(device)
    data = AttentionData(X.to(dev), torch.ones(B, 2, dtype=torch.float64, device=dev), z.to(dev),
                         v.to(dev))
    return data, K0.to(dev)


def _query_cos(W, W_mm, z):
    """cos(W z_i, W_mm z_i) per query, (..., n)."""
    a = torch.einsum("...de,...ne->...nd", W, z)  # W z_i, (..., n, d)
    b = torch.einsum("...de,...ne->...nd", W_mm, z)
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))


def _plot_visualization(res):
    from ..plots import new_figure, token_plane

    A = res.arrays
    fig, axes = new_figure(1, 2, figsize=(9.0, 3.8))
    for ax, key, svm, title in ((axes[0], "W", "fro", "W: GD path and Att-SVM"),
                                (axes[1], "KQ", "nuc", "(K,Q): GD path and Att-SVM⋆")):
        paths = A[f"path_{key}"]  # (n, S, 2)
        token_plane(A["X"], A["scores"], paths=paths, directions=A[f"ray_{svm}"],
                    direction_labels=[f"W^mm z_{i + 1} ({svm})" for i in range(len(paths))],
                    ax=ax, title=title)
    return fig


@experiment(
    "tf_visualization", paper=f"{PAPER} Fig. 1 (E1, visualization2.ipynb)", chapter="05_w_vs_kq",
    title="2-D GD paths of W and (K,Q) against the Frobenius and nuclear SVM rays",
    plot=_plot_visualization,
    targets=[
        Target("corr_W_fro", "corr(W(2000), W^mm_α) on the paper's 2-D example", "≥ 0.99",
               0.99, 1.0, "≥ 0.99", "re-simulation",
               "α = GD's final selection (not best_ids), as the digest prescribes"),
        Target("corr_KQ_nuc", "corr(KQᵀ(2000), W^mm_⋆,α) on the paper's 2-D example", "≥ 0.99",
               0.99, 1.0, "≥ 0.99", "re-simulation"),
        Target("selects_opt", "GD (W and (K,Q)) selects the optimal token of both inputs, "
               "which then lie beyond the mid-margin line", "yes", 1, 1, "exact",
               "official code"),
        Target("layouts_query_cos_frac",
               "10 random 2-D layouts: share of per-query cos(W z_i, W^mm z_i) ≥ 0.98",
               "most (one of 20 was 0.89)", 0.75, 1.0, "most draws", "re-simulation"),
    ])
def tf_visualization(steps: int = 2000, layouts: int = 10, seed: int = 0, device=None):
    """E1: normalised GD on the 2-D example of ``visualization2`` for W (from 0) and (K,Q)
    (K(0) = 0.1 N(0,1), Q(0) = 0), against the Frobenius / nuclear SVM of GD's selection;
    then the same on ``layouts`` random layouts of that style (one batched call each)."""
    ex = visualization_example(2, device=device)
    data = ex.data
    kw = dict(lr=0.1, steps=steps, eps=EPS, record_every=max(1, steps // 200))
    rW = train(data, "W", init={"W": ex.init["W"]}, **kw)
    rK = train(data, "KQ", init={"K": ex.init["K"], "Q": ex.init["Q"]}, reg=EPS, **kw)
    aW, aK = selected_tokens(data, rW.W), selected_tokens(data, rK.W)
    Wf, Wn = att_svm(data, alpha=aW, norm="fro"), att_svm(data, alpha=aK, norm="nuc")
    opt = optimal_tokens(data)
    z = data.z
    num = dict(corr_W_fro=float(_corr(rW.W, Wf)), corr_KQ_nuc=float(_corr(rK.W, Wn)),
               query_cos_W_min=float(_query_cos(rW.W, Wf, z).min()),
               query_cos_KQ_min=float(_query_cos(rK.W, Wn, z).min()),
               selects_opt=float(bool((aW == opt).all() and (aK == opt).all())))
    # random layouts, all of them in one batched call per parameterisation
    ld, K0 = _layouts(layouts, seed, device)
    lW = train(ld, "W", init={"W": torch.zeros_like(K0)}, **{**kw, "record_every": steps})
    lK = train(ld, "KQ", init={"K": K0, "Q": torch.zeros_like(K0)}, reg=EPS,
               **{**kw, "record_every": steps})
    laW, laK = selected_tokens(ld, lW.W), selected_tokens(ld, lK.W)
    lWf, okW, _ = _solve_each(ld, laW, "fro")
    lWn, okK, _ = _solve_each(ld, laK, "nuc")
    cW, cK = _corr(lW.W.cpu(), lWf), _corr(lK.W.cpu(), lWn)
    qc = torch.cat([_query_cos(lW.W.cpu(), lWf, ld.z.cpu()).flatten(),
                    _query_cos(lK.W.cpu(), lWn, ld.z.cpu()).flatten()])
    lopt = optimal_tokens(ld)
    num.update(layouts_corr_W_min=float(cW.nan_to_num(-1).min()),
               layouts_corr_KQ_min=float(cK.nan_to_num(-1).min()),
               layouts_query_cos_frac=float((qc.nan_to_num(-1) >= 0.98).double().mean()),
               layouts_infeasible=float((~okW).sum() + (~okK).sum()),
               layouts_nonopt_W=float((laW != lopt).any(-1).sum()),
               layouts_nonopt_KQ=float((laK != lopt).any(-1).sum()))
    hz = lambda H: torch.einsum("sde,ne->nsd", H, z)  # noqa: E731  W(k) z_i, (n, S, 2)
    arrays = dict(X=data.X, scores=scores(data), steps=rW.history["step"],
                  path_W=hz(rW.history["W"]), path_KQ=hz(rK.history["W"]),
                  ray_fro=(Wf @ z.T).T, ray_nuc=(Wn @ z.T).T,
                  layouts_corr_W=cW, layouts_corr_KQ=cK)
    return num, arrays


# ============================================================================ E2: W vs (K,Q)
def _plot_local(res):
    from ..plots import correlation_curves, new_figure, norm_curves, probability_curves

    A = res.arrays
    fig, axes = new_figure(1, 3, figsize=(13.0, 3.6))
    s = A["steps"]
    probability_curves(s, {"W": A["prob_W"], "(K,Q)": A["prob_KQ"]}, ax=axes[0])
    correlation_curves(s, {"W vs Frobenius": A["corr_W_fro"],
                           "(K,Q) vs nuclear": A["corr_KQ_nuc"],
                           "W vs nuclear (cross)": A["corr_W_nuc"],
                           "(K,Q) vs Frobenius (cross)": A["corr_KQ_fro"]}, ax=axes[1])
    norm_curves(s, {"‖W(k)‖_F": A["norm_W"]}, ax=axes[2])
    return fig


@experiment(
    "tf_local_convergence", paper=f"{PAPER} Fig. 3 (E2, local_converge.ipynb)",
    chapter="05_w_vs_kq",
    title="Local convergence: W → Att-SVM (Frobenius), (K,Q) → Att-SVM⋆ (nuclear)",
    plot=_plot_local,
    targets=[
        Target("prob_KQ_k100", "mean max-softmax of (K,Q) at k = 100", "0.998", 0.948, 1.0,
               "±0.05", "re-simulation"),
        Target("prob_W_k100", "mean max-softmax of W at k = 100", "0.72", 0.67, 0.77,
               "±0.05", "re-simulation"),
        Target("prob_W_k200", "mean max-softmax of W at k = 200", "0.966", 0.916, 1.0,
               "±0.05", "re-simulation"),
        Target("corr_W_fro_k1000", "mean corr(W(k), W^mm_α) at k = 1000", "0.994",
               0.984, 1.0, "±0.01", "re-simulation"),
        Target("corr_KQ_nuc_k1000", "mean corr(KQᵀ(k), W^mm_⋆,α) at k = 1000",
               "0.996", 0.986, 1.0, "±0.01", "re-simulation",
               "the official notebook plots corr(W(k), W^mm_⋆) here (a plotting slip); the "
               "book pairs (K,Q) with the nuclear SVM as the README intends"),
        Target("corr_W_nuc_k1000", "cross pair: mean corr(W(k), W^mm_⋆,α) at k = 1000",
               "0.859 (notebook's red curve)", 0.81, 0.90, "±0.04", "re-simulation"),
        Target("corr_KQ_fro_k1000", "cross pair: mean corr(KQᵀ(k), W^mm_α) at k = 1000",
               "0.847", 0.81, 0.90, "±0.04", "re-simulation"),
        Target("frac_global_W", "share of W runs selecting the optimal token of every input",
               "0.68", 0.58, 0.78, "±0.10", "re-simulation"),
        Target("frac_global_KQ", "share of (K,Q) runs selecting the optimal token of every "
               "input", "0.69", 0.59, 0.79, "±0.10", "re-simulation"),
        Target("frac_local_W", "share of W runs whose selection is locally optimal",
               "0.98 (≥ 0.95)", 0.95, 1.0, "≥ 0.95", "re-simulation"),
        Target("frac_local_KQ", "share of (K,Q) runs whose selection is locally optimal "
               "(support tokens of the nuclear SVM)", "0.99 (≥ 0.95)", 0.95, 1.0, "≥ 0.95",
               "re-simulation"),
        Target("norm_slope_k1000", "‖W(1000)‖_F / 1000 (normalised GD, lr 0.1)", "0.095",
               0.0855, 0.1045, "±10%", "re-simulation"),
        Target("norm_W_final", "mean ‖W(2000)‖_F: the float64 plateau, not a finite limit",
               "117 (100–150)", 100.0, 150.0, "100–150", "re-simulation"),
    ])
def tf_local_convergence(trials: int = 100, steps: int = 2000, n: int = 6, T: int = 8,
                         d: int = 10, seed: int = 0, record_every: int = 10, device=None):
    """E2: ``trials`` random instances (cross-attention, seed = run), normalised GD for W and
    for (K,Q) (tiny penalty λ = 2.2e-16), each as ONE batched call; α = the final selection;
    correlation of every recorded iterate with the Frobenius and the nuclear SVM of α."""
    data = random_data(n, T, d, trials=trials, seed=seed, device=device)
    kw = dict(lr=0.1, steps=steps, eps=EPS, record_every=record_every)
    rW = train(data, "W", seed=seed, **kw)
    rK = train(data, "KQ", reg=EPS, seed=seed + 1, **kw)
    aW, aK = selected_tokens(data, rW.W), selected_tokens(data, rK.W)
    svm = {(p, nm): att_svm(data, alpha=a, norm=nm).to(data.X)
           for p, a in (("W", aW), ("KQ", aK)) for nm in ("fro", "nuc")}
    HW, HK = rW.history["W"], rK.history["W"]  # (B, S, d, d)
    corr = {"corr_W_fro": _corr(HW, svm["W", "fro"][:, None]),
            "corr_W_nuc": _corr(HW, svm["W", "nuc"][:, None]),
            "corr_KQ_nuc": _corr(HK, svm["KQ", "nuc"][:, None]),
            "corr_KQ_fro": _corr(HK, svm["KQ", "fro"][:, None])}
    steps_rec = _np(rW.history["step"])
    i100, i200, i1000 = (_at(steps_rec, k) for k in (100, 200, min(1000, steps)))
    normW = HW.flatten(-2).norm(dim=-1)  # (B, S)
    opt = optimal_tokens(data)
    num = dict(prob_W_k100=float(rW.history["max_prob"][:, i100].mean()),
               prob_W_k200=float(rW.history["max_prob"][:, i200].mean()),
               prob_KQ_k100=float(rK.history["max_prob"][:, i100].mean()),
               frac_global_W=float((aW == opt).all(-1).double().mean()),
               frac_global_KQ=float((aK == opt).all(-1).double().mean()),
               frac_local_W=float(_locally_optimal(data, svm["W", "fro"], aW).double().mean()),
               frac_local_KQ=float(_locally_optimal(data, svm["KQ", "nuc"], aK).double().mean()),
               norm_slope_k1000=float(normW[:, i1000].mean() / steps_rec[i1000]),
               norm_W_final=float(normW[:, -1].mean()))
    for key, c in corr.items():
        num[f"{key}_k1000"] = float(c[:, i1000].mean())
        num[f"{key}_final"] = float(c[:, -1].mean())
        num[f"{key}_min_k1000"] = float(c[:, i1000].min())
    arrays = dict(steps=steps_rec, prob_W=rW.history["max_prob"], prob_KQ=rK.history["max_prob"],
                  norm_W=normW, **corr)
    return num, arrays


# ============================================================================ E3: SVM rank
RANK_CELLS = ((5, 5), (10, 5), (15, 5), (5, 10), (5, 15))  # (n, T): vary n, then vary T
ILL_CONDITIONED = 1e3  # ||W^mm||_F above this: barely feasible, solver accuracy is relative


def _official_nuclear_rank(data, alpha, tol: float = 1e-7) -> np.ndarray:
    """Rank of Att-SVM⋆ solved as the official notebook does it: the primal problem
    ``min ||W||_nuc`` with cvxpy's default solver (SCS for this SDP, ~1e-4 accurate) and
    ``numpy.linalg.matrix_rank(W, tol=1e-7)`` (absolute). Kept only to reproduce the paper's
    curve and show that its nuclear ranks are solver noise; the book uses :func:`att_svm`."""
    import cvxpy as cp

    X, z = _np(data.X).astype(np.float64), _np(data.z).astype(np.float64)
    a = _np(alpha).astype(np.int64)
    B, n, T, d = X.shape
    ranks = np.zeros(B)
    for b in range(B):  # the official notebook's protocol, one instance at a time
        D = X[b][np.arange(n), a[b]][:, None, :] - X[b]  # (n, T, d)
        keep = np.arange(T)[None, :] != a[b][:, None]
        rows = np.einsum("itj,ik->itjk", D, z[b])[keep].reshape(-1, d * d)  # <R, W> >= 1
        W = cp.Variable((d, d))
        try:
            cp.Problem(cp.Minimize(cp.normNuc(W)), [rows @ cp.vec(W, order="C") >= 1]).solve(
                solver="SCS")
        except cp.error.SolverError:
            pass
        ranks[b] = np.nan if W.value is None else np.linalg.matrix_rank(W.value, tol=tol)
    return ranks


def _official_target(n, d, paper, lo, hi):
    return Target(f"official_nuc_rank_n{n}_d{d}",
                  f"nuclear mean rank, n={n}, T=5, d={d}, with the official formulation and "
                  "solver (cvxpy's default SCS; rank tol 1e-7)", paper, lo, hi, "±0.5",
                  "re-simulation", "reproduces the paper's curve, which is solver noise: the "
                  "accurate solution (Clarabel; two formulations agree) has far lower rank, "
                  f"see nuc_rank_n{n}_d{d}")


def _plot_rank(res):
    from ..plots import new_figure, sweep_curves

    A = res.arrays
    fig, axes = new_figure(1, 2, figsize=(9.6, 3.6))
    ds, cells = A["ds"], [tuple(int(x) for x in c) for c in A["cells"]]
    n0, T0 = cells[0]
    panels = ((axes[0], [r for r, c in enumerate(cells) if c[1] == T0], f"vary n (T = {T0})"),
              (axes[1], [r for r, c in enumerate(cells) if c[0] == n0], f"vary T (n = {n0})"))
    for ax, rows, title in panels:
        vals, styles = {}, {}
        for r in rows:
            n, T = cells[r]
            vals[f"n={n},T={T} Frobenius"] = A["fro_mean"][r]
            vals[f"n={n},T={T} nuclear"] = A["nuc_mean"][r]
            styles[f"n={n},T={T} nuclear"] = "--"
        sweep_curves(ds, vals, ax=ax, styles=styles, ylabel="mean rank (feasible only)",
                     title=title, legend="upper left")
    return fig


@experiment(
    "tf_svm_rank", paper=f"{PAPER} Fig. 4 (E3, svm_rank.ipynb)", chapter="05_w_vs_kq",
    title="Rank of the Frobenius and nuclear Att-SVM solutions over (n, T, d)",
    plot=_plot_rank,
    targets=[
        Target("margin_err_max", "every feasible Frobenius solution: |min margin − 1|",
               "1 ± 1e-6", 0.0, 1e-6, "1e-6 (solver accuracy)", "paper",
               "instances at the edge of feasibility (‖W^mm‖_F > 1e3, so margins of 1 are "
               "1e-3 of the logit scale) are counted apart, see ill_conditioned"),
        Target("offspan_max", "every feasible Frobenius solution: ‖W(I − P_Z)‖/‖W‖",
               "< 1e-6", 0.0, 1e-6, "1e-6", "paper",
               "attnlib solves in the basis of span{z_i}, so this checks that reduction"),
        Target("rank_excess_max", "every feasible solution (both norms): rank − min(n, d)",
               "≤ 0", -math.inf, 0.0, "exact", "paper"),
        Target("fro_rank_dev_max", "Frobenius mean rank = min(n, d) at every (n, T, d) "
               "(largest deviation over the grid)", "0 (min(n, d) exactly)", 0.0, 0.5,
               "±0.5 per point", "re-simulation",
               "feasible-only; with an accurate solver a few instances have rank < min(n, d) "
               "(an input whose constraints are all slack contributes nothing to W)"),
        Target("nuc_minus_fro_max", "nuclear rank ≤ Frobenius rank in every instance", "≤ 0",
               -math.inf, 0.0, "exact", "re-simulation"),
        *(_official_target(n, d, paper, lo, hi) for n, d, paper, lo, hi in (
            (5, 5, "4.5", 4.0, 5.0), (10, 10, "9.0", 8.5, 9.5), (15, 15, "13.4–13.9", 12.9, 14.4),
            (5, 20, "5.0", 4.5, 5.0), (10, 20, "9.9", 9.4, 10.0),
            (15, 20, "14.7–14.9", 14.2, 15.0))),
        Target("artefact_n15_d3", "notebook-style mean rank at n=15, T=5, d=3 (infeasible "
               "counted as rank 1)", "≈ 1", 0.7, 1.3, "±0.3", "official code",
               "the official artefact (matrix_rank(None) = 1), shown only to explain the "
               "stored figure; the book's curves are feasible-only"),
    ])
def tf_svm_rank(trials: int = 100, ds: tuple = (1, 2, 3, 4, 5, 10, 15, 20),
                cells: tuple = RANK_CELLS, seed: int = 0, rtol: float = 1e-6,
                official_trials: int = 20, progress: bool = True, device=None):
    """E3: at α = opt on ``trials`` random instances per (n, T, d), solve Att-SVM (Frobenius)
    and Att-SVM⋆ (nuclear); numerical rank with relative tolerance ``rtol``. Infeasible
    instances are counted as infeasible (and the notebook's rank-1 artefact is reported
    apart). At T = 5, n in {5, 10, 15}, d in {n, 20}, the first ``official_trials`` feasible
    instances are also solved with the official formulation and solver, to reproduce the
    paper's nuclear curve."""
    from tqdm.auto import tqdm

    cells, ds = tuple(tuple(c) for c in cells), tuple(ds)
    shape = (len(cells), len(ds))
    fro_mean, nuc_mean = np.full(shape, np.nan), np.full(shape, np.nan)
    infeas, art_fro, art_nuc = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    margin_err, offspan, excess, fro_dev, nuc_gap = 0.0, 0.0, -math.inf, 0.0, -math.inf
    official, failures, ill, margin_err_ill = {}, 0, 0, 0.0
    grid = [(r, j) for r in range(len(cells)) for j in range(len(ds))]
    for r, j in tqdm(grid, desc="SVM rank grid", disable=not progress):
        (n, T), d = cells[r], ds[j]
        data = random_data(n, T, d, trials=trials, seed=seed + 1000 * (r * len(ds) + j),
                           device="cpu")
        opt = optimal_tokens(data)
        Wf, ok, fail = _solve_each(data, opt, "fro")
        Wn = torch.full_like(Wf, math.nan)
        for b in torch.nonzero(ok).flatten().tolist():  # feasibility is the same for both
            try:
                Wn[b] = att_svm(data.trial(b), alpha=opt[b], norm="nuc")
            except RuntimeError:  # the solver gave up: leave this instance out, count it
                ok[b], fail[b] = False, True
        failures += int(fail.sum())
        infeas[r, j] = float((~ok & ~fail).double().sum() / max(1, int((~fail).sum())))
        cap = min(n, d)
        if ok.any():
            F, N = Wf[ok], Wn[ok]
            rf, rn = _rank(F, rtol).double(), _rank(N, rtol).double()
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
                sub = data.trial(0).__class__(X[:official_trials], data.Y[ok][:official_trials],
                                              z[:official_trials], data.v[ok][:official_trials])
                official[(n, d)] = float(np.nanmean(_official_nuclear_rank(sub,
                                                                           a[:official_trials])))
            nuc_gap = max(nuc_gap, float((rn - rf).max()))
        # the official notebook's artefact: an infeasible instance counts as rank 1
        infeasible = (~ok & ~fail).sum().item()
        decided = max(1, int((~fail).sum()))
        art_fro[r, j] = (np.nansum(_np(_rank(Wf[ok], rtol)).astype(float)) + infeasible) / decided
        art_nuc[r, j] = (np.nansum(_np(_rank(Wn[ok], rtol)).astype(float)) + infeasible) / decided

    def cell(n, T, d, arr):
        if (n, T) in cells and d in ds:
            return float(arr[cells.index((n, T)), ds.index(d)])
        return math.nan

    num = dict(solver_failures=float(failures), ill_conditioned=float(ill),
               margin_err_ill=margin_err_ill, margin_err_max=margin_err, offspan_max=offspan,
               rank_excess_max=excess,
               fro_rank_dev_max=fro_dev, nuc_minus_fro_max=nuc_gap,
               artefact_n15_d3=cell(15, 5, 3, art_fro))
    for n, d in ((5, 5), (10, 10), (15, 15), (5, 20), (10, 20), (15, 20)):
        num[f"nuc_rank_n{n}_d{d}"] = cell(n, 5, d, nuc_mean)
        num[f"official_nuc_rank_n{n}_d{d}"] = official.get((n, d), math.nan)
    for n, T, d in ((5, 5, 2), (5, 5, 3), (10, 5, 3), (10, 5, 4), (15, 5, 4), (15, 5, 5)):
        num[f"infeasible_n{n}_T{T}_d{d}"] = cell(n, T, d, infeas)
    arrays = dict(ds=np.array(ds), cells=np.array(cells), fro_mean=fro_mean, nuc_mean=nuc_mean,
                  infeasible=infeas, artefact_fro=art_fro, artefact_nuc=art_nuc)
    return num, arrays


# ============================================================================ feasibility
def _plot_feasibility(res):
    from ..plots import new_figure

    A = res.arrays
    fig, ax = new_figure(1, 1, figsize=(6.0, 3.4))
    labels = [f"({n},{T},{d})" for n, T, d in A["cells"]]
    x = np.arange(len(labels))
    ax.bar(x - 0.2, A["feasible_opt"], 0.4, label="α = opt")
    ax.bar(x + 0.2, A["feasible_random"], 0.4, label="random α")
    ax.set_xticks(x, labels, rotation=30, fontsize=8)
    ax.set_ylabel("feasible share")
    ax.set_xlabel("(n, T, d)")
    ax.legend(fontsize=8)
    return fig


FEAS_AT = ((5, 5, 5), (10, 5, 10), (15, 5, 15), (5, 10, 9), (6, 8, 10))
FEAS_BELOW = ((15, 5, 4), (10, 5, 3))


@experiment(
    "tf_feasibility", paper=f"{PAPER} §over-parameterisation (E3 data)",
    chapter="06_overparameterization",
    title="Att-SVM is feasible for every selection once d ≥ max(T−1, n)",
    plot=_plot_feasibility,
    targets=[
        Target("feasible_opt_at", "d ≥ max(T−1, n): share of instances feasible at α = opt "
               "(smallest over the cells)", "100%", 1.0, 1.0, "exact", "re-simulation"),
        Target("feasible_random_at", "d ≥ max(T−1, n): share feasible for a random α "
               "(smallest over the cells)", "100%", 1.0, 1.0, "exact", "re-simulation"),
        Target("infeasible_n15_T5_d4", "below the threshold: infeasible share at "
               "(n,T,d) = (15,5,4), α = opt", "0.77", 0.67, 0.87, "±0.10", "re-simulation"),
        Target("infeasible_n10_T5_d3", "below the threshold: infeasible share at "
               "(n,T,d) = (10,5,3), α = opt", "0.88", 0.78, 0.98, "±0.10", "re-simulation"),
    ])
def tf_feasibility(trials: int = 100, at: tuple = FEAS_AT, below: tuple = FEAS_BELOW,
                   seed: int = 0, progress: bool = True, device=None):
    """Feasibility of Att-SVM (Frobenius; feasibility does not depend on the norm) on
    ``trials`` random instances per (n, T, d): at α = opt and at a uniformly random α, for
    cells at or above d = max(T−1, n) (``at``) and below it (``below``, α = opt only)."""
    from tqdm.auto import tqdm

    cells = tuple(tuple(c) for c in at) + tuple(tuple(c) for c in below)
    f_opt, f_rand = np.full(len(cells), np.nan), np.full(len(cells), np.nan)
    failures = 0  # solver failures: neither solved nor proved infeasible, left out
    for r, (n, T, d) in enumerate(tqdm(cells, desc="feasibility", disable=not progress)):
        data = random_data(n, T, d, trials=trials, seed=seed + 7919 * (r + 1), device="cpu")
        _, ok, fail = _solve_each(data, optimal_tokens(data), "fro")
        failures += int(fail.sum())
        f_opt[r] = float(ok.double().sum() / max(1, int((~fail).sum())))
        if r < len(at):
            g = torch.Generator().manual_seed(seed + r)
            alpha = torch.randint(0, T, (trials, n), generator=g)
            _, ok, fail = _solve_each(data, alpha, "fro")
            failures += int(fail.sum())
            f_rand[r] = float(ok.double().sum() / max(1, int((~fail).sum())))
    num = dict(solver_failures=float(failures), feasible_opt_at=float(f_opt[:len(at)].min()),
               feasible_random_at=float(f_rand[:len(at)].min()))
    for r, (n, T, d) in enumerate(cells[len(at):], start=len(at)):
        num[f"infeasible_n{n}_T{T}_d{d}"] = 1.0 - float(f_opt[r])
    return num, dict(cells=np.array(cells), feasible_opt=f_opt, feasible_random=f_rand)


# ============================================================================ E5: global vs local
def _plot_global(res):
    from ..plots import new_figure

    A = res.arrays
    fig, ax = new_figure(1, 1, figsize=(5.6, 3.4))
    x = np.arange(len(A["ds"]))
    g, lo, o = (np.asarray(A[k]).reshape(-1) for k in ("global", "local_only", "other"))
    ax.bar(x, g, label="global W^mm", color="tab:red")
    ax.bar(x, lo, bottom=g, label="locally optimal W^mm_α", color="tab:blue")
    ax.bar(x, o, bottom=g + lo, label="other", color="0.7")
    ax.set_xticks(x, [str(d) for d in A["ds"]])
    ax.set_xlabel("d")
    ax.set_ylabel("share of GD runs")
    ax.legend(fontsize=8, loc="lower right")
    return fig


_E5_RUN = {2: 0.10, 4: 0.38, 6: 0.48, 8: 0.62, 10: 0.66, 15: 0.74, 20: 0.84}


@experiment(
    "tf_global_fraction", paper=f"{PAPER} (E5, reconstructed; no official notebook)",
    chapter="06_overparameterization",
    title="Share of GD runs converging to the global vs a locally optimal direction, vs d",
    plot=_plot_global,
    targets=[
        *(Target(f"global_d{d}", f"share of GD runs converging to the global W^mm, d = {d}",
                 f"{p:.2f}", max(0.0, p - 0.15), min(1.0, p + 0.15), "±0.15 at 50 runs",
                 "re-simulation", "the paper's own chart is unverified; the digest's "
                 "independent protocol (corr > 0.95 and a locally optimal α)")
          for d, p in _E5_RUN.items()),
        Target("local_min_d4", "smallest share (over d ≥ 4) of runs converging to some "
               "locally optimal direction (global included)", "≥ 0.95", 0.95, 1.0, "≥ 0.95",
               "re-simulation"),
        Target("global_rise", "global share at the largest d minus at the smallest d "
               "(the trend)", "0.74 (0.10 → 0.84)", 0.44, 1.0, "rises with d",
               "re-simulation"),
    ])
def tf_global_fraction(trials: int = 50, ds: tuple = (2, 4, 6, 8, 10, 15, 20), n: int = 6,
                       T: int = 8, steps: int = 2000, seed: int = 0, progress: bool = True,
                       device=None):
    """E5: for every d, ``trials`` random instances trained by normalised GD on W (one batched
    call per d). A run converged to W^mm_α when corr(W(steps), W^mm_α) > 0.95 for its final
    selection α and α is locally optimal; "global" when moreover α = opt."""
    from tqdm.auto import tqdm

    ds = tuple(ds)
    glob, loc, oth = np.zeros(len(ds)), np.zeros(len(ds)), np.zeros(len(ds))
    for j, d in enumerate(tqdm(ds, desc="d sweep", disable=not progress)):
        data = random_data(n, T, d, trials=trials, seed=seed + 100_003 * j, device=device)
        res = train(data, "W", lr=0.1, steps=steps, eps=EPS, record_every=steps, seed=seed + j)
        alpha = selected_tokens(data, res.W)
        Wmm, ok, _ = _solve_each(data, alpha, "fro")  # a solver failure counts as "other"
        conv = ok.clone()
        if ok.any():
            sub = data.trial(0).__class__(data.X[ok], data.Y[ok], data.z[ok], data.v[ok])
            conv[ok] = (_corr(res.W[ok].cpu(), Wmm[ok]) > 0.95) \
                & _locally_optimal(sub, Wmm[ok], alpha[ok])
        is_opt = (alpha == optimal_tokens(data)).all(-1).cpu()
        glob[j] = float((conv & is_opt).double().mean())
        loc[j] = float((conv & ~is_opt).double().mean())
        oth[j] = 1.0 - glob[j] - loc[j]
    num = {f"global_d{d}": math.nan for d in _E5_RUN}  # NaN: a d the sweep left out
    num.update({f"global_d{d}": float(glob[j]) for j, d in enumerate(ds)})
    num.update({f"local_d{d}": float(glob[j] + loc[j]) for j, d in enumerate(ds)})
    big = [j for j, d in enumerate(ds) if d >= 4]
    num["local_min_d4"] = float(min(glob[j] + loc[j] for j in big)) if big else math.nan
    num["global_rise"] = float(glob[-1] - glob[0])
    # one (n, T) cell, so that the sweep explorer reads the arrays as (cells, d)
    return num, dict(ds=np.array(ds), cells=np.array([[n, T]]),
                     **{k: v[None] for k, v in (("global", glob), ("local_only", loc),
                                                 ("other", oth))})


# ============================================================================ E4: nonlinear head
_E4_FIG = {4: (0.035, 0.075, 0.16), 6: (0.017, 0.045, 0.15), 8: (0.011, 0.015, 0.14),
           10: (0.0055, 0.0085, 0.12)}  # stored figure: final mean 1 - corr (SVMeq, dir, 1tok)
_E4_PRIOR_RATE = {4: 0.2, 6: 0.1, 8: 0.04, 10: 0.017}  # re-simulation's acceptance rates


def _plot_multi(res):
    from ..plots import correlation_curves, new_figure

    A = res.arrays
    ds = A["ds"]
    fig, axes = new_figure(2, len(ds), figsize=(3.3 * len(ds), 6.4))
    axes = np.atleast_2d(axes).reshape(2, len(ds))
    for j, d in enumerate(ds):
        k = A["run_d"] == d
        correlation_curves(A["steps"], {"SVM-eq": A["corr_eq"][k], "W^dir": A["corr_dir"][k],
                                        "1-token SVM": A["corr_one"][k]},
                           ax=axes[0, j], one_minus=True, title=f"d = {d}",
                           legend="lower left" if j == 0 else None)
        ax = axes[1, j]
        ax.loglog(np.maximum(A["max_masked"][k], 1e-300), 1 - A["corr_eq"][k][:, -1], ".",
                  ms=3, alpha=0.6)
        ax.set_xlabel("largest masked probability")
        ax.set_ylabel("1 − corr(W, SVM-eq)")
        ax.grid(alpha=0.3)
    return fig


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1]) if len(x) > 2 else math.nan


def _relu_candidates(d, n, T, B, seed, device):
    """B candidate runs of E4 at dimension d: data (random law, cross-attention), the fixed
    value matrices V (N(0,1), ||V||_F = 1) and W(0) ~ U(-1/sqrt d, 1/sqrt d)."""
    data = random_data(n, T, d, trials=B, seed=seed, device=device)
    g = torch.Generator().manual_seed(seed)
    V = torch.randn(B, d, d, generator=g, dtype=torch.float64)
    V = V / V.flatten(-2).norm(dim=-1)[:, None, None]
    W0 = (2 * torch.rand(B, d, d, generator=g, dtype=torch.float64) - 1) / math.sqrt(d)
    return data, V.to(data.X), W0.to(data.X)


def _subset(data, idx):
    return data.trial(0).__class__(data.X[idx], data.Y[idx], data.z[idx], data.v[idx])


@experiment(
    "tf_multi_token", paper=f"{PAPER} Fig. 5 (E4, multi_token_converge.ipynb)",
    chapter="07_nonlinear_heads",
    title="ReLU head: several selected tokens, GD direction vs the generalised SVM equivalence",
    plot=_plot_multi,
    targets=[
        Target("ordering_ok", "final mean 1 − corr: SVM-eq ≤ W^dir < 1-token SVM at every d",
               "holds", 1, 1, "the ordering must hold", "official code"),
        *(Target(f"eq_mean_d{d}", f"final mean 1 − corr(W, SVM-eq), d = {d}", f"{fig[0]}",
                 fig[0] / 2, fig[0] * 2, "factor 2", "official code",
                 "accepted runs only (the acceptance filter is reported beside it)")
          for d, fig in _E4_FIG.items()),
        *(Target(f"one_mean_d{d}", f"final mean 1 − corr(W, 1-token SVM), d = {d}",
                 f"{fig[2]}", fig[2] / 2, fig[2] * 2, "factor 2", "official code")
          for d, fig in _E4_FIG.items()),
        Target("eq_median", "median final 1 − corr(W, SVM-eq), all d pooled", "2–3e-3", 1e-3,
               6e-3, "factor 2", "re-simulation"),
        *(Target(f"clean_ok_d{d}", f"runs with largest masked probability < 1e-14: share with "
                 f"1 − corr(SVM-eq) ≤ 1e-2, d = {d}", p, 0.9, 1.0, "≥ 90%", "re-simulation")
          for d, p in ((4, "0.96"), (6, "1.00"))),
        Target("mask_error_spearman", "rank correlation of log largest masked probability and "
               "log(1 − corr(SVM-eq)), all d pooled", "visibly positive", 1e-9, 1.0, "> 0",
               "re-simulation"),
    ])
def tf_multi_token(accepted: int = 500, ds: tuple = (4, 6, 8, 10), n: int = 3, T: int = 4,
                   steps: int = 2001, record_every: int = 100, seed: int = 1,
                   max_batch: int = 16384, max_candidates: int = 200_000,
                   progress: bool = True, device=None):
    """E4: the ReLU head f = 1ᵀReLU(Vᵀ Xᵀ s) with a fixed random V (‖V‖_F = 1), W trained by
    normalised GD. Candidate runs are trained in large batches (one :func:`attnlib.train` call
    per batch) and kept only if their final softmax separates cleanly (no probability in
    (1e-6, 1e-3], at least one ≤ 1e-6) and both SVMs are feasible, until ``accepted`` runs per
    d; the kept ones are re-trained with their trajectory recorded (same W(0), same result)."""
    from tqdm.auto import tqdm

    ds = tuple(ds)
    num, rows = {}, {k: [] for k in ("run_d", "corr_eq", "corr_dir", "corr_one", "max_masked",
                                     "multi")}
    steps_rec = None
    for d in ds:
        kept, tried, skipped, next_seed = [], 0, 0, seed
        bar = tqdm(total=accepted, desc=f"E4 d={d}", disable=not progress)
        while len(kept) < accepted and tried < max_candidates:
            rate = len(kept) / tried if kept else _E4_PRIOR_RATE.get(d, 0.02) * 0.8
            B = int(min(max_batch, max(64, math.ceil(1.3 * (accepted - len(kept)) / rate))))
            data, V, W0 = _relu_candidates(d, n, T, B, next_seed, device)
            next_seed += B
            allpos = (data.Y > 0).all(-1)  # the official loop skips these seeds
            skipped += int(allpos.sum())
            live = torch.nonzero(~allpos).flatten()
            head = M.ReluHead(V[live], torch.ones(d, dtype=V.dtype, device=V.device))
            sub = _subset(data, live)
            n_rec = len(range(0, steps + 1, record_every)) + 1
            record = len(live) * n_rec * d * d <= 2e7  # keep trajectories if they are small
            res = train(sub, "W", head=head, init={"W": W0[live]}, lr=0.1, steps=steps, eps=EPS,
                        record_every=record_every if record else steps)
            tried += len(live)
            s = torch.exp(M.log_softmax(M.logits(sub.X, res.W, sub.z)))  # (b, n, T)
            for b in torch.nonzero(cleanly_masked(s)).flatten().tolist():
                if len(kept) == accepted:
                    break
                one, sb = sub.trial(b), s[b]
                try:  # filter 3: both SVMs feasible
                    eq = svm_equivalence(one, selected_sets(sb), sb)
                    W1 = att_svm(one, alpha=sb.argmax(-1), norm="fro")
                except (InfeasibleError, RuntimeError):  # as the official loop: any failure
                    continue
                kept.append((one, V[live[b]], W0[live[b]], eq, W1, sb, res.W[b],
                             (res.history["W"][b], res.history["step"]) if record else None))
                bar.update(1)
        bar.close()
        if not kept:
            raise ValueError(f"no run accepted at d={d} in {tried} candidates")
        if all(k[7] is not None for k in kept):
            H = torch.stack([k[7][0] for k in kept])  # (K, S, d, d), recorded in the first pass
            steps_rec = _np(kept[0][7][1])
        else:  # re-train the kept runs with their trajectory recorded (one batched call)
            X = torch.stack([k[0].X for k in kept])
            acc = data.trial(0).__class__(X, torch.stack([k[0].Y for k in kept]),
                                          torch.stack([k[0].z for k in kept]),
                                          torch.stack([k[0].v for k in kept]))
            head = M.ReluHead(torch.stack([k[1] for k in kept]),
                              torch.ones(d, dtype=X.dtype, device=X.device))
            rec = train(acc, "W", head=head, init={"W": torch.stack([k[2] for k in kept])},
                        lr=0.1, steps=steps, eps=EPS, record_every=record_every)
            H, steps_rec = rec.history["W"], _np(rec.history["step"])  # (K, S, d, d)
        W_dir = torch.stack([k[3].W_dir for k in kept]).to(H)
        W_fin = torch.stack([k[3].W_fin for k in kept]).to(H)
        W_one = torch.stack([k[4] for k in kept]).to(H)
        W_eq = type(kept[0][3])(W_fin, W_dir).fit(torch.stack([k[6] for k in kept]).to(H))
        S = torch.stack([k[5] for k in kept])  # (K, n, T) final softmax
        O = selected_sets(S)
        c_eq, c_dir, c_one = (_corr(H, Wr[:, None]).cpu() for Wr in (W_eq, W_dir, W_one))
        max_masked = torch.where(O, torch.zeros_like(S), S).flatten(-2).amax(-1).cpu()
        e_eq, e_dir, e_one = 1 - c_eq[:, -1], 1 - c_dir[:, -1], 1 - c_one[:, -1]
        clean = max_masked < 1e-14
        num.update({f"tried_d{d}": float(tried), f"skipped_d{d}": float(skipped),
                    f"accepted_d{d}": float(len(kept)), f"rate_d{d}": len(kept) / tried,
                    f"eq_mean_d{d}": float(e_eq.mean()), f"eq_median_d{d}": float(e_eq.median()),
                    f"dir_mean_d{d}": float(e_dir.mean()),
                    f"dir_median_d{d}": float(e_dir.median()),
                    f"one_mean_d{d}": float(e_one.mean()),
                    f"one_median_d{d}": float(e_one.median()),
                    f"multi_share_d{d}": float((O.sum(-1) >= 2).any(-1).double().mean()),
                    f"clean_ok_d{d}": float((e_eq[clean] <= 1e-2).double().mean())
                    if clean.any() else math.nan})
        rows["run_d"].append(np.full(len(kept), d))
        for key, val in (("corr_eq", c_eq), ("corr_dir", c_dir), ("corr_one", c_one),
                         ("max_masked", max_masked), ("multi", O.sum(-1).amax(-1))):
            rows[key].append(_np(val))
    arrays = {k: np.concatenate(v) for k, v in rows.items()}
    arrays.update(steps=steps_rec, ds=np.array(ds))
    for key in ("eq_mean", "dir_mean", "one_mean", "rate"):  # (1, P): the sweep explorer's form
        arrays[key] = np.array([[num[f"{key}_d{d}"] for d in ds]])
    arrays["cells"] = np.array([[n, T]])
    for d in set(_E4_FIG) - set(ds):  # targets of a d left out: not computed (NaN)
        num.update({f"{k}_d{d}": math.nan for k in ("eq_mean", "one_mean", "clean_ok")})
    err = 1 - arrays["corr_eq"][:, -1]
    num["ordering_ok"] = float(all(num[f"eq_mean_d{d}"] <= num[f"dir_mean_d{d}"]
                                   < num[f"one_mean_d{d}"] for d in ds))
    num["eq_median"] = float(np.median(err))
    pos = arrays["max_masked"] > 0
    num["mask_error_spearman"] = _spearman(np.log(arrays["max_masked"][pos]),
                                           np.log(np.maximum(err[pos], 1e-300)))
    return num, arrays


# ============================================================================ λ head (designed)
def _plot_lambda(res):
    from ..plots import correlation_curves, new_figure

    A = res.arrays
    fig, axes = new_figure(1, 2, figsize=(9.6, 3.4))
    correlation_curves(A["steps"], {"SVM-eq": A["corr_eq"], "W^dir": A["corr_dir"],
                                    "1-token SVM": A["corr_one"]}, ax=axes[0], one_minus=True,
                       legend="lower left")
    x = np.arange(len(A["s_opt"]))
    axes[1].bar(x - 0.2, A["s_opt"], 0.4, label="best attention (sparsemax-like)")
    axes[1].bar(x + 0.2, A["s_final"], 0.4, label="GD's final softmax")
    axes[1].set_xlabel("token t")
    axes[1].set_ylabel("attention s_t")
    axes[1].legend(fontsize=8)
    return fig


@experiment(
    "tf_lambda_head", paper=f"{PAPER} (base_nonlinear.py 'lambda' mode, unused in the paper)",
    chapter="07_nonlinear_heads",
    title="λ-penalty head: GD selects two tokens and follows the SVM equivalence",
    plot=_plot_lambda,
    targets=[
        Target("s_gap", "largest |s_t − s*_t| between GD's final softmax and the best "
               "attention (0.7, 0.3, 0, 0)", "0", 0.0, 0.02, "≤ 0.02", "suggested",
               "a designed example of the book, from the official code's unused λ head"),
        Target("err_eq", "1 − corr(W(2000), W^fin + R·W^dir)", "small", 0.0, 0.01, "≤ 0.01",
               "suggested", "a designed example of the book"),
        Target("err_one_over_eq", "1-token SVM error / SVM-eq error at the end", "> 1", 10.0,
               math.inf, "≥ 10×", "suggested", "a designed example of the book"),
    ])
def tf_lambda_head(lam: float = 0.25, steps: int = 2000, record_every: int = 20, device=None):
    """The λ head :math:`f = v^\top h - \\lambda\\|h\\|^2` on one input with orthonormal
    tokens and scores (1, 0.8, 0.2, −0.5): the best attention is (0.7, 0.3, 0, 0), so two
    tokens stay selected. Normalised GD on W (query z = x_1), then the SVM equivalence of the
    final selected sets, compared with the 1-token Att-SVM."""
    ex = lambda_head_example(lam=lam, device=device)
    settings = {**ex.settings, "steps": steps}
    res = train(ex.data, head=M.LambdaHead(ex.init["lam"]), eps=EPS, record_every=record_every,
                **settings)
    s = torch.softmax(attention_logits(ex.data, res.W), -1)  # (1, T)
    eq = svm_equivalence(ex.data, selected_sets(s), s)
    W_eq = eq.fit(res.W)
    W_one = att_svm(ex.data, alpha=s.argmax(-1), norm="fro").to(W_eq)
    H = res.history["W"]  # (S, d, d)
    corr = dict(corr_eq=_corr(H, W_eq), corr_dir=_corr(H, eq.W_dir.to(H)),
                corr_one=_corr(H, W_one))
    s_opt = torch.as_tensor(ex.known["s_opt"], dtype=s.dtype, device=s.device).reshape(s.shape)
    err_eq, err_one = 1 - float(corr["corr_eq"][-1]), 1 - float(corr["corr_one"][-1])
    num = dict(s_gap=float((s - s_opt).abs().max()), err_eq=err_eq,
               err_dir=1 - float(corr["corr_dir"][-1]), err_one=err_one,
               err_one_over_eq=err_one / max(err_eq, 1e-300),
               selected=float(selected_sets(s).sum()))
    return num, dict(steps=_np(res.history["step"]), s_final=s[0], s_opt=s_opt[0], **corr)


# ============================================================================ sequences / causal
def _plot_causal(res):
    from ..plots import correlation_curves, new_figure

    A = res.arrays
    fig, axes = new_figure(1, 2, figsize=(9.6, 3.6))
    correlation_curves(A["steps"], {"causal GD vs causal SVM": A["corr_causal"],
                                    "causal GD vs mask-free SVM": A["corr_causal_vs_full"],
                                    "full GD vs full SVM": A["corr_full"]},
                       ax=axes[0], legend="lower right")
    correlation_curves(A["steps"], {"causal GD vs causal SVM": A["corr_causal"],
                                    "full GD vs full SVM": A["corr_full"]},
                       ax=axes[1], one_minus=True, legend="upper right")
    return fig


@experiment(
    "tf_causal", paper=f"{PAPER} §sequence / causal attention (no official code)",
    chapter="08_sequences_causal",
    title="Sequence and causal self-attention: GD direction vs the (causal) sequence SVM",
    plot=_plot_causal,
    targets=[
        Target("corr_causal_final", "mean corr(W(k), causal SAtt-SVM of GD's selection) at the "
               "end", "the paper's claim, checked numerically by the book", 0.99, 1.0, "≥ 0.99",
               "suggested", "no official experiment: the book's own check"),
        Target("corr_full_final", "mean corr(W(k), SAtt-SVM of GD's selection), bidirectional "
               "attention", "the paper's claim, checked numerically", 0.99, 1.0, "≥ 0.99",
               "suggested", "no official experiment: the book's own check"),
        Target("mask_gap", "corr with the causal SVM minus corr with the mask-free SVM (same "
               "selection): the mask changes the direction", "> 0", 0.02, 1.0, "≥ 0.02",
               "suggested", "no official experiment: the book's own check"),
    ])
def tf_causal(trials: int = 20, n: int = 2, T: int = 6, d: int = 16, steps: int = 2000,
              seed: int = 0, record_every: int = 20, device=None):
    """Sequence self-attention (every position a query, one label per position, fixed linear
    head) trained by normalised GD with and without the causal mask, all trials in one
    batched call each; the final selection α_ik of every query is fed to the sequence SVM
    (:func:`attnlib.svm.sequence_svm`) with the matching mask. d ≥ max(T−1, nT) makes every
    selection feasible."""
    data = SQ.random_sequences(n, T, d, trials=trials, seed=seed, device=device)
    kw = dict(lr=0.1, steps=steps, eps=EPS, record_every=record_every, seed=seed)
    rc = SQ.train_sequence(data, causal=True, **kw)
    rf = SQ.train_sequence(data, causal=False, **kw)
    ac = SQ.sequence_selected_tokens(data, rc.W, causal=True)
    af = SQ.sequence_selected_tokens(data, rf.W, causal=False)
    Wc = sequence_svm(data, alpha=ac, causal=True).to(data.X)
    Wcf = sequence_svm(data, alpha=ac, causal=False).to(data.X)  # same α, mask ignored
    Wf = sequence_svm(data, alpha=af, causal=False).to(data.X)
    Hc, Hf = rc.history["W"], rf.history["W"]  # (B, S, d, d)
    corr = dict(corr_causal=_corr(Hc, Wc[:, None]), corr_causal_vs_full=_corr(Hc, Wcf[:, None]),
                corr_full=_corr(Hf, Wf[:, None]))
    opt_c = SQ.sequence_optimal_tokens(data, causal=True)
    num = {f"{k}_final": float(v[:, -1].mean()) for k, v in corr.items()}
    num.update(corr_causal_min=float(corr["corr_causal"][:, -1].min()),
               corr_full_min=float(corr["corr_full"][:, -1].min()),
               mask_gap=num["corr_causal_final"] - num["corr_causal_vs_full_final"],
               opt_share_causal=float((ac == opt_c).double().mean()),
               prob_causal_final=float(rc.history["max_prob"][:, -1].mean()))
    return num, dict(steps=_np(rc.history["step"]), **corr)


# ----------------------------------------------------------------------------- causal explorer
@functools.lru_cache(maxsize=4)
def _causal_runs(n: int, T: int, d: int, steps: int, seed: int):
    """Both layers (causal, bidirectional) on one data set, with their SVMs; cached."""
    data = SQ.random_sequences(n, T, d, seed=seed, device="cpu")
    out = {"data": data}
    for name, causal in (("causal", True), ("bidirectional", False)):
        res = SQ.train_sequence(data, causal=causal, lr=0.1, steps=steps, eps=EPS,
                                record_every=20, seed=seed)
        alpha = SQ.sequence_selected_tokens(data, res.W, causal)
        W_mm = sequence_svm(data, alpha=alpha, causal=causal)
        H = res.history["W"]
        out[name] = dict(H=H, steps=_np(res.history["step"]), alpha=_np(alpha),
                         corr=_np(_corr(H, W_mm)))
    out["opt"] = {name: _np(SQ.sequence_optimal_tokens(data, causal=c))
                  for name, c in (("causal", True), ("bidirectional", False))}
    return out


def causal_explorer(n: int = 2, T: int = 6, d: int = 16, steps: int = 2000, seed: int = 0,
                    mode: str | None = None):
    """Explorer (chapter 8): the attention matrix of a sequence self-attention layer while it
    trains, causal or bidirectional, and its correlation with the matching sequence SVM.

    Left: :math:`s_{ik\\cdot}` for every query k (rows) of sequence i, with the token each
    query ends on (dot) and its optimal visible token (cross). Right: 1 − corr(W(k), SAtt-SVM
    of the final selection), the current iteration marked. Built on
    :class:`attnlib.widgets.Explorer` (live in Jupyter, a slider player on the website).
    """
    from ..plots import correlation_curves
    from ..widgets import Control, Explorer

    def draw(fig, attention, sequence, iterations):
        runs = _causal_runs(n, T, d, steps, seed)
        r, data = runs[attention], runs["data"]
        k = int(np.searchsorted(r["steps"], int(iterations)))
        W = r["H"][k]
        s = _np(SQ.sequence_softmax(data.X, W, attention == "causal"))[int(sequence)]  # (T, T)
        ax0, ax1 = fig.subplots(1, 2)
        ax0.imshow(s, vmin=0, vmax=1, cmap="Blues")
        q = np.arange(T)
        ax0.plot(r["alpha"][int(sequence)], q, "o", color="tab:red", ms=5, label="final α_ik")
        ax0.plot(runs["opt"][attention][int(sequence)], q, "x", color="k", ms=6,
                 label="optimal visible token")
        ax0.set_xlabel("token t")
        ax0.set_ylabel("query k")
        ax0.set_title(f"attention s_ik at step {int(r['steps'][k])}", fontsize=10)
        ax0.legend(fontsize=7, loc="lower left")
        correlation_curves(r["steps"], {f"{attention} GD vs its SVM": r["corr"]}, ax=ax1,
                           one_minus=True, mark=int(iterations), legend="upper right")

    controls = [Control("attention", ("causal", "bidirectional"), default="causal",
                        static=("causal", "bidirectional")),
                Control("sequence", tuple(range(n)), default=0),
                Control("iterations", tuple(range(0, steps + 1, 100)), default=steps,
                        continuous=True)]
    return Explorer(draw, controls, name="causal", slider="iterations", figsize=(9.0, 3.6),
                    caption="Move the iterations: each query's attention concentrates on "
                            "its selected token, and W turns toward the sequence SVM.").show(mode)


# ----------------------------------------------------------------------------- recorded runs
# Paper-scale results shipped with attnlib: see attnlib.experiments.recorded (kept here as a
# name chapter 7 uses).
from ._registry import RECORDED, recorded  # noqa: E402,F401
