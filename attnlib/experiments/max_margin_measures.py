r"""The book's own computations on the prompt model of arXiv 2306.13596 (chapters 1-3).

Beside the paper's four figures (:mod:`attnlib.experiments.max_margin`), the book measures:

========================  ===============================================================
:func:`ray_losses`        chapter 1: the risk :math:`\mathcal L(R\,u)` along rays of p
``mm_ray_risk``           chapter 1: how close the risk gets to its infimum along two rays
``mm_regpath``            the regularisation path on E1-global (suggested check, R1)
``mm_local_certificate``  the README's certificate: GD ends at locally optimal selections
``mm_token_plane``        the six GD runs and the SVM rays behind the token-plane explorer
``mm_selection``          the selections of a 3-token input behind the selection explorer
========================  ===============================================================

Each registered function returns ``(numbers, arrays)`` as every experiment does; the explorers
of :mod:`attnlib.explorers.max_margin` draw from these arrays instead of training themselves.
"""

from __future__ import annotations

import math
from typing import Literal

import torch

from attnlib import data as _data
from attnlib import examples as _examples
from attnlib import models as _models
from attnlib._runtime import few_threads, resolve_device
from attnlib._validate import choice
from attnlib.figures.max_margin import plot_certificate, plot_regpath
from attnlib.metrics import correlation
from attnlib.optimality import enumerate_selections
from attnlib.svm import prompt_svm
from attnlib.tokens import (
    optimal_tokens,
    scores,
    selected_tokens,
    support_tokens,
)
from attnlib.train import regularization_path, train

from .official_numerics import Numerics
from .registry import Target, experiment

__all__ = ["PAPER", "SELECTION_POSITIONS", "TOKEN_EXAMPLES", "ray_losses"]

PAPER = "2306.13596"  # the arXiv id (as in attnlib.experiments.max_margin)


# ----------------------------------------------------------------------------- chapter 1
def ray_losses(example, directions, radii, loss: str = "logistic"):
    r"""The risk :math:`\mathcal L(R\,u)` along rays :math:`p = R u` of the prompt model.

    Parameters
    ----------
    example : attnlib.examples.Example
        A prompt-model example (``init["W"]`` is its fixed W).
    directions : tensor (k, d)
        Directions ``u`` (normalised here).
    radii : sequence of float (m,)
    loss : str

    Returns
    -------
    risk : tensor (k, m)
        :math:`\frac1n\sum_i \ell\big(Y_i\, v^\top X_i^\top \mathrm{softmax}(X_i W R u)\big)`.
    attention : tensor (k, m, n, T)

    See chapter 1: the risk falls toward :math:`\frac1n\sum_i\ell(\max_t\gamma_{it})` only along
    directions that select the optimal tokens.
    """
    d = example.data
    U = torch.as_tensor(directions, dtype=d.dtype, device=d.device)
    U = U / U.norm(dim=-1, keepdim=True)
    R = torch.as_tensor(radii, dtype=d.dtype, device=d.device)
    P = R[None, :, None] * U[:, None, :]  # (k, m, d)
    s = _models.softmax(_models.logits_prompt(d.X, example.init["W"], P))  # (k, m, n, T)
    return _models.risk(d.X, d.Y, s, d.v, loss=loss), s


@experiment(
    "mm_ray_risk", seconds=0.1, paper=f"{PAPER} Sec. 2 (no finite minimiser)",
    chapter="01_token_selection",
    title="The risk along rays of p: it falls to ℓ(max γ) only toward the optimal token",
    targets=[
        Target("risk_decreasing", "risk along the ray toward x1 keeps falling as ‖p‖ grows "
               "(along a hand-picked ray: a property of the model, not of training)",
               "decreasing", 1, 1, "shape", "paper", evidence="by construction"),
        Target("gap_inf_x1", "toward x1: |L(R u) − ℓ(γ_1)| at the largest R (the infimum, "
               "reached only in the limit)", "→ 0", 0.0, 1e-6, "≤ 1e-6", "paper"),
        Target("gap_inf_x2", "toward x2: |L(R u) − ℓ(γ_2)| at the largest R (a worse value; "
               "the limit of the softmax along a hand-picked ray)",
               "→ 0", 0.0, 1e-6, "≤ 1e-6", "paper", evidence="by construction"),
        Target("s1_Rmax", "toward x1: attention on x1 at the largest R (almost one-hot)",
               "→ 1", 0.9999, 1.0, "> 0.9999", "re-simulation"),
    ],
)
def ray_risk(radii: tuple[float, ...] = (0, 1, 2, 4, 8, 16, 32, 64),
             loss: Literal["logistic", "exp", "correlation"] = "logistic",
             device: str | None = "cpu"):
    r"""Chapter 1: :func:`ray_losses` on E1-global toward :math:`x_1 = (-0.1, 1)` and
    :math:`x_2 = (1, 0)`, and how close the risk gets to :math:`\ell(\gamma_1)`,
    :math:`\ell(\gamma_2)` (logistic: :math:`\ell(u) = \log(1 + e^{-u})`). See chapter 1.
    """
    ex = _examples.three_token_example("global", device=resolve_device(device))
    u = torch.tensor([[-0.1, 1.0, 0.0], [1.0, 0.0, 0.0]], dtype=ex.data.dtype,
                     device=ex.data.device)
    risk, att = ray_losses(ex, u, radii, loss=loss)  # (2, m), (2, m, 1, 3)
    gamma = scores(ex.data)[0]  # (1, 0.9, 0.9)
    inf = _models.loss_value(gamma[:2], loss)  # ℓ(γ_1), ℓ(γ_2)
    numbers = {"risk_decreasing": float(bool((risk[0, 1:].diff() < 0).all())),
               "gap_inf_x1": float((risk[0, -1] - inf[0]).abs()),
               "gap_inf_x2": float((risk[1, -1] - inf[1]).abs()),
               "s1_Rmax": float(att[0, -1, 0, 0])}
    arrays = {"radii": torch.as_tensor(radii, dtype=torch.float64), "directions": u,
              "risk": risk, "attention": att}
    return numbers, arrays


# ----------------------------------------------------------------------------- R1 check
@experiment(
    "mm_regpath", seconds=0.3, paper=f"{PAPER} R1 (suggested check)", chapter="02_att_svm",
    title="Regularisation path on the 3-token example (global scores)",
    plot=plot_regpath,
    targets=[
        Target("cos_Rmax", "cos(p̄(R), p^mm) at the largest R (16): the minimiser aligns with "
               "ATT-SVM",
               "> 0.99", 0.99, 1.0, "> 0.99", "suggested",
               "not in the official notebooks; the book computes p̄(R) by projected GD"),
        Target("cos_increasing", "cos(p̄(R), p^mm) increases with R ∈ {2, 4, 8, 16}",
               "increasing", 1, 1, "shape", "suggested"),
    ],
)
def regpath(radii: tuple[float, ...] = (2, 4, 8, 16), steps: int = 2000, lr: float = 0.1,
            device: str | None = "cpu"):
    r"""The regularisation path :math:`\bar p(R) = \arg\min_{\|p\|\le R}\mathcal L(p)` on E1-global.

    All radii run as one batch of :func:`attnlib.train.regularization_path`; the numbers are
    :math:`\cos(\bar p(R), p^{mm})` per radius. See chapter 2.
    """
    dev = resolve_device(device)
    ex = _examples.three_token_example("global", device=dev)
    W = ex.init["W"]
    path = regularization_path(ex.data, radii, param="p", steps=steps, lr=lr, init={"W": W})
    p_mm = prompt_svm(ex.data, W=W)
    cos = correlation(path.p, p_mm, dims=1)  # (R,)
    numbers = {f"cos_R{r:g}": float(c) for r, c in zip(radii, cos.tolist())}
    numbers["cos_Rmax"] = float(cos[-1])
    numbers["cos_increasing"] = float(bool((cos[1:] > cos[:-1]).all()))
    numbers["max_residual"] = float(path.residual.max())
    numbers.update(Numerics("exact", 0.0).numbers())  # projected steps, exact gradient
    arrays = {"radii": torch.tensor(radii, dtype=torch.float64), "cos": cos,
              "p": path.p, "loss": path.loss, "directions": path.p[:, :2] / path.p[:, :2].norm(
                  dim=-1, keepdim=True), "p_mm": p_mm[:2], "keys": ex.data.X[0, :, :2],
              "scores": scores(ex.data)[0]}
    return numbers, arrays


# ----------------------------------------------------------------------------- README certificate
@experiment(
    "mm_local_certificate", seconds=0.1, paper=f"{PAPER} README procedure",
    chapter="03_local_global",
    title="Certify GD's limit: every endpoint selects a locally optimal selection",
    plot=plot_certificate,
    targets=[
        Target("fraction_locally_optimal", "fraction of GD endpoints whose selection is locally "
               "optimal", "1 (README)", 1, 1, "exact", "official code",
               "the README describes this certificate; no official notebook implements it. "
               "The book runs it on a random instance (n=3, T=3, d=4) from random inits"),
        Target("all_locally_optimal_reached", "every locally optimal selection is reached by "
               "some of the 32 runs", "all", 1, 1, "exact", "re-simulation"),
        Target("median_cos_own_svm", "median cos(p(2000), p^mm of the run's own selection)",
               "> 0.999", 0.999, 1.0, "≥ 0.999", "re-simulation"),
    ],
)
def local_certificate(n: int = 3, T: int = 3, d: int = 4, seed: int = 0, trials: int = 32,
                      init_scale: float = 3.0, steps: int = 2000, lr: float = 0.1,
                      device: str | None = "cpu"):
    r"""The README's certificate of local optimality, at scale.

    On a random instance (prompt model, W = I), run normalised GD from ``trials`` random
    initialisations :math:`p(0)\sim\mathcal N(0, \sigma^2 I)` (one batched call), read each
    endpoint's selection :math:`\hat\alpha_i = \arg\max_t s_{it}`, and check it against the
    labels of all :math:`T^n` selections (:func:`attnlib.enumerate_selections`).
    See chapter 3.
    """
    dev = resolve_device(device)
    raw = _data.random_data(n, T, d, seed=seed, device=dev)
    data = _data.AttentionData(raw.X, raw.Y, v=raw.v)
    table = enumerate_selections(data, param="p")
    g = torch.Generator().manual_seed(int(seed))
    p0 = init_scale * torch.randn(trials, d, generator=g, dtype=torch.float64)
    run = train(data, param="p", lr=lr, steps=steps, init={"p": p0.to(dev, data.dtype)},
                record_every=max(steps // 20, 1))
    alpha_hat = selected_tokens(data.batched(trials), p=run.p)  # (trials, n)
    index = (alpha_hat.cpu() * (T ** torch.arange(n - 1, -1, -1))).sum(-1)  # row of the table
    reached = sorted(set(index.tolist()))
    p_mm = torch.full((len(table.alpha), d), math.nan, dtype=torch.float64)  # NaN: not solved
    for u in reached:  # one SVM per selection reached (at most T^n), not per run
        if bool(table.feasible[u]):
            p_mm[u] = prompt_svm(data, alpha=table.alpha[u]).cpu()
    own = p_mm[index]  # (trials, d): each run's own p^mm
    cos = correlation(run.p.cpu(), own, dims=1)
    lo = table.locally_optimal[index]
    n_lo_reached = sum(bool(table.locally_optimal[u]) for u in reached)
    numbers = {
        "fraction_locally_optimal": float(lo.double().mean()),
        "n_selections": float(len(table.alpha)), "n_feasible": float(table.feasible.sum()),
        "n_locally_optimal": float(table.locally_optimal.sum()),
        "n_reached": float(len(reached)),
        "n_locally_optimal_reached": float(n_lo_reached),
        "all_locally_optimal_reached": float(n_lo_reached == int(table.locally_optimal.sum())),
        "fraction_global": float(table.globally_optimal[index].double().mean()),
        "min_cos_own_svm": float(cos.min()), "median_cos_own_svm": float(cos.median()),
        # normalised steps with ε = 0 and the exact gradient: the fractions depend on ε
        **Numerics("exact", 0.0).numbers(),
    }
    arrays = {"alpha": table.alpha, "feasible": table.feasible,
              "locally_optimal": table.locally_optimal,
              "globally_optimal": table.globally_optimal, "endpoint_index": index,
              "endpoint_alpha": alpha_hat, "cos": cos, "p": run.p}
    return numbers, arrays


# ----------------------------------------------------------------------------- token plane
#: Prompt-model examples of the paper: name -> (constructor(device=None), description).
TOKEN_EXAMPLES = {
    "e1-global": (lambda device=None: _examples.three_token_example("global", device=device),
                  "one input, 3 tokens, scores (1, .9, .9): every run finds the optimal token"),
    "e1-local": (lambda device=None: _examples.three_token_example("local", device=device),
                 "one input, 3 tokens, scores (1, .9, 0): runs split between two selections"),
    "e2": (lambda device=None: _examples.multi_input_example(device=device),
           "3 inputs of 7 tokens, equal non-optimal scores"),
}
_ENUMERATE_UP_TO = 27  # label every selection when there are at most this many (T^n)


@experiment(
    "mm_token_plane", seconds=0.1, paper=f"{PAPER} Figs. 1-2 (explorer)", chapter="02_att_svm",
    title="Token plane: six GD runs of p and the max-margin rays of the locally optimal "
          "selections",
    targets=[
        Target("fraction_on_a_ray", "fraction of the six runs whose final selection is one of "
               "the drawn (locally optimal) selections", "1", 1, 1, "exact", "paper",
               "the paper proves it for plain GD with η ≤ 1/L (from a cone around p^mm(α)); "
               "the explorer runs the figures' normalised GD"),
    ],
)
def token_plane(example: Literal["e1-global", "e1-local", "e2"] = "e1-global", lr: float = 0.1,
                normalized: bool = True,
                loss: Literal["logistic", "exp", "correlation"] = "logistic", steps: int = 1000,
                record_every: int = 5,
                progress: bool = False, device: str | None = "cpu"):
    r"""The runs behind the token-plane explorer: :math:`p(k)` from the example's six inits.

    Trains :math:`p` of :math:`f(X) = v^\top X^\top\mathrm{softmax}(XWp)` from the example's
    six initialisations (the trials of one :func:`attnlib.train` call) and solves the p-SVM
    :math:`p^{mm}(\alpha)` of every locally optimal selection :math:`\alpha` (of the optimal
    tokens only when there are more than 27 selections). See chapters 1-3.

    Returns numbers (``fraction_on_a_ray``) and arrays: ``X`` keys (n, T, 2), ``gamma``
    scores (n, T), ``P`` paths (6, S, 2), ``steps`` (S,), ``prob`` the largest softmax
    probability (6, S), ``alphas`` (k, n), ``dirs`` (k, 2), ``support`` of the first (n, T),
    ``cos`` (k, 6, S) of every run with every ray, ``selected`` (6, n), ``optimal`` (n,),
    ``inits`` (6, 2).
    """
    example = choice("example", example, TOKEN_EXAMPLES)
    dev = resolve_device(device)
    ex = TOKEN_EXAMPLES[example][0](dev)
    W = ex.init["W"]
    settings = {**ex.settings, "lr": lr, "normalized": normalized, "loss": loss,
                "steps": steps, "record_every": record_every}
    with few_threads(device=dev):
        res = train(ex.data, **settings, init=ex.init, progress=progress)  # 6 runs = trials
        if ex.data.T ** ex.data.n <= _ENUMERATE_UP_TO:
            sel = enumerate_selections(ex.data, param="p", W=W)
            alphas = sel.alpha[sel.locally_optimal]
        else:
            alphas = optimal_tokens(ex.data)[None]
        p_mm = torch.stack([prompt_svm(ex.data, alpha=a, W=W) for a in alphas])  # (k, d)
        z = p_mm[0].expand(ex.data.n, -1)  # the prompt model: every query is p
        support = support_tokens(ex.data.X, W, alphas[0], z=z)
    P = res.history["p"][..., :2]  # (6, S, 2): the key plane (W = diag(1, 1, 0))
    dirs = p_mm[:, :2]
    selected = selected_tokens(ex.data.batched(P.shape[0]), W, p=res.p)  # (6, n)
    on_ray = (selected[:, None, :] == alphas[None].to(selected.device)).all(-1).any(-1)
    numbers = {"fraction_on_a_ray": float(on_ray.double().mean()),
               **Numerics("exact", float(ex.settings.get("eps", 0.0)) if normalized else 0.0)
               .numbers()}
    arrays = {"X": ex.data.X[..., :2], "gamma": scores(ex.data), "P": P,
              "steps": res.history["step"], "prob": res.history["max_prob"],
              "alphas": alphas, "dirs": dirs, "support": support,
              "cos": correlation(P[None], dirs[:, None, None, :], dims=1),  # (k, 6, S)
              "selected": selected, "optimal": optimal_tokens(ex.data),
              "inits": ex.init["p"][:, :2]}
    return numbers, arrays


# ----------------------------------------------------------------------------- selection
#: Positions of :math:`x_3` in the selection explorer (the last: between x1 and x2).
SELECTION_POSITIONS = {"(0, 0)": (0.0, 0.0), "(0.6, 0.6)": (0.6, 0.6),
                       "(-0.6, -0.4)": (-0.6, -0.4), "(0.4, -0.8)": (0.4, -0.8),
                       "(0.45, 0.5)": (0.45, 0.5)}


@experiment(
    "mm_selection", seconds=0.1, paper=f"{PAPER} local optimality (explorer)",
    chapter="03_local_global",
    title="Every selection of the 3-token input, x3 moved: feasible, locally optimal, its SVM",
    targets=[
        Target("rule_agrees", "the labels follow the rule: α is locally optimal iff its SVM "
               "is feasible and every support token scores strictly below x_α", "always", 1, 1,
               "exact", "paper", "the rule recomputed from the support tokens and scores: the "
               "same definition the labels use, a check of the code",
               evidence="by construction"),
    ],
)
def selection(position: Literal["(0, 0)", "(0.6, 0.6)", "(-0.6, -0.4)", "(0.4, -0.8)",
                                "(0.45, 0.5)"] = "(0, 0)",
              score: float = 0.0, device: str | None = "cpu"):
    r"""The three selections of one 3-token input with :math:`x_3` at ``position``.

    :math:`x_1 = (-0.1, 1)` (score 1) and :math:`x_2 = (1, 0)` (score 0.9) as in E1, and
    :math:`x_3` at a position of :data:`SELECTION_POSITIONS` with score ``score``; W =
    diag(1, 1, 0). For every selection :math:`\alpha`: feasible, locally optimal, globally
    optimal, its p-SVM :math:`p^{mm}(\alpha)` and support tokens :math:`\mathcal T(\alpha)`.
    See chapter 3.

    Returns numbers (``rule_agrees``, ``n_locally_optimal``) and arrays: ``X`` (1, 3, 2),
    ``gamma`` (1, 3), ``alpha`` (3,), ``feasible``, ``locally_optimal``, ``globally_optimal``
    (3,), ``p_mm`` (3, 2) (NaN when infeasible), ``support`` (3, 1, 3).
    """
    position = choice("position", position, SELECTION_POSITIONS)
    dev = resolve_device(device)
    x3 = SELECTION_POSITIONS[position]
    f64 = dict(dtype=torch.float64, device=dev)
    X = torch.tensor([[[-0.1, 1.0, 1.0], [1.0, 0.0, 0.9], [x3[0], x3[1], float(score)]]], **f64)
    data = _data.AttentionData(X, torch.ones(1, **f64), v=torch.tensor([0.0, 0.0, 1.0], **f64))
    W = torch.diag(torch.tensor([1.0, 1.0, 0.0], **f64))
    T = X.shape[1]
    p_mm = torch.full((T, 2), math.nan, **f64)
    support = torch.zeros(T, 1, T, dtype=torch.bool, device=dev)
    with few_threads(device=dev):
        sel = enumerate_selections(data, param="p", W=W)
        for u in torch.nonzero(sel.feasible).flatten().tolist():  # at most 3 small SVMs
            p = prompt_svm(data, alpha=sel.alpha[u], W=W)
            p_mm[u] = p[:2]
            support[u] = support_tokens(X, W, sel.alpha[u], z=p[None])
    gamma = scores(data)  # (1, T)
    chosen = gamma[0, sel.alpha[:, 0]]  # (T,): score of the selected token
    below = torch.where(support[:, 0], gamma[0][None] < chosen[:, None] - 1e-10, True).all(-1)
    rule = sel.feasible & below
    numbers = {"rule_agrees": float(torch.equal(rule, sel.locally_optimal)),
               "n_locally_optimal": float(sel.locally_optimal.sum())}
    arrays = {"X": X[..., :2], "gamma": gamma, "alpha": sel.alpha[:, 0],
              "feasible": sel.feasible, "locally_optimal": sel.locally_optimal,
              "globally_optimal": sel.globally_optimal, "p_mm": p_mm, "support": support}
    return numbers, arrays
