r"""Feedback on exercise answers: correct, or precisely what is wrong.

Every function here takes a learner's answer and the reference data, and returns a
:class:`Feedback`: truthy when the answer is right, and in every case a message that says
what was checked and, when the answer is wrong, where it fails ("your W violates 3 of 42
margin constraints; the largest violation is at sample 2, token 5"). It displays itself in
Jupyter and prints as text, so a check cell is just the call::

    al.check.check_svm_direction(W, data)

How a chapter writes a self-checking exercise (see the instructor guide):

1. The code cell holding the answer carries the cell tag ``solution``. It starts with one or
   more comment lines saying what to compute; the student edition keeps those comments, sets
   every name the cell assigns to ``None`` and raises ``NotImplementedError``.
2. The next code cell carries the tag ``check`` and calls one function of this module. It
   receives ``None`` in the student edition until the learner answers, and then says so.

Indices are 0-based, as everywhere in attnlib (sample ``i``, token ``t``). A wrongly shaped
*answer* is feedback (a falsy :class:`Feedback`), not an exception; wrong *reference*
arguments (the data, a norm name) raise ``ValueError``. Set the environment variable
``ATTNLIB_CHECK_STRICT=1`` to make every failed check raise ``AssertionError`` (used when
grading, and to test the instructor editions).
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass, field

import torch

__all__ = ["Feedback", "check_svm_direction", "check_selection", "check_locally_optimal",
           "check_rank", "check_md_step", "check_value"]

_DT = torch.float64


@dataclass
class Feedback:
    """The verdict of one check: ``bool(fb)`` is whether the answer is right.

    Attributes
    ----------
    ok : bool
        Whether the answer passed.
    title : str
        What was checked, e.g. ``"Att-SVM direction"``.
    message : str
        What is right, or precisely what is wrong.
    details : dict
        The numbers behind the message (margins, correlation, ...), for graders.
    """

    ok: bool
    title: str
    message: str
    details: dict = field(default_factory=dict)

    def __post_init__(self):
        if not self.ok and os.environ.get("ATTNLIB_CHECK_STRICT", "") not in ("", "0"):
            raise AssertionError(str(self))

    def __bool__(self) -> bool:
        return bool(self.ok)

    def __str__(self) -> str:
        mark = "✓ correct" if self.ok else "✗ not yet"
        return f"{mark} ({self.title}): {self.message}"

    __repr__ = __str__

    def _repr_markdown_(self) -> str:
        mark = "✅ **Correct**" if self.ok else "❌ **Not yet**"
        return f"{mark} ({self.title}): {self.message}"


# -- helpers -------------------------------------------------------------------------------
def _tensor(x, name, dtype=_DT):
    """The answer as a CPU tensor, or a Feedback-ready error string."""
    if x is None:
        return None, f"{name} is None: you have not answered yet (replace the stub above)."
    try:
        t = torch.as_tensor(x.detach() if hasattr(x, "detach") else x)
    except (TypeError, ValueError, RuntimeError) as e:
        return None, f"{name} could not be read as an array ({e})."
    if t.is_complex():
        return None, f"{name} must be real, got dtype {t.dtype}."
    if dtype is not None:
        t = t.to(device="cpu", dtype=dtype)
        if t.dtype.is_floating_point and not torch.isfinite(t).all():
            return None, f"{name} contains NaN or Inf."
    return t.cpu(), None


def _data_tensors(data):
    """X (n,T,d), Y (n,), z (n,d), v (d,) or None, as float64 CPU tensors (one instance)."""
    for attr in ("X", "Y"):
        if not hasattr(data, attr):
            raise ValueError(f"data must be an attnlib.AttentionData, got {type(data).__name__}")
    X = torch.as_tensor(data.X).to("cpu", _DT)
    if X.dim() != 3:
        raise ValueError(f"data must hold one instance (X of shape (n,T,d)), got X.shape="
                         f"{tuple(X.shape)}; index the trial first: data[b]")
    z = getattr(data, "z", None)
    z = X[:, 0, :] if z is None else torch.as_tensor(z).to("cpu", _DT)
    v = getattr(data, "v", None)
    v = None if v is None else torch.as_tensor(v).to("cpu", _DT)
    return X, torch.as_tensor(data.Y).to("cpu", _DT), z, v


def _fail(title, message, **details):
    return Feedback(False, title, message, details)


def _norm(W, norm):
    if norm == "fro":
        return torch.linalg.matrix_norm(W, "fro")
    if norm == "nuc":
        return torch.linalg.matrix_norm(W, "nuc")
    return W.abs().pow(float(norm)).sum().pow(1.0 / float(norm))


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


def _alpha(alpha, n, T, name="alpha"):
    """Validate a reference selection (raises: it is not the learner's answer)."""
    a = torch.as_tensor(alpha).to("cpu")
    if a.dtype.is_floating_point or a.shape != (n,) or (a < 0).any() or (a >= T).any():
        raise ValueError(f"{name} must be {n} integer token indices in 0..{T - 1}, got {alpha!r}")
    return a.long()


def _margins(W, X, z, alpha):
    """(x_{i,alpha_i} - x_{it})^T W z_i for every i, t: shape (n, T), inf at t = alpha_i."""
    a = torch.einsum("ntd,de,ne->nt", X, W, z)  # logits a_it = x_it^T W z_i
    idx = torch.arange(X.shape[0])
    m = a[idx, alpha][:, None] - a  # (n, T)
    m[idx, alpha] = math.inf
    return m


# -- checks ----------------------------------------------------------------------------------
def check_svm_direction(W, data, alpha=None, norm="fro", *, exact=False, min_corr=0.99,
                        atol=1e-4) -> Feedback:
    r"""Check that ``W`` is the Att-SVM solution (``exact``) or its direction.

    The Att-SVM of a selection :math:`\alpha` (chapter 2; with ``norm="nuc"`` the Att-SVM⋆
    of chapter 5, with ``norm=lp`` the :math:`\ell_p`-AttSVM of chapter 9) is

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
        One instance (no trials dimension).
    alpha : array (n,), optional
        The selection; default: the optimal tokens (highest score :math:`\gamma_{it}`).
    norm : "fro", "nuc" or float lp > 1
    exact : bool
    min_corr, atol : float
    """
    title = "Att-SVM solution" if exact else "Att-SVM direction"
    norm = _check_norm(norm)
    X, Y, z, v = _data_tensors(data)
    n, T, d = X.shape
    if alpha is None:
        from attnlib.tokens import optimal_tokens

        alpha = optimal_tokens(data)
    alpha = _alpha(alpha, n, T)
    W, err = _tensor(W, "W")
    if err:
        return _fail(title, err)
    if W.shape != (d, d):
        return _fail(title, f"W must have shape (d, d) = ({d}, {d}), yours has {tuple(W.shape)}.")
    if not W.abs().max() > 0:
        return _fail(title, "W is zero: it gives every token the same attention.")
    m = _margins(W, X, z, alpha)  # (n, T)
    bound = 1 - atol if exact else 0.0
    total = n * (T - 1)
    bad = m < bound if exact else m <= bound
    if bad.any():
        k = int(bad.sum())
        i, t = divmod(int(torch.argmin(m).item()), T)
        rhs = "≥ 1" if exact else "> 0"
        return _fail(title, f"your W violates {k} of {total} margin constraints "
                            f"(x_iα_i − x_it)ᵀ W z_i {rhs}; the largest violation is at "
                            f"sample {i}, token {t} (margin {float(m[i, t]):.4g}, selected "
                            f"token {int(alpha[i])}).",
                     violations=k, constraints=total, worst=(i, t), margin=float(m[i, t]))
    from attnlib.svm import InfeasibleError, att_svm

    try:
        W_mm = torch.as_tensor(att_svm(data, alpha=alpha, norm=norm)).to("cpu", _DT)
    except InfeasibleError as e:
        return _fail(title, f"no W satisfies the constraints of this selection ({e}); your W "
                            "cannot be its max-margin solution.")
    name = {"fro": "Frobenius", "nuc": "nuclear"}.get(norm, f"ℓ{norm}")
    corr = float((W * W_mm).sum() / (W.norm() * W_mm.norm()))
    details = dict(correlation=corr, min_margin=float(m.min()), constraints=total)
    if exact:
        nw, nmm = float(_norm(W, norm)), float(_norm(W_mm, norm))
        details.update(norm=nw, optimal_norm=nmm)
        if nw > nmm * (1 + atol) + atol:
            return _fail(title, f"your W satisfies all {total} margin constraints but is not the "
                                f"smallest: its {name} norm is {nw:.6g}, the minimum is {nmm:.6g} "
                                f"(correlation with the solution {corr:.4f}).", **details)
        return Feedback(True, title, f"all {total} margin constraints hold (smallest margin "
                                     f"{float(m.min()):.4g}) and the {name} norm {nw:.6g} is the "
                                     f"minimum.", details)
    if corr < min_corr:
        return _fail(title, f"your W selects the right tokens (all {total} margins positive) but "
                            f"points elsewhere than the max-margin direction: corr(W, W^mm) = "
                            f"{corr:.4f} < {min_corr}.", **details)
    return Feedback(True, title, f"all {total} margins positive and corr(W, W^mm) = {corr:.4f} "
                                 f"≥ {min_corr} ({name} Att-SVM).", details)


def check_selection(alpha, data, W=None) -> Feedback:
    r"""Check a selection: the optimal tokens, or the tokens that ``W`` selects.

    Without ``W`` the answer must be the optimal tokens
    :math:`\mathrm{opt}_i = \arg\max_t \gamma_{it}`, :math:`\gamma_{it} = Y_i v^\top x_{it}`
    (chapter 1). With ``W`` it must be the selected tokens
    :math:`\arg\max_t x_{it}^\top W z_i` (the tokens softmax attention concentrates on).

    Parameters
    ----------
    alpha : array (n,) of int
        The answer, 0-based token indices.
    data : AttentionData
        One instance.
    W : array (d, d), optional
    """
    X, Y, z, v = _data_tensors(data)
    n, T, d = X.shape
    title = "selected tokens" if W is not None else "optimal tokens"
    if W is not None:
        W = torch.as_tensor(W).to("cpu", _DT)
        if W.shape != (d, d):
            raise ValueError(f"W must have shape ({d}, {d}), got {tuple(W.shape)}")
        value = torch.einsum("ntd,de,ne->nt", X, W, z)  # logits
        what = "logit"
    else:
        if v is None:
            raise ValueError("data.v is None: the optimal tokens need the head v")
        value = Y[:, None] * torch.einsum("ntd,d->nt", X, v)  # scores gamma_it
        what = "score"
    a, err = _tensor(alpha, "alpha", dtype=None)
    if err:
        return _fail(title, err)
    if a.dtype.is_floating_point:
        if not torch.equal(a, a.round()):
            return _fail(title, "alpha must hold integer token indices, yours has fractions.")
        a = a.long()
    a = a.reshape(-1) if a.dim() == 0 else a
    if a.shape != (n,):
        return _fail(title, f"alpha must hold one token index per sample, shape ({n},); yours "
                            f"has shape {tuple(a.shape)}.")
    if (a < 0).any() or (a >= T).any():
        i = int(torch.nonzero((a < 0) | (a >= T))[0, 0])
        return _fail(title, f"sample {i}: token {int(a[i])} does not exist (tokens are 0-based, "
                            f"0..{T - 1}).")
    best = value.max(dim=1).values  # (n,)
    mine = value[torch.arange(n), a.long()]
    wrong = mine < best - 1e-12 * (1 + best.abs())
    if wrong.any():
        i = int(torch.nonzero(wrong)[0, 0])
        right = int(value[i].argmax())
        return _fail(title, f"{int(wrong.sum())} of {n} samples wrong; e.g. sample {i}: you chose "
                            f"token {int(a[i])} ({what} {float(mine[i]):.4g}), but token {right} "
                            f"has the larger {what} {float(best[i]):.4g}.",
                     wrong=torch.nonzero(wrong)[:, 0].tolist())
    ties = ((value >= best[:, None] - 1e-12 * (1 + best.abs()[:, None])).sum(1) > 1).sum()
    note = f" ({int(ties)} samples have ties: any maximiser counts)" if ties else ""
    return Feedback(True, title, f"all {n} samples pick a token of largest {what}{note}.")


def check_locally_optimal(answer, data, alpha=None, norm="fro") -> Feedback:
    r"""Check an answer about local optimality (chapter 3).

    A selection :math:`\alpha` is locally optimal when it is feasible and, for every sample,
    the support tokens of :math:`W^{mm}_\alpha` (those whose margin constraint is tight)
    score lower than the selected token: :math:`\gamma_{i\alpha_i} > \gamma_{it}` for
    :math:`t \in \mathcal{T}_i(\alpha)`.

    Parameters
    ----------
    answer : bool or collection of selections
        With ``alpha``: whether ``alpha`` is locally optimal. Without: the set of all locally
        optimal selections (each an int when n = 1, else a tuple of n ints); only for
        :math:`T^n \le 4096`.
    data : AttentionData
    alpha : array (n,), optional
    norm : "fro", "nuc" or float lp > 1
    """
    from attnlib.tokens import is_locally_optimal

    title = "local optimality"
    norm = _check_norm(norm)
    X, Y, z, v = _data_tensors(data)
    n, T, d = X.shape
    if answer is None:
        return _fail(title, "answer is None: you have not answered yet (replace the stub above).")
    if alpha is not None:
        alpha = _alpha(alpha, n, T)
        if not isinstance(answer, (bool, int)) and not (hasattr(answer, "item")
                                                        and getattr(answer, "numel", lambda: 1)()
                                                        == 1):
            return _fail(title, f"answer must be True or False, got {answer!r}.")
        truth = bool(is_locally_optimal(data, alpha, norm=norm))
        if bool(answer) == truth:
            return Feedback(True, title, f"selection {alpha.tolist()} is "
                                         f"{'' if truth else 'not '}locally optimal.")
        return _fail(title, f"selection {alpha.tolist()} is {'' if truth else 'not '}locally "
                            f"optimal; you said it is{' not' if truth else ''}. "
                            + _why_local(data, alpha, norm, truth))
    if T**n > 4096:
        raise ValueError(f"without alpha the check enumerates T^n = {T**n} selections; "
                         "pass alpha or use a smaller instance (T^n <= 4096)")
    try:
        given = {(int(s),) if n == 1 and not hasattr(s, "__len__") else tuple(int(u) for u in s)
                 for s in answer}
    except (TypeError, ValueError):
        return _fail(title, "answer must be a collection of selections, e.g. {0, 1} for one "
                            "sample or {(0, 0), (1, 0)} for two.")
    truth = {s for s in itertools.product(range(T), repeat=n)
             if bool(is_locally_optimal(data, torch.tensor(s), norm=norm))}
    fmt = lambda S: "{" + ", ".join(str(s[0]) if n == 1 else str(s) for s in sorted(S)) + "}"
    if given == truth:
        return Feedback(True, title, f"the locally optimal selections are exactly {fmt(truth)}.")
    missing, extra = truth - given, given - truth
    parts = []
    if extra:
        parts.append(f"{fmt(extra)} {'is' if len(extra) == 1 else 'are'} not locally optimal")
    if missing:
        parts.append(f"you missed {fmt(missing)}")
    return _fail(title, "; ".join(parts) + ".", missing=sorted(missing), extra=sorted(extra))


def _why_local(data, alpha, norm, truth):
    """One sentence on why alpha is (not) locally optimal."""
    from attnlib.svm import InfeasibleError, att_svm
    from attnlib.tokens import support_tokens

    X, Y, z, v = _data_tensors(data)
    if truth:
        return "Every support token scores lower than its selected token."
    try:
        W_mm = att_svm(data, alpha=alpha, norm=norm)
    except InfeasibleError:
        return "No W satisfies its margin constraints: the selection is infeasible."
    if v is None:
        return ""
    gamma = Y[:, None] * torch.einsum("ntd,d->nt", X, v)  # (n, T)
    sup = torch.as_tensor(support_tokens(data, W_mm, alpha)).to("cpu").bool()  # (n, T) mask
    idx = torch.arange(X.shape[0])
    worse = sup & (gamma >= gamma[idx, alpha][:, None])
    if worse.any():
        i, t = (int(u) for u in torch.nonzero(worse)[0])
        return (f"At sample {i}, support token {t} scores {float(gamma[i, t]):.4g} ≥ "
                f"{float(gamma[i, alpha[i]]):.4g}, the score of the selected token "
                f"{int(alpha[i])}.")
    return ""


def check_rank(r, W, rtol=1e-6) -> Feedback:
    r"""Check a numerical rank: the number of singular values above ``rtol`` times the largest.

    .. math:: \mathrm{rank}(W) = \#\{k : \sigma_k(W) > \mathrm{rtol}\,\sigma_1(W)\}

    (chapter 5: the Att-SVM⋆ solution has rank at most n).
    """
    title = "rank"
    W = torch.as_tensor(W.detach() if hasattr(W, "detach") else W).to("cpu", _DT)
    if W.dim() != 2:
        raise ValueError(f"W must be a matrix, got shape {tuple(W.shape)}")
    sv = torch.linalg.svdvals(W)
    true = int((sv > rtol * sv.max()).sum()) if sv.numel() and sv.max() > 0 else 0
    if r is None:
        return _fail(title, "r is None: you have not answered yet (replace the stub above).")
    try:
        rf = float(r.item() if hasattr(r, "item") else r)
    except (TypeError, ValueError, RuntimeError):
        return _fail(title, f"r must be a number, got {r!r}.")
    if rf == true:
        return Feedback(True, title, f"W has rank {true} (singular values above {rtol:g}·σ₁).",
                        dict(rank=true))
    shown = ", ".join(f"{float(s):.3g}" for s in sv[: min(len(sv), true + 2)])
    hint = (" Count only singular values above the relative tolerance: tiny ones are "
            "round-off." if rf > true else "")
    return _fail(title, f"you said {r}; W has numerical rank {true} (leading singular values "
                        f"{shown}; tolerance {rtol:g}·σ₁).{hint}", rank=true)


def check_md_step(W_next, W, grad, lr, lp) -> Feedback:
    r"""Check one :math:`\ell_p` mirror-descent step (chapter 9).

    With the potential :math:`\psi(W) = \frac1p \|W\|_p^p` (entrywise), whose mirror map is
    :math:`\nabla\psi(W) = \mathrm{sign}(W)\,|W|^{p-1}`, one step is

    .. math::
        \nabla\psi(W^+) = \nabla\psi(W) - \eta\, G, \qquad
        W^+ = \mathrm{sign}(\cdot)\,|\cdot|^{1/(p-1)} \text{ of the right-hand side.}

    Parameters
    ----------
    W_next : array
        The answer :math:`W^+`.
    W, grad : array, same shape
        The current iterate and the gradient (already normalised if the step is).
    lr : float
        :math:`\eta > 0`.
    lp : float
        :math:`p > 1`.
    """
    title = f"ℓ{lp:g} mirror-descent step" if isinstance(lp, (int, float)) else "mirror step"
    lp, lr = float(lp), float(lr)
    if not lp > 1:
        raise ValueError(f"lp must be > 1, got {lp}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    W = torch.as_tensor(W.detach() if hasattr(W, "detach") else W).to("cpu", _DT)
    G = torch.as_tensor(grad.detach() if hasattr(grad, "detach") else grad).to("cpu", _DT)
    if W.shape != G.shape:
        raise ValueError(f"grad must have W's shape {tuple(W.shape)}, got {tuple(G.shape)}")
    theta = W.sign() * W.abs().pow(lp - 1) - lr * G  # dual step: grad psi(W) - lr * G
    ref = _md(W, G, lr, lp)
    Wn, err = _tensor(W_next, "W_next")
    if err:
        return _fail(title, err)
    if Wn.shape != W.shape:
        return _fail(title, f"W_next must have W's shape {tuple(W.shape)}, yours has "
                            f"{tuple(Wn.shape)}.")
    scale = float(ref.abs().max()) + 1e-300
    err_ = (Wn - ref).abs()
    tol = 1e-8 * max(1.0, scale)
    if float(err_.max()) <= tol:
        return Feedback(True, title, f"W⁺ matches ∇ψ(W⁺) = ∇ψ(W) − η∇L to {float(err_.max()):.1e}.",
                        dict(max_error=float(err_.max())))
    k = int(err_.argmax())
    pos = tuple(int(u) for u in torch.unravel_index(torch.tensor(k), W.shape))
    hint = ""
    if torch.allclose(Wn, W - lr * G, rtol=1e-8, atol=tol) and lp != 2:
        hint = (" This is a plain gradient step W − η∇L; mirror descent steps in the dual: map "
                "W by sign(W)|W|^(p−1), subtract η∇L, and map back by sign(·)|·|^(1/(p−1)).")
    elif torch.allclose(Wn, theta, rtol=1e-8, atol=tol):
        hint = " You stopped in the dual: map back with sign(·)|·|^(1/(p−1))."
    elif torch.allclose(Wn, _md(W, -G, lr, lp), rtol=1e-8, atol=tol):
        hint = " Check the sign of the gradient term: descent subtracts η∇L."
    return _fail(title, f"{int((err_ > tol).sum())} of {W.numel()} entries are off; the largest "
                        f"error is at entry {pos}: yours {float(Wn[pos]):.6g}, expected "
                        f"{float(ref[pos]):.6g}.{hint}", max_error=float(err_.max()), entry=pos)


def _md(W, G, lr, lp):
    """One l_p mirror step: (grad psi)^{-1}(grad psi(W) - lr G), grad psi = sign |.|^(p-1)."""
    theta = W.sign() * W.abs().pow(lp - 1) - lr * G  # dual
    return theta.sign() * theta.abs().pow(1 / (lp - 1))  # back to the primal


def check_value(answer, expected, *, rtol=1e-6, atol=1e-9, name="value") -> Feedback:
    r"""Generic numeric check: ``|answer - expected| <= atol + rtol |expected|`` entrywise.

    Parameters
    ----------
    answer, expected : number or array (same shape)
    rtol, atol : float
    name : str
        What the value is, for the message ("the margin", "cos(p, p_mm)").
    """
    title = name
    exp = torch.as_tensor(expected.detach() if hasattr(expected, "detach") else expected)
    exp = exp.to("cpu", _DT)
    ans, err = _tensor(answer, name)
    if err:
        return _fail(title, err)
    if ans.shape != exp.shape:
        if ans.numel() == exp.numel():
            ans = ans.reshape(exp.shape)
        else:
            return _fail(title, f"{name} must have shape {tuple(exp.shape)}, yours has "
                                f"{tuple(ans.shape)}.")
    tol = atol + rtol * exp.abs()
    off = (ans - exp).abs() > tol
    if not off.any():
        shown = f"{float(ans):.6g}" if ans.numel() == 1 else f"all {ans.numel()} entries"
        return Feedback(True, title, f"{shown} within tolerance (rtol={rtol:g}, atol={atol:g}).")
    if exp.numel() == 1:
        return _fail(title, f"{name} = {float(ans):.6g}, expected {float(exp):.6g} "
                            f"(rtol={rtol:g}, atol={atol:g}).")
    k = int(((ans - exp).abs() - tol).argmax())
    pos = tuple(int(u) for u in torch.unravel_index(torch.tensor(k), exp.shape))
    return _fail(title, f"{int(off.sum())} of {exp.numel()} entries of {name} are off; e.g. "
                        f"entry {pos}: yours {float(ans[pos]):.6g}, expected "
                        f"{float(exp[pos]):.6g}.", entries_off=int(off.sum()))
