"""Chapter 7 of "Transformers as SVMs" (arXiv 2308.16898): nonlinear heads.

Two registered experiments:
``tf_multi_token`` (E4), a ReLU head whose GD keeps several tokens selected, against the
generalised SVM equivalence :func:`attnlib.svm.svm_equivalence`; ``tf_lambda_head``, the
book's designed λ-penalty head, where the best attention keeps exactly two tokens.
Computation and declared targets only; the figures are in ``attnlib.figures.tf_svm_heads``.
Part of each comparison is an identity (``W_fin`` is the projection of the final iterate on
``S_fin``, so the fitted equivalence beats ``W_dir``): those targets say
``evidence="by construction"``, and the informative parts are checked on their own
(:func:`fin_rows`, :func:`project_fin`). See chapter 7.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .. import models as M
from .._runtime import few_threads
from .._validate import to_numpy
from ..data import AttentionData
from ..examples import EPS, lambda_head_example
from ..figures.tf_svm_heads import plot_lambda, plot_multi
from ..metrics import correlation
from ..svm import Equivalence, InfeasibleError, att_svm, svm_equivalence
from ..tokens import attention_logits, cleanly_masked, selected_sets
from ..train import train
from .multi_token import chunk_bounds, map_chunks, relu_candidates, train_relu_candidates
from .registry import Target, experiment

PAPER = "2308.16898"

# ============================================================================ E4: ReLU head
_E4_FIG = {4: (0.035, 0.075, 0.16), 6: (0.017, 0.045, 0.15), 8: (0.011, 0.015, 0.14),
           10: (0.0055, 0.0085, 0.12)}  # stored figure: final mean 1 - corr (SVMeq, dir, 1tok)
_E4_PRIOR_RATE = {4: 0.2, 6: 0.1, 8: 0.04, 10: 0.017}  # re-simulation's acceptance rates
_E4_RESIM = {4: (40, 193), 6: (40, 378), 8: (40, 928), 10: (40, 2301)}  # kept / tried


def wilson(k: float, m: float, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval (95% by default) of a proportion ``k / m``."""
    if m <= 0:
        return math.nan, math.nan
    p = k / m
    mid, half = p + z * z / (2 * m), z * math.sqrt(p * (1 - p) / m + z * z / (4 * m * m))
    return max(0.0, (mid - half) / (1 + z * z / m)), min(1.0, (mid + half) / (1 + z * z / m))


def fin_rows(X: torch.Tensor, z: torch.Tensor, O: torch.Tensor) -> torch.Tensor:
    r"""The matrices :math:`(x_{it} - x_{ir_i}) z_i^\top`, :math:`t \in \mathcal O_i`
    (:math:`r_i` the first member of :math:`\mathcal O_i`), flattened: a spanning set of
    :math:`\mathcal S_{fin}` for one instance, (k, d²) (k = 0 if every set is a singleton)."""
    ref = O.to(torch.int64).argmax(-1)  # (n,)
    other = torch.arange(O.shape[-1], device=O.device) != ref[:, None]
    ii, tt = torch.nonzero(O & other).T
    D = X[ii, tt] - X[ii, ref[ii]]
    return torch.einsum("kj,kl->kjl", D, z[ii]).reshape(len(ii), X.shape[-1] * z.shape[-1])


def project_fin(W: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    """Orthogonal projection of ``W`` (..., d, d) onto the span of the rows of ``C``."""
    if len(C) == 0:
        return torch.zeros_like(W)
    w = W.reshape(*W.shape[:-2], -1)
    return ((w @ torch.linalg.pinv(C)) @ C).reshape(W.shape)


def mean_z(errors: torch.Tensor, paper: float | None) -> float:
    r"""Two-sample z statistic of a mean over runs against a paper's mean over as many runs
    of the same distribution: :math:`z = (\bar e - e_{\rm paper}) / (\sqrt2\,
    \mathrm{sd}(e)/\sqrt{m})` (the paper's standard error taken equal to the book's).
    NaN without a paper value or with fewer than two runs."""
    e = torch.as_tensor(errors, dtype=torch.float64).reshape(-1)
    if paper is None or len(e) < 2:
        return math.nan
    se = float(e.std()) / math.sqrt(len(e))
    return (float(e.mean()) - paper) / (math.sqrt(2.0) * se) if se > 0 else math.nan


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1]) if len(x) > 2 else math.nan


def _subset(data: AttentionData, idx: torch.Tensor) -> AttentionData:
    """The trials ``idx`` of batched data."""
    return AttentionData(data.X[idx], data.Y[idx], data.z[idx], data.v[idx])


@experiment(
    "tf_multi_token", paper=f"{PAPER} Fig. 5 (E4, multi_token_converge.ipynb)",
    chapter="07_nonlinear_heads",
    title="ReLU head: several selected tokens, GD direction vs the generalised SVM equivalence",
    plot=plot_multi,
    seconds=25,  # measured 2026-11-29: CPU s, one process alone
    targets=[
        Target("eq_le_dir", "SVM-eq ≤ W^dir in final 1 − corr, every run: W^eq is the "
               "projection of W(2001) on S_fin ⊕ span(W^dir), which contains W^dir", "holds", 1,
               1, "identity", "official code", "the first half of the paper's ordering",
               evidence="by construction"),
        Target("dir_lt_one", "final mean 1 − corr: W^dir < 1-token SVM at every d", "holds", 1,
               1, "the ordering must hold", "official code"),
        Target("perp_median", "median 1 − corr(W − W^fin, W^dir) at the end, all d pooled: the "
               "diverging part of W against W^dir (no fitted scale)", "≈ SVM-eq's 2–3e-3", 0.0,
               1e-2, "≤ 1e-2", "suggested", "the informative half of the SVM-eq error"),
        *(Target(f"rate_d{d}", f"acceptance rate (kept / candidates up to the quota), d = {d}",
                 f"{k / m:.3f} ({k}/{m})", *wilson(k, m), "re-simulation's 95% Wilson interval",
                 "re-simulation", "candidates: seeds with some Y_i = −1 (the official loop "
                 "skips the others); the book's own interval is printed beside it")
          for d, (k, m) in _E4_RESIM.items()),
        Target("multi_share_pos", "share of inputs with Y_i = +1 that keep ≥ 2 tokens", "≈ 0 "
               "(derived: Y f is convex in s, so the best attention is one token)", 0.0, 0.05,
               "≤ 5%", "suggested", "the book's derivation, checked on every kept run; the "
               "exceptions are nearly one-hot attentions still losing a small remainder"),
        Target("multi_share_neg", "share of inputs with Y_i = −1 that keep ≥ 2 tokens",
               "> 0 (a mixture can minimise a convex output)", 0.3, 1.0, "≥ 30%", "suggested",
               "the book's observation; the paper's 72–82% of runs come from these inputs"),
        *(Target(f"eq_mean_d{d}", f"final mean 1 − corr(W, SVM-eq), d = {d}", f"{fig[0]}",
                 fig[0] / 2, fig[0] * 2, "factor 2", "official code",
                 "accepted runs only (the acceptance filter is reported beside it)")
          for d, fig in _E4_FIG.items()),
        *(Target(f"one_mean_d{d}", f"final mean 1 − corr(W, 1-token SVM), d = {d}",
                 f"{fig[2]}", fig[2] / 2, fig[2] * 2, "factor 2", "official code")
          for d, fig in _E4_FIG.items()),
        *(Target(f"dir_mean_d{d}", f"final mean 1 − corr(W, W^dir), d = {d} (W^dir uses "
                 "only the selected sets: nothing fitted)", f"{fig[1]}", fig[1] / 2,
                 fig[1] * 2, "factor 2", "official code", "the paper figure's dotted curve; "
                 "the factor 2 is the tolerance the reproduction plan set for these "
                 "heavy-tailed means before any result, not a bound fitted to the book's "
                 "value (whether a ratio is sampling error is tested by mean_z_max)")
          for d, fig in _E4_FIG.items()),
        Target("mean_z_max", "largest |z| over the 12 means with a value read off the paper's "
               "figure (SVM-eq, W^dir, 1-token SVM at d = 4, 6, 8, 10): z = (book − paper) / "
               "(√2 · standard error of the book's mean), a two-sample test of two 500-run "
               "means whose spreads are taken equal", "0 (same distribution)", 0.0, 2.87,
               "≤ 2.87 (5% level, Bonferroni over 12 means)", "official code",
               "added after the results were seen, to say whether the W^dir ratios of 1.7 at "
               "d = 8 and 10 are sampling error; the figure's values are read by eye, which "
               "this test ignores"),
        Target("eq_median", "median final 1 − corr(W, SVM-eq), all d pooled", "2–3e-3", 1e-3,
               6e-3, "factor 2", "re-simulation"),
        *(Target(f"clean_ok_d{d}", f"runs with largest masked probability < 1e-14: share with "
                 f"1 − corr(SVM-eq) ≤ 1e-2, d = {d}", p, 0.9, 1.0, "≥ 90%", "re-simulation")
          for d, p in ((4, "0.96"), (6, "1.00"))),
        Target("mask_error_spearman", "rank correlation of log largest masked probability and "
               "log(1 − corr(SVM-eq)), all d pooled", "visibly positive", 1e-9, 1.0, "> 0",
               "re-simulation"),
    ])
def tf_multi_token(accepted: int = 500, ds: tuple[int, ...] = (4, 6, 8, 10), n: int = 3,
                   T: int = 4,
                   steps: int = 2001, record_every: int = 100, seed: int = 1,
                   max_batch: int = 16384, max_candidates: int = 200_000, chunk: int = 1024,
                   workers: int = 1, progress: bool = True, device: str | None = None):
    r"""E4: the ReLU head f = 1ᵀReLU(Vᵀ Xᵀ s) with a fixed random V (‖V‖_F = 1), W trained by
    normalised GD. A run is kept only if its final softmax separates cleanly (no probability
    in (1e-6, 1e-3], at least one ≤ 1e-6) and both SVMs are feasible, until ``accepted`` runs
    per d; ``tried_d*`` counts the candidates up to the one that filled the quota, as the
    official seed-by-seed loop does.

    .. math::

        W^{eq} = W^{fin} + R\,W^{dir}, \qquad
        \text{error} = 1 - \mathrm{corr}(W(k), W^{eq})

    against the 1-token Att-SVM of :math:`\arg\max_t s_{it}`.

    Candidates are drawn in batches of up to ``max_batch`` seeds (their size follows the
    acceptance rate seen so far) and trained ``chunk`` at a time, ``workers`` chunks in
    parallel, by :func:`attnlib.experiments.multi_token.train_relu_candidates` (the same
    iteration as :func:`attnlib.train`, in kernel coordinates, with the trajectory recorded
    on the fly); the stream stops at the chunk that fills the quota. One worker by default:
    the book's notebooks already run two at a time, and a second worker trains chunks past
    the quota (counted in ``trained_d*``, the only number ``workers`` changes) for no gain.

    See chapter 7, *Nonlinear heads select several tokens*.
    """
    from tqdm.auto import tqdm

    ds = tuple(ds)
    num, rows = {}, {k: [] for k in ("run_d", "corr_eq", "corr_dir", "corr_one", "max_masked",
                                     "multi", "perp")}
    counts = {"pos": np.zeros(2, dtype=int), "neg": np.zeros(2, dtype=int)}  # (≥ 2 tokens, all)
    steps_rec = None
    for d in ds:
        bar = tqdm(total=accepted, desc=f"E4 d={d}", disable=not progress)
        with few_threads():
            kept, count = _stream(d, n, T, accepted, steps, record_every, seed, max_batch,
                                  max_candidates, chunk, workers, device, bar)
        bar.close()
        if not kept:
            raise ValueError(f"max_candidates: no run accepted at d={d} in {count['tried']} "
                             f"candidates (allow more candidates, or fewer accepted runs)")
        H = torch.cat([k["H"] for k in kept])  # (K, S, d, d), recorded during training
        steps_rec = to_numpy(kept[0]["steps"])
        W_dir, W_fin, W_one, W_end, S = (torch.cat([k[key] for k in kept]).to(H) for key in
                                         ("W_dir", "W_fin", "W_one", "W", "s"))
        W_eq = Equivalence(W_fin, W_dir).fit(W_end)
        O = selected_sets(S)
        c_eq, c_dir, c_one = (correlation(H, Wr[:, None], dims=2).cpu()
                              for Wr in (W_eq, W_dir, W_one))
        max_masked = torch.where(O, torch.zeros_like(S), S).flatten(-2).amax(-1).cpu()
        e_eq, e_dir, e_one = 1 - c_eq[:, -1], 1 - c_dir[:, -1], 1 - c_one[:, -1]
        # W_fin is the projection of W_end on S_fin (its equations hold for W_end), so the
        # diverging part is W_end - W_fin; W^eq projects W_end on S_fin + span(W_dir)
        perp = (1 - correlation(W_end - W_fin, W_dir, dims=2)).cpu()
        clean = max_masked < 1e-14
        K = len(W_end)
        multi = O.sum(-1).cpu() >= 2  # (K, n)
        pos = torch.cat([k["Y"] for k in kept]).cpu() > 0
        lo, hi = wilson(K, count["tried"])
        num.update({f"{key}_d{d}": float(v) for key, v in count.items()})
        num.update({f"accepted_d{d}": float(K), f"rate_d{d}": K / count["tried"],
                    f"rate_lo_d{d}": lo, f"rate_hi_d{d}": hi,
                    f"perp_mean_d{d}": float(perp.mean()),
                    f"perp_median_d{d}": float(perp.median()),
                    f"eq_le_dir_d{d}": float((e_eq <= e_dir + 1e-12).all()),
                    f"multi_pos_d{d}": float(multi[pos].double().mean()),
                    f"multi_neg_d{d}": float(multi[~pos].double().mean()),
                    f"eq_mean_d{d}": float(e_eq.mean()), f"eq_median_d{d}": float(e_eq.median()),
                    f"dir_mean_d{d}": float(e_dir.mean()),
                    f"dir_median_d{d}": float(e_dir.median()),
                    f"one_mean_d{d}": float(e_one.mean()),
                    f"one_median_d{d}": float(e_one.median()),
                    **{f"{key}_z_d{d}": mean_z(e, fig) for key, e, fig in
                       (("eq", e_eq, _E4_FIG.get(d, (None,) * 3)[0]),
                        ("dir", e_dir, _E4_FIG.get(d, (None,) * 3)[1]),
                        ("one", e_one, _E4_FIG.get(d, (None,) * 3)[2]))},
                    f"multi_share_d{d}": float((O.sum(-1) >= 2).any(-1).double().mean()),
                    f"clean_ok_d{d}": float((e_eq[clean] <= 1e-2).double().mean())
                    if clean.any() else math.nan})
        rows["run_d"].append(np.full(K, d))
        counts["pos"] += [int(multi[pos].sum()), int(pos.sum())]
        counts["neg"] += [int(multi[~pos].sum()), int((~pos).sum())]
        for key, val in (("corr_eq", c_eq), ("corr_dir", c_dir), ("corr_one", c_one),
                         ("max_masked", max_masked), ("multi", O.sum(-1).amax(-1)),
                         ("perp", perp)):
            rows[key].append(to_numpy(val))
    arrays = {k: np.concatenate(v) for k, v in rows.items()}
    arrays.update(steps=steps_rec, ds=np.array(ds))
    for key in ("eq_mean", "dir_mean", "one_mean", "rate"):  # (1, P): the sweep explorer's form
        arrays[key] = np.array([[num[f"{key}_d{d}"] for d in ds]])
    arrays["cells"] = np.array([[n, T]])
    for d in set(_E4_FIG) - set(ds):  # targets of a d left out: not computed (NaN)
        num.update({f"{k}_d{d}": math.nan for k in ("eq_mean", "dir_mean", "one_mean", "clean_ok",
                                                   "rate")})
    err = 1 - arrays["corr_eq"][:, -1]
    num["ordering_ok"] = float(all(num[f"eq_mean_d{d}"] <= num[f"dir_mean_d{d}"]
                                   < num[f"one_mean_d{d}"] for d in ds))
    num["eq_median"] = float(np.median(err))
    num["perp_median"] = float(np.median(arrays["perp"]))
    num["eq_le_dir"] = float(all(num[f"eq_le_dir_d{d}"] == 1 for d in ds))
    zs = [abs(num[f"{k}_z_d{d}"]) for d in ds for k in ("eq", "dir", "one")]
    num["mean_z_max"] = max((z for z in zs if not math.isnan(z)), default=math.nan)
    num["dir_lt_one"] = float(all(num[f"dir_mean_d{d}"] < num[f"one_mean_d{d}"] for d in ds))
    for key, (k, m) in counts.items():  # inputs with |O_i| >= 2, by label, all d pooled
        num[f"multi_share_{key}"] = k / m if m else math.nan
    pos = arrays["max_masked"] > 0
    num["mask_error_spearman"] = _spearman(np.log(arrays["max_masked"][pos]),
                                           np.log(np.maximum(err[pos], 1e-300)))
    return num, arrays


def _stream(d, n, T, accepted, steps, record_every, seed, max_batch, max_candidates, chunk,
            workers, device, bar):
    """E4's candidate stream at one d: batches of seeds, trained chunk by chunk, filtered in
    seed order until ``accepted`` runs are kept. Returns the kept runs (one dict of stacked
    tensors per chunk) and the counts up to the candidate that filled the quota."""
    kept, drawn, next_seed = [], 0, seed
    got_n = {"kept": 0}  # runs kept so far (read by the chunk sizes)
    count = dict(tried=0, skipped=0, exited=0, trained=0)
    while got_n["kept"] < accepted and drawn < max_candidates:
        rate = got_n["kept"] / drawn if got_n["kept"] else _E4_PRIOR_RATE.get(d, 0.02) * 0.8
        B = int(min(max_batch, max(64, math.ceil(1.3 * (accepted - got_n["kept"]) / rate))))
        data, V, W0 = relu_candidates(d, n, T, B, next_seed, device)
        next_seed += B
        allpos = (data.Y > 0).all(-1).cpu()  # the official loop skips these seeds
        live = torch.nonzero(~allpos).flatten()
        drawn += len(live)  # the batch schedule counts every live seed of a batch

        def fit(bounds, data=data, V=V, W0=W0, live=live):
            idx = live[bounds[0]:bounds[1]].to(data.X.device)
            sub = _subset(data, idx)
            return bounds, sub, train_relu_candidates(sub, V[idx], W0[idx], steps,
                                                      record_every=record_every)

        def wanted():  # a chunk per worker for about 1.2 times the runs still needed
            k = got_n["kept"]
            r = k / count["tried"] if k else _E4_PRIOR_RATE.get(d, 0.02) * 0.8
            return 1.2 * (accepted - k) / r / max(1, workers)

        full = True
        chunks = chunk_bounds(len(live), chunk, wanted)
        for (lo, hi), sub, runs in map_chunks(fit, chunks, workers):
            count["trained"] += hi - lo
            s = torch.exp(M.log_softmax(M.logits(sub.X, runs.W, sub.z)))  # (b, n, T)
            got, last = _accept(sub, runs, s, accepted - got_n["kept"])
            if got is not None:
                kept.append(got)
                got_n["kept"] += len(got["W"])
                bar.update(len(got["W"]))
            upto = hi - lo if last is None else last + 1  # candidates counted in this chunk
            count["tried"] += upto
            count["exited"] += int((runs.exited[:upto] >= 0).sum())
            if got_n["kept"] == accepted:
                count["skipped"] += int(allpos[:int(live[lo + last]) + 1].sum())
                full = False
                break
        if full:
            count["skipped"] += int(allpos.sum())
    return kept, count


def _accept(sub, runs, s, need):
    """The first ``need`` candidates of a chunk that pass the filter (clean final softmax,
    both SVMs feasible), in order: their tensors, and the index of the last one if the quota
    is filled (else None)."""
    clean = torch.nonzero(cleanly_masked(s)).flatten().tolist()
    good, sol = [], {}
    while clean and len(good) < need:
        take, clean = clean[:need - len(good)], clean[need - len(good):]
        for b, res in zip(take, _svms(sub, s, take)):
            if res is not None:  # filter 3: both SVMs feasible
                good.append(b)
                sol[b] = res
    if not good:
        return None, None
    idx = torch.tensor(good, device=s.device)
    out = {"W": runs.W[idx], "s": s[idx], "H": runs.iterates(rows=idx), "steps": runs.steps,
           "Y": sub.Y[idx],
           "W_fin": torch.stack([sol[b][0].W_fin for b in good]),
           "W_dir": torch.stack([sol[b][0].W_dir for b in good]),
           "W_one": torch.stack([sol[b][1] for b in good])}
    return out, (good[-1] if len(good) == need else None)


def _svms(sub, s, take):
    """Both SVMs of the candidates ``take`` (batched; one by one where that fails, as the
    official loop rejects a run at any failure): (Equivalence, W^1token) or None each."""
    idx = torch.tensor(take, device=s.device)
    part, sp = _subset(sub, idx), s[idx]
    try:
        eq = svm_equivalence(part, selected_sets(sp), sp)
        W1 = att_svm(part, alpha=sp.argmax(-1), norm="fro")
        return [(Equivalence(eq.W_fin[j], eq.W_dir[j]), W1[j]) for j in range(len(take))]
    except (InfeasibleError, RuntimeError):
        if len(take) == 1:
            return [None]
    return [r for j in range(len(take)) for r in _svms(part, sp, [j])]


# ============================================================================ λ head (designed)
@experiment(
    "tf_lambda_head", paper=f"{PAPER} (base_nonlinear.py 'lambda' mode, unused in the paper)",
    chapter="07_nonlinear_heads",
    title="λ-penalty head: GD selects two tokens and follows the SVM equivalence",
    plot=plot_lambda,
    seconds=0.2,
    targets=[
        Target("s_gap", "largest |s_t − s*_t| between GD's final softmax and the best "
               "attention (0.7, 0.3, 0, 0)", "0", 0.0, 0.02, "≤ 0.02", "suggested",
               "a designed example of the book, from the official code's unused λ head"),
        Target("eq_le_dir", "1 − corr(W(2000), W^fin + R·W^dir) ≤ 1 − corr(W(2000), W^dir): "
               "R fitted and W^fin read off GD's final softmax make W^eq a projection of W(2000)",
               "holds", 1, 1, "identity", "suggested", "not a test of the equivalence",
               evidence="by construction"),
        Target("fin_gap", "‖P_S W(2000) − W^fin(s*)‖_F: the finite part of GD against W^fin "
               "computed from the best attention s*, without GD", "→ 0", 0.0, 0.1,
               "≤ 0.1 (one normalised step)", "suggested", "a designed example of the book"),
        Target("perp_err", "1 − corr(W(2000) − P_S W(2000), W^dir(s*)): the diverging part "
               "against the a-priori max-margin direction", "→ 0", 0.0, 1e-2, "≤ 1e-2",
               "suggested", "a designed example of the book"),
        Target("err_one_over_eq", "1-token SVM error / SVM-eq error at the end", "> 1", 10.0,
               math.inf, "≥ 10×", "suggested", "a designed example of the book"),
        Target("err_one_over_dir", "1-token SVM error / W^dir error at the end (W^dir uses "
               "only GD's selected sets: no fitted scale, no in-set ratios)", "> 1", 10.0,
               math.inf, "≥ 10×", "suggested", "the comparison with nothing fitted"),
    ])
def tf_lambda_head(lam: float = 0.25, steps: int = 2000, record_every: int = 20,
                   device: str | None = None):
    r"""The λ head :math:`f = v^\top h - \lambda\|h\|^2` on one input with orthonormal
    tokens and scores (1, 0.8, 0.2, −0.5): the best attention is (0.7, 0.3, 0, 0), so two
    tokens stay selected. Normalised GD on W (query z = x_1), then the SVM equivalence of the
    final selected sets, compared with the 1-token Att-SVM.

    See chapter 7, *Nonlinear heads select several tokens*.
    """
    ex = lambda_head_example(lam=lam, device=device)
    settings = {**ex.settings, "steps": steps}
    res = train(ex.data, head=M.LambdaHead(ex.init["lam"]), eps=EPS, record_every=record_every,
                **settings)
    s = torch.softmax(attention_logits(ex.data, res.W), -1)  # (1, T)
    if bool(selected_sets(s).all()):
        raise ValueError(f"steps: after {steps} steps gradient descent still selects every "
                         "token, and the SVM equivalence needs a masked one; give more steps")
    eq = svm_equivalence(ex.data, selected_sets(s), s)
    W_eq = eq.fit(res.W)
    W_one = att_svm(ex.data, alpha=s.argmax(-1), norm="fro").to(W_eq)
    H = res.history["W"]  # (S, d, d)
    corr = dict(corr_eq=correlation(H, W_eq, dims=2),
                corr_dir=correlation(H, eq.W_dir.to(H), dims=2),
                corr_one=correlation(H, W_one, dims=2))
    s_opt = torch.as_tensor(ex.known["s_opt"], dtype=s.dtype, device=s.device).reshape(s.shape)
    # a priori: both parts from the best attention s*, without looking at GD
    prior = svm_equivalence(ex.data, s_opt > 0, s_opt.clamp_min(1e-300))
    W_fin0, W_dir0 = prior.W_fin.to(H), prior.W_dir.to(H)
    C = fin_rows(ex.data.X, ex.data.z, s_opt > 0).to(H)
    H_fin = project_fin(H, C)  # the component of W(k) in S_fin
    fin_gap = (H_fin - W_fin0).flatten(-2).norm(dim=-1)  # absolute: compare with one step
    perp = 1 - correlation(H - H_fin, W_dir0, dims=2)
    err_eq, err_one = 1 - float(corr["corr_eq"][-1]), 1 - float(corr["corr_one"][-1])
    err_dir = 1 - float(corr["corr_dir"][-1])
    num = dict(s_gap=float((s - s_opt).abs().max()), err_eq=err_eq, err_dir=err_dir,
               err_one=err_one, err_one_over_eq=err_one / max(err_eq, 1e-300),
               err_one_over_dir=err_one / max(err_dir, 1e-300),
               eq_le_dir=float(err_eq <= err_dir + 1e-12),
               fin_gap=float(fin_gap[-1]), perp_err=float(perp[-1]),
               fin_norm=float(W_fin0.norm()), W_norm=float(H[-1].norm()),
               lr=float(ex.settings["lr"]),
               dir_match=1 - float(correlation(eq.W_dir.to(H), W_dir0, dims=2)),
               selected=float(selected_sets(s).sum()))
    return num, dict(steps=to_numpy(res.history["step"]), s_final=s[0], s_opt=s_opt[0],
                     fin_gap=fin_gap, perp_err=perp, **corr)


from .tf_svm_heads_path import tf_nonlinear_path  # noqa: E402,F401  (registers it)
