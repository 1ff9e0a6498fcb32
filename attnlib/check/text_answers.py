r"""Check of the selection statistics on real sentences (chapter 10).

The learner computes, for one trained model :math:`W`, the **attention mass** on the planted
word and the **top-1 hit rate** of chapter 10's definition of a task with a known relevant token:

.. math::
    \mathrm{mass} = \frac1N\sum_i s_{ir_i}, \qquad
    \mathrm{hit} = \frac1N\sum_i [\arg\max_t s_{it} = r_i], \qquad
    s_i = \mathrm{softmax}(X_i W z_i).

:func:`check_planted_attention` compares the answer with an **independent** computation:
NumPy float64, one sentence at a time from the definition, never ``attnlib.text``'s batched
``attention`` / ``relevant_attention`` that the chapter's experiment uses. Wrong answers get a
diagnosis of the common mistakes (a transposed :math:`W`, 1-based positions, a sum over the
sentences instead of the mean, a softmax that is not normalised, the attention on the most
attended token instead of the planted word), never the expected value. See ``attnlib.check``.
"""

from __future__ import annotations

import numpy as np

from attnlib.check.feedback import Feedback, answer_tensor, fail, reference
from attnlib.check.numeric import check_value

__all__ = ["check_planted_attention", "planted_attention_oracle"]


def _softmax(a: np.ndarray) -> np.ndarray:
    e = np.exp(a - a.max())
    return e / e.sum()


def planted_attention_oracle(W, X, z, relevant) -> dict:
    r"""Mass and hit rate from their definition, one sentence at a time (NumPy float64).

    Also returns the values that the common mistakes give (keys ``"mistakes_mass"``,
    ``"mistakes_hit"``: hint -> value) and the number of sentences whose two largest logits
    are too close to tell which is the top token in float32 (``"ties"``).

    Parameters
    ----------
    W : array (d, d)
    X : array (N, T, d)
    z : array (N, d)
    relevant : int array (N,), 0-based positions :math:`r_i`
    """
    W, X, z = (reference(a, n).numpy() for a, n in ((W, "W"), (X, "X"), (z, "z")))
    r = np.asarray(reference(relevant, "relevant").numpy())
    if X.ndim != 3 or W.shape != (X.shape[-1],) * 2 or z.shape != (X.shape[0], X.shape[-1]):
        raise ValueError(f"X must be (N,T,d), W (d,d) and z (N,d); got {X.shape}, {W.shape}, "
                         f"{z.shape}")
    N, T, _ = X.shape
    if r.shape != (N,) or not np.array_equal(r, np.round(r)) or r.min() < 0 or r.max() >= T:
        raise ValueError(f"relevant must hold N = {N} token positions in 0..{T - 1}")
    r = r.astype(np.int64)
    s, sT, top, topT, raw, ties = (np.empty(N) for _ in range(6))
    for i in range(N):
        a = X[i] @ (W @ z[i])  # a_t = x_it^T W z_i
        aT = X[i] @ (W.T @ z[i])  # the transposed W
        si, siT = _softmax(a), _softmax(aT)
        s[i], sT[i], raw[i] = si[r[i]], siT[r[i]], np.exp(min(a[r[i]], 700.0))
        top[i], topT[i] = np.argmax(si) == r[i], np.argmax(siT) == r[i]
        gap = np.sort(a)[-2:]
        ties[i] = gap[1] - gap[0] <= 1e-5 * (1.0 + np.abs(a).max())
    shift = np.array([_softmax(X[i] @ (W @ z[i]))[r[i] - 1] for i in range(N)])
    top1 = np.array([np.argmax(X[i] @ (W @ z[i])) == r[i] - 1 for i in range(N)])
    best = np.array([_softmax(X[i] @ (W @ z[i])).max() for i in range(N)])
    transposed = ("Your W is transposed: the logit of token t is x_tᵀ W z_i, keys on the left "
                  "of W, the query on the right.")
    one_based = ("Your positions look shifted by one: relevant[i] is already a 0-based Python "
                 "index of the planted word, use it as it is.")
    summed = ("You summed over the sentences: the statistic is a mean, so divide by the "
              "number of sentences N.")
    return dict(mass=float(s.mean()), hit=float(top.mean()), ties=int(ties.sum()), N=N,
                mistakes_mass={
                    transposed: sT.mean(), one_based: shift.mean(), summed: s.sum(),
                    "Your attention is not normalised: s_i = exp(a_i) / Σ_t exp(a_it), the "
                    "softmax divides by the sum over the tokens.": raw.mean(),
                    "This is the attention on each sentence's most attended token, not on its "
                    "planted word r_i.": best.mean()},
                mistakes_hit={transposed: topT.mean(), one_based: top1.mean(),
                              summed: top.sum()})


def check_planted_attention(stats, W, X, z, relevant) -> Feedback:
    r"""Check ``stats = (mass, hit)``: the attention mass on the planted word and the top-1
    hit rate of the model ``W`` on the sentences ``X`` with queries ``z`` (chapter 10).

    The mass must match to a relative 1e-4 (float32 data); the hit rate to within the
    sentences whose top two logits tie within float32 round-off (plus half a sentence).

    Parameters
    ----------
    stats : pair of numbers (mass, hit)
        The answer.
    W : array (d, d)
    X : array (N, T, d)
    z : array (N, d)
    relevant : int array (N,)
        The 0-based position of each sentence's planted word.
    """
    title = "attention on the planted word"
    ref = planted_attention_oracle(W, X, z, relevant)
    if stats is None:
        return fail(title, "stats is None: you have not answered yet (replace the stub above).")
    if not isinstance(stats, (tuple, list)) or len(stats) != 2:
        return fail(title, "answer with the pair (mass, hit).")
    for x, name in zip(stats, ("mass", "hit")):
        t, err = answer_tensor(x, name)
        if err and "NaN or Inf" in err:
            return fail(title, f"{name} is not finite: exp of the logits overflows. The softmax "
                               "divides exp(a_it) by Σ_t exp(a_it), after subtracting the "
                               "largest logit (torch.softmax does both).")
        if err:
            return fail(title, err)
        if t.numel() != 1:
            return fail(title, f"{name} must be one number (the mean over the sentences), "
                               f"yours has shape {tuple(t.shape)}.")
    fb_mass = check_value(stats[0], ref["mass"], rtol=1e-4, atol=1e-6, name="mass",
                          mistakes=ref["mistakes_mass"])
    fb_hit = check_value(stats[1], ref["hit"], rtol=0, atol=(ref["ties"] + 0.5) / ref["N"],
                         name="hit rate", mistakes=ref["mistakes_hit"])
    details = dict(N=ref["N"], ties=ref["ties"])
    if fb_mass and fb_hit:
        return Feedback(True, title, f"mass and hit rate match the definition, computed "
                                     f"sentence by sentence over {ref['N']} sentences.", details)
    wrong = [fb.message for fb in (fb_mass, fb_hit) if not fb]
    if len(wrong) == 2:  # the same mistake in both: name it once
        for hint in ref["mistakes_hit"]:
            if hint in wrong[0]:
                wrong[1] = wrong[1].replace(f" {hint}", "")
    return fail(title, " ".join(wrong), **details)
