"""Numeric checks: a numerical rank, one mirror-descent step, any value (chapters 5, 9).

See :mod:`attnlib.check` for how a chapter uses them.
"""

from __future__ import annotations

import torch

from attnlib.check.feedback import Feedback, answer_tensor, fail, reference
from attnlib.train import inverse_mirror_map, mirror_map

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
    shown = ", ".join(f"{float(s):.3g}" for s in sv[: min(len(sv), true + 2)])
    hint = (" Count only singular values above the relative tolerance: tiny ones are "
            "round-off." if rf > true else "")
    return fail(title, f"you said {r}; W has numerical rank {true} (leading singular values "
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
    W, G = reference(W, "W"), reference(grad, "grad")
    if W.shape != G.shape:
        raise ValueError(f"grad must have W's shape {tuple(W.shape)}, got {tuple(G.shape)}")
    theta = mirror_map(W, lp) - lr * G  # dual step: grad psi(W) - lr * G
    ref = inverse_mirror_map(theta, lp)  # back to the primal
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
    hint = ""
    if torch.allclose(Wn, W - lr * G, rtol=1e-8, atol=tol) and lp != 2:
        hint = (" This is a plain gradient step W − η∇L; mirror descent steps in the dual: map "
                "W by sign(W)|W|^(p−1), subtract η∇L, and map back by sign(·)|·|^(1/(p−1)).")
    elif torch.allclose(Wn, theta, rtol=1e-8, atol=tol):
        hint = " You stopped in the dual: map back with sign(·)|·|^(1/(p−1))."
    elif torch.allclose(Wn, _md(W, -G, lr, lp), rtol=1e-8, atol=tol):
        hint = " Check the sign of the gradient term: descent subtracts η∇L."
    return fail(title, f"{int((err_ > tol).sum())} of {W.numel()} entries are off; the largest "
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
    if exp.numel() == 1:
        return fail(title, f"{name} = {float(ans):.6g}, expected {float(exp):.6g} "
                            f"(rtol={rtol:g}, atol={atol:g}).")
    k = int(((ans - exp).abs() - tol).argmax())
    pos = tuple(int(u) for u in torch.unravel_index(torch.tensor(k), exp.shape))
    return fail(title, f"{int(off.sum())} of {exp.numel()} entries of {name} are off; e.g. "
                        f"entry {pos}: yours {float(ans[pos]):.6g}, expected "
                        f"{float(exp[pos]):.6g}.", entries_off=int(off.sum()))
