"""Checks of SVM answers, selections and local optimality (chapters 1-5, 9).

See :mod:`attnlib.check` for how a chapter uses them.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

import attnlib.check.local_answers
from attnlib import optimality, svm, tokens
from attnlib.check.feedback import (
    DTYPE,
    Feedback,
    answer_tensor,
    fail,
    one_instance,
    position,
    reference,
)
from attnlib.metrics import correlation

__all__ = ["check_svm_direction", "check_prompt_direction", "check_selection",
           "check_locally_optimal", "check_relaxed_prompt", "w_locally_optimal_oracle",
           "relaxed_prompt_oracle"]


def _norm(W, norm):
    if norm == "fro":
        return torch.linalg.vector_norm(W)
    if norm == "nuc":
        return torch.linalg.matrix_norm(W, "nuc")
    return torch.linalg.vector_norm(W, ord=float(norm))


def _norm_name(norm):
    return {"fro": "Frobenius", "nuc": "nuclear"}[norm] if isinstance(norm, str) \
        else f"ℓ{norm:g}"


def _check_norm(norm):
    if norm in ("fro", "nuc"):
        return norm
    try:
        lp = float(norm)
    except (TypeError, ValueError):
        lp = float("nan")
    if not lp > 1:
        raise ValueError(f"norm must be 'fro', 'nuc' or a number lp > 1, got {norm!r}")
    return lp


def _alpha(alpha, data):
    """Validate a reference selection (raises: it is not the learner's answer)."""
    return tokens.as_selection(alpha, torch.as_tensor(data.X))


# -- checks ----------------------------------------------------------------------------------
def check_svm_direction(W, data, alpha=None, norm="fro", *, exact=False, min_corr=0.99,
                        atol=1e-4) -> Feedback:
    r"""Check that ``W`` is the Att-SVM solution (``exact``) or its direction.

    The Att-SVM of a selection :math:`\alpha` (chapter 2; with ``norm="nuc"`` the Att-SVM⋆
    of the (K, Q) parameterisation, chapter 5; with ``norm=lp`` the :math:`\ell_p`-AttSVM of
    mirror descent, chapter 9) is

    .. math::
        W^{mm}_\alpha = \arg\min_W \|W\| \quad\text{s.t.}\quad
        (x_{i\alpha_i} - x_{it})^\top W z_i \ge 1 \quad \forall i,\ t \ne \alpha_i .

    With ``exact=False`` (a direction, e.g. a long gradient-descent run) every margin
    :math:`(x_{i\alpha_i} - x_{it})^\top W z_i` must be positive and
    :math:`\mathrm{corr}(W, W^{mm}_\alpha) \ge` ``min_corr``. With ``exact=True`` every margin
    must be at least ``1 - atol`` and :math:`\|W\|` within ``atol`` (relative) of the minimum.

    Parameters
    ----------
    W : array (d, d)
        The answer.
    data : AttentionData
        One instance (no trials dimension) with queries ``z``.
    alpha : array (n,), optional
        The selection; default: the optimal tokens (highest score :math:`\gamma_{it}`).
    norm : "fro", "nuc" or float lp > 1
    exact : bool
    min_corr, atol : float

    Examples
    --------
    >>> data = al.random_data(4, 5, 8, seed=0)           # doctest: +SKIP
    >>> al.check.check_svm_direction(al.att_svm(data), data)   # doctest: +SKIP
    ✓ correct (Att-SVM direction): all 16 margins positive and corr(W, W^mm) = 1.0000 ...
    """
    data = one_instance(data)
    if data.z is None:
        raise ValueError("data has no queries z (the prompt model): use check_prompt_direction")
    d = data.d

    def margins(W, alpha):
        return tokens.token_margins(data, W, alpha)

    def solve(alpha, norm):
        return svm.att_svm(data, alpha=alpha, norm=norm)

    return _direction(W, "W", (d, d), data, alpha, norm, margins, solve, exact, min_corr, atol,
                      "Att-SVM")


def check_prompt_direction(p, data, alpha=None, W=None, norm="fro", *, exact=False,
                           min_corr=0.99, atol=1e-4) -> Feedback:
    r"""Check that ``p`` is the p-SVM solution (``exact``) or its direction (prompt model).

    With the key-query matrix :math:`W` fixed (default identity) the prompt token's SVM is
    (chapters 1-4)

    .. math::
        p^{mm}(\alpha) = \arg\min_p \|p\| \quad\text{s.t.}\quad
        (x_{i\alpha_i} - x_{it})^\top W p \ge 1 \quad \forall i,\ t \ne \alpha_i .

    Parameters are as in :func:`check_svm_direction`, with ``p`` of shape (d,) and ``W`` the
    fixed matrix (e.g. ``example.init["W"]`` of a hand-made example).
    """
    data = one_instance(data)
    n, d = data.n, data.d
    Wf = torch.eye(d, dtype=DTYPE) if W is None else reference(W, "W")

    def margins(p, alpha):
        return tokens.token_margins(data.X, Wf, alpha, z=p.expand(n, d))

    def solve(alpha, norm):
        return svm.prompt_svm(data, alpha=alpha, W=Wf, norm=norm)

    return _direction(p, "p", (d,), data, alpha, norm, margins, solve, exact, min_corr, atol,
                      "p-SVM")


def _direction(ans, sym, shape, data, alpha, norm, margins, solve, exact, min_corr, atol, svm_name):
    """Shared body of the SVM checks: validate, margins, then compare with the solver."""
    title = f"{svm_name} solution" if exact else f"{svm_name} direction"
    norm = _check_norm(norm)
    n, T = data.n, data.T
    alpha = tokens.optimal_tokens(data) if alpha is None else alpha
    alpha = _alpha(alpha, data)
    x, err = answer_tensor(ans, sym)
    if err:
        return fail(title, err)
    if tuple(x.shape) != shape:
        return fail(title, f"{sym} must have shape {shape}, yours has {tuple(x.shape)}.")
    if not x.abs().max() > 0:
        return fail(title, f"{sym} is zero: it gives every token the same attention.")
    m = margins(x, alpha).clone()  # (n, T), 0 at the selected tokens
    m[torch.arange(n), alpha] = math.inf
    total = n * (T - 1)
    bad = m < 1 - atol if exact else m <= 0
    if bad.any():
        k = int(bad.sum())
        i, t = divmod(int(torch.argmin(m)), T)
        rhs = "≥ 1" if exact else "> 0"
        q = "W z_i" if sym == "W" else "W p"
        return fail(title, f"your {sym} violates {k} of {total} margin constraints "
                            f"(x_iα_i − x_it)ᵀ {q} {rhs}; the largest violation is at "
                            f"{position((i, t), ('sample', 'token'))} (margin "
                            f"{float(m[i, t]):.4g}; the selected token of that sample is "
                            f"token {int(alpha[i]) + 1}, Python index {int(alpha[i])}).",
                     violations=k, constraints=total, worst=(i, t), margin=float(m[i, t]))
    try:
        ref = reference(solve(alpha, norm), "solution")
    except svm.InfeasibleError as e:
        return fail(title, f"no {sym} satisfies the constraints of this selection ({e}).")
    name = _norm_name(norm)
    corr = float(correlation(x, ref, dims=x.dim()))
    details = dict(correlation=corr, min_margin=float(m.min()), constraints=total)
    if exact:
        nx, nref = float(_norm(x, norm)), float(_norm(ref, norm))
        details.update(norm=nx, optimal_norm=nref)
        if nx > nref * (1 + atol) + atol:
            details.pop("optimal_norm")
            why = (f"is not the smallest: every margin is above 1, so its {name} norm "
                   f"{nx:.6g} can be lowered (scale it down until a margin is exactly 1)."
                   if float(m.min()) > 1 + atol else  # scaling down would break a margin
                   f"its smallest margin is exactly 1, and yet it is not the {name} "
                   f"minimiser: another {sym} meets the constraints with a smaller {name} "
                   f"norm. Scaling will not help; solve the SVM with the {name} norm (the "
                   "minimiser of another norm is a different point).")
            return fail(title, f"your {sym} satisfies all {total} margin constraints"
                               + (" but " if why.startswith("is") else ", ") + why, **details)
        return Feedback(True, title, f"all {total} margin constraints hold (smallest margin "
                                     f"{float(m.min()):.4g}) and the {name} norm {nx:.6g} is "
                                     "the minimum.", details)
    if corr < min_corr:
        return fail(title, f"your {sym} selects the right tokens (all {total} margins positive) "
                            f"but points elsewhere than the {name} max-margin direction: "
                            f"corr({sym}, {sym}^mm) = {corr:.4f} < {min_corr}.", **details)
    return Feedback(True, title, f"all {total} margins positive and corr({sym}, {sym}^mm) = "
                                 f"{corr:.4f} ≥ {min_corr} ({name} {svm_name}).", details)


def check_selection(alpha, data, W=None, *, p=None) -> Feedback:
    r"""Check a selection: the optimal tokens, or the tokens the attention selects.

    Without ``W`` and ``p`` the answer must be the optimal tokens
    :math:`\mathrm{opt}_i = \arg\max_t \gamma_{it}`, :math:`\gamma_{it} = Y_i v^\top x_{it}`
    (chapter 1). With ``W`` (or the prompt ``p``, ``W`` then fixed, default identity) it must
    be the selected tokens :math:`\arg\max_t x_{it}^\top W z_i` (or
    :math:`x_{it}^\top W p`), where softmax attention concentrates.

    Parameters
    ----------
    alpha : array (n,) of int
        The answer, 0-based token indices.
    data : AttentionData
        One instance.
    W : array (d, d), optional
    p : array (d,), optional
    """
    data = one_instance(data)
    n, T = data.n, data.T
    if W is None and p is None:
        title, what = "optimal tokens", "score"
        value = tokens.scores(data)  # gamma_it, (n, T)
    else:
        title, what = "selected tokens", "logit"
        value = tokens.attention_logits(data, None if W is None else reference(W, "W"),
                                        p=None if p is None else reference(p, "p"))  # (n, T)
    a, err = answer_tensor(alpha, "alpha", dtype=None)
    if err:
        return fail(title, err)
    if a.dtype.is_floating_point:
        if not torch.isfinite(a).all() or not torch.equal(a, a.round()):
            return fail(title, "alpha must hold integer token indices, yours has fractions.")
    a = a.long().reshape(-1) if a.dim() == 0 else a.long()
    if a.shape != (n,):
        return fail(title, f"alpha must hold one token index per sample, shape ({n},); yours "
                            f"has shape {tuple(a.shape)}.")
    if (a < 0).any() or (a >= T).any():
        i = int(torch.nonzero((a < 0) | (a >= T))[0, 0])
        return fail(title, f"sample {i + 1} (Python index {i}): token index {int(a[i])} does "
                            f"not exist (tokens are 0-based, 0..{T - 1}).")
    best = value.max(dim=1).values  # (n,)
    mine = value[torch.arange(n), a]
    tie = 1e-12 * (1 + best.abs())
    wrong = mine < best - tie
    if wrong.any():
        i = int(torch.nonzero(wrong)[0, 0])
        shifted, hint = a - 1, ""
        smallest = bool((mine <= value.min(dim=1).values + tie)[wrong].all())
        if smallest:  # argmin where argmax is asked (or the sign of the label lost)
            hint = (" You picked the smallest, not the largest: use argmax (not argmin), and "
                    "check the sign (the label Y_i).")
        if (shifted >= 0).all() and (value[torch.arange(n), shifted] >= best - tie).all():
            hint += (" (If you counted from 1 instead: tokens are numbered from 0 in Python.)"
                     if smallest else " Your indices look 1-based: tokens are numbered from 0.")
        return fail(title, f"{int(wrong.sum())} of {n} samples wrong; e.g. sample {i + 1} "
                            f"(Python index {i}): you chose token index {int(a[i])} ({what} "
                            f"{float(mine[i]):.4g}), but another token of that sample has a "
                            f"larger {what}.{hint}",
                     wrong=torch.nonzero(wrong)[:, 0].tolist())
    ties = int(((value >= (best - tie)[:, None]).sum(1) > 1).sum())
    note = f" ({ties} samples have ties: any maximiser counts)" if ties else ""
    return Feedback(True, title, f"all {n} samples pick a token of largest {what}{note}.")


def check_locally_optimal(answer, data, alpha=None, norm="fro", *, param="W",
                          W=None) -> Feedback:
    r"""Check an answer about local optimality (chapter 3).

    A selection :math:`\alpha` is locally optimal when its SVM is feasible and every support
    token (active margin constraint) scores strictly below the selected token:
    :math:`\gamma_{i\alpha_i} > \gamma_{it}` for :math:`t \in \mathcal{T}_i(\alpha)`.

    Parameters
    ----------
    answer : bool or collection of selections
        With ``alpha``: whether ``alpha`` is locally optimal. Without: the set of all locally
        optimal selections (each an int when n = 1, else a tuple of n ints); only for
        :math:`T^n \le 4096`.
    data : AttentionData
    alpha : array (n,), optional
    norm : "fro", "nuc" or float lp > 1
    param : "W" or "p"
        The Att-SVM of W (queries ``data.z``) or the p-SVM of the prompt model.
    W : array (d, d), optional
        The prompt model's fixed matrix (default identity).
    """
    title = "local optimality"
    data = one_instance(data)
    norm = _check_norm(norm)
    n, T = data.n, data.T
    Wf = None if W is None else reference(W, "W")
    kw = dict(norm=norm, param=param, W=Wf)
    if answer is None:
        return fail(title, "answer is None: you have not answered yet (replace the stub above).")
    if alpha is not None:
        alpha = _alpha(alpha, data)
        if not isinstance(answer, (bool, int)) and not (torch.is_tensor(answer)
                                                        and answer.numel() == 1):
            return fail(title, f"answer must be True or False, got {answer!r}.")
        truth = bool(optimality.is_locally_optimal(data, alpha, **kw))
        sel = alpha.tolist()
        if bool(answer) == truth:
            return Feedback(True, title, f"selection {sel} is {'' if truth else 'not '}locally "
                                         "optimal.")
        return fail(title, f"selection {sel} is {'' if truth else 'not '}locally optimal; you "
                            f"said it is{' not' if truth else ''}. "
                            + _why_local(data, alpha, truth, norm, param, Wf))
    if T**n > 4096:
        raise ValueError(f"without alpha the check enumerates T^n = {T**n} selections; pass "
                         "alpha or use a smaller instance (T^n <= 4096)")
    try:
        given = {(int(s),) if not hasattr(s, "__len__") else tuple(int(u) for u in s)
                 for s in answer}
    except (TypeError, ValueError):
        return fail(title, "answer must be a collection of selections, e.g. {0, 1} for one "
                            "sample or {(0, 0), (1, 0)} for two.")
    if any(len(s) != n for s in given):
        return fail(title, f"each selection must name {n} token(s), one per sample.")
    if param == "W" and norm == "fro":  # the independent NumPy oracle (exercise ch3)
        return _w_selection_set(given, data, title)
    sels = optimality.enumerate_selections(data, **kw)
    truth = {tuple(a.tolist()) for a, ok in zip(sels.alpha, sels.locally_optimal) if ok}
    fmt = lambda S: "{" + ", ".join(str(s[0]) if n == 1 else str(s) for s in sorted(S)) + "}"
    if given == truth:
        return Feedback(True, title, f"the locally optimal selections are exactly {fmt(truth)}.")
    missing, extra = truth - given, given - truth
    parts = []
    if extra:
        parts.append(f"{fmt(extra)} {'is' if len(extra) == 1 else 'are'} not locally optimal")
    if missing:  # how many, not which: that would be the answer
        parts.append(f"you missed {len(missing)} locally optimal selection"
                     f"{'s' if len(missing) > 1 else ''}")
    return fail(title, "; ".join(parts) + ".", missing=len(missing), extra=sorted(extra))


def w_locally_optimal_oracle(X, z, Y, v, alpha, *, labels=True, support="active",
                             feasible_only=True) -> bool:
    r"""Whether ``alpha`` is locally optimal for the W-model, in NumPy float64, independent
    of ``attnlib.svm`` and ``attnlib.optimality``: the Frobenius Att-SVM
    :math:`(x_{i\alpha_i} - x_{it})^\top W z_i \ge 1` is linear in
    :math:`\mathrm{vec}(W)` (rows :math:`\mathrm{vec}((x_{i\alpha_i} - x_{it}) z_i^\top)`)
    and solved by Lawson-Hanson (``attnlib.check.local_answers.min_norm_point``). The
    keywords give the mistakes recognised, as in ``locally_optimal_oracle`` there."""
    X, z, Y, v = (np.asarray(a, dtype=np.float64) for a in (X, z, Y, v))
    n, T, _ = X.shape
    where = [(i, t) for i in range(n) for t in range(T) if t != alpha[i]]
    A = np.array([np.outer(X[i, alpha[i]] - X[i, t], z[i]).ravel() for i, t in where])
    w = attnlib.check.local_answers.min_norm_point(A)
    if w is None:
        return not feasible_only
    m = A @ w
    active = m <= 1 + 1e-6 * max(1.0, float(np.abs(m).max()))
    chosen = {"active": active, "none": np.zeros_like(active), "all": np.ones_like(active)
              }[support]
    gamma = (Y[:, None] if labels else 1.0) * (X @ v)
    return not any(c and gamma[i, t] >= gamma[i, alpha[i]] - 1e-10
                   for c, (i, t) in zip(chosen, where))


def _w_selection_set(given, data, title):
    """Compare a set of selections of the W-model with the oracle; diagnose, never list."""
    X, z, Y, v = (reference(getattr(data, k), k).numpy() for k in "XzYv")
    n, T = X.shape[:2]
    sels = list(itertools.product(range(T), repeat=n))
    truth_of = lambda **kw: {a for a in sels if w_locally_optimal_oracle(X, z, Y, v, a, **kw)}
    truth = truth_of()
    if given == truth:
        return Feedback(True, title, f"all {len(truth)} locally optimal selections among the "
                                     f"{len(sels)}, and no other (independent NNLS check).")
    if given == {tuple(u + 1 for u in s) for s in truth} or any(
            max(s) >= T or min(s) < 0 for s in given):
        return fail(title, f"your token indices look 1-based or out of range: tokens are "
                           f"numbered from 0 (0..{T - 1}), as in Python.")
    feasible = truth_of(support="none")
    for wrong, hint in [
        (truth_of(feasible_only=False), "You counted selections whose Att-SVM is infeasible: "
         "local optimality needs a feasible SVM first."),
        (feasible, "Your set is every selection with a feasible SVM: no token counted as a "
         "support token. Margins equal 1 only up to round-off; use a tolerance."),
        (truth_of(labels=False), "Your scores ignore the labels: γ_it = Y_i vᵀx_it."),
        (truth_of(support="all"), "You compared the selected token with every token; local "
         "optimality compares it only with its support tokens (margin 1).")]:
        if given == wrong:
            return fail(title, hint)
    return fail(title, attnlib.check.local_answers.selection_set_message(given, truth, feasible),
                wrong=len(given - truth), missing=len(truth - given))


def _why_local(data, alpha, truth, norm, param, W):
    """One sentence on why ``alpha`` is (not) locally optimal."""
    if truth:
        return "Every support token scores lower than its selected token."
    try:
        if param == "W":
            bad = optimality.violations(data, svm.att_svm(data, alpha=alpha, norm=norm), alpha)
        else:
            p_mm = svm.prompt_svm(data, alpha=alpha, W=W, norm=norm)
            Wf = torch.eye(data.d, dtype=DTYPE) if W is None else W
            bad = optimality.violations(data, Wf, alpha, z=p_mm.expand(data.n, -1))
    except svm.InfeasibleError:
        return "No solution satisfies its margin constraints: the selection is infeasible."
    gamma = tokens.scores(data)  # (n, T)
    own = gamma[torch.arange(data.n), alpha][:, None]
    if not bad.any():
        return ""
    i, t = (int(u) for u in torch.nonzero(bad)[0])
    return (f"At {position((i, t), ('sample', 'token'))}, a support token, the score "
            f"{float(gamma[i, t]):.4g} is ≥ {float(own[i, 0]):.4g}, the score of the selected "
            f"token (Python index {int(alpha[i])}).")


def relaxed_prompt_oracle(X, Y, alpha, W=None, *, relaxed=True, tol=1e-6):
    r""":math:`p^{relax}` (chapter 4) in NumPy, independent of ``attnlib.svm``: the head SVM
    :math:`\min\|v\|` s.t. :math:`Y_i v^\top x_{i\alpha_i} \ge 1`, its support inputs
    :math:`\mathcal S`, then :math:`\min\|p\|` s.t. :math:`(k_{i\alpha_i} - k_{it})^\top p
    \ge 1` for :math:`i \in \mathcal S`, :math:`\ge 0` otherwise (``relaxed=False``:
    :math:`\ge 1` for all, :math:`p^{mm}`). Returns ``(p, v_mm)``."""
    X, Y = np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)
    n, T, d = X.shape
    W = np.eye(d) if W is None else np.asarray(W, dtype=np.float64)
    sel = X[np.arange(n), alpha]  # (n, d)
    v_mm = attnlib.check.local_answers.min_norm_point(Y[:, None] * sel)
    if v_mm is None:
        return None, None
    S = Y * (sel @ v_mm) <= 1 + tol
    K = X @ W
    where = [(i, t) for i in range(n) for t in range(T) if t != alpha[i]]
    G = np.array([K[i, alpha[i]] - K[i, t] for i, t in where])
    h = np.array([1.0 if (S[i] or not relaxed) else 0.0 for i, _ in where])
    return attnlib.check.local_answers.min_norm_point(G, h), v_mm


def check_relaxed_prompt(p, data, alpha=None, W=None, *, atol=1e-6) -> Feedback:
    r"""Check :math:`p^{relax}` (chapter 4) against ``relaxed_prompt_oracle``, an NNLS
    computation independent of ``attnlib.svm.relaxed_prompt_svm``; the feedback names the
    common mistakes (:math:`p^{mm}`, :math:`v^{mm}`, a flipped sign, constraints of the
    non-support inputs dropped) and never the expected value.

    Parameters
    ----------
    p : array (d,)
    data : AttentionData
        One instance (prompt model), labels ``Y``.
    alpha : array (n,), optional
        The selection (default the optimal tokens).
    W : array (d, d), optional
        The fixed key matrix (default identity).
    """
    title = "p^relax"
    data = one_instance(data)
    n, T, d = data.n, data.T, data.d
    alpha = _alpha(tokens.optimal_tokens(data) if alpha is None else alpha, data).tolist()
    X, Y = reference(data.X, "X").numpy(), reference(data.Y, "Y").numpy()
    Wn = None if W is None else reference(W, "W").numpy()
    x, err = answer_tensor(p, "p_relax")
    if err:
        return fail(title, err)
    if tuple(x.shape) != (d,):
        return fail(title, f"p_relax must have shape ({d},), yours has {tuple(x.shape)}.")
    ref, v_mm = relaxed_prompt_oracle(X, Y, alpha, Wn)
    if ref is None:
        raise ValueError("data: the SVMs of this selection are infeasible")
    xa = x.numpy()
    close = lambda b: b is not None and np.allclose(xa, b, atol=atol, rtol=1e-5)
    if close(ref):
        return Feedback(True, title, "your p_relax is the minimum-norm point of the relaxed "
                                     "constraints (independent NNLS check).")
    p_mm, _ = relaxed_prompt_oracle(X, Y, alpha, Wn, relaxed=False)
    no_rows = relaxed_prompt_oracle(X, Y, alpha, Wn)[1]  # v^mm
    for cand, hint in [
        (p_mm, "This is p^mm: every input keeps margin ≥ 1. In p^relax an input that is not "
               "a support vector of the head (v-margin > 1) only needs margin ≥ 0."),
        (-ref, "Your p points the wrong way: the selected token must win, "
               "(k_iα_i − k_it)ᵀp ≥ 0, not ≤ 0."),
        (no_rows, "This is v^mm, the head's SVM; p^relax is the prompt's.")]:
        if close(cand):
            return fail(title, hint)
    K = X if Wn is None else X @ Wn
    sel = X[np.arange(n), alpha]
    S = Y * (sel @ v_mm) <= 1 + 1e-6
    worst = None
    for i in range(n):
        for t in range(T):
            if t != alpha[i]:
                m = float((K[i, alpha[i]] - K[i, t]) @ xa)
                if m < (1.0 if S[i] else 0.0) - atol and (worst is None or m < worst[2]):
                    worst = (i, t, m)
    if worst is not None:
        i, t, m = worst
        need = "≥ 1 (a support input of the head)" if S[i] else "≥ 0 (not a support input)"
        return fail(title, f"your p_relax violates a constraint: "
                           f"{position((i, t), ('input', 'token'))} has margin {m:.4g}, it "
                           f"needs {need}.")
    return fail(title, "your p_relax satisfies the relaxed constraints but is not the "
                       "shortest such point: which constraints are active at the minimum? "
                       "(KKT: p is a non-negative combination of their rows).")
