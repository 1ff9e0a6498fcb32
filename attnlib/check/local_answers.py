r"""Checks for the write-it-yourself exercises of chapters 3 and 4.

Chapter 3: the learner writes the test of local optimality for the prompt model and applies
it to every selection of a small instance; :func:`check_local_selections` compares the set
with an **independent** computation written here in NumPy float64, never with
``attnlib.optimality`` or ``attnlib.svm``:

- the Att-SVM :math:`\min\|p\|` s.t. :math:`(k_{i\alpha_i} - k_{it})^\top p \ge 1` is solved
  as a least-distance program by the Lawson-Hanson reduction to non-negative least squares
  (SciPy's ``nnls``): with :math:`E = [A^\top; \mathbf 1^\top]` and :math:`f = e_{d+1}`,
  :math:`u = \mathrm{nnls}(E, f)`, :math:`r = Eu - f`; the problem is infeasible iff
  :math:`r = 0`, else :math:`p = -r_{1:d}/r_{d+1}` (``min_norm_point``);
- the support tokens are read from the margins, and the scores compared, as the definition
  says (``locally_optimal_oracle``).

Chapter 4: :func:`check_joint_step`, one step of joint normalised gradient descent on
:math:`(v, p)`, compared with central finite differences of the risk written from its
definition.

Wrong answers get a diagnosis of the common mistakes (infeasible selections kept, margins
compared with 1 exactly, scores without the labels, 1-based indices, comparing with every
token instead of the support tokens; an ascent step, a missing or joint normalisation, the
p step taken at the updated v (or the v step at the updated p), the softmax over samples),
never the expected value.
See ``attnlib.check`` for how a chapter uses a check.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch
from scipy.optimize import nnls

from attnlib.check.feedback import Feedback, answer_tensor, fail, one_instance, reference
from attnlib.check.numeric import check_value

__all__ = ["check_local_selections", "check_joint_step", "min_norm_point",
           "locally_optimal_oracle", "joint_risk_oracle", "selection_set_message"]

_SUPPORT_TOL = 1e-6  # a margin within 1 + this (relative) is active
_SCORE_TOL = 1e-10  # a support token scoring above best - this violates strictness
_H = 1e-6  # finite-difference step (central differences)


def min_norm_point(A, b=None) -> np.ndarray | None:
    r"""The minimum-norm :math:`w` with :math:`A w \ge b` (rows of ``A``; ``b`` defaults to
    all ones), or ``None`` when no :math:`w` satisfies the constraints. Lawson-Hanson's
    least-distance programming by non-negative least squares; exact up to round-off, no
    convex solver."""
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] == 0:
        raise ValueError(f"A must be a non-empty matrix (m, d), got shape {A.shape}")
    m, d = A.shape
    b = np.ones(m) if b is None else np.asarray(b, dtype=np.float64)
    if b.shape != (m,):
        raise ValueError(f"b must have shape ({m},), got {b.shape}")
    E = np.vstack([A.T, b[None, :]])
    f = np.zeros(d + 1)
    f[-1] = 1.0
    u, _ = nnls(E, f, maxiter=50 * (m + d + 1))
    r = E @ u - f
    if np.linalg.norm(r) < 1e-10:  # a Farkas certificate: A^T u = 0, b^T u = 1, u >= 0
        return None
    w = -r[:d] / r[d]
    if (A @ w - b).min() < -1e-7 * (1 + np.abs(A).max() * np.abs(w).max()):
        return None  # round-off made a near-infeasible system look feasible
    return w


def _prompt_rows(X, alpha, W):
    """Constraint rows (k_{i alpha_i} - k_it)^T, with their (i, t)."""
    n, T, _ = X.shape
    K = X @ W  # k_it = W^T x_it, as rows
    rows = [(i, t, K[i, alpha[i]] - K[i, t]) for i in range(n) for t in range(T)
            if t != alpha[i]]
    return np.array([r for *_, r in rows]), [(i, t) for i, t, _ in rows]


def locally_optimal_oracle(X, Y, v, alpha, W=None, *, labels=True, support="active",
                           feasible_only=True) -> bool:
    r"""Whether ``alpha`` is locally optimal for the prompt model (chapter 3), from the
    definition: the p-SVM of ``alpha`` is feasible and every support token scores strictly
    below the selected one, :math:`\gamma_{it} < \gamma_{i\alpha_i}`,
    :math:`\gamma_{it} = Y_i v^\top x_{it}`.

    The keywords give the variants the check recognises as mistakes: ``labels=False`` scores
    without :math:`Y_i`; ``support="none"`` (no token counts as support: margins compared
    with 1 exactly), ``"all"`` (every token), ``"inactive"`` (the tokens that are *not*
    support tokens); ``feasible_only=False`` counts an infeasible selection as locally
    optimal.
    """
    X, Y, v = (np.asarray(a, dtype=np.float64) for a in (X, Y, v))
    d = X.shape[-1]
    W = np.eye(d) if W is None else np.asarray(W, dtype=np.float64)
    A, where = _prompt_rows(X, alpha, W)
    p = min_norm_point(A)
    if p is None:
        return not feasible_only
    margins = A @ p
    active = margins <= 1 + _SUPPORT_TOL * max(1.0, float(np.abs(margins).max()))
    chosen = {"active": active, "none": np.zeros_like(active), "all": np.ones_like(active),
              "inactive": ~active}[support]
    gamma = (Y[:, None] if labels else 1.0) * (X @ v)
    return not any(c and gamma[i, t] >= gamma[i, alpha[i]] - _SCORE_TOL
                   for c, (i, t) in zip(chosen, where))


def _selection_set(answer, n, T):
    """The answer as a set of n-tuples of ints, or an error string."""
    try:
        if torch.is_tensor(answer) or isinstance(answer, np.ndarray):
            answer = np.asarray(torch.as_tensor(answer).cpu()).reshape(-1, n).tolist()
        if isinstance(answer, dict):
            return None, ("answer with a set of selections (tuples), not a dict; e.g. "
                          "{a for a in selections if locally_optimal(a)}.")
        given = set()
        for s in answer:
            s = [s] if not hasattr(s, "__len__") else list(s)
            if any(float(u) != int(u) for u in s):
                return None, "each token index must be an integer."
            given.add(tuple(int(u) for u in s))
    except (TypeError, ValueError):
        return None, (f"answer must be a collection of selections, each a tuple of {n} token "
                      f"indices, e.g. {{{(0,) * n}}}.")
    if any(len(s) != n for s in given):
        return None, f"each selection must name {n} token(s), one per sample."
    return given, None


def check_local_selections(answer, data, W=None) -> Feedback:
    r"""Check the set of all locally optimal selections of the prompt model (chapter 3).

    Parameters
    ----------
    answer : collection of selections
        Each a tuple of n token indices (0-based), one per sample.
    data : AttentionData
        One instance with a head ``v``; the prompt model with keys :math:`k_{it} = W^\top
        x_{it}`, scores :math:`\gamma_{it} = Y_i v^\top x_{it}`.
    W : array (d, d), optional
        The fixed key matrix (default identity).
    """
    title = "locally optimal selections (by hand)"
    data = one_instance(data)
    if data.v is None:
        raise ValueError("data must carry the head v (the scores are Y_i v^T x_it)")
    X, Y, v = (reference(t, nm).numpy() for t, nm in ((data.X, "X"), (data.Y, "Y"),
                                                       (data.v, "v")))
    n, T, d = X.shape
    if T**n > 4096:
        raise ValueError(f"data: the check enumerates T^n = {T**n} selections (at most 4096)")
    Wn = np.eye(d) if W is None else reference(W, "W").numpy()
    if Wn.shape != (d, d):
        raise ValueError(f"W must have shape (d, d) = {(d, d)}, got {Wn.shape}")
    if answer is None:
        return fail(title, "answer is None: you have not answered yet (replace the stub above).")
    given, err = _selection_set(answer, n, T)
    if err:
        return fail(title, err)
    sels = list(itertools.product(range(T), repeat=n))
    truth_of = lambda **kw: {a for a in sels if locally_optimal_oracle(X, Y, v, a, Wn, **kw)}
    truth = truth_of()
    fmt = lambda S: "{" + ", ".join(map(str, sorted(S))) + "}"
    if given == truth:
        return Feedback(True, title, f"your test finds the {len(truth)} locally optimal "
                                     f"selections among the {len(sels)}: {fmt(truth)}.",
                        dict(n_locally_optimal=len(truth)))
    one_based = given == {tuple(u + 1 for u in s) for s in truth}
    if one_based or any(min(s) < 0 or max(s) >= T for s in given):
        if one_based or all(1 <= u <= T for s in given for u in s):
            return fail(title, f"your token indices look 1-based: count tokens from 0, as "
                               f"Python does (0..{T - 1}); the prose's x_1 is token 0.")
        return fail(title, f"token indices must lie in 0..{T - 1}.")
    feasible = truth_of(support="none")
    mistakes = [
        (truth_of(feasible_only=False),
         "You counted selections whose Att-SVM is infeasible: local optimality needs a "
         "feasible SVM first (cvxpy reports status 'infeasible' and p.value is None)."),
        (feasible,
         "Your set is exactly the selections with a feasible SVM: no token ever counted as a "
         "support token. A solver's margins equal 1 only up to round-off; compare "
         "|margin − 1| with a tolerance (e.g. 1e-5)."),
        (truth_of(labels=False),
         "Your scores ignore the labels: γ_it = Y_i vᵀx_it, not vᵀx_it."),
        (truth_of(support="all"),
         "You compared the selected token with every token of its input; local optimality "
         "compares it only with its support tokens (the margins of p^mm(α) equal to 1)."),
        (truth_of(support="inactive"),
         "You compared with the tokens whose margin is above 1; the support tokens are the "
         "active ones, margin exactly 1."),
    ]
    for wrong, hint in mistakes:
        if given == wrong:
            return fail(title, hint)
    return fail(title, selection_set_message(given, truth, feasible, round_off=True),
                wrong=len(given - truth), missing=len(truth - given))


def selection_set_message(given: set, truth: set, feasible: set, *, round_off=False) -> str:
    """What is wrong with a set of selections, by count and by kind, never naming one.

    Naming a wrong selection per try would let a few scripted submissions read the answer
    off the feedback; counts per kind (an infeasible Att-SVM, a support token that scores as
    high as the selected token, a locally optimal selection left out) do not name it."""
    extra = given - truth
    infeasible = len(extra - feasible)
    beaten = len(extra & feasible)
    parts = []
    if extra:
        verb = "is" if len(extra) == 1 else "are"
        kinds = []
        if infeasible:
            kinds.append(f"{infeasible} with an infeasible Att-SVM")
        if beaten:
            kinds.append(f"{beaten} with a feasible Att-SVM but a support token that scores at "
                         "least as high as the selected token")
        parts.append(f"{len(extra)} of your {len(given)} selections {verb} not locally "
                     f"optimal: {' and '.join(kinds)}.")
        if beaten and round_off:
            parts.append("If your test saw no such support token, it missed one: a solver's "
                         "margins equal 1 only up to round-off, so compare |margin − 1| with a "
                         "tolerance.")
    missing = len(truth - given)
    if missing:
        parts.append(f"{missing} locally optimal selection{'s are' if missing > 1 else ' is'} "
                     "missing from your set: are your tolerances too strict, or the score "
                     "comparison reversed?")
    return " ".join(parts)


def joint_risk_oracle(X, Y, v, p, W=None, *, softmax_axis=-1, labels=True) -> np.ndarray:
    r"""The logistic risk of the prompt model with a trained head, from its definition:
    :math:`\mathcal L(v, p) = \frac1n\sum_i\log(1 + e^{-Y_i v^\top X_i^\top
    \mathrm{softmax}(X_i W p)})`, NumPy float64. ``v`` and ``p`` may carry one leading
    (batch) dimension. ``softmax_axis=0`` and ``labels=False`` give the mistakes the check
    recognises (a softmax over the samples, scores without the labels)."""
    X, Y, v, p = (np.asarray(a, dtype=np.float64) for a in (X, Y, v, p))
    W = np.eye(X.shape[-1]) if W is None else np.asarray(W, dtype=np.float64)
    v, p = np.broadcast_arrays(v, p)
    a = np.einsum("itd,de,...e->...it", X, W, p)
    ax = a.ndim - 1 if softmax_axis == -1 else a.ndim - 2
    a = a - a.max(ax, keepdims=True)
    s = np.exp(a)
    s /= s.sum(ax, keepdims=True)
    f = np.einsum("...it,itd,...d->...i", s, X, v)
    return np.logaddexp(0.0, -(Y if labels else 1.0) * f).mean(-1)


def _fd(fun, x):
    E = np.eye(x.size) * _H
    return (fun(x + E) - fun(x - E)) / (2 * _H)


def check_joint_step(vp_next, v, p, data, lr, W=None) -> Feedback:
    r"""Check one step of joint normalised gradient descent on :math:`(v, p)` (chapter 4):

    .. math::
        v^+ = v - \eta\,\frac{\nabla_v\mathcal L}{\|\nabla_v\mathcal L\|},\qquad
        p^+ = p - \eta\,\frac{\nabla_p\mathcal L}{\|\nabla_p\mathcal L\|},

    both gradients at the current :math:`(v, p)`, each normalised by its own norm, computed
    here by central finite differences of ``joint_risk_oracle``.

    Parameters
    ----------
    vp_next : pair (v_next, p_next), arrays (d,)
        The answer.
    v, p : arrays (d,)
        The current iterate.
    data : AttentionData
        One instance (``X``, ``Y``); its own ``v`` is ignored.
    lr : float
        The step size :math:`\eta > 0`.
    W : array (d, d), optional
        The fixed key matrix (default identity).
    """
    title = "(v, p) after one joint normalised GD step"
    data = one_instance(data)
    X, Y = reference(data.X, "X").numpy(), reference(data.Y, "Y").numpy()
    d = X.shape[-1]
    v, p = reference(v, "v").numpy(), reference(p, "p").numpy()
    Wn = np.eye(d) if W is None else reference(W, "W").numpy()
    lr = float(lr)
    if not np.isfinite(lr) or lr <= 0:
        raise ValueError(f"lr must be a positive number, got {lr}")
    if v.shape != (d,) or p.shape != (d,) or Wn.shape != (d, d):
        raise ValueError(f"v and p must have shape (d,) = ({d},) and W (d, d); got "
                         f"{v.shape}, {p.shape}, {Wn.shape}")
    if vp_next is None:
        return fail(title, "vp_next is None: you have not answered yet (replace the stub "
                           "above).")
    if (torch.is_tensor(vp_next) or isinstance(vp_next, np.ndarray)) and \
            tuple(vp_next.shape) == (2, d):
        vp_next = tuple(vp_next)  # the pair stacked as rows
    if not isinstance(vp_next, (tuple, list)) or len(vp_next) != 2:
        return fail(title, "answer with the pair (v_next, p_next).")
    ans = []
    for x, name in zip(vp_next, ("v_next", "p_next")):
        t, err = answer_tensor(x, name)
        if err:
            return fail(title, err)
        ans.append(t.numpy().reshape(-1))
    if any(a.shape != (d,) for a in ans):
        return fail(title, f"v_next and p_next must each hold d = {d} numbers.")

    def grads(v0, p0, **kw):
        gv = _fd(lambda V: joint_risk_oracle(X, Y, V, p0, Wn, **kw), v0)
        gp = _fd(lambda P: joint_risk_oracle(X, Y, v0, P, Wn, **kw), p0)
        return gv, gp

    unit = lambda g: g / np.linalg.norm(g)
    gv, gp = grads(v, p)
    v1, p1 = v - lr * unit(gv), p - lr * unit(gp)
    both = np.linalg.norm(np.concatenate([gv, gp]))
    pair = lambda a, b: np.stack([a, b])
    step = lambda g_v, g_p: pair(v - lr * unit(g_v), p - lr * unit(g_p))
    mistakes = {
        "You moved up the gradients: a descent step subtracts η times each normalised "
        "gradient.": pair(v + lr * unit(gv), p + lr * unit(gp)),
        "Your step is not normalised: divide each gradient by its own norm, as in the "
        "experiment of this chapter.": pair(v - lr * gv, p - lr * gp),
        "You normalised both gradients by one norm (of the pair): each is divided by its own "
        "norm, ∇_v L/‖∇_v L‖ and ∇_p L/‖∇_p L‖.": pair(v - lr * gv / both, p - lr * gp / both),
        "Your p step used the updated v: take both gradients at the current (v, p), then "
        "step.": pair(v1, p - lr * unit(grads(v1, p)[1])),
        "Your v step used the updated p: take both gradients at the current (v, p), then "
        "step.": pair(v - lr * unit(grads(v, p1)[0]), p1),
        "Your pair is in the order (p, v): answer (v_next, p_next).": step(gv, gp)[::-1].copy(),
        "Your risk ignores the labels: the margin of sample i is Y_i f_i.":
            step(*grads(v, p, labels=False)),
        "Your softmax runs over the samples: attention normalises over the tokens t of each "
        "input (the last axis of X_i W p).": step(*grads(v, p, softmax_axis=0)),
    }
    fb = check_value(pair(*ans), step(gv, gp), rtol=1e-6, atol=1e-7,
                     name="(v_next, p_next) stacked", mistakes=mistakes)
    return Feedback(fb.ok, title, fb.message, fb.details)
