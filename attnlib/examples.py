"""The papers' hand-made examples and official constants, each defined once.

Every example returns an :class:`Example`: its :class:`~attnlib.data.AttentionData` plus the
paper's initialisation, training settings and closed-form reference values, ready for
``train(ex.data, **ex.settings, init=ex.init)``. The numbers are the official notebooks'
recipes (see each docstring's ``source``).

Constants
---------
EPS : float
    float64 machine epsilon, the official code's ``eps`` (normalised steps, (K,Q) ``reg``).
MD_BUDGETS : dict
    The mirror-descent paper's step budgets per :math:`\\ell_p`: 1,500 / 2,000 / 20,000 steps for
    p = 1.75 / 2 / 3.

See chapters 1-4 (max-margin paper), 5-7 (TF-SVM paper) and 9 (mirror-descent paper).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from attnlib._runtime import resolve_device, resolve_dtype
from attnlib._validate import number
from attnlib._validate import seed as check_seed
from attnlib.data import AttentionData, official_draw, random_data

__all__ = [
    "EPS",
    "MD_BUDGETS",
    "Example",
    "three_token_example",
    "multi_input_example",
    "joint_example",
    "loss_example",
    "visualization_example",
    "mirror_joint_example",
    "mirror_random_data",
    "lambda_head_example",
    "relu_head_example",
]

#: float64 machine epsilon (2.220446049250313e-16), the official code's ``eps``.
EPS = float(torch.finfo(torch.float64).eps)

#: Mirror-descent step budgets per p (arXiv 2410.14581, §5): p -> steps.
MD_BUDGETS = {1.75: 1500, 2.0: 2000, 3.0: 20000}


@dataclass(frozen=True, eq=False)
class Example:
    """A hand-made example of a paper: its data plus the settings the paper trains it with.

    Attributes
    ----------
    name : str
        Short name.
    data : AttentionData
        The data (unbatched unless a sweep is part of the example).
    init : dict of tensors
        Ready for ``train(..., init=example.init)``: fixed tensors (e.g. ``W`` for the prompt
        model) and initial values. A leading dimension on an initial value stacks the paper's
        several runs as trials.
    settings : dict
        The paper's training settings (``param``, ``lr``, ``steps``, ``eps``, ...), ready for
        ``train(example.data, **example.settings, init=example.init)``.
    known : dict
        Closed-form reference values (SVM solutions, labels, ...) from the papers and their code.
    source : str
        Paper and notebook the example comes from.
    """

    name: str
    data: AttentionData
    init: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    known: dict = field(default_factory=dict)
    source: str = ""



def _t(x, device, dtype):
    return torch.as_tensor(x, dtype=torch.float64).to(device=resolve_device(device),
                                                       dtype=resolve_dtype(dtype))


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True)


def mirror_random_data(seed: int = 1, trials: int | None = None, device=None, dtype=None):
    """The synthetic set-up of the mirror-descent paper (§5.1): n=6, T=8, d=10, cross-attention.

    Returns an :class:`Example` whose ``init["W"]`` is the paper's aggregate-run initialisation
    :math:`W(0)\\sim\\mathcal N(0,1)` entrywise (drawn on a separate generator seeded with
    ``seed``), and whose settings are normalised MD with lr 0.1; ``known["steps"]`` gives the
    paper's budgets per p (1,500 / 2,000 / 20,000 for p = 1.75 / 2 / 3).

    See chapter 9, *Mirror descent selects tokens too*.
    """
    check_seed(seed, count=10_001)  # (the initialisation is drawn from seed + 10,000)
    data = random_data(6, 8, 10, trials=trials, seed=seed, device=device, dtype=dtype)
    g = torch.Generator().manual_seed(10_000 + int(seed))
    shape = (10, 10) if trials is None else (trials, 10, 10)
    W0 = torch.randn(*shape, generator=g, dtype=torch.float32).to(device=data.device,
                                                                  dtype=data.dtype)
    return Example(
        name="mirror_random",
        data=data,
        init={"W": W0},
        settings=dict(param="W", method="md", lr=0.1, normalized=True, loss="logistic"),
        known={"steps": dict(MD_BUDGETS)},
        source="arXiv 2410.14581, §5.1 (AttentionMD synthetic experiment)",
    )



def _prompt_W(device, dtype):
    return _t(np.diag([1.0, 1.0, 0.0]), device, dtype)


def three_token_example(scores: str = "global", device=None, dtype=None) -> Example:
    """The single-input 3-token example (max-margin paper, E1).

    Tokens are 3-D, :math:`(u_1, u_2, \\gamma)`: :math:`x_1=(-0.1, 1)`, :math:`x_2=(1, 0)`,
    :math:`x_3=(0, 0)` in the key plane and the score in the third coordinate. With
    :math:`W=\\mathrm{diag}(1,1,0)` the logits :math:`x_t^\\top W p` see only the plane, and
    :math:`v=(0,0,1)` reads only the score, so :math:`\\gamma=(1, 0.9, 0.9)` ("global") or
    :math:`(1, 0.9, 0)` ("local"). Six runs start at :math:`p(0)=(0,c,0)`,
    :math:`c\\in\\{1, .5, 0, -.5, -1, -1.5\\}` (stacked as 6 trials in ``init["p"]``).

    ``known``: the SVM solutions :math:`p^{mm}(\\alpha)` for :math:`\\alpha=1,2,3` (0-based keys
    0, 1, 2), the locally optimal selections, and (local panel) the expected final selection of
    each run: runs with c = -1, -1.5 go to token 2 (index 1), the others to token 1 (index 0).

    See chapter 3, *Local versus global optimality*.
    """
    if scores not in ("global", "local"):
        raise ValueError(f"scores: expected 'global' or 'local', got {scores!r}")
    g3 = 0.9 if scores == "global" else 0.0
    X = _t([[[-0.1, 1.0, 1.0], [1.0, 0.0, 0.9], [0.0, 0.0, g3]]], device, dtype)
    data = AttentionData(X, _t([1.0], device, dtype), v=_t([0.0, 0.0, 1.0], device, dtype))
    cs = [1.0, 0.5, 0.0, -0.5, -1.0, -1.5]
    p0 = _t([[0.0, c, 0.0] for c in cs], device, dtype)
    k = 1 / 1.01
    known = {
        "p_mm": {0: _t([-0.1 * k, k, 0.0], device, dtype), 1: _t([1.0, 0.0, 0.0], device, dtype),
                 2: _t([-1.0, -1.1, 0.0], device, dtype)},
        "p_mm_sq_norm": {0: 1 / 1.01, 1: 1.0, 2: 2.21},
        "support": {0: [2], 1: [2], 2: [0, 1]},
        "locally_optimal": [0] if scores == "global" else [0, 1],
        "c": cs,
        "final_selection": [0] * 6 if scores == "global" else [0, 0, 0, 0, 1, 1],
    }
    return Example(
        name=f"three_token_{scores}",
        data=data,
        init={"W": _prompt_W(device, dtype), "p": p0},
        settings=dict(param="p", method="gd", lr=0.1, steps=1000, normalized=True, eps=1e-9,
                      loss="logistic"),
        known=known,
        source="arXiv 2306.13596, E1 (single_input_converge.ipynb)",
    )


def multi_input_example(device=None, dtype=None) -> Example:
    """The multi-input example (max-margin paper, E2), exact torch seed-0 recipe.

    ``X = 0.2 * randn(3, 7, 3)`` on ``torch.Generator().manual_seed(0)`` (float32); token 0 is
    shifted by (1,0), tokens 1-3 by (-1,1), tokens 4-6 by (-0.5,-0.5); the third coordinate is
    then set to 1 for token 0 (optimal) and 0.5 for the others. :math:`Y=(1,1,1)`,
    :math:`v=(0,0,1)`, :math:`W=\\mathrm{diag}(1,1,0)`. Six runs start at
    :math:`p(0)=(c,0,0)`, :math:`c\\in\\{1,.5,0,-.5,-1,-1.5\\}`.

    The official notebook trains with this W but solves its p-SVM with W = I
    (``p_svm_solver(X, torch.diag(torch.ones(d)), ...)``), so the score coordinate enters
    its keys: ``known["p_mm_half_sq_official"]`` = 0.31319 is that solver's objective
    ½‖p^mm_{W=I}‖², which this draw reproduces (the seed-0 draw is the same under today's
    torch). Every constraint's score difference is 1 − 0.5, so the W = I solution is a
    multiple of the W = diag(1,1,0) one in the key plane plus a third coordinate: the red ray
    of the official figure is exactly the direction that GD with this W approaches, while the
    norms differ (½‖p^mm‖² = 0.3713 on the keys :math:`W^\\top x`). Settings: normalised GD
    (lr 0.1, eps 1e-12); ``known["gd_settings"]``: the plain-GD baseline (lr 1, not
    normalised).

    See chapter 2, *The Att-SVM and gradient descent*.
    """
    n, T, d = 3, 7, 3
    g = torch.Generator().manual_seed(0)
    X = torch.randn((n, T, d), generator=g, dtype=torch.float32) * 0.2
    X[:, 0] += torch.tensor([1.0, 0.0, 0.0])
    X[:, 1:(T + 1) // 2] += torch.tensor([-1.0, 1.0, 0.0])
    X[:, -(T - 1) // 2:] += torch.tensor([-0.5, -0.5, 0.0])
    X[:, 0, -1] = 1.0
    X[:, 1:, -1] = 0.5
    X = X.to(device=resolve_device(device), dtype=resolve_dtype(dtype))
    data = AttentionData(X, torch.ones(n, dtype=X.dtype, device=X.device),
                         v=_t([0.0, 0.0, 1.0], device, dtype))
    cs = [1.0, 0.5, 0.0, -0.5, -1.0, -1.5]
    return Example(
        name="multi_input",
        data=data,
        init={"W": _prompt_W(device, dtype), "p": _t([[c, 0.0, 0.0] for c in cs], device, dtype)},
        settings=dict(param="p", method="gd", lr=0.1, steps=1000, normalized=True, eps=1e-12,
                      loss="logistic"),
        known={"p_mm_norm_official": math.sqrt(2 * 0.31319), "p_mm_half_sq_official": 0.31319,
               "opt": [0, 0, 0], "c": cs,
               "gd_settings": dict(lr=1.0, normalized=False)},
        source="arXiv 2306.13596, E2 (multi_input_converge.ipynb)",
    )


def joint_example(tight: bool = True, device=None, dtype=None) -> Example:
    """Joint (v, p) training (max-margin paper, E3).

    n=3, T=2, d=2, W=I, Y=(+1,-1,+1); first token of every input is the origin, the second is
    (1,1), (1,-1) and (0.5,1) (tight) or (0.5,1.5) (non-tight). Start p(0)=(0,-1),
    v(0)=(-1,0); normalised GD on both, lr 0.1, 1000 steps. The notebook's epsilons differ
    (1e-19 for p, 1e-9 for v); ``settings["eps"]`` is 1e-19 for both (the difference is below
    float64 resolution for these gradients).

    ``known``: v^mm = (0,1); p^mm = (4/3,1/3) (tight) or (1.25,0.25) (non-tight);
    p^relax = p^mm (tight) or (1,0) (non-tight).

    See chapter 4, *Training the head too*.
    """
    third = [0.5, 1.0] if tight else [0.5, 1.5]
    X = _t([[[0, 0], [1, 1]], [[0, 0], [1, -1]], [[0, 0], third]], device, dtype)
    data = AttentionData(X, _t([1.0, -1.0, 1.0], device, dtype))
    known = {"v_mm": _t([0.0, 1.0], device, dtype),
             "p_mm": _t([4 / 3, 1 / 3] if tight else [1.25, 0.25], device, dtype),
             "p_relax": _t([4 / 3, 1 / 3] if tight else [1.0, 0.0], device, dtype),
             "opt": [1, 1, 1], "v_support": [0, 1, 2] if tight else [0, 1]}
    return Example(
        name=f"joint_{'tight' if tight else 'nontight'}",
        data=data,
        init={"W": torch.eye(2, dtype=X.dtype, device=X.device),
              "p": _t([0.0, -1.0], device, dtype), "v": _t([-1.0, 0.0], device, dtype)},
        settings=dict(param="p+v", method="gd", lr=0.1, steps=1000, normalized=True, eps=1e-19,
                      loss="logistic"),
        known=known,
        source="arXiv 2306.13596, E3 (joint_training.ipynb)",
    )


def loss_example(C=(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100), device=None, dtype=None) -> Example:
    """The loss-function example (max-margin paper, E4).

    n=2, T=2, d=3, Y=(1,1), v=(0,0,1), W=diag(1,1,0); :math:`X_1=[(0,0;0),(1,1;C)]`,
    :math:`X_2=[(0,0;0),(1,-1;1)]`. The optimal token is the second one in both inputs and
    :math:`p^{mm}=(1,0,0)` for every C. ``C`` may be a number (unbatched data) or a sequence
    (one trial per value). Start p(0)=0, normalised GD, lr 0.1, eps 1e-9; the paper plots 200 of
    1000 iterations, for the correlation loss and the logistic loss.

    See chapter 3, *Local versus global optimality*.
    """
    Cs = np.atleast_1d(np.asarray(C, dtype=np.float64))
    if Cs.ndim != 1 or not np.isfinite(Cs).all():
        raise ValueError(f"C: expected a number or a 1-D sequence of finite numbers, got {C!r}")
    X = np.zeros((len(Cs), 2, 2, 3))
    X[:, 0, 1] = np.stack([np.ones_like(Cs), np.ones_like(Cs), Cs], axis=-1)
    X[:, 1, 1] = [1.0, -1.0, 1.0]
    X = _t(X, device, dtype)
    Y, v = _t([1.0, 1.0], device, dtype), _t([0.0, 0.0, 1.0], device, dtype)
    batched = np.ndim(C) > 0
    data = AttentionData(X if batched else X[0], Y, v=v)
    p0 = torch.zeros((len(Cs), 3) if batched else (3,), dtype=X.dtype, device=X.device)
    return Example(
        name="loss_example",
        data=data,
        init={"W": _prompt_W(device, dtype), "p": p0},
        settings=dict(param="p", method="gd", lr=0.1, steps=1000, normalized=True, eps=1e-9),
        known={"p_mm": _t([1.0, 0.0, 0.0], device, dtype), "C": Cs.tolist(), "opt": [1, 1],
               "plot_steps": 200, "losses": ["correlation", "logistic"]},
        source="arXiv 2306.13596, E4 (diff_loss_function.ipynb)",
    )


def visualization_example(version: int = 2, device=None, dtype=None) -> Example:
    """The 2-D pictures of the TF-SVM paper (E1), exact official recipes.

    ``version=1`` (``visualization.ipynb``, seed 1): n=2, T=3, d=2, Y=(1,1),
    X = 0.3·N(0,I) shifted by (-1,0) for input 1 and (+1,0) for input 2 (not normalised).
    ``version=2`` (``visualization2.ipynb``, seed 3): n=2, T=5, d=2, Y=(1,1),
    X = 0.5·N(0,I) with :math:`x_{11}=(1,0.5)`, :math:`x_{21}=(1,-0.5)` and the other tokens
    shifted by (-1,0). Both draw v (unit), then X, then z (unit) on one torch generator.

    ``init["W"]`` = 0 (the W run); ``init["K"]`` = 0.1·N(0,1) (drawn on a generator seeded with
    the example's seed; the official code uses the global RNG) and ``init["Q"]`` = 0 (the
    (K,Q) run). Settings: normalised GD, lr 0.1, 2000 steps, eps = float64 machine epsilon,
    ``reg`` = the same epsilon for (K,Q).

    See chapter 5, *Self-attention as an SVM: W versus (K, Q)*.
    """
    if version not in (1, 2):
        raise ValueError(f"version: expected 1 or 2, got {version!r}")
    n, d = 2, 2
    T, seed, scale = (3, 1, 0.3) if version == 1 else (5, 3, 0.5)
    g = torch.Generator().manual_seed(seed)
    f32 = torch.float32  # (the official draws: float32 whatever torch's default dtype is)
    v = torch.randn(d, generator=g, dtype=f32)
    v = v / torch.norm(v)
    X = scale * torch.randn((n, T, d), generator=g, dtype=f32)
    if version == 1:
        X[0] += torch.tensor([-1.0, 0.0])
        X[1] += torch.tensor([1.0, 0.0])
    else:
        X[0, 0] = torch.tensor([1.0, 0.5])
        X[1, 0] = torch.tensor([1.0, -0.5])
        X[:, 1:] += torch.tensor([-1.0, 0.0])
    z = torch.randn((n, d), generator=g, dtype=f32)
    z = z / torch.norm(z, dim=-1, keepdim=True)
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    data = AttentionData(X.to(dev, dt), torch.ones(n, device=dev, dtype=dt), z.to(dev, dt),
                         v.to(dev, dt))
    K0 = 0.1 * torch.randn((d, d), generator=torch.Generator().manual_seed(seed), dtype=f32)
    eps = EPS
    return Example(
        name=f"visualization{version}",
        data=data,
        init={"W": torch.zeros(d, d, device=dev, dtype=dt), "K": K0.to(dev, dt),
              "Q": torch.zeros(d, d, device=dev, dtype=dt)},
        settings=dict(param="W", method="gd", lr=0.1, steps=2000, normalized=True, eps=eps,
                      loss="logistic"),
        known={"reg_KQ": eps, "seed": seed},
        source=f"arXiv 2308.16898, E1 (visualization{'' if version == 1 else '2'}.ipynb)",
    )


def mirror_joint_example(lp: float = 2.0, device=None, dtype=None) -> Example:
    """The joint (W, v) toy problem of the mirror-descent paper (§5.2).

    n=2, T=3, d=2, self-attention (:math:`z_i = x_{i1}`):
    :math:`X_1=[(-2.7,1.2),(1.4,2.1),(1.3,-0.1)]`, :math:`Y_1=+1`;
    :math:`X_2=[(0.4,-2.2),(-1.1,-0.4),(0.9,0.1)]`, :math:`Y_2=-1`. Start W(0)=0, v(0)=0;
    normalised ℓp-MD on both, lr 0.1; 1,500 / 2,000 / 20,000 steps for p = 1.75 / 2 / 3.
    The code's epsilon 2.2e-16 makes the first step (where the W-gradient is 0) safe.

    ``known["selection"]``: the final selected tokens, (1,0) for p in {1.75, 2} and (0,0) for
    p = 3 (0-based).

    See chapter 9, *Mirror descent selects tokens too*.
    """
    X = _t([[[-2.7, 1.2], [1.4, 2.1], [1.3, -0.1]], [[0.4, -2.2], [-1.1, -0.4], [0.9, 0.1]]],
           device, dtype)
    data = AttentionData(X, _t([1.0, -1.0], device, dtype), z=X[:, 0, :].clone())
    steps = MD_BUDGETS.get(float(lp), 2000)
    sel = {1.75: [1, 0], 2.0: [1, 0], 3.0: [0, 0]}
    return Example(
        name="mirror_joint",
        data=data,
        init={"W": torch.zeros(2, 2, dtype=X.dtype, device=X.device),
              "v": torch.zeros(2, dtype=X.dtype, device=X.device)},
        settings=dict(param="W+v", method="md", lp=float(lp), lr=0.1, steps=steps,
                      normalized=True, eps=EPS, loss="logistic"),
        known={"selection": sel, "steps": dict(MD_BUDGETS)},
        source="arXiv 2410.14581, §5.2 (AttentionMD joint toy)",
    )


def relu_head_example(d: int = 4, seed: int = 1, device=None, dtype=None) -> Example:
    """The nonlinear (ReLU) head set-up of the TF-SVM paper (E4).

    n=3, T=4, cross-attention, unit tokens and unit random z, drawn like
    :func:`attnlib.data.random_data` from ``seed``; the head is
    :math:`f = \\mathbf 1^\\top \\mathrm{ReLU}(V^\\top X^\\top s)`
    with :math:`V\\in\\mathbb R^{d\\times d}` standard normal scaled to ``‖V‖_F = 1`` (drawn after
    the data on the same generator) and an all-ones readout. Use
    ``head=models.ReluHead(example.init["V"], example.init["u"])``. Settings: W only, 2001
    normalised GD steps, lr 0.1.

    See chapter 7, *Nonlinear heads*.
    """
    d = number("d", d, lo=1, integer=True)
    g = torch.Generator().manual_seed(check_seed(seed))
    v, Y, X, z = official_draw(3, 4, d, g, "cross")
    V = torch.randn(d, d, generator=g, dtype=torch.float32)
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    V = (V / V.norm()).to(dev, dt)
    data = AttentionData(_unit(X.to(dt)).to(dev), Y.to(dev, dt), _unit(z.to(dt)).to(dev),
                         _unit(v.to(dt)).to(dev))
    return Example(
        name="relu_head",
        data=data,
        init={"V": V, "u": torch.ones(d, device=dev, dtype=dt)},
        settings=dict(param="W", method="gd", lr=0.1, steps=2001, normalized=True,
                      eps=EPS, loss="logistic"),
        known={"mask_threshold": 1e-3, "masked_max": 1e-6},
        source="arXiv 2308.16898, E4 (multi_token_converge.ipynb, mode 'relu')",
    )


def lambda_head_example(lam: float = 0.25, gamma=(1.0, 0.8, 0.2, -0.5), device=None,
                        dtype=None) -> Example:
    """A designed multi-token case for the λ-penalty head (TF-SVM ``base_nonlinear.py``).

    One input, T = d = len(gamma), orthonormal tokens (the identity basis), Y = +1 and
    :math:`v=\\gamma`, so the token scores are ``gamma``. The head is
    :math:`f = v^\\top h - \\lambda \\|h\\|^2` with :math:`h = X^\\top s`; with orthonormal
    tokens :math:`\\|h\\|^2 = \\|s\\|^2` and the best attention is the sparsemax-like mixture
    :math:`s_t = \\max(0, (\\gamma_t-\\tau)/(2\\lambda))`, given in ``known["s_opt"]``.
    Use ``head=models.LambdaHead(lam)`` (query z = x_1).

    See chapter 7, *Nonlinear heads*.
    """
    gam = np.asarray(gamma, dtype=np.float64)
    if gam.ndim != 1 or gam.size < 2 or not np.isfinite(gam).all():
        raise ValueError(f"gamma: expected a 1-D sequence of >= 2 finite scores, got {gamma!r}")
    if not lam > 0:
        raise ValueError(f"lam: expected a positive number, got {lam!r}")
    T = gam.size
    # simplex projection of gamma / (2 lam): s = max(0, gamma/(2lam) - tau')
    y = gam / (2 * lam)
    u = np.sort(y)[::-1]
    css = np.cumsum(u)
    k = np.nonzero(u - (css - 1) / np.arange(1, T + 1) > 0)[0][-1]
    s_opt = np.maximum(y - (css[k] - 1) / (k + 1), 0.0)
    X = _t(np.eye(T)[None], device, dtype)
    data = AttentionData(X, _t([1.0], device, dtype), z=X[:, 0, :].clone(),
                         v=_t(gam, device, dtype))
    return Example(
        name="lambda_head",
        data=data,
        init={"lam": float(lam)},
        settings=dict(param="W", method="gd", lr=0.1, steps=2000, normalized=True,
                      loss="correlation"),
        known={"s_opt": _t(s_opt, device, dtype), "selected": np.nonzero(s_opt > 0)[0].tolist()},
        source="arXiv 2308.16898, base_nonlinear.py mode 'lambda' (unused in the notebooks)",
    )
