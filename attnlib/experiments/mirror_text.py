r"""The mechanism behind the mirror-descent paper's real-data claim, on sentences of real words.

``md_text`` (chapter 10): the paper (arXiv 2410.14581) reports that ℓ1.1 mirror descent puts
more attention on the designated sentiment word of probe sentences than gradient descent
(normalised attention 0.4387 against 0.3122). Here every sentence of real words
(:func:`attnlib.text.sentiment_sentences`: the VADER lexicon's human ratings) has one planted
strong sentiment word, the globally optimal token, and three weaker words of the opposite
polarity, so uniform attention misclassifies and the classifier must select the planted word.
The one-layer classifier :math:`f(X_i) = v^\top X_i^\top\mathrm{softmax}(X_i W z_i)` trains W
only (v fixed, the theory's setting) with ℓ1.1-MD, GD (ℓ2), ℓ3-MD and Adam,
:math:`W \leftarrow \nabla\psi^{-1}(\nabla\psi(W) - \eta\nabla\mathcal L)` with
:math:`\nabla\psi(W) = \mathrm{sign}(W)|W|^{p-1}`, with normalised steps
(:math:`\eta/\|\nabla\mathcal L\|_q`, the paper's synthetic rule, so that the training
sentences are separated within the budget); learning rate and checkpoint are chosen on the
validation split among the checkpoints that separate the training sentences
(:func:`attnlib.realdata.select`). ``md_text_svm`` measures the mechanism on a small training
set: the distance of each trained direction to the ℓq-AttSVM of its selected tokens. Measured:
attention mass on the planted word, top-1 hit rate, near-zero entries of W, train and test
accuracy. Figures in
:mod:`attnlib.figures.mirror_text`. See chapter 10.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch

from attnlib import realdata, text
from attnlib._runtime import resolve_device
from attnlib.figures import mirror_text as figures

from .registry import Target, experiment, not_run

PAPER = "2410.14581"

_IMDB = ("the exact replica trains 3- to 6-block transformers of width 384 on the 25,000 IMDb "
         "reviews cut at 512 distilbert word pieces; the reviews are a download that the "
         "book, built offline, does not make, and a run is a GPU job (about half an hour per "
         "epoch on a CPU)")
not_run("md_imdb_accuracy", paper=f"{PAPER} §5.3, IMDb table",
        what="max test accuracy, ℓ1.1-MD vs GD, on IMDb itself (3 blocks, 10 runs each)",
        paper_value="83.47 ± 0.09 vs 81.66 ± 0.09 (+1.5 to +2.3 points over 3, 4, 6 blocks)",
        reason=_IMDB + "; md_reviews runs the same model, miniature, on 10,000 rated "
               "movie-review sentences that ship with the book, and its accuracy, "
               "histogram and attention rows are live",
        chapter="10_real_data")
not_run("md_cifar_vit", paper=f"{PAPER} §5.4, CIFAR-10 ViT",
        what="test accuracy after 1,000 epochs, ℓ1.1-MD vs Adam (one run each)",
        paper_value="≈ 0.81 vs ≈ 0.81-0.82 (read off the figure)",
        reason="a 6-block vision transformer trained for 1,000 epochs: a GPU job (CIFAR-10 "
               "is also a download)",
        chapter="10_real_data")

#: key -> (realdata.fit optimizer, exponent p); "md3" is ℓ3 mirror descent
TEXT_OPTIMIZERS = {"md": ("md", 1.1), "gd": ("gd", 2.0), "md3": ("md", 3.0),
                   "adam": ("adam", 2.0)}
SHOWN = 8  # test sentences whose attention is kept for the figures and the explorer


def _measure(run, li, ck, data, rel_te):
    """Metrics of one optimizer's validation-selected models (per seed) and its curves."""
    b = torch.arange(ck.shape[0], device=ck.device)
    W = run["W"][li, ck, b]  # (S, d, d)
    Xtr, Ytr, ztr = data.part("train")
    Xte, _, zte = data.part("test")

    def train_acc(W):
        return ((text.outputs(W, data.v, Xtr, ztr) > 0) == (Ytr > 0)).double().mean(-1)

    s = text.attention(W, Xte, zte)  # (S, N, T)
    mass, hit = text.relevant_attention(s, rel_te)
    C, S = run["W"].shape[1:3]
    Wc = run["W"][li].flatten(0, 1)  # (C*S, d, d): every checkpoint, every seed
    curve_mass = text.relevant_attention(text.attention(Wc, Xte, zte), rel_te)[0].view(C, S)
    r = int(data.z[0, 0] == 1 and bool((data.X[:, 0, 0] == 1).all()))  # 1 with a [CLS] query
    # with a [CLS] query only W's [CLS] column meets a gradient: count its entries
    frac, ratio = realdata.weight_sparsity(W[..., :1] if r else W)
    A = W.abs()
    rating_share = A[:, r, 0] / (A[..., :1] if r else A).sum((-2, -1))  # share of ||W||_1
    return dict(train_acc=train_acc(W), final_train_acc=train_acc(run["W"][li, -1]),
                val_acc=run["val_acc"][li, ck, b],
                test_acc=run["test_acc"][li, ck, b], mass=mass, hit=hit, sparsity=frac,
                l1_over_fro=ratio, rating_share=rating_share, step=run["step"][ck].double(), W=W,
                shown=s[:, :SHOWN], curve_mass=curve_mass, curve_step=run["step"],
                curve_val_acc=run["val_acc"][li], curve_train_loss=run["train_loss"][li])


@experiment(
    "md_text", paper=f"{PAPER} §5.3 attention maps (claim), on planted keywords",
    chapter="10_real_data",
    title="ℓ1.1-MD vs GD vs ℓ3-MD vs Adam: attention on a planted sentiment word (real words)",
    plot=figures.plot_text,
    seconds=9.3,  # measured 2026-11-29: CPU s, one process alone
    targets=[
        Target("separated", "every ℓ1.1-MD, GD, ℓ3-MD and Adam model separates its training "
               "sentences at the chosen checkpoint (min train accuracy)",
               "trained to separation (the theory's regime; IMDb runs stop at 99.5%)",
               1.0, 1.0, "= 1", "suggested",
               "the checkpoint is chosen on validation among those that separate the training "
               "sentences, so this checks only that some checkpoint of every model separates "
               "within the step budget: the regime of the comparison, not a finding",
               evidence="regression guard",
               revisions=("≥ 0.97 -> = 1: set after the first results, together with the "
                          "rule that picks the checkpoint among the separating ones",)),
        Target("mass_seeds", "seeds where ℓ1.1-MD puts more test attention on the planted "
               "word than GD", "≥ 4 of 5 (R2)", 4, math.inf, "≥ 4/5", "suggested",
               "the paper: 0.4387 vs 0.3122 (normalised, 40 probe sentences, one model each)"),
        Target("mass_diff", "mean attention on the planted word, ℓ1.1-MD minus GD",
               "0.4387 − 0.3122 = 0.13 (min-max normalised)", 0.0, math.inf, "> 0",
               "suggested", "raw softmax mass here; the paper min-max normalises per sentence"),
        Target("hit_diff", "top-1 hit rate of the planted word, ℓ1.1-MD minus GD",
               "more often on the optimal token (claim)", 0.0, math.inf, "≥ 0", "suggested"),
        Target("sparsity_ratio", "near-zero entries of W (|W_jk| < 1e-3·max): ℓ1.1-MD over GD",
               "sparser (IMDb histograms)", 3.0, math.inf, "≥ 3×", "suggested"),
        Target("acc_diff", "test accuracy, ℓ1.1-MD minus GD (points, means over seeds)",
               "+1.5 to +2.3 (IMDb)", 1.5, math.inf, "≥ +1.5", "paper",
               "learning rate and checkpoint chosen on validation (the paper: max over epochs)",
               revisions=("≥ −1 -> ≥ +1.5: the paper's gain is +1.5 to +2.3 points; the old "
                          "bound was the book's own and counted a miss as met",)),
    ],
)
def sentences(steps: int = 1200, eval_every: int = 50, seeds: int = 5, n: int = 1000,
              T: int = 12, dim: int = 64, distractors: int = 3,
              query: Literal["mean", "cls"] = "cls",
              data_seed: int = 0, head_scale: float = 4.0, init_scale: float = 0.1,
              lr_md: tuple[float, ...] = (0.003, 0.01, 0.03),
              lr_gd: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0),
              lr_md3: tuple[float, ...] = (10.0, 30.0, 100.0),
              lr_adam: tuple[float, ...] = (0.1, 0.3, 1.0), progress: bool = False,
              device: str | None = "cpu"):
    """ℓ1.1-MD, GD, ℓ3-MD and Adam on the planted-sentiment sentences, ``seeds`` inits each.

    One batched :func:`attnlib.realdata.fit` per optimizer (learning rates × seeds), W only
    (the fixed head ``data.v``); :func:`attnlib.realdata.select` picks the learning rate and
    each seed's checkpoint on validation. See chapter 10, *Mirror descent on real data*.
    """
    data = text.sentiment_sentences(n=n, T=T, dim=dim, distractors=distractors, query=query,
                                    head_scale=head_scale, seed=data_seed,
                                    device=resolve_device(device))
    rel_te = data.relevant[data.index["test"]]
    lrs = {"md": lr_md, "gd": lr_gd, "md3": lr_md3, "adam": lr_adam}
    out = {}
    for key, (opt, lp) in TEXT_OPTIMIZERS.items():
        run = realdata.fit(data, opt, lrs[key], lp=lp, steps=steps, eval_every=eval_every,
                           seeds=tuple(range(seeds)), init_scale=init_scale,
                           progress=progress, v=data.v, normalized=opt != "adam")
        # the regime of the theory: only checkpoints that separate the training sentences
        li, ck = realdata.select(run["val_acc"], run["val_loss"], run["train_acc"] == 1)
        out[key] = _measure(run, li, ck, data, rel_te) | {"lr": float(lrs[key][li])}
    numbers, arrays = {}, {}
    for k, r in out.items():
        for m in ("train_acc", "final_train_acc", "val_acc", "test_acc", "mass", "hit",
                  "sparsity", "l1_over_fro", "rating_share", "step"):
            numbers[f"{k}_{m}"] = float(r[m].double().mean())
            numbers[f"{k}_{m}_std"] = float(r[m].double().std()) if seeds > 1 else 0.0
            arrays[f"{k}_{m}"] = r[m]
        numbers[f"{k}_lr"] = r["lr"]
        A = r["W"].abs()[..., :1] if query == "cls" else r["W"].abs()  # the trained entries
        arrays[f"rel_abs_{k}"] = (A / A.amax((-2, -1), keepdim=True)).flatten()
        arrays[f"W_{k}"] = r["W"]
        arrays[f"attention_{k}"] = r["shown"]  # (S, SHOWN, T)
        for c in ("curve_mass", "curve_val_acc", "curve_train_loss"):  # (C, S) each
            arrays[f"{c}_{k}"] = r[c]
    test = data.index["test"][:SHOWN]
    arrays.update(curve_step=out["md"]["curve_step"], words=data.words[test],
                  relevant=data.relevant[test], distractor=data.distractor[test],
                  label=data.Y[test], vocab=np.array(data.vocab))
    md, gd = out["md"], out["gd"]
    numbers.update(
        separated=float(torch.cat([out[k]["train_acc"] for k in TEXT_OPTIMIZERS]).min()),
        mass_seeds=int((md["mass"] > gd["mass"]).sum()),
        mass_diff=float(md["mass"].mean() - gd["mass"].mean()),
        hit_diff=float(md["hit"].mean() - gd["hit"].mean()),
        sparsity_ratio=float(md["sparsity"].mean() / gd["sparsity"].mean().clamp(min=1e-12)),
        acc_diff=100 * float(md["test_acc"].mean() - gd["test_acc"].mean()),
        uniform=1.0 / data.T)
    return numbers, arrays



SVM_PS = (1.1, 2.0, 3.0)


@experiment(
    "md_text_svm", paper=f"{PAPER} Thm (ℓp-AttGD → ℓp-AttSVM), on real words",
    chapter="10_real_data",
    title="The mechanism on real words: the trained direction against the ℓp-AttSVM of the "
          "selected tokens",
    seconds=4.1,  # measured 2026-11-29: CPU s, one process alone
    targets=[
        Target("svm_solved", "ℓq-AttSVMs of the selected tokens solved and certified (of "
               "3 p × seeds × 3 q)", "feasible (theory's assumption)", 1.0, 1.0, "all",
               "suggested", "a certified answer or a Farkas certificate of infeasibility"),
        Target("svm_diag_ratio", "for every p: nearest other ℓq-SVM over its own ℓp-SVM "
               "(mean D_dir over seeds; the smallest of the three ratios)",
               "own SVM nearest, by ≥ 2×", 2.0, math.inf, "≥ 2", "re-simulation",
               "a re-simulation on synthetic data (chapter 9) gives ratios 3.5 to 12"),
        Target("svm_ddir_p2", "GD: D_dir to its own ℓ2-AttSVM (mean over seeds)",
               "≤ 0.015 (2,000 steps)", 0.0, 0.015, "≤ 0.015", "re-simulation"),
        Target("svm_equal_eta_ratio", "at equal normalised steps (η = lr_gd, ε = 0): GD's "
               "D_dir to its ℓ2-AttSVM over ℓ1.1-MD's D_dir to its ℓ1.1-AttSVM (means over "
               "seeds)", "ℓ1.1 no farther from its SVM than GD (no rate in p is stated)", 2.0,
               math.inf, "≥ 2", "re-simulation", "an independent re-run measured 0.0011, "
               "0.0016, 0.0007 (ℓ1.1, 3 seeds) against GD's 0.0078: a ratio near 7. Measured "
               "with the exact logit gradient (attnlib.train), both runs from the same W0: "
               "the first run of this target, with the autograd trainer of the table, froze "
               "ℓ1.1 at D_dir ≈ 0.39 (its softmax saturates, |W| ≈ 1e5 by step 1,000, and "
               "the rounded gradient is exactly 0); both numbers are reported"),
    ],
)
def sentences_svm(steps: int = 3000, seeds: int = 3, n: int = 48, T: int = 8, dim: int = 12,
                  distractors: int = 3, data_seed: int = 0, head_scale: float = 4.0,
                  init_scale: float = 0.1, lr_md: float = 0.001, lr_gd: float = 0.1,
                  lr_md3: float = 3.0, progress: bool = False):
    r"""ℓ1.1-MD, GD and ℓ3-MD on a small planted-word training set, then the ℓq-AttSVM of the
    tokens each run selects, :math:`\alpha_i = \arg\max_t s_{it}`, for q ∈ {1.1, 2, 3}.

    Normalised steps, W only (v fixed), float64; the SVMs are :func:`attnlib.svm.att_svm`
    (certified). Measured: :math:`D_{dir}(W^{mm}_q, W_p)`
    (:func:`attnlib.metrics.bregman_direction`, the SVM first), the share of selections on
    the planted word, train accuracy; and, to separate the step size from p, ℓ1.1-MD once more
    with GD's step ``lr_gd`` (``ddir_md_equal``, against its ℓ1.1-AttSVM). Small on purpose:
    the SVM of the main experiment (500 sentences × 11 constraints on 64² unknowns) is beyond
    the cvxpy solve path (its parametrised compile alone needs tens of GB). See chapter 10.
    """
    from attnlib.metrics import bregman_direction
    from attnlib.svm import InfeasibleError, UncertifiedError, att_svm

    data = text.sentiment_sentences(n=n, T=T, dim=dim, distractors=distractors,
                                    head_scale=head_scale, seed=data_seed, dtype=torch.float64)
    X, _, z = data.part("train")
    rel = data.relevant[data.index["train"]]
    lrs = {1.1: lr_md, 2.0: lr_gd, 3.0: lr_md3}
    S = int(seeds)
    svms = {}  # (selection, q) -> the ℓq-AttSVM (or None: infeasible, uncertified), solved once

    def svm(a, q):
        key = (a.cpu().numpy().tobytes(), q)
        if key not in svms:
            try:
                svms[key] = att_svm(X, z, a, norm=q)
            except (InfeasibleError, UncertifiedError):
                svms[key] = None
        return svms[key]

    # the three p at their own steps, one batched computation (a parameter group per p; p = 2
    # is gradient descent)
    pairs = list(dict.fromkeys((p, lrs[p]) for p in SVM_PS))
    run = realdata.fit(data, "md", [lr for _, lr in pairs], lp=[p for p, _ in pairs],
                       steps=steps, eval_every=steps, seeds=tuple(range(S)),
                       init_scale=init_scale, progress=progress, v=data.v, normalized=True)
    runs = {pl: run["W"][g, -1] for g, pl in enumerate(pairs)}  # (p, lr) -> final W (S, d, d)
    D = torch.full((len(SVM_PS), S, len(SVM_PS)), math.nan, dtype=torch.float64)
    numbers, arrays = {}, {}
    solved = 0
    for i, p in enumerate(SVM_PS):
        W = runs[p, lrs[p]]  # (S, d, d)
        s = text.attention(W, X, z)
        alpha = s.argmax(-1)  # (S, n): the selected tokens
        key = {1.1: "md", 2.0: "gd", 3.0: "md3"}[p]
        arrays[f"{key}_train_acc"] = run["train_acc"][pairs.index((p, lrs[p])), -1]
        arrays[f"{key}_planted"] = (alpha == rel).double().mean(-1)
        arrays[f"{key}_max_attention"] = s.amax(-1).min(-1).values
        for b in range(S):
            for j, q in enumerate(SVM_PS):
                Wm = svm(alpha[b], q)
                if Wm is None:
                    continue
                solved += 1
                D[i, b, j] = bregman_direction(Wm, W[b], q)
        for m in ("train_acc", "planted", "max_attention"):
            numbers[f"{key}_{m}"] = float(arrays[f"{key}_{m}"].mean())
            numbers[f"{key}_{m}_min"] = float(arrays[f"{key}_{m}"].min())
    Dm = D.mean(1)  # (p, q)
    ratios = [float(torch.cat([Dm[i, :i], Dm[i, i + 1:]]).min() / Dm[i, i])
              for i in range(len(SVM_PS))]
    for i, kp in enumerate(("md", "gd", "md3")):
        for j, kq in enumerate(("q1.1", "q2", "q3")):
            numbers[f"ddir_{kp}_{kq}"] = float(Dm[i, j])
        numbers[f"diag_ratio_{kp}"] = ratios[i]
    # ℓ1.1-MD and GD at the same normalised step lr_gd, ε = 0, from the same W0: is it the
    # step size or p that keeps ℓ1.1 farther from its SVM? Twice: with the trainer of the runs
    # above (autograd) and with attnlib.train's exact logit gradient, which loses no term when
    # the selected token's attention rounds to 1 (chapter 9, the three regimes).
    from attnlib.data import AttentionData
    from attnlib.train import train

    W0 = run["W"][0, 0]  # (S, d, d): every run above starts here
    eq = {}
    for p, tag in ((1.1, "md"), (2.0, "gd")):
        if (p, lr_gd) not in runs:  # GD at lr_gd is the run above: not trained twice
            # ℓ1.1 at GD's step trains alone: its softmax saturates and its end point depends
            # on the rounding of every step (its gradient rounds to exactly 0), so it is not
            # batched with runs whose shapes would change that rounding
            runs[p, lr_gd] = realdata.fit(
                data, "md" if p != 2 else "gd", (lr_gd,), lp=p, steps=steps, eval_every=steps,
                seeds=tuple(range(S)), init_scale=init_scale, progress=progress, v=data.v,
                normalized=True)["W"][0, -1]
        auto = runs[p, lr_gd]
        exact = train(AttentionData(X, data.part("train")[1], z, v=data.v), param="W",
                      method="md" if p != 2 else "gd", lr=lr_gd, steps=steps, normalized=True,
                      lp=p, eps=0.0, init={"W": W0}, record_every=steps).W
        for kind, W in (("autograd", auto), ("exact", exact)):
            alpha = text.attention(W, X, z).argmax(-1)
            d = torch.full((S,), math.nan, dtype=torch.float64)
            for b in range(S):
                Wm = svm(alpha[b], p)
                if Wm is not None:
                    d[b] = bregman_direction(Wm, W[b], p)
            eq[f"{tag}_{kind}"] = d
    numbers.update(svm_solved=solved / D.numel(), svm_diag_ratio=min(ratios),
                   svm_ddir_p2=float(Dm[1, 1]), n_train=len(rel),
                   ddir_md_equal=float(eq["md_exact"].mean()),
                   ddir_md_equal_max=float(eq["md_exact"].max()),
                   ddir_gd_equal=float(eq["gd_exact"].mean()),
                   ddir_md_equal_autograd=float(eq["md_autograd"].mean()),
                   ddir_gd_equal_autograd=float(eq["gd_autograd"].mean()),
                   svm_equal_eta_ratio=float(eq["gd_exact"].mean() / eq["md_exact"].mean()))
    arrays["ddir"] = D
    arrays.update({f"ddir_equal_{k}": v for k, v in eq.items()})
    return numbers, arrays


# the real-review experiment registers with this module (chapter 10)
from .mirror_reviews import real_reviews  # noqa: E402,F401
