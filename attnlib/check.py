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
arguments (the data, a norm name) raise ``ValueError``.

Strict mode: ``al.check.strict(True)`` makes every failed check raise ``AssertionError``
(grading, testing the instructor editions); ``Feedback(..., strict=True)`` does it for one
check. Its default comes from the environment variable ``ATTNLIB_CHECK_STRICT`` (``1``: on),
read in one place, :func:`is_strict`, so that a grader (``scripts/assignments.py``, the
notebook tests) can switch it on for a whole notebook run without editing it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import torch

from attnlib import optimality, svm, tokens
from attnlib.metrics import correlation
from attnlib.train import inverse_mirror_map, mirror_map

__all__ = ["Feedback", "strict", "is_strict", "STRICT_ENV", "check_svm_direction",
           "check_prompt_direction", "check_selection", "check_locally_optimal", "check_rank",
           "check_md_step", "check_value"]

_DT = torch.float64
STRICT_ENV = "ATTNLIB_CHECK_STRICT"  # "1": failed checks raise (the grader's switch)
_STRICT = {"on": None}  # set by strict(); None: follow STRICT_ENV


def strict(on=None) -> bool:
    """Switch strict mode on or off (``None``: leave it); returns whether it is on.

    In strict mode every failed check raises ``AssertionError`` with its message.
    ``strict(None)`` after ``strict(True|False)`` keeps the setting; the environment
    variable ``ATTNLIB_CHECK_STRICT`` is the default until ``strict`` is first called with a
    bool.
    """
    if on is not None:
        if not isinstance(on, bool):
            raise ValueError(f"on: expected True, False or None, got {on!r}")
        _STRICT["on"] = on
    return is_strict()


def is_strict() -> bool:
    """Whether failed checks raise: the value set by :func:`strict`, else the environment
    variable ``ATTNLIB_CHECK_STRICT`` (set and not ``"0"``): the one place it is read."""
    if _STRICT["on"] is not None:
        return _STRICT["on"]
    return os.environ.get(STRICT_ENV, "") not in ("", "0")


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
    strict : bool, optional
        Raise ``AssertionError`` at creation when the answer failed; default
        :func:`is_strict`.
    """

    ok: bool
    title: str
    message: str
    details: dict = field(default_factory=dict)
    strict: bool | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if not self.ok and (is_strict() if self.strict is None else self.strict):
            raise AssertionError(str(self))

    def __bool__(self) -> bool:
        return bool(self.ok)

    def __str__(self) -> str:
        mark = "✓ correct" if self.ok else "✗ not yet"
        return f"{mark} ({self.title}): {self.message}"

    __repr__ = __str__

    def _repr_markdown_(self) -> str:
        mark = "✅ **Correct**" if self.ok else "❌ **Not yet**"
        esc = lambda t: "".join("\\" + c if c in "\\*_`[]<>#|" else c for c in t)
        return f"{mark} ({esc(self.title)}): {esc(self.message)}"


# -- helpers -------------------------------------------------------------------------------
def _tensor(x, name, dtype=_DT):
    """The answer as a CPU tensor, or an error string for the feedback."""
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
        if not torch.isfinite(t).all():
            return None, f"{name} contains NaN or Inf."
    return t.cpu(), None


def _ref(x, name):
    """A reference argument (not the learner's answer) as a float64 CPU tensor."""
    return torch.as_tensor(x.detach() if hasattr(x, "detach") else x).to("cpu", _DT)


def _one(data):
    """``data`` on the CPU in float64, checked to be one instance (no trials dimension)."""
    if not (hasattr(data, "X") and hasattr(data, "Y")):
        raise ValueError(f"data must be an attnlib.AttentionData, got {type(data).__name__}")
    if getattr(data, "B", None) is not None or torch.as_tensor(data.X).dim() != 3:
        raise ValueError("data must hold one instance (X of shape (n,T,d)); take one trial "
                         "first: data.trial(b)")
    return data.to(device="cpu", dtype=_DT) if hasattr(data, "to") else data


def _fail(title, message, **details):
    return Feedback(False, title, message, details)


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
    data = _one(data)
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
    data = _one(data)
    n, d = data.n, data.d
    Wf = torch.eye(d, dtype=_DT) if W is None else _ref(W, "W")

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
    x, err = _tensor(ans, sym)
    if err:
        return _fail(title, err)
    if tuple(x.shape) != shape:
        return _fail(title, f"{sym} must have shape {shape}, yours has {tuple(x.shape)}.")
    if not x.abs().max() > 0:
        return _fail(title, f"{sym} is zero: it gives every token the same attention.")
    m = margins(x, alpha).clone()  # (n, T), 0 at the selected tokens
    m[torch.arange(n), alpha] = math.inf
    total = n * (T - 1)
    bad = m < 1 - atol if exact else m <= 0
    if bad.any():
        k = int(bad.sum())
        i, t = divmod(int(torch.argmin(m)), T)
        rhs = "≥ 1" if exact else "> 0"
        q = "W z_i" if sym == "W" else "W p"
        return _fail(title, f"your {sym} violates {k} of {total} margin constraints "
                            f"(x_iα_i − x_it)ᵀ {q} {rhs}; the largest violation is at "
                            f"sample {i}, token {t} (margin {float(m[i, t]):.4g}, selected "
                            f"token {int(alpha[i])}).",
                     violations=k, constraints=total, worst=(i, t), margin=float(m[i, t]))
    try:
        ref = _ref(solve(alpha, norm), "solution")
    except svm.InfeasibleError as e:
        return _fail(title, f"no {sym} satisfies the constraints of this selection ({e}).")
    name = _norm_name(norm)
    corr = float(correlation(x, ref, dims=x.dim()))
    details = dict(correlation=corr, min_margin=float(m.min()), constraints=total)
    if exact:
        nx, nref = float(_norm(x, norm)), float(_norm(ref, norm))
        details.update(norm=nx, optimal_norm=nref)
        if nx > nref * (1 + atol) + atol:
            return _fail(title, f"your {sym} satisfies all {total} margin constraints but is not "
                                f"the smallest: its {name} norm is {nx:.6g}, the minimum is "
                                f"{nref:.6g} (correlation with the solution {corr:.4f}).",
                         **details)
        return Feedback(True, title, f"all {total} margin constraints hold (smallest margin "
                                     f"{float(m.min()):.4g}) and the {name} norm {nx:.6g} is "
                                     "the minimum.", details)
    if corr < min_corr:
        return _fail(title, f"your {sym} selects the right tokens (all {total} margins positive) "
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
    data = _one(data)
    n, T = data.n, data.T
    if W is None and p is None:
        title, what = "optimal tokens", "score"
        value = tokens.scores(data)  # gamma_it, (n, T)
    else:
        title, what = "selected tokens", "logit"
        value = tokens.attention_logits(data, None if W is None else _ref(W, "W"),
                                        p=None if p is None else _ref(p, "p"))  # (n, T)
    a, err = _tensor(alpha, "alpha", dtype=None)
    if err:
        return _fail(title, err)
    if a.dtype.is_floating_point:
        if not torch.isfinite(a).all() or not torch.equal(a, a.round()):
            return _fail(title, "alpha must hold integer token indices, yours has fractions.")
    a = a.long().reshape(-1) if a.dim() == 0 else a.long()
    if a.shape != (n,):
        return _fail(title, f"alpha must hold one token index per sample, shape ({n},); yours "
                            f"has shape {tuple(a.shape)}.")
    if (a < 0).any() or (a >= T).any():
        i = int(torch.nonzero((a < 0) | (a >= T))[0, 0])
        return _fail(title, f"sample {i}: token {int(a[i])} does not exist (tokens are 0-based, "
                            f"0..{T - 1}).")
    best = value.max(dim=1).values  # (n,)
    mine = value[torch.arange(n), a]
    tie = 1e-12 * (1 + best.abs())
    wrong = mine < best - tie
    if wrong.any():
        i = int(torch.nonzero(wrong)[0, 0])
        right = int(value[i].argmax())
        return _fail(title, f"{int(wrong.sum())} of {n} samples wrong; e.g. sample {i}: you chose "
                            f"token {int(a[i])} ({what} {float(mine[i]):.4g}), but token {right} "
                            f"has the larger {what} {float(best[i]):.4g}.",
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
    data = _one(data)
    norm = _check_norm(norm)
    n, T = data.n, data.T
    Wf = None if W is None else _ref(W, "W")
    kw = dict(norm=norm, param=param, W=Wf)
    if answer is None:
        return _fail(title, "answer is None: you have not answered yet (replace the stub above).")
    if alpha is not None:
        alpha = _alpha(alpha, data)
        if not isinstance(answer, (bool, int)) and not (torch.is_tensor(answer)
                                                        and answer.numel() == 1):
            return _fail(title, f"answer must be True or False, got {answer!r}.")
        truth = bool(optimality.is_locally_optimal(data, alpha, **kw))
        sel = alpha.tolist()
        if bool(answer) == truth:
            return Feedback(True, title, f"selection {sel} is {'' if truth else 'not '}locally "
                                         "optimal.")
        return _fail(title, f"selection {sel} is {'' if truth else 'not '}locally optimal; you "
                            f"said it is{' not' if truth else ''}. "
                            + _why_local(data, alpha, truth, norm, param, Wf))
    if T**n > 4096:
        raise ValueError(f"without alpha the check enumerates T^n = {T**n} selections; pass "
                         "alpha or use a smaller instance (T^n <= 4096)")
    try:
        given = {(int(s),) if not hasattr(s, "__len__") else tuple(int(u) for u in s)
                 for s in answer}
    except (TypeError, ValueError):
        return _fail(title, "answer must be a collection of selections, e.g. {0, 1} for one "
                            "sample or {(0, 0), (1, 0)} for two.")
    if any(len(s) != n for s in given):
        return _fail(title, f"each selection must name {n} token(s), one per sample.")
    sels = optimality.enumerate_selections(data, **kw)
    truth = {tuple(a.tolist()) for a, ok in zip(sels.alpha, sels.locally_optimal) if ok}
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


def _why_local(data, alpha, truth, norm, param, W):
    """One sentence on why ``alpha`` is (not) locally optimal."""
    if truth:
        return "Every support token scores lower than its selected token."
    try:
        if param == "W":
            bad = optimality.violations(data, svm.att_svm(data, alpha=alpha, norm=norm), alpha)
        else:
            p_mm = svm.prompt_svm(data, alpha=alpha, W=W, norm=norm)
            Wf = torch.eye(data.d, dtype=_DT) if W is None else W
            bad = optimality.violations(data, Wf, alpha, z=p_mm.expand(data.n, -1))
    except svm.InfeasibleError:
        return "No solution satisfies its margin constraints: the selection is infeasible."
    gamma = tokens.scores(data)  # (n, T)
    own = gamma[torch.arange(data.n), alpha][:, None]
    if not bad.any():
        return ""
    i, t = (int(u) for u in torch.nonzero(bad)[0])
    return (f"At sample {i}, the support token {t} scores {float(gamma[i, t]):.4g} ≥ "
            f"{float(own[i, 0]):.4g}, the score of the selected token {int(alpha[i])}.")


def check_rank(r, W, rtol=1e-6) -> Feedback:
    r"""Check a numerical rank: the number of singular values above ``rtol`` times the largest.

    .. math:: \mathrm{rank}(W) = \#\{k : \sigma_k(W) > \mathrm{rtol}\,\sigma_1(W)\}

    (chapter 5: the Att-SVM⋆ solution has rank at most n).
    """
    title = "rank"
    W = _ref(W, "W")
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
    W, G = _ref(W, "W"), _ref(grad, "grad")
    if W.shape != G.shape:
        raise ValueError(f"grad must have W's shape {tuple(W.shape)}, got {tuple(G.shape)}")
    theta = mirror_map(W, lp) - lr * G  # dual step: grad psi(W) - lr * G
    ref = inverse_mirror_map(theta, lp)  # back to the primal
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
    return inverse_mirror_map(mirror_map(W, lp) - lr * G, lp)


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
    exp = _ref(expected, "expected")
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
