"""Numeric checks: a numerical rank, one mirror-descent step, any value (chapters 5, 9, 10).

See :mod:`attnlib.check` for how a chapter uses them.
"""

from __future__ import annotations

import numpy as np
import torch

from attnlib.check.feedback import DTYPE, Feedback, answer_tensor, fail, position, reference

__all__ = ["check_rank", "check_md_step", "check_value"]


def check_rank(r, W, rtol=1e-6) -> Feedback:
    r"""Check a numerical rank: the number of singular values above ``rtol`` times the largest.

    .. math:: \mathrm{rank}(W) = \#\{k : \sigma_k(W) > \mathrm{rtol}\,\sigma_1(W)\}

    (chapter 5: the Att-SVM⋆ solution has rank at most n).
    """
    title = "rank"
    W = reference(W, "W")
    if W.dim() != 2:
        raise ValueError(f"W must be a matrix, got shape {tuple(W.shape)}")
    sv = torch.linalg.svdvals(W)
    true = int((sv > rtol * sv.max()).sum()) if sv.numel() and sv.max() > 0 else 0
    if r is None:
        return fail(title, "r is None: you have not answered yet (replace the stub above).")
    try:
        rf = float(r.item() if hasattr(r, "item") else r)
    except (TypeError, ValueError, RuntimeError):
        return fail(title, f"r must be a number, got {r!r}.")
    if rf == true:
        return Feedback(True, title, f"W has rank {true} (singular values above {rtol:g}·σ₁).",
                        dict(rank=true))
    if rf != round(rf) or rf < 0:
        return fail(title, f"a rank is a whole number ≥ 0, you said {r}.")
    if rf > true:  # which way, never the rank itself
        hint = ("too high: count only the singular values above the relative tolerance "
                f"{rtol:g}·σ₁; the tiny ones are round-off.")
    else:
        hint = (f"too low: count every singular value above {rtol:g}·σ₁ (the threshold is "
                "relative to the largest one, σ₁), not only the large ones.")
    return fail(title, f"your rank is {hint}", direction="high" if rf > true else "low")


def check_md_step(W_next, W, grad, lr, lp) -> Feedback:
    r"""Check one :math:`\ell_p` mirror-descent step (chapters 9, 10).

    With the potential :math:`\psi(W) = \frac1p \|W\|_p^p` (entrywise), whose mirror map is
    :math:`\nabla\psi(W) = \mathrm{sign}(W)\,|W|^{p-1}`, one step is

    .. math::
        \nabla\psi(W^+) = \nabla\psi(W) - \eta\, G, \qquad
        W^+ = \mathrm{sign}(\cdot)\,|\cdot|^{1/(p-1)} \text{ of the right-hand side.}

    The reference is computed here in NumPy float64 from this formula, independently of
    ``attnlib.train``'s mirror maps and of ``al.LpMirrorDescent`` (which a learner may be
    checking). Wrong answers get a diagnosis (a plain gradient step, stopping in the dual,
    the exponents swapped, the sign of the step), never the expected value.

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
    W, G = reference(W, "W"), reference(grad, "grad")
    if W.shape != G.shape:
        raise ValueError(f"grad must have W's shape {tuple(W.shape)}, got {tuple(G.shape)}")
    w, g = W.numpy(), G.numpy()
    theta = _power(w, lp - 1) - lr * g  # dual step: grad psi(W) - lr * G
    ref = torch.from_numpy(_power(theta, 1 / (lp - 1)))  # back to the primal
    Wn, err = answer_tensor(W_next, "W_next")
    if err:
        return fail(title, err)
    if Wn.shape != W.shape:
        return fail(title, f"W_next must have W's shape {tuple(W.shape)}, yours has "
                            f"{tuple(Wn.shape)}.")
    scale = float(ref.abs().max()) + 1e-300
    err_ = (Wn - ref).abs()
    tol = 1e-8 * max(1.0, scale)
    if float(err_.max()) <= tol:
        return Feedback(True, title, f"W⁺ matches ∇ψ(W⁺) = ∇ψ(W) − η∇L to {float(err_.max()):.1e}.",
                        dict(max_error=float(err_.max())))
    k = int(err_.argmax())
    pos = tuple(int(u) for u in torch.unravel_index(torch.tensor(k), W.shape))
    near = lambda x: torch.allclose(Wn, torch.as_tensor(x, dtype=DTYPE), rtol=1e-8, atol=tol)
    hint = ""
    if lp != 2 and near(w - lr * g):
        hint = (" This is a plain gradient step W − η∇L; mirror descent steps in the dual: map "
                "W by sign(W)|W|^(p−1), subtract η∇L, and map back by sign(·)|·|^(1/(p−1)).")
    elif lp != 2 and near(theta):
        hint = " You stopped in the dual: map back with sign(·)|·|^(1/(p−1))."
    elif lp != 2 and near(_power(_power(w, 1 / (lp - 1)) - lr * g, lp - 1)):
        hint = (" The two exponents are swapped: to the dual with |·|^(p−1), back to the "
                "primal with |·|^(1/(p−1)).")
    elif near(_power(_power(w, lp - 1) + lr * g, 1 / (lp - 1))):
        hint = " Check the sign of the gradient term: descent subtracts η∇L."
    if not hint:
        hint = " " + (diagnose(Wn, ref, tol) or "Recompute that entry by hand: map W to the "
                      "dual, take the step there, and map back.")
    return fail(title, f"{int((err_ > tol).sum())} of {W.numel()} entries are off; the largest "
                        f"error is at {position(pos)} (yours {float(Wn[pos]):.6g}).{hint}",
                max_error=float(err_.max()), entry=pos)


def _power(x: np.ndarray, e: float) -> np.ndarray:
    """sign(x) |x|^e entrywise (the l_p mirror maps), in NumPy float64."""
    with np.errstate(over="ignore"):
        return np.sign(x) * np.abs(x) ** e


def diagnose(ans, exp, tol=1e-9) -> str:
    """A hint naming a common mistake that turns ``exp`` into ``ans``, or ``""``.

    Recognised: 1-based instead of 0-based indices, a transposed matrix, a flipped sign, a
    missing or extra normalisation (``ans`` a multiple of ``exp``), rows or columns not
    normalised. The hint never contains the expected value.
    """
    ans, exp = torch.as_tensor(ans, dtype=DTYPE), torch.as_tensor(exp, dtype=DTYPE)
    if not exp.numel() or ans.shape != exp.shape:
        return ""
    floor = 1e-9 * (1.0 + float(exp.abs().max()))
    tol = torch.as_tensor(tol, dtype=DTYPE).clamp(min=floor)
    close = lambda a, b: a.shape == b.shape and bool(((a - b).abs() <= tol).all())
    integral = bool(torch.equal(exp, exp.round()) and torch.equal(ans, ans.round()))
    if integral and close(ans - 1, exp):
        return ("Your indices look 1-based: attnlib counts samples, tokens and steps from 0 "
                "(Python indexing).")
    if exp.dim() == 2 and exp.shape[0] == exp.shape[1] and not close(exp, exp.T) \
            and close(ans.T, exp):
        return ("Your matrix is the transpose of the right one: check which index runs over "
                "keys (x) and which over queries (z) in x^T W z.")
    if float(exp.abs().max()) > 0 and close(-ans, exp):
        return "Your answer has the wrong sign."
    na, ne = float(ans.norm()), float(exp.norm())
    if ne > 0 and na > 0 and int((exp != 0).sum()) > 1:  # one nonzero entry: no direction
        cos = float((ans * exp).sum()) / (na * ne)
        if cos > 1 - 1e-9 and abs(na / ne - 1) > 1e-6:
            return ("Your answer points the right way but has the wrong scale: a normalisation "
                    "is missing or extra.")
        if exp.dim() == 2 and exp.shape[1] > 1:
            for dim, what in ((1, "rows"), (0, "columns")):
                s = ans.sum(dim, keepdim=True)
                if (s.abs() > 0).all() and close(ans / s, exp):
                    return (f"Your {what} are not normalised: divide each by its sum (a "
                            "softmax or a probability vector sums to 1).")
    return ""


def check_value(answer, expected, *, rtol=1e-6, atol=1e-9, name="value",
                mistakes=None) -> Feedback:
    r"""Generic numeric check: ``|answer - expected| <= atol + rtol |expected|`` entrywise.

    A wrong answer gets where it is off and, when ``diagnose`` or ``mistakes`` recognise
    it, what went wrong, but never the expected value.

    Parameters
    ----------
    answer, expected : number or array (same shape)
    rtol, atol : float
    name : str
        What the value is, for the message ("the margin", "cos(p, p_mm)").
    mistakes : dict, optional
        ``{hint: wrong_value}``: known wrong answers of this exercise (e.g. ``p^mm`` where
        ``p^relax`` is asked), each with the hint shown when the answer matches it.
    """
    title = name
    exp = reference(expected, "expected")
    ans, err = answer_tensor(answer, name)
    if err:
        return fail(title, err)
    if ans.shape != exp.shape:
        if ans.numel() == exp.numel():
            ans = ans.reshape(exp.shape)
        else:
            return fail(title, f"{name} must have shape {tuple(exp.shape)}, yours has "
                                f"{tuple(ans.shape)}.")
    tol = atol + rtol * exp.abs()
    off = (ans - exp).abs() > tol
    if not off.any():
        shown = f"{float(ans):.6g}" if ans.numel() == 1 else f"all {ans.numel()} entries"
        return Feedback(True, title, f"{shown} within tolerance (rtol={rtol:g}, atol={atol:g}).")
    hint = ""
    for text, wrong in (mistakes or {}).items():
        w = reference(wrong, "mistakes")
        if w.numel() == ans.numel() and bool(((ans - w.reshape(ans.shape)).abs()
                                              <= atol + rtol * w.abs().reshape(ans.shape)).all()):
            hint = f" {text}"
            break
    hint = hint or (" " + diagnose(ans, exp, tol) if diagnose(ans, exp, tol) else "")
    if exp.numel() == 1:
        side = "large" if float(ans) > float(exp) else "small"
        return fail(title, f"{name} = {float(ans):.6g} is too {side} (rtol={rtol:g}, "
                            f"atol={atol:g}).{hint}")
    k = int(((ans - exp).abs() - tol).argmax())
    pos = tuple(int(u) for u in torch.unravel_index(torch.tensor(k), exp.shape))
    return fail(title, f"{int(off.sum())} of {exp.numel()} entries of {name} are off; the "
                        f"farthest is {position(pos)} (yours {float(ans[pos]):.6g}).{hint}",
                entries_off=int(off.sum()))
