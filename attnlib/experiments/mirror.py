r"""Experiments of *Optimizing Attention with Mirror Descent* (arXiv 2410.14581), chapter 9.

ℓp mirror descent on the key-query matrix W. With the potential
:math:`\psi(W) = \frac1p\|W\|_p^p` (entrywise) the update is

.. math::

    W_{k+1} = \nabla\psi^{-1}\big(\nabla\psi(W_k) - \eta_k \nabla\mathcal L(W_k)\big),
    \qquad \nabla\psi(W) = \mathrm{sign}(W)\odot|W|^{p-1},

and its iterates turn toward the ℓp-AttSVM solution of the tokens they select. Every
synthetic setting of the paper is one registered function:

======================  ===============================================================
``md_mechanics``        the algorithm's algebra: mirror maps, p = 2 is GD, proximal form,
                        Bregman divergence, gradient (targets T1-T5)
``md_convergence``      §5.1: normalised ℓp-MD on W for p = 1.75, 2, 3 at the paper's
                        budgets; directional Bregman curves to every ℓq-SVM (T6-T10)
``md_bias``             the implicit bias depends on p: p = 1.25, 2, 3 against the three
                        SVMs, and sparsity of iterates and SVMs (T11, T12)
``md_unnormalized``     constant-step ℓp-MD: slow directional convergence (T13)
``md_joint``            §5.2: the joint (W, v) toy problem, which token each p selects (T14;
                        :mod:`attnlib.experiments.mirror_joint`)
``md_path``             one ℓp-MD path from W(0) = 0 and its ℓp- and ℓ2-AttSVMs (the
                        chapter's explorer; :mod:`attnlib.experiments.mirror_path`)
``md_lp_path``          the ℓp regularisation path and the ℓp-AttSVM
                        (``attnlib.experiments.mirror_regpath``)
``md_dual``             the paper's optimizer (dual recomputed from float32 weights) vs the
                        book's (dual kept in float64) at p = 1.1
                        (``attnlib.experiments.mirror_dual``)
``md_digits``           §7: ℓ1.1-MD vs GD vs Adam on digits (chapter 10,
                        :mod:`attnlib.experiments.mirror_digits`)
======================  ===============================================================

Each function takes the paper's settings as typed keyword defaults, trains all its datasets as
the trials of one batched :func:`attnlib.train.train` call per exponent and returns
``(numbers, arrays)``. Targets sit beside each experiment; their values come from the
paper's official code (``aaronk2002/AttentionMD``) or from an independent re-simulation of
its synthetic experiments (different random draws than the paper's). The figures and tables
are in :mod:`attnlib.figures.mirror`. Computations run on the CPU unless
``device`` says otherwise (``None``: ``attnlib._runtime.default_device``).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from attnlib import metrics, models
from attnlib._runtime import resolve_device
from attnlib.examples import EPS, MD_BUDGETS, mirror_random_data
from attnlib.figures import mirror as figures
from attnlib.metrics import bregman, bregman_direction, sparsity
from attnlib.optimality import locally_optimal_from
from attnlib.svm import att_svm
from attnlib.tokens import selected_tokens, token_margins
from attnlib.train import LpMirrorDescent, inverse_mirror_map, mirror_map, train

from .mirror_svms import lq_svms, lq_svms_once
from .official_numerics import Numerics
from .registry import Target, experiment

__all__ = ["PAPER", "mechanics", "convergence", "bias", "unnormalized"]

PAPER = "2410.14581"
_LPS = (1.75, 2.0, 3.0)  # the exponents of §5.1 and §5.2
_STEPS = tuple(MD_BUDGETS[p] for p in _LPS)  # their official iteration budgets
# md_convergence targets that need a particular exponent (1.75, 2 or 3) among lps
_CONV_KEYS = ("norm_ratio_p3", "min_max_prob_p175", "min_max_prob_p2", "local_opt_frac_p175",
              "local_opt_frac_p2", "ddir_p2", "ddir_p3", "ddir_p175", "svm_p2_vs_fro",
              "order_175")


# ----------------------------------------------------------------------------- mechanics

@experiment(
    "md_mechanics", paper=f"{PAPER} §2 (algorithm)", chapter="09_mirror_descent",
    title="The ℓp mirror-descent step: maps, p = 2, proximal form, Bregman divergence",
    seconds=1.0,  # measured 2026-11-29: CPU s, one process alone
    targets=[
        Target("roundtrip_err", "max |∇ψ*(∇ψ(W)) − W| / max(1, |W|), p ∈ {1.1, 1.25, 1.75, 2, 3}",
               "≤ 1e-10", 0.0, 1e-10, "≤ 1e-10", "suggested"),
        Target("p2_vs_gd_err", "one ℓ2-MD step minus the GD step W − η∇L (max-norm)",
               "≤ 1e-14", 0.0, 1e-14, "≤ 1e-14", "suggested",
               evidence="by construction"),
        Target("prox_grad_err", "gradient of η<G,W> + D_ψ(W, W_k) at the MD step (max-norm)",
               "≤ 1e-10", 0.0, 1e-10, "≤ 1e-10", "suggested",
               "the optimizer's step is the inverse map of the dual step, so this gradient is "
               "its round trip", evidence="by construction"),
        Target("prox_perturb_lower", "of 100 random 1e-3 perturbations, how many lower the "
               "proximal objective", "0", 0, 0, "exact", "suggested"),
        Target("bregman_min", "min of D_ψ(W, V) / ‖W − V‖_F² over random pairs V = W + tH, "
               "t ∈ {10, 1, 0.1, 0.01} (≥ 0: near pairs catch a wrong linear term)", "≥ 0",
               -1e-9, math.inf, "≥ 0", "suggested"),
        Target("bregman_self", "max |D_ψ(W, W)|", "0", 0.0, 1e-12, "1e-12", "suggested",
               evidence="by construction"),
        Target("bregman_p2_err", "at p = 2: |D_ψ(W, V) − ½‖W − V‖_F²|", "≤ 1e-12", 0.0, 1e-12,
               "≤ 1e-12", "suggested"),
        Target("ddir_in_range", "directional divergence lies in [0, 2]", "1", 1, 1, "exact",
               "suggested",
               evidence="by construction"),
        Target("ddir_formula_err", "D_dir(A, B) − (1 − <∇ψ(B̄), Ā>)", "≤ 1e-12", 0.0, 1e-12,
               "≤ 1e-12", "suggested",
               evidence="by construction"),
        Target("grad_rel_err", "closed-form ∇_W L vs autograd, relative error", "≤ 1e-6",
               0.0, 1e-6, "≤ 1e-6", "suggested"),
    ],
)
def mechanics(seed: int = 0, lps: tuple[float, ...] = (1.1, 1.25, 1.75, 2.0, 3.0),
              lr: float = 0.1, device: str | None = "cpu"):
    r"""Targets T1-T5: the algebra of ℓp mirror descent, checked on random 10×10 matrices.

    The mirror map :math:`\nabla\psi(W) = \mathrm{sign}(W)|W|^{p-1}` and its inverse, the
    proximal form :math:`W_{k+1} = \arg\min_W \eta\langle G, W\rangle + D_\psi(W, W_k)`,
    the Bregman divergence and its directional form, and the closed-form gradient.

    Parameters
    ----------
    seed : int
        Seed of the random matrices W, V, G (one triple per exponent).
    lps : tuple of float
        The exponents p > 1.
    lr : float
        Step size η of the proximal step.
    device : str or None
        Where to compute (``None``: the library default device).

    See chapter 9, *Mirror descent selects tokens too*.
    """
    dev, dt = resolve_device(device), torch.float64
    g = torch.Generator().manual_seed(seed)
    rnd = lambda *s: torch.randn(*s, generator=g, dtype=dt).to(dev)  # noqa: E731
    W, V, G = rnd(len(lps), 10, 10), rnd(len(lps), 10, 10), rnd(len(lps), 10, 10)
    rt, prox, lower, bmin, bself = [], [], 0, math.inf, 0.0
    for j, lp in enumerate(lps):
        rt.append(((inverse_mirror_map(mirror_map(W[j], lp), lp) - W[j]).abs()
                   / W[j].abs().clamp(min=1)).max())
        # the optimizer's step is the proximal point of eta<G, W> + D(W, W_k)
        w = W[j].clone().requires_grad_(True)
        w.grad = G[j].clone()
        LpMirrorDescent([w], lr=lr, lp=lp).step()
        Wn = w.detach()
        prox.append((lr * G[j] + mirror_map(Wn, lp) - mirror_map(W[j], lp)).abs().max())
        pert = torch.cat([Wn[None], Wn + 1e-3 * rnd(100, 10, 10)])  # (101, d, d)
        obj = lr * (G[j] * pert).sum((-2, -1)) + bregman(pert, W[j], lp)
        lower += int((obj[1:] < obj[0] - 1e-15).sum())
        # D >= 0 is informative on near pairs, where psi(W) - psi(V) and the linear term
        # nearly cancel (far pairs pass with a wrong linear term); scale-free by |W - V|^2
        for t in (10.0, 1.0, 0.1, 0.01):
            Vt = W[j] + t * V[j]
            bmin = min(bmin, float(bregman(W[j], Vt, lp) / ((W[j] - Vt) ** 2).sum()))
        bself = max(bself, float(bregman(W[j], W[j], lp).abs()))
    # p = 2 is gradient descent: one step of the optimizer and of train()
    ex = mirror_random_data(seed=1, device=dev)
    one = dict(param="W", lr=lr, steps=1, normalized=False, init={"W": ex.init["W"]})
    md = train(ex.data, method="md", lp=2.0, **one).W
    gd = train(ex.data, method="gd", **one).W
    grad = models.grad_W(ex.data.X, ex.data.Y, ex.data.z, ex.init["W"], ex.data.v)
    w = ex.init["W"].clone().requires_grad_(True)
    a = models.logits(ex.data.X, w, ex.data.z)
    u = ex.data.Y * (models.softmax(a) * (ex.data.X @ ex.data.v)).sum(-1)
    torch.nn.functional.softplus(-u).mean().backward()
    gerr = float((grad - w.grad).norm() / w.grad.norm())
    p2 = max(float((md - gd).abs().max()), float((md - (ex.init["W"] - lr * grad)).abs().max()))
    # Bregman at p = 2 and the directional form
    b2 = float((bregman(W, V, 2.0) - 0.5 * ((W - V) ** 2).sum((-2, -1))).abs().max())
    dd, form = [], []
    for lp in lps:
        D = bregman_direction(W, V, lp)
        A = W / metrics.lp_norm(W, lp, dims=2)[:, None, None]
        B = V / metrics.lp_norm(V, lp, dims=2)[:, None, None]
        dd.append(D)
        form.append((D - (1 - (mirror_map(B, lp) * A).sum((-2, -1)))).abs().max())
    dd = torch.stack(dd)
    numbers = dict(roundtrip_err=float(max(rt)), p2_vs_gd_err=p2, prox_grad_err=float(max(prox)),
                   prox_perturb_lower=lower, bregman_min=bmin, bregman_self=bself,
                   bregman_p2_err=b2, ddir_in_range=int(bool((dd >= 0).all() & (dd <= 2).all())),
                   ddir_formula_err=float(max(form)), grad_rel_err=gerr)
    return numbers, {"lps": np.array(lps)}


@experiment(
    "md_convergence", paper=f"{PAPER} §5.1 (Fig. 'Bregman divergence')",
    chapter="09_mirror_descent",
    title="Normalised ℓp-MD on W converges in direction to the ℓp-AttSVM (p = 1.75, 2, 3)",
    plot=figures.plot_convergence,
    seconds=14,  # measured 2026-11-29: CPU s, one process alone
    targets=[
        Target("norm_violation", "‖W(k)‖_p^{p−1} ≤ ‖W(0)‖_p^{p−1} + ηk at every recorded k "
               "(largest relative excess)", "≤ roundoff", -math.inf, 1e-10, "roundoff",
               "re-simulation",
               evidence="by construction"),
        Target("norm_ratio_p3", "p = 3: ‖W(K)‖_p^{p−1} / (‖W(0)‖_p^{p−1} + ηK) at the end "
               "(median over datasets)", "≈ 0.98", 0.95, 1.0 + 1e-10, "≥ 0.95", "re-simulation",
               "median: the mean is pulled down by the few datasets whose direction is still "
               "turning (mean 0.946 over the 100 datasets); needs the full 20,000 steps"),
        Target("min_max_prob", "attention saturates: min_i max_t s_it at the end, all p, all "
               "datasets", "1.000", 0.99, 1.0, "≥ 0.99", "re-simulation"),
        Target("min_max_prob_p175", "p = 1.75: min_i max_t s_it at the end, all datasets",
               "1.000", 0.99, 1.0, "≥ 0.99", "re-simulation",
               "the chapter's short run (5,000 steps for p = 3) checks p = 1.75 and 2 only"),
        Target("min_max_prob_p2", "p = 2: min_i max_t s_it at the end, all datasets", "1.000",
               0.99, 1.0, "≥ 0.99", "re-simulation"),
        Target("svm_min_margin", "the ℓp-AttSVM of the final selection has margins ≥ 1",
               "≥ 1 − 1e-6", 1 - 1e-6, math.inf, "≥ 1 − 1e-6", "re-simulation",
               "the book solves the primal with Clarabel"),
        Target("svm_p2_vs_fro", "ℓ2-AttSVM equals the Frobenius Att-SVM (D_dir, max over "
               "datasets)", "≈ 1e-15", 0.0, 1e-8, "≤ 1e-8", "re-simulation"),
        Target("local_opt_frac", "final selections that are locally optimal under ℓp",
               "8/8", 0.9, 1.0, "≥ 9/10", "re-simulation"),
        Target("local_opt_frac_p175", "p = 1.75: final selections that are locally optimal",
               "8/8", 0.9, 1.0, "≥ 9/10", "re-simulation"),
        Target("local_opt_frac_p2", "p = 2: final selections that are locally optimal", "8/8",
               0.9, 1.0, "≥ 9/10", "re-simulation"),
        Target("ddir_p2", "p = 2: mean D_dir(W^mm, W(2000))", "0.0068 ± 0.0022", 0.0, 0.015,
               "≤ 0.015", "re-simulation"),
        Target("ddir_p3", "p = 3: mean D_dir(W^mm, W(20000))", "0.0037 ± 0.0008", 0.0, 0.01,
               "≤ 0.01", "re-simulation"),
        Target("ddir_p175", "p = 1.75: mean D_dir(W^mm, W(1500))", "0.0145 ± 0.0039", 0.0,
               0.03, "≤ 0.03", "re-simulation",
               "with the official ε (float64 machine epsilon) added to the step's dual norm, "
               "which freezes the direction once the gradient is far below ε; with ε = 0 it "
               "keeps turning (chapter 9)"),
        Target("ddir_monotone", "the mean matched divergence falls at checkpoints 5%, 10%, "
               "25%, 50%, 100% of the budget, every p", "monotone", 1, 1, "exact",
               "re-simulation"),
        Target("matched_lowest", "in every panel (iterates of ℓp-MD) the matched ℓp-SVM has the "
               "smallest mean final D_dir of the ℓq-SVMs", "only q = p goes to 0", 1, 1,
               "exact", "re-simulation",
               "each ℓq-SVM is built from the ℓp run's own selection"),
        Target("order_175", "p = 1.75 iterates are closer to the ℓ1.75-SVM than to the ℓ2-SVM "
               "(means)", "0.0145 < 0.0214", 1, 1, "ordering only", "re-simulation",
               "each ℓq-SVM is built from the ℓp run's own selection (the official notebook "
               "uses the ℓq run's selection, which inflates mismatched curves)"),
    ],
)
def convergence(trials: int = 100, seed: int = 1, lps: tuple[float, ...] = _LPS,
                steps: tuple[int, ...] = _STEPS, lr: float = 0.1, records: int = 100,
                eps: float = EPS, progress: bool = False, device: str | None = "cpu"):
    r"""§5.1: normalised ℓp-MD on W (v fixed), W(0) ~ N(0, 1), n = 6, T = 8, d = 10.

    ``eps`` is added to the dual norm of the gradient, :math:`\eta_k = \eta/(\|G_k\|_q +
    \varepsilon)`: the official code's float64 machine epsilon by default. Once
    :math:`\|G_k\|_q` falls far below it the steps shrink in proportion and the direction
    freezes; ``eps=0`` keeps every step of length η (chapter 9 compares both).

    Each run is compared with the ℓq-AttSVM of its final selection by the directional
    Bregman divergence :math:`D_{dir}(W^{mm}, W_k) = 1 - \langle\nabla\psi(\bar W_k),
    \bar W^{mm}\rangle` (bars: unit ℓp norm). ``lps`` and ``steps`` pair each exponent with its
    budget; ``records`` checkpoints are kept per run. See chapter 9.

    ``trials`` datasets (seeds ``seed``, ``seed + 1``, ...; 100 as in the paper) train as one
    batch per exponent. For each run the selection is read off the last iterate, and
    the ℓq-AttSVM of that selection is solved for every q in ``lps`` (once per dataset and
    selection: runs that end on the same selection share them).
    """
    if len(lps) != len(steps):
        raise ValueError(f"steps: expected one budget per exponent in lps={lps}, got {steps}")
    dev = resolve_device(device)
    ex = mirror_random_data(seed=seed, trials=trials, device=dev)
    data, W0 = ex.data, ex.init["W"]
    numbers, arrays = {}, {"lps": np.array(lps, dtype=float)}
    viol, min_prob, margins, local, order = -math.inf, 1.0, math.inf, [], None
    monotone, fallbacks, lowest = True, 0, True
    solved = {}  # (trial, selection) -> its ℓq-AttSVMs, shared by the exponents' runs
    for j, (lp, K) in enumerate(zip(lps, steps)):
        run = train(data, param="W", method="md", lp=lp, lr=lr, steps=K, normalized=True,
                    eps=eps, init={"W": W0}, record_every=max(1, K // records),
                    progress=progress)
        Wk, ks = run.history["W"], run.history["step"].to(W0.dtype)  # (B, S, d, d), (S,)
        dual = metrics.lp_norm(Wk, lp, dims=2).pow(lp - 1)  # (B, S) = ||Theta(k)||_q
        bound = dual[:, :1] + lr * ks
        viol = max(viol, float(((dual - bound) / bound).max()))
        tag = {1.75: "p175", 2.0: "p2", 3.0: "p3"}.get(lp, f"p{lp:g}")
        numbers[f"min_max_prob_{tag}"] = float(run.history["min_max_prob"][:, -1].min())
        min_prob = min(min_prob, numbers[f"min_max_prob_{tag}"])
        alpha = selected_tokens(data, run.W)  # (B, n)
        Wmm, fb = lq_svms_once(data, alpha, lps, solved)  # (Q, B, d, d)
        fallbacks += fb
        D = bregman_direction(Wmm[:, :, None], Wk[None], lp)  # (Q, B, S)
        margins = min(margins, float(token_margins(data, Wmm[j], alpha).masked_fill(
            torch.nn.functional.one_hot(alpha, data.T).bool(), math.inf).amin()))
        local.append(locally_optimal_from(data, Wmm[j], alpha))
        numbers[f"local_opt_frac_{tag}"] = float(local[-1].double().mean())
        mean = D[j].mean(0)  # (S,)
        cks = [int(np.searchsorted(ks.cpu().numpy(), f * K)) for f in (.05, .1, .25, .5, 1.)]
        monotone &= bool((mean[cks].diff() < 0).all())
        numbers[f"ddir_{tag}"] = float(D[j, :, -1].mean())
        lowest &= int(D[:, :, -1].mean(1).argmin()) == j  # matched q = p ends lowest
        numbers[f"ddir_{tag}_median"] = float(D[j, :, -1].median())
        gq = run.history["grad_norm"][:, -1]  # (B,) the last gradient's Frobenius norm
        numbers[f"grad_final_{tag}"] = float(gq.median())
        if lp == 3.0:
            ratio = dual[:, -1] / bound[:, -1]
            numbers["norm_ratio_p3"] = float(ratio.median())
            numbers["norm_ratio_p3_mean"] = float(ratio.mean())
        if lp == 2.0:
            fro = att_svm(data, alpha=alpha, norm="fro")
            numbers["svm_p2_vs_fro"] = float(bregman_direction(fro, Wmm[j], 2.0).abs().max())
        if lp == 1.75 and 2.0 in lps:
            order = int(D[j, :, -1].mean() < D[list(lps).index(2.0), :, -1].mean())
        arrays.update({f"steps_{j}": ks, f"ddir_{j}": D, f"ddir_final_{j}": D[:, :, -1],
                       f"W_{j}": run.W, f"Wmm_{j}": Wmm[j], f"alpha_{j}": alpha,
                       f"dual_{j}": dual, f"bound_{j}": bound})
    local = torch.cat(local)
    numbers.update(norm_violation=viol, min_max_prob=min_prob, svm_min_margin=margins,
                   local_opt_frac=float(local.double().mean()), ddir_monotone=int(monotone),
                   matched_lowest=int(lowest),
                   svm_scs_fallbacks=fallbacks)
    if order is not None:
        numbers["order_175"] = order
    numbers.update(Numerics("exact", eps).numbers())  # attnlib's gradient, the step's ε
    for key in _CONV_KEYS:  # targets of exponents not run here: NaN (never met)
        numbers.setdefault(key, math.nan)
    return numbers, arrays


@experiment(
    "md_bias", paper=f"{PAPER} §3.3, §5.1 (re-simulation design)", chapter="09_mirror_descent",
    title="The implicit bias depends on p: matched vs mismatched ℓq-SVMs, and sparsity",
    plot=figures.plot_bias,
    seconds=1.6,  # measured 2026-11-29: CPU s, one process alone
    targets=[
        Target("diag_ratio_min", "each row of the D_dir matrix is smallest on its diagonal, "
               "by a factor (min over rows of off-diagonal / diagonal)", "≥ 2 (e.g. 3.1, 11.7, "
               "3.2)", 2.0, math.inf, "factor ≥ 2", "re-simulation",
               "each ℓq-SVM uses the ℓp run's own final selection"),
        Target("sparsity_ratio", "fraction of |W_jk| < 0.01·max|W|: p = 1.25 over p = 2 "
               "(final iterates)", "0.47 / 0.023 ≈ 20 (6 data sets)", 10.0, math.inf, "≥ 10×",
               "re-simulation",
               "≥ 10× is the re-simulation's own target. The design is its design (6 data "
               "sets, W(0) = 0.01·N(0, 1), 3,000 steps, threshold 0.01·max|W|); the data sets "
               "are the paper generator's seeds 1-6, not the re-simulation's draws. At p = 2 "
               "the fraction counts about 25 of 600 entries, so 6 data sets give a noisy "
               "ratio: over seeds 1-60 the fractions are 0.449 and 0.026 (ratio 17.2), and "
               "the ten blocks of 6 seeds give 10.6 (seeds 1-6, the lowest) to 26.4"),
        Target("sparsity_p125", "fraction of near-zero entries, p = 1.25 iterate",
               "0.47 ± 0.06", 0.3, 0.65, "±3 std", "re-simulation"),
        Target("svm_sparsity_ratio", "same fraction for the ℓp-SVM solutions: p = 1.25 over "
               "p = 2", "0.46 / 0.028 ≈ 16", 10.0, math.inf, "≥ 10×", "re-simulation"),
    ],
)
def bias(trials: int = 6, seed: int = 1, lps: tuple[float, ...] = (1.25, 2.0, 3.0),
         steps: int = 3000, lr: float = 0.1, init_scale: float = 0.01, eps: float = 0.0,
         device: str | None = "cpu"):
    """ℓp-MD for p = 1.25, 2, 3 from the small start W(0) = 0.01·N(0, 1), 3,000 normalised
    steps; divergence of each run's final iterate to the ℓq-SVM of its selection, every q.

    The normalised step uses ``eps`` = 0 by default (attnlib's exact gradient, every step of
    length η), not the official code's 2⁻⁵², with which the ℓ1.25 runs freeze once the
    gradient falls below it; the numbers ``numerics_*`` say so.

    Sparsity is the fraction of entries below 1% of the largest
    (:func:`attnlib.metrics.sparsity`), for the iterates and for the SVM solutions.
    See chapter 9.
    """
    if not {1.25, 2.0} <= set(lps):  # (the sparsity targets compare p = 1.25 with p = 2)
        raise ValueError(f"lps: expected exponents that include 1.25 and 2, got {lps}")
    dev = resolve_device(device)
    ex = mirror_random_data(seed=seed, trials=trials, device=dev)
    data, W0 = ex.data, init_scale * ex.init["W"]
    Q = len(lps)
    ddir = torch.zeros(Q, Q, dtype=W0.dtype)
    sp, sp_svm, rel, fallbacks = [], [], [], 0
    for j, lp in enumerate(lps):
        W = train(data, param="W", method="md", lp=lp, lr=lr, steps=steps, normalized=True,
                  eps=eps, init={"W": W0}, record_every=steps).W  # (B, d, d)
        alpha = selected_tokens(data, W)
        Wmm, fb = lq_svms(data, alpha, lps)  # (Q, B, d, d)
        fallbacks += fb
        ddir[j] = bregman_direction(Wmm, W[None], lp).mean(1).cpu()
        sp.append(sparsity(W, 0.01).mean())
        sp_svm.append(sparsity(Wmm[j], 0.01).mean())
        rel.append((W.abs() / W.abs().amax((-2, -1), keepdim=True)).flatten().cpu())
    eye = torch.eye(Q, dtype=torch.bool)
    off = ddir.masked_fill(eye, math.inf).amin(1) / ddir.diagonal()
    i1, i2 = list(lps).index(1.25), list(lps).index(2.0)
    numbers = dict(diag_ratio_min=float(off.min()),
                   sparsity_ratio=float(sp[i1] / sp[i2].clamp(min=1e-12)),
                   sparsity_p125=float(sp[i1]),
                   svm_sparsity_ratio=float(sp_svm[i1] / sp_svm[i2].clamp(min=1e-12)),
                   svm_scs_fallbacks=fallbacks)
    for j, lp in enumerate(lps):
        numbers[f"sparsity_p{lp:g}"] = float(sp[j])
        numbers[f"svm_sparsity_p{lp:g}"] = float(sp_svm[j])
    numbers.update(Numerics("exact", eps).numbers())
    return numbers, {"lps": np.array(lps, dtype=float), "ddir": ddir, "rel_abs": torch.stack(rel)}


@experiment(
    "md_unnormalized", paper=f"{PAPER} §4 (rate; re-simulation design)",
    chapter="09_mirror_descent",
    title="Constant-step ℓp-MD: the direction converges slowly, the norm grows like log k",
    plot=figures.plot_unnormalized,
    seconds=1.4,  # measured 2026-11-29: CPU s, one process alone
    targets=[
        Target("ddir_p2", "p = 2: D_dir to the ℓ2-SVM after 5,000 constant steps (mean)",
               "≈ 0.04", 0.02, 0.08, "within ×2", "re-simulation",
               "a re-simulation of the paper's setting gives about 0.04; the book accepts a "
               "factor of 2", when=lambda s: 2.0 in s["lps"], condition="lps include 2"),
        Target("ddir_p3", "p = 3: D_dir after 5,000 constant steps (mean)", "≈ 0.04", 0.02,
               0.08, "within ×2", "re-simulation",
               when=lambda s: 3.0 in s["lps"], condition="lps include 3"),
        Target("ddir_p1.25", "p = 1.25: D_dir after 5,000 constant steps (mean)", "≈ 0.14",
               0.07, 0.28, "within ×2", "re-simulation",
               when=lambda s: 1.25 in s["lps"], condition="lps include 1.25"),
        Target("norm_p2", "p = 2: ‖W(5000)‖_2 (mean)", "≈ 24", 12.0, 48.0, "within ×2",
               "re-simulation", when=lambda s: 2.0 in s["lps"], condition="lps include 2"),
    ],
)
def unnormalized(trials: int = 3, seed: int = 1, lps: tuple[float, ...] = (1.25, 2.0, 3.0),
                 steps: int = 5000, lr: float = 10.0, init_scale: float = 0.01, records: int = 60,
                 device: str | None = "cpu"):
    r"""Unnormalised ℓp-MD with constant η = 10 from W(0) = 0.01·N(0, 1).

    ``records`` log-spaced checkpoints of the divergence to the ℓp-SVM of the final selection
    and of :math:`\|W_k\|_p`. See chapter 9.
    """
    dev = resolve_device(device)
    ex = mirror_random_data(seed=seed, trials=trials, device=dev)
    data, W0 = ex.data, init_scale * ex.init["W"]
    rec = np.unique(np.geomspace(1, steps, records).astype(int))
    numbers, D_all, N_all = {}, [], []
    for lp in lps:
        run = train(data, param="W", method="md", lp=lp, lr=lr, steps=steps, normalized=False,
                    init={"W": W0}, record_every=1 if steps <= 2000 else 5)
        ks = run.history["step"].cpu().numpy()
        idx = torch.as_tensor(np.searchsorted(ks, rec))
        Wk = run.history["W"][:, idx]  # (B, R, d, d)
        Wmm = lq_svms(data, selected_tokens(data, run.W), (lp,))[0][0]
        D = bregman_direction(Wmm[:, None], Wk, lp)  # (B, R)
        D_all.append(D)
        N_all.append(metrics.lp_norm(Wk, lp, dims=2))
        numbers[f"ddir_p{lp:g}"] = float(D[:, -1].mean())
        numbers[f"norm_p{lp:g}"] = float(N_all[-1][:, -1].mean())
    numbers.update(Numerics("exact", 0.0).numbers())  # constant steps: no ε
    return numbers, {"lps": np.array(lps, dtype=float), "steps": ks[np.searchsorted(ks, rec)],
                     "ddir": torch.stack(D_all), "norm": torch.stack(N_all)}


# the other experiments of the paper (registered on import)
from .mirror_joint import joint  # noqa: E402,F401  (isort: skip)
from .mirror_digits import digits  # noqa: E402,F401
from .mirror_dual import dual as md_dual  # noqa: E402,F401
from .mirror_path import path  # noqa: E402,F401
from .mirror_regpath import lp_path  # noqa: E402,F401
from .mirror_text import sentences  # noqa: E402,F401
from .official_numerics import md_numerics, prompt_numerics  # noqa: E402,F401
