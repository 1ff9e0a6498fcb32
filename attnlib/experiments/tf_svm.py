"""Experiments of "Transformers as Support Vector Machines" (arXiv 2308.16898), chapters 5-8.

One registered experiment per official experiment (E1-E5 of the paper's code, numbered as in
the book's reproduction report) plus the book's causal-attention check:

============================  ===============================================  =======
name                          what                                             chapter
============================  ===============================================  =======
``tf_visualization``          E1: 2-D GD paths of W and (K,Q) vs both SVMs     5
``tf_local_convergence``      E2: W vs (K,Q), 100 runs, correlation curves     5
``tf_svm_rank``               E3: rank of Frobenius vs nuclear solutions       5
``tf_nuclear_nonunique``      Att-SVM⋆ with many solutions; (K,Q) GD on them   5
``tf_rank_cap``               (K,Q) with width m < n: the rank cap binds       5
``tf_feasibility``            feasibility of Att-SVM above/below max(T-1,n)    6
``tf_global_fraction``        E5: global vs local convergence as d grows       6
``tf_global_equal_scores``    global GD theorem: equal non-optimal scores      6
``tf_multi_token``            E4: ReLU head, several selected tokens, SVM-eq   7
``tf_lambda_head``            λ head: two selected tokens, SVM-eq              7
``tf_causal``                 sequence / causal self-attention vs its SVM      8
============================  ===============================================  =======

This module holds E1 and E2 (chapter 5); E3 lives in :mod:`.tf_svm_rank`, chapters 6, 7 and 8
in ``tf_svm_overparam``, ``tf_svm_heads`` and ``tf_svm_causal`` (:mod:`attnlib.experiments`
imports them after this one). Computation
and declared targets only: the figures are in :mod:`attnlib.figures.tf_svm`, the explorers in
:mod:`attnlib.explorers.tf_svm`. All training is batched (one :func:`attnlib.train` call per
setting, the runs as the trials dimension); the SVMs are solved by :mod:`attnlib.svm`.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .._runtime import resolve_device
from .._validate import to_numpy
from ..data import AttentionData, random_data
from ..examples import EPS, visualization_example
from ..figures.tf_svm import plot_local, plot_visualization
from ..metrics import correlation, numerical_rank
from ..optimality import locally_optimal_from
from ..svm import att_svm, solve_each
from ..tokens import optimal_tokens, scores, selected_tokens
from ..train import train
from .registry import Target, experiment

PAPER = "2308.16898"
# rank of a trained matrix: W's untouched initialisation leaves σ_j of several 1e-3 σ_1
# (about 1e-2 in a few runs), (K,Q)'s far less; chapter 5 prints the floor
SPECTRUM_RTOL = 1e-2


# ----------------------------------------------------------------------------- helpers
def _at(steps: np.ndarray, k: int) -> int:
    """Index of the recorded step k."""
    idx = np.nonzero(np.asarray(steps) == k)[0]
    if len(idx) == 0:
        raise ValueError(f"step {k} was not recorded (recorded every {steps[1] - steps[0]})")
    return int(idx[0])


def _local_share(data: AttentionData, W_mm: torch.Tensor, alpha: torch.Tensor) -> float:
    """Share of trials whose selection α is locally optimal, read from its solved SVM: support
    tokens are the constraints active within 1e-4 (relative), as in the
    re-simulation (:func:`attnlib.optimality.locally_optimal_from`)."""
    return float(locally_optimal_from(data, W_mm, alpha, tol=1e-4).double().mean())


# ============================================================================ E1: 2-D picture
def _layouts(B: int, seed: int, device):
    """Random layouts in the style of ``visualization2``: n=2, T=5, d=2, Y=+1.

    x_11 = (1, .5) and x_21 = (1, -.5); the other tokens 0.5 N(0, I) - (1, 0); v, z_i random
    unit vectors.
    """
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
    return correlation(a, b, dims=1)


def _layout_numbers(layouts: int, seed: int, kw: dict, device) -> dict:
    """E1 on ``layouts`` random layouts (NaN when 0): W and (K,Q) each in one batched call,
    both SVMs per layout; the smallest correlations and the share of aligned queries."""
    if layouts == 0:
        return dict.fromkeys(("layouts_corr_W_min", "layouts_corr_KQ_min",
                              "layouts_query_cos_frac", "layouts_infeasible",
                              "layouts_nonopt_W", "layouts_nonopt_KQ"), math.nan)
    ld, K0 = _layouts(layouts, seed, device)
    lW = train(ld, "W", init={"W": torch.zeros_like(K0)}, **{**kw, "record_every": kw["steps"]})
    lK = train(ld, "KQ", init={"K": K0, "Q": torch.zeros_like(K0)}, reg=EPS,
               **{**kw, "record_every": kw["steps"]})
    laW, laK = selected_tokens(ld, lW.W), selected_tokens(ld, lK.W)
    sW, sK = solve_each(ld, laW, "fro"), solve_each(ld, laK, "nuc")
    lWf, okW = sW.W.to("cpu", torch.float64), sW.feasible.cpu()
    lWn, okK = sK.W.to("cpu", torch.float64), sK.feasible.cpu()
    cW = correlation(lW.W.cpu(), lWf, dims=2)
    cK = correlation(lK.W.cpu(), lWn, dims=2)
    qc = torch.cat([_query_cos(lW.W.cpu(), lWf, ld.z.cpu()).flatten(),
                    _query_cos(lK.W.cpu(), lWn, ld.z.cpu()).flatten()])
    lopt = optimal_tokens(ld)
    return dict(layouts_corr_W_min=float(cW.nan_to_num(-1).min()),
                 layouts_corr_KQ_min=float(cK.nan_to_num(-1).min()),
                layouts_query_cos_frac=float((qc.nan_to_num(-1) >= 0.98).double().mean()),
                layouts_infeasible=float((~okW).sum() + (~okK).sum()),
                layouts_nonopt_W=float((laW != lopt).any(-1).sum()),
                layouts_nonopt_KQ=float((laK != lopt).any(-1).sum()),
                layouts_corr_W=cW, layouts_corr_KQ=cK)


@experiment(
    "tf_visualization", paper=f"{PAPER} Fig. 1 (E1, visualization2.ipynb)", chapter="05_w_vs_kq",
    title="2-D GD paths of W and (K,Q) against the Frobenius and nuclear SVM rays",
    plot=plot_visualization,
    seconds=0.6,
    bounds={"layouts": (0, None), "example": (1, 2)},
    targets=[
        Target("corr_W_fro", "corr(W(2000), W^mm_α) on the paper's 2-D example", "≥ 0.99",
               0.99, 1.0, "≥ 0.99", "re-simulation",
               "α = GD's final selection (not the official notebook's best_ids)"),
        Target("corr_KQ_nuc", "corr(KQᵀ(2000), W^mm_⋆,α) on the paper's 2-D example", "≥ 0.99",
               0.99, 1.0, "≥ 0.99", "re-simulation"),
        Target("selects_opt", "GD (W and (K,Q)) selects the optimal token of both inputs, "
               "which then lie beyond the mid-margin line", "yes", 1, 1, "exact",
               "official code"),
        Target("layouts_query_cos_frac",
               "10 random 2-D layouts: share of per-query cos(W z_i, W^mm z_i) ≥ 0.98",
               "most (one of 20 was 0.89)", 0.75, 1.0, "most draws", "re-simulation"),
    ])
def tf_visualization(steps: int = 2000, layouts: int = 10, seed: int = 0, example: int = 2,
                     lr: float = 0.1, normalized: bool = True, device: str | None = None):
    r"""E1: normalised GD on the 2-D example of ``visualization2`` for W (from 0) and (K,Q)
    (K(0) = 0.1 N(0,1), Q(0) = 0), against the Frobenius / nuclear SVM of GD's selection;
    then the same on ``layouts`` random layouts of that style (one batched call each; 0: none).

    ``example`` picks the 2-D example (1: ``visualization.ipynb``, 2: ``visualization2.ipynb``);
    ``lr`` and ``normalized`` apply to every run. The arrays keep both 2-D runs' histories and
    both SVMs of each run's selection, which the explorer
    :func:`attnlib.explorers.tf_svm.parameterisation` draws.

    .. math::

        \mathrm{corr}(W(k), W^{mm}_\alpha), \qquad W^{mm}_\alpha = \arg\min \|W\|
        \ \text{s.t.}\ (x_{i\alpha_i} - x_{it})^\top W z_i \ge 1 \ (t \ne \alpha_i)

    with the Frobenius norm for W and the nuclear norm for :math:`KQ^\top`.

    Returns
    -------
    numbers, arrays : dict, dict
        The targets' numbers; the paths, rays, histories and SVMs behind the figure.

    See chapter 5, *Self-attention as an SVM: W versus (K, Q)*.
    """
    ex = visualization_example(example, device=device)
    data = ex.data
    kw = dict(lr=lr, normalized=normalized, steps=steps, eps=EPS,
              record_every=max(1, steps // 200))
    rW = train(data, "W", init={"W": ex.init["W"]}, **kw)
    rK = train(data, "KQ", init={"K": ex.init["K"], "Q": ex.init["Q"]}, reg=EPS, **kw)
    aW, aK = selected_tokens(data, rW.W), selected_tokens(data, rK.W)
    svm = {(p, nm): att_svm(data, alpha=a, norm=nm) for p, a in (("W", aW), ("KQ", aK))
           for nm in ("fro", "nuc")}  # both SVMs of each run's selection (the explorer's)
    Wf, Wn = svm["W", "fro"], svm["KQ", "nuc"]
    opt = optimal_tokens(data)
    z = data.z
    num = dict(corr_W_fro=float(correlation(rW.W, Wf, dims=2)),
               corr_KQ_nuc=float(correlation(rK.W, Wn, dims=2)),
               query_cos_W_min=float(_query_cos(rW.W, Wf, z).min()),
               query_cos_KQ_min=float(_query_cos(rK.W, Wn, z).min()),
               selects_opt=float(bool((aW == opt).all() and (aK == opt).all())))
    num.update(_layout_numbers(layouts, seed, kw, device))
    hz = lambda H: torch.einsum("sde,ne->nsd", H, z)  # noqa: E731  W(k) z_i, (n, S, 2)
    arrays = dict(X=data.X, scores=scores(data), steps=rW.history["step"],
                  path_W=hz(rW.history["W"]), path_KQ=hz(rK.history["W"]),
                  ray_fro=(Wf @ z.T).T, ray_nuc=(Wn @ z.T).T, z=z,
                  layouts_corr_W=num.pop("layouts_corr_W", np.zeros(0)),
                  layouts_corr_KQ=num.pop("layouts_corr_KQ", np.zeros(0)),
                  hist_W=rW.history["W"], hist_KQ=rK.history["W"],
                  prob_W=rW.history["max_prob"], prob_KQ=rK.history["max_prob"],
                  alpha_W=aW, alpha_KQ=aK,
                  **{f"svm_{p}_{nm}": W for (p, nm), W in svm.items()})
    return num, arrays


# ============================================================================ E2: W vs (K,Q)
@experiment(
    "tf_local_convergence", paper=f"{PAPER} Fig. 3 (E2, local_converge.ipynb)",
    chapter="05_w_vs_kq",
    title="Local convergence: W → Att-SVM (Frobenius), (K,Q) → Att-SVM⋆ (nuclear)",
    plot=plot_local,
    seconds=2.0,  # measured 2026-11-29: CPU s, one process alone
    targets=[
        Target("prob_KQ_k100", "mean max-softmax of (K,Q) at k = 100", "0.998", 0.948, 1.0,
               "±0.05", "re-simulation"),
        Target("prob_W_k100", "mean max-softmax of W at k = 100", "0.72", 0.67, 0.77,
               "±0.05", "re-simulation"),
        Target("prob_W_k200", "mean max-softmax of W at k = 200", "0.966", 0.916, 1.0,
               "±0.05", "re-simulation"),
        Target("corr_W_fro_k1000", "mean corr(W(k), W^mm_α) at k = 1000", "0.994",
               0.984, 1.0, "±0.01", "re-simulation",
               "the mean is pulled down by the few runs still switching selection at k = "
               "1000; the claim corr ≥ 0.99 is checked on the median and at k = 2000"),
        Target("corr_W_fro_median_k1000", "median corr(W(k), W^mm_α) at k = 1000",
               "≥ 0.99", 0.99, 1.0, "≥ 0.99", "re-simulation",
               "the typical run; robust to the stragglers that still switch selection"),
        Target("corr_W_fro_final", "mean corr(W(k), W^mm_α) at k = 2000", "0.997 (≥ 0.99)",
               0.99, 1.0, "≥ 0.99", "re-simulation"),
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
               0.0855, 0.1045, "±10%", "re-simulation",
               "only the lower end tests anything: steps of length 0.1 bound the slope by "
               "0.1 + ‖W(0)‖/1000 < 0.1045 by construction"),
        Target("norm_W_final", "mean ‖W(2000)‖_F: the float64 plateau, not a finite limit",
               "117 (100–150)", 100.0, 150.0, "100–150", "re-simulation"),
        Target("rank_W_final", "mean rank of W(2000) (σ_j > 1e-2 σ_1) = n: the Frobenius "
               "SVM's rank", "min(n, d) = 6", 5.5, 6.5, "±0.5", "suggested",
               "rank ≤ n of every Att-SVM solution, rank min(n, d) generically (§ rank)"),
        Target("rank_KQ_final", "mean rank of KQᵀ(2000) minus the mean rank of its nuclear "
               "SVM W^mm_⋆,α, both counted at σ_j > 1e-2 σ_1", "0 (low rank, as the nuclear "
               "SVM)", -0.5, 0.5, "±0.5", "suggested",
               "the visible face of the low-rank bias: trained (K,Q) has the nuclear SVM's rank, "
               "about half of W's. One threshold for both (it was 1e-2 for KQᵀ against 1e-6 "
               "for the SVM); rank_KQ_final_fine repeats the comparison at 1e-6"),
        Target("rank_KQ_final_fine", "the same difference with both counted at σ_j > 1e-6 σ_1",
               "0", -0.5, 0.5, "±0.5", "suggested",
               "KQᵀ(2000) keeps a few singular values between 1e-6 and 1e-2 σ_1 (the tiny "
               "penalty's equilibrium), so it counts more here than at 1e-2 (0.42 when the "
               "bound was set, after the value was seen: a guard, not evidence)",
               evidence="regression guard"),
        Target("spectrum_KQ_nuc", "mean cosine between the singular values of KQᵀ(2000) and "
               "of W^mm_⋆,α", "1", 0.99, 1.0, "≥ 0.99", "suggested"),
        Target("spectrum_W_fro", "mean cosine between the singular values of W(2000) and of "
               "W^mm_α", "1", 0.99, 1.0, "≥ 0.99", "suggested"),
    ])
def tf_local_convergence(trials: int = 100, steps: int = 2000, n: int = 6, T: int = 8,
                         d: int = 10, seed: int = 0, record_every: int = 10,
                         device: str | None = None):
    r"""E2: ``trials`` random instances (cross-attention, seed = run), normalised GD for W and
    for (K,Q) (tiny penalty λ = 2.2e-16), each as ONE batched call; α = the final selection;
    correlation of every recorded iterate with the Frobenius and the nuclear SVM of α.

    .. math::

        \rho_{W}(k) = \mathrm{corr}(W(k), W^{mm}_\alpha), \qquad
        \rho_{KQ}(k) = \mathrm{corr}(K(k)Q(k)^\top, W^{mm}_{\star,\alpha})

    (and the two cross pairs), averaged over the runs at k = 100, 200, 1000 and at the end.

    See chapter 5, *Self-attention as an SVM: W versus (K, Q)*.
    """
    data = random_data(n, T, d, trials=trials, seed=seed, device=device)
    kw = dict(lr=0.1, steps=steps, eps=EPS, record_every=record_every)
    rW = train(data, "W", seed=seed, **kw)
    rK = train(data, "KQ", reg=EPS, seed=seed + 1, **kw)
    aW, aK = selected_tokens(data, rW.W), selected_tokens(data, rK.W)
    svm = {(p, nm): att_svm(data, alpha=a, norm=nm).to(data.X)
           for p, a in (("W", aW), ("KQ", aK)) for nm in ("fro", "nuc")}
    HW, HK = rW.history["W"], rK.history["W"]  # (B, S, d, d)
    corr = {"corr_W_fro": correlation(HW, svm["W", "fro"][:, None], dims=2),
            "corr_W_nuc": correlation(HW, svm["W", "nuc"][:, None], dims=2),
            "corr_KQ_nuc": correlation(HK, svm["KQ", "nuc"][:, None], dims=2),
            "corr_KQ_fro": correlation(HK, svm["KQ", "fro"][:, None], dims=2)}
    steps_rec = to_numpy(rW.history["step"])
    i100, i200, i1000 = (_at(steps_rec, k) for k in (100, 200, min(1000, steps)))
    normW = HW.flatten(-2).norm(dim=-1)  # (B, S)
    opt = optimal_tokens(data)
    num = dict(prob_W_k100=float(rW.history["max_prob"][:, i100].mean()),
               prob_W_k200=float(rW.history["max_prob"][:, i200].mean()),
               prob_KQ_k100=float(rK.history["max_prob"][:, i100].mean()),
               frac_global_W=float((aW == opt).all(-1).double().mean()),
               frac_global_KQ=float((aK == opt).all(-1).double().mean()),
               frac_local_W=_local_share(data, svm["W", "fro"], aW),
               frac_local_KQ=_local_share(data, svm["KQ", "nuc"], aK),
               norm_slope_k1000=float(normW[:, i1000].mean() / steps_rec[i1000]),
               norm_W_final=float(normW[:, -1].mean()))
    for key, c in corr.items():
        num[f"{key}_k1000"] = float(c[:, i1000].mean())
        num[f"{key}_median_k1000"] = float(c[:, i1000].median())
        num[f"{key}_final"] = float(c[:, -1].mean())
        num[f"{key}_min_k1000"] = float(c[:, i1000].min())
    # singular-value spectra of the trained matrices and of their SVMs (normalised by σ_1)
    spec = {k: torch.linalg.svdvals(M.to("cpu", torch.float64)) for k, M in (
        ("W", HW[:, -1]), ("KQ", HK[:, -1]), ("fro", svm["W", "fro"]),
        ("nuc", svm["KQ", "nuc"]))}
    mats = (("W", HW[:, -1]), ("KQ", HK[:, -1]), ("fro", svm["W", "fro"]),
            ("nuc", svm["KQ", "nuc"]))
    rank = {k: numerical_rank(M, SPECTRUM_RTOL if k in ("W", "KQ") else 1e-6).double()
            for k, M in mats}
    common = {k: numerical_rank(M, SPECTRUM_RTOL).double() for k, M in mats}  # one threshold
    fine = {k: numerical_rank(M, 1e-6).double() for k, M in mats}
    cos = lambda a, b: float(correlation(spec[a], spec[b], dims=1).mean())  # noqa: E731
    num.update(rank_W_final=float(rank["W"].mean()),
               rank_KQ_final=float(common["KQ"].mean() - common["nuc"].mean()),
               rank_KQ_final_fine=float(fine["KQ"].mean() - fine["nuc"].mean()),
               rank_KQ_abs=float(rank["KQ"].mean()), rank_fro_svm=float(rank["fro"].mean()),
               rank_nuc_svm=float(rank["nuc"].mean()),
               spectrum_KQ_nuc=cos("KQ", "nuc"), spectrum_W_fro=cos("W", "fro"),
               spectrum_W_nuc=cos("W", "nuc"), spectrum_KQ_fro=cos("KQ", "fro"))
    arrays = dict(steps=steps_rec, prob_W=rW.history["max_prob"], prob_KQ=rK.history["max_prob"],
                  norm_W=normW, alpha_W=aW, alpha_KQ=aK, **corr,
                  **{f"sv_{k}": v / v[:, :1] for k, v in spec.items()})
    return num, arrays

