r"""The drag explorer of chapter 2: move the tokens or the start of gradient descent.

On the website a reader drags a key :math:`k_{it}` or the start :math:`p(0)` in the 2-D token
plane and watches, live, the Att-SVM solution :math:`p^{mm}(\alpha)`, its support tokens and
the gradient-descent path of :math:`p` move. The browser computes them (``token-drag.js``,
shipped offline with plotly.js by ``scripts/setup.sh``) from the data exported here. On a
phone a vertical swipe over the plots scrolls the page; a finger on a token (or on
:math:`p(0)`) drags it; from the keyboard, Tab reaches each token and the arrow keys move it:

.. math::

    p^{mm}(\alpha) = \arg\min_p \|p\| \ \text{s.t.}\ (k_{i\alpha_i} - k_{it})^\top p \ge 1,
    \qquad p \leftarrow p - \eta\,\frac{\nabla\mathcal L(p)}{\|\nabla\mathcal L(p)\|+\varepsilon}
    \ \text{(normalised) or}\ p - \eta\nabla\mathcal L(p),

with :math:`\mathcal L(p) = \frac1n\sum_i \ell\big(\sum_t \mathrm{softmax}(K_i p)_t\,
\gamma_{it}\big)`, the prompt model of chapters 1-3 (``TOKEN_EXAMPLES``: keys
:math:`k_{it} = W^\top x_{it}` in the plane of :math:`W = \mathrm{diag}(1, 1, 0)`, scores
:math:`\gamma_{it} = Y_i v^\top x_{it}`).

The export also carries attnlib's own answers (:func:`attnlib.prompt_svm`,
:func:`attnlib.support_tokens`, :func:`attnlib.train`) for the chapter's default and a few
moved configurations (:data:`MOVES`): the browser test (``tests/test_site_drag.py``) checks
the page's numbers against them. The view needs the website's JavaScript; in Jupyter the
fragment says so, and the live explorer (``al.explorers.token_plane``) is the one to use there.

See chapter 2, *The Att-SVM and gradient descent*.
"""

from __future__ import annotations

import html
import itertools
import json

import torch

from attnlib._validate import flag
from attnlib.examples import three_token_example
from attnlib.experiments.max_margin_measures import TOKEN_EXAMPLES
from attnlib.optimality import is_locally_optimal
from attnlib.plots.style import palette_hex
from attnlib.svm.config import InfeasibleError
from attnlib.svm.problems import prompt_svm
from attnlib.tokens import optimal_tokens, support_tokens
from attnlib.train.loop import train

__all__ = ["token_drag", "token_drag_data", "reference", "MOVES", "LRS", "LOSSES",
           "ITERATIONS"]

LRS = (0.01, 0.03, 0.1, 0.3, 1.0)  # the step sizes of the token-plane explorer
LOSSES = ("logistic", "exp", "correlation")
ITERATIONS = (0, 1000)  # the iteration slider's range
PLOTLY_SRC = "../plotly/plotly-basic.min.js"  # relative to a chapter page (book/*.html)
MODULE_SRC = "../explorers/token-drag.js"

#: Moved configurations whose attnlib answers the page carries (the browser test replays
#: them): each changes the chapter's default by a token moved (``move``: input, token, new
#: key), the start ``p0``, the selected token ``alpha`` (one index for every input, or one
#: per input) or a setting.
MOVES = (
    dict(example="e1-global", move=(0, 2, (0.4, -0.3))),    # x3 down-right: support moves
    dict(example="e1-global", move=(0, 1, (0.9, 0.9))),     # x2 up: two support tokens
    dict(example="e1-global", alpha=1),                     # select x2 instead
    dict(example="e1-global", move=(0, 2, (0.45, 0.5)), alpha=2),  # x3 inside: infeasible
    dict(example="e1-local", p0=(0.0, -1.5)),               # a start in the other basin
    dict(example="e1-local", alpha=1),                      # x2: locally optimal here
    dict(example="e1-global", loss="exp", lr=0.3),
    dict(example="e2", move=(1, 4, (0.2, -0.9))),
    # E2, selections of chapter 3 (one token per input): feasible but not locally optimal
    # (x_{2,1}, the optimal token of input 2, is a support token of x_{2,3}), infeasible
    # although each selected token alone is separable, and infeasible because x_{3,2} alone is
    dict(example="e2", alpha=(0, 2, 0)),
    dict(example="e2", alpha=(0, 0, 2)),
    dict(example="e2", alpha=(0, 0, 1)),
    dict(example="e2", normalized=False, lr=1.0, iterations=500),
)


def _example(example: str):
    if example not in TOKEN_EXAMPLES:
        raise ValueError(f"example: expected one of {tuple(TOKEN_EXAMPLES)}, got {example!r}")
    ex = TOKEN_EXAMPLES[example][0]("cpu")
    W = ex.init["W"]
    plane = W.diagonal() != 0  # the key plane of W = diag(1, 1, 0)
    keys = (ex.data.X @ W)[..., plane]  # (n, T, 2)
    gamma = ex.data.Y[:, None] * (ex.data.X @ ex.data.v)  # (n, T)
    return ex, keys, gamma


def _check_settings(lr, normalized, loss, iterations):
    if not (isinstance(lr, (int, float)) and not isinstance(lr, bool) and lr > 0):
        raise ValueError(f"lr: expected a number > 0, got {lr!r}")
    flag("normalized", normalized)
    if loss not in LOSSES:
        raise ValueError(f"loss: expected one of {LOSSES}, got {loss!r}")
    if not (isinstance(iterations, int) and ITERATIONS[0] <= iterations <= ITERATIONS[1]):
        raise ValueError(f"iterations: expected an int in {list(ITERATIONS)}, got {iterations!r}")


def reference(keys, gamma, alpha, p0, *, lr=0.1, normalized=True, loss="logistic",
              iterations=200, eps=0.0) -> dict:
    r"""attnlib's answers for one configuration of the token plane.

    Parameters
    ----------
    keys : array (n, T, 2)
        Keys :math:`k_{it}`.
    gamma : array (n, T)
        Scores :math:`\gamma_{it}` (the third token coordinate, read by :math:`v`).
    alpha : sequence of int (n,)
        The selection (0-based).
    p0 : pair of float
        Start of gradient descent.
    lr, normalized, loss, iterations, eps
        As in :func:`attnlib.train` (``iterations`` steps).

    Returns
    -------
    dict
        ``feasible``; ``p_mm`` (2,) and ``support`` (n, T) bools (``None`` if infeasible,
        :func:`attnlib.prompt_svm` raised :class:`attnlib.InfeasibleError`);
        ``locally_optimal`` (every support token scores below the selected one,
        ``attnlib.is_locally_optimal``); ``p_end`` (2,), :math:`p` after ``iterations`` steps
        of :func:`attnlib.train`.
    """
    _check_settings(lr, normalized, loss, iterations)
    K = torch.as_tensor(keys, dtype=torch.float64, device="cpu")  # the example's device (below)
    g = torch.as_tensor(gamma, dtype=torch.float64, device="cpu")
    if K.ndim != 3 or K.shape[-1] != 2 or g.shape != K.shape[:2]:
        raise ValueError(f"keys, gamma: expected shapes (n, T, 2) and (n, T), got "
                         f"{tuple(K.shape)} and {tuple(g.shape)}")
    n, T, _ = K.shape
    a = torch.as_tensor(alpha, dtype=torch.int64, device="cpu")
    if a.shape != (n,) or (a < 0).any() or (a >= T).any():
        raise ValueError(f"alpha: expected {n} token indices in [0, {T}), got {alpha!r}")
    # the prompt model of the examples: tokens (k, gamma), W = diag(1, 1, 0), v = (0, 0, 1)
    X = torch.cat([K, g[..., None]], -1)  # (n, T, 3)
    ex = three_token_example("global", device="cpu")
    data = ex.data.with_(X=X, Y=torch.ones(n, dtype=X.dtype))
    W = ex.init["W"]
    out = dict(feasible=True, p_mm=None, support=None)
    try:
        p_mm = prompt_svm(data, alpha=a, W=W)
        sup = support_tokens(data.X, W, a, z=p_mm.expand(n, -1))
        out.update(p_mm=p_mm[:2].tolist(), support=sup.tolist())
    except InfeasibleError:
        out["feasible"] = False
    out["locally_optimal"] = bool(is_locally_optimal(data, a, param="p", W=W))
    start = torch.tensor([float(p0[0]), float(p0[1]), 0.0], dtype=X.dtype)
    res = train(data, param="p", method="gd", lr=float(lr), steps=int(iterations),
                normalized=normalized, loss=loss, eps=float(eps), init={"W": W, "p": start},
                record_every=max(1, int(iterations)))
    out["p_end"] = res.p[:2].tolist()
    return out


def _config(example, *, move=None, alpha=None, p0=None, lr=0.1, normalized=True,
            loss="logistic", iterations=200) -> dict:
    """One configuration (data and settings) and attnlib's answers for it."""
    ex, keys, gamma = _example(example)
    keys = keys.clone()
    if move is not None:
        i, t, k = move
        keys[i, t] = torch.as_tensor(k, dtype=keys.dtype)
    sel = (optimal_tokens(ex.data).tolist() if alpha is None
           else [int(alpha)] * ex.data.n if isinstance(alpha, int) else [int(a) for a in alpha])
    start = ex.init["p"][0, :2].tolist() if p0 is None else [float(c) for c in p0]
    eps = float(ex.settings["eps"])
    cfg = dict(example=example, keys=keys.tolist(), alpha=sel, p0=start, lr=float(lr),
               normalized=bool(normalized), loss=loss, iterations=int(iterations), eps=eps)
    cfg["attnlib"] = reference(keys, gamma, sel, start, lr=float(lr), normalized=normalized,
                               loss=loss, iterations=int(iterations), eps=eps)
    return cfg


def token_drag_data(example: str = "e2", *, lr: float = 0.1, normalized: bool = True,
                    loss: str = "logistic", iterations: int = 200, moves=MOVES) -> dict:
    """What the page needs: every example's keys, scores, optimal tokens, start and
    :math:`\\varepsilon`; the defaults (``example`` and the settings); the controls' choices;
    and ``references``, attnlib's answers (:func:`reference`) for the default of every example
    and for each of ``moves``."""
    _check_settings(lr, normalized, loss, iterations)
    _example(example)  # checks the name
    examples = {}
    for name, (_, info) in TOKEN_EXAMPLES.items():
        ex, keys, gamma = _example(name)
        examples[name] = dict(keys=keys.tolist(), gamma=gamma.tolist(), info=info,
                              optimal=optimal_tokens(ex.data).tolist(),
                              p0=ex.init["p"][0, :2].tolist(), eps=float(ex.settings["eps"]))
    settings = dict(lr=float(lr), normalized=bool(normalized), loss=loss,
                    iterations=int(iterations))
    refs = [_config(name, **settings) for name in TOKEN_EXAMPLES]
    refs += [_config(**{**settings, **m}) for m in moves]
    return dict(examples=examples, defaults=dict(example=example, **settings),
                palette=palette_hex(),
                choices=dict(lr=list(LRS), loss=list(LOSSES), iterations=list(ITERATIONS)),
                references=refs)


_IDS = itertools.count()


def token_drag(example: str = "e2", *, lr: float = 0.1, normalized: bool = True,
               loss: str = "logistic", iterations: int = 200):
    """The drag explorer as an HTML fragment (``IPython.display.HTML``): the exported data
    (:func:`token_drag_data`) and the scripts that draw it on the website.

    It opens on ``example`` with the given step size, normalisation, loss and number of
    iterations (the chapter's defaults). It needs the website's offline plotly.js; in Jupyter
    it shows a note that points to the live explorer instead.
    """
    from IPython.display import HTML

    data = token_drag_data(example, lr=lr, normalized=normalized, loss=loss,
                           iterations=iterations)
    uid = f"attnlib-drag-{next(_IDS)}"
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    note = ("This drag explorer runs on the book's website (it draws with the site's offline "
            "plotly.js). In Jupyter, use the live explorer <code>al.explorers.token_plane</code> "
            "above.")
    return HTML(
        f'<div class="attnlib-drag" id="{uid}" data-plotly-src="{html.escape(PLOTLY_SRC)}">'
        f'<p class="attnlib-drag-fallback">{note}</p></div>'
        f'<script type="application/json" id="{uid}-data">{payload}</script>'
        f'<script src="{html.escape(MODULE_SRC)}"></script>'
        f'<script>(function(){{var m=window.attnTokenDrag;'
        f'if(m){{m.mount("{uid}");}}}})();</script>')
