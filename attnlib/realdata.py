"""Offline real data for the mirror-descent chapter: the attention classifier on handwritten digits.

The digits are scikit-learn's bundled 8×8 images as patch tokens (T = 16 tokens of d = 20:
each 2×2 patch with a one-hot position), Y = +1 for the digits 5-9 and Y = -1 for 0-4, which
keeps the model inside the theory of the book; :mod:`attnlib.splits` builds them and the
train/validation/test split (its names are also reachable from here: ``digits_tokens``,
``DigitSplits``, ``split_indices``, ``SplitViews``).

The model is the book's one-layer attention classifier with a linear head,

.. math::

    f(X_i) = v^\\top X_i^\\top \\operatorname{softmax}(X_i W z_i),
    \\qquad z_i = \\tfrac1T \\textstyle\\sum_t x_{it},

trained on the logistic loss. :class:`AttentionClassifier` holds B independent copies
(``W`` (B,d,d), ``v`` (B,d)), one per seed, so several initialisations train as one tensor
computation; every optimizer used here (ℓp mirror descent, SGD, Adam) acts entrywise, so the
copies do not interact. :func:`fit` trains full batch and records the validation and test
metrics at checkpoints; :func:`select` picks the learning rate and the checkpoint from the
validation split only; :func:`compare` runs the whole comparison of chapter 10.

See chapter 10, "Mirror descent on real data".
"""

from __future__ import annotations

import math

import torch

from ._runtime import few_threads
from ._validate import choice, number
from .metrics import sparsity
from .splits import DigitSplits, SplitViews, digits_tokens, split_indices
from .status import RunStatus, collect, report
from .train import LpMirrorDescent
from .train.mirror import normalized_step

__all__ = ["SplitViews", "DigitSplits", "digits_tokens", "split_indices", "AttentionClassifier",
           "shared_query", "fit",
           "select", "compare", "attention_entropy", "weight_sparsity", "OPTIMIZERS"]

OPTIMIZERS = ("md", "gd", "adam")


class AttentionClassifier(torch.nn.Module):
    r"""Independent one-layer attention classifiers: G groups × S seeds, one tensor each.

    .. math::

        f_b(X_i) = \sum_t s_{bit}\, v_b^\top x_{it},
        \qquad s_{bi} = \operatorname{softmax}(X_i W_b z_i)

    The B = G·S models are stacked as ``W`` (B, d, d) and ``v`` (B, d) for the forward pass;
    each group is its own pair of parameters, so an optimizer can give every group its own
    learning rate (:meth:`param_groups`) while all of them train in one computation.

    Parameters
    ----------
    d : int
        Token dimension.
    seeds : sequence of int
        Seed s draws ``W`` entrywise from N(0, init_scale²) and ``v`` from N(0, 1/d) with its
        own ``torch.Generator``, so a model does not depend on the others in the batch; every
        group starts from the same S initialisations (a paired comparison).
    init_scale : float
        Standard deviation of W's entries at initialisation.
    groups : int
        Number of groups G (e.g. one per learning rate of a grid).
    """

    def __init__(self, d: int, seeds=(0, 1, 2, 3, 4), init_scale: float = 0.1,
                 device=None, dtype=torch.float32, groups: int = 1):
        super().__init__()
        if d < 1:
            raise ValueError(f"d must be a positive integer, got {d!r}")
        if groups < 1:
            raise ValueError(f"groups must be a positive integer, got {groups!r}")
        seeds = [int(s) for s in seeds]
        if not seeds:
            raise ValueError("seeds must name at least one seed")
        Ws, vs = [], []
        for s in seeds:  # initialisation only, once per seed: not a hot path
            g = torch.Generator().manual_seed(s)
            Ws.append(init_scale * torch.randn(d, d, generator=g, dtype=torch.float64))
            vs.append(torch.randn(d, generator=g, dtype=torch.float64) / math.sqrt(d))
        W0 = torch.stack(Ws).to(device=device, dtype=dtype)  # (S, d, d)
        v0 = torch.stack(vs).to(device=device, dtype=dtype)  # (S, d)
        self.seeds = tuple(seeds)
        self.Ws = torch.nn.ParameterList([torch.nn.Parameter(W0.clone()) for _ in range(groups)])
        self.vs = torch.nn.ParameterList([torch.nn.Parameter(v0.clone()) for _ in range(groups)])

    @property
    def W(self):
        """All attention matrices, (B, d, d) with B = groups · seeds."""
        return torch.cat(list(self.Ws))

    @property
    def v(self):
        """All heads, (B, d)."""
        return torch.cat(list(self.vs))

    def param_groups(self, lrs) -> list[dict]:
        """Optimizer parameter groups: group g trains with learning rate ``lrs[g]``."""
        if len(lrs) != len(self.Ws):
            raise ValueError(f"lrs must give one learning rate per group ({len(self.Ws)}), "
                             f"got {len(lrs)}")
        return [{"params": [W, v], "lr": float(lr)} for W, v, lr in zip(self.Ws, self.vs, lrs)]

    def _stacked(self, pars):
        """The groups' parameters as one (B, ...) tensor (the parameter itself for one group:
        no copy, in the forward pass nor in the backward)."""
        return pars[0] if len(pars) == 1 else torch.cat(list(pars))

    def logits(self, X, z):
        """Attention logits ``x_it^T W_b z_i`` laid out (N, T, B): ``W_b z_i`` for every
        model and sample as one matrix product (N, d) × (d, d·B), then one bmm over samples.

        ``z`` (N, d), or (1, d) for a query shared by every sample (a [CLS] token: see
        :func:`shared_query`): ``W_b z`` is then one vector per model, and the logits one
        matrix product (N·T, d) × (d, B)."""
        W = self._stacked(self.Ws)
        B, d, e = W.shape
        if z.shape[0] == 1 and X.shape[0] != 1:
            return (X.reshape(-1, d) @ (W @ z[0]).T).view(X.shape[0], X.shape[1], B)
        Wz = torch.bmm(z[None], W.permute(2, 1, 0).reshape(1, e, d * B)).view(-1, d, B)
        return torch.bmm(X, Wz)  # (N, T, B)

    def attention(self, X, z):
        """Softmax attention ``s`` (B, N, T) of every model on every sample."""
        return torch.softmax(self.logits(X, z), dim=1).permute(2, 0, 1)

    def values(self, X):
        """The values ``v_b^T x_it`` laid out (N, T, B)."""
        return X @ self._stacked(self.vs).T

    def forward(self, X, z, values=None):
        """Outputs ``f`` (B, N).

        ``values``: :meth:`values` of ``X``, when it is already at hand (a fixed head: the
        values do not change from step to step); computed here otherwise.
        """
        values = self.values(X) if values is None else values  # (N, T, B)
        s = torch.softmax(self.logits(X, z), dim=1)  # (N, T, B)
        return (s * values).sum(1).T


def shared_query(z):
    """``z`` (N, d) as one row (1, d) when every sample has the same query (a [CLS] token, as in
    :func:`attnlib.text.sentiment_sentences`), so that :meth:`AttentionClassifier.logits`
    computes ``W z`` once per model instead of once per sample; ``z`` itself otherwise."""
    return z[:1] if z.shape[0] > 1 and bool((z == z[:1]).all()) else z


def _loss(f, Y):
    """Mean logistic loss of each model's outputs ``f`` (B, N): (B,)."""
    return torch.nn.functional.softplus(-Y * f).mean(-1)


def _acc(f, Y):
    """Accuracy of each model's outputs ``f`` (B, N): (B,)."""
    return ((f > 0) == (Y > 0)).to(f.dtype).mean(-1)


def _loss_acc(model, X, Y, z, values=None):
    """Mean logistic loss and accuracy of each model: two (B,) tensors."""
    f = model(X, z, values)  # (B, N)
    return _loss(f, Y), _acc(f, Y)


def _make_optimizer(name: str, groups: list[dict], lps: list[float]):
    if name == "md":  # each group its own exponent
        return LpMirrorDescent([g | {"lp": p} for g, p in zip(groups, lps)],
                               lr=groups[0]["lr"], lp=lps[0])
    if name == "gd":
        return torch.optim.SGD(groups, lr=groups[0]["lr"])
    if name == "adam":
        return torch.optim.Adam(groups, lr=groups[0]["lr"])
    raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {name!r}")


def fit(data: DigitSplits, optimizer: str = "md", lrs=(0.1,), lp: float | tuple = 1.1,
        steps: int = 1000, eval_every: int = 25, seeds=(0, 1, 2, 3, 4),
        init_scale: float = 0.1, progress: bool = False, v=None,
        normalized: bool = False) -> dict:
    """Train one classifier per (learning rate, seed), full batch, all in one computation.

    Parameters
    ----------
    data : DigitSplits
    optimizer : {"md", "gd", "adam"}
        ``"md"``: :class:`attnlib.train.LpMirrorDescent` (unnormalized, exponent ``lp``, as in
        the paper's real-data runs); ``"gd"``: SGD; ``"adam"``: Adam. All act entrywise, so
        the L·S models train independently.
    lrs : sequence of float
        The learning-rate grid (L values); one parameter group each.
    lp : float or sequence of float
        Mirror-descent exponent (``"md"`` only): one for every learning rate, or one per
        learning rate (L values; p = 2 is gradient descent), so that runs of several p train
        as one computation.
    steps, eval_every
        Full-batch steps, checkpoint spacing.
    seeds, init_scale
        See :class:`AttentionClassifier`.
    v : Tensor (d,), optional
        A fixed head: every model uses it and only W trains (the theory's setting; the
        sentences of :mod:`attnlib.text`). Default: v is drawn per seed and trained.
    normalized : bool
        Divide each model's gradient by its dual norm :math:`\\|\\nabla_W\\mathcal L\\|_q`,
        :math:`q = p/(p-1)` (2 for ``"gd"``), before the step, model by model (W and v
        separately): normalised mirror descent / normalised GD, the step rule of the paper's
        synthetic runs, whose norm grows linearly in the steps instead of logarithmically.
        Not for ``"adam"`` (already scale-free).

    Returns
    -------
    dict
        ``"step"`` (C,); ``"train_loss"``, ``"train_acc"``, ``"val_loss"``, ``"val_acc"``,
        ``"test_acc"`` (L, C, S); ``"W"`` (L, C, S, d, d) and ``"v"`` (L, C, S, d) at every
        checkpoint; ``"status"``, the run's "no NaN, no stall" verdict
        (:class:`attnlib.status.RunStatus`, one run per model).
        Test accuracy is recorded for reporting; :func:`select` never reads it.
    """
    optimizer = choice("optimizer", optimizer, OPTIMIZERS)
    if not isinstance(normalized, bool) or (normalized and optimizer == "adam"):
        raise ValueError(f"normalized: expected True or False, and False for 'adam', got "
                         f"{normalized!r}")
    steps = number("steps", steps, lo=1, integer=True)
    eval_every = number("eval_every", eval_every, lo=1, integer=True)
    lrs = [number("lrs", lr, lo=0, lo_open=True) for lr in lrs]
    if not lrs:
        raise ValueError("lrs: expected at least one positive learning rate, got none")
    lps = [number("lp", p, lo=1, lo_open=True) for p in
           (lp if isinstance(lp, (list, tuple)) else [lp] * len(lrs))]
    if len(lps) != len(lrs):
        raise ValueError(f"lp: expected one exponent or one per learning rate ({len(lrs)}), "
                         f"got {len(lps)}")
    from tqdm.auto import tqdm

    L, S = len(lrs), len(tuple(seeds))
    model = AttentionClassifier(data.d, seeds, init_scale, data.X.device, data.X.dtype,
                                groups=L)
    if v is not None:  # fixed head: v takes no gradient, so every optimizer leaves it alone
        v = torch.as_tensor(v, device=data.X.device, dtype=data.X.dtype)
        if v.shape != (data.d,):
            raise ValueError(f"v: expected shape ({data.d},), got {tuple(v.shape)}")
        for p in model.vs:
            p.requires_grad_(False).copy_(v.expand_as(p))
    opt = _make_optimizer(optimizer, model.param_groups(lrs), lps)
    sets = _norm_sets(model, [2.0 if optimizer == "gd" else p / (p - 1.0) for p in lps],
                      data.part("train")[2])
    tr, va, te = ((X, Y, shared_query(z)) for X, Y, z in
                  (data.part("train"), data.part("val"), data.part("test")))
    if v is not None:  # a fixed head: the values of every split are constants of the run
        with torch.no_grad():
            tr, va, te = ((*p, model.values(p[0])) for p in (tr, va, te))
    Xtr, Ytr, ztr = tr[:3]
    vtr = tr[3] if v is not None else None
    rec = {k: [] for k in ("train_loss", "train_acc", "val_loss", "val_acc", "test_acc", "W",
                           "v")}
    steps_seen = []

    def record(k):
        """Checkpoint k: validation, test, weights (training: ``record_train``)."""
        with torch.no_grad():
            steps_seen.append(k)
            vl, vacc = _loss_acc(model, *va)
            rec["val_loss"].append(vl)
            rec["val_acc"].append(vacc)
            rec["test_acc"].append(_loss_acc(model, *te)[1])
            rec["W"].append(model.W.detach().clone())
            rec["v"].append(model.v.detach().clone())

    def record_train(f, loss):  # the last checkpoint's: the next forward pass is at its weights
        rec["train_loss"].append(loss.detach())
        rec["train_acc"].append(_acc(f.detach(), Ytr))

    # the tensors are small: on a busy CPU, torch's thread pool costs far more than it saves
    # (measured 12x slower per step with 2 threads under load on a 2-core machine)
    with few_threads(device=data.X.device), collect():  # the optimiser's reports: summed below
        record(0)
        for k in tqdm(range(1, steps + 1), disable=not progress, desc=optimizer):
            opt.zero_grad(set_to_none=True)
            f = model(Xtr, ztr, vtr)
            loss = _loss(f, Ytr)
            if len(rec["train_loss"]) < len(steps_seen):  # the weights of the last checkpoint
                record_train(f, loss)
            loss.sum().backward()  # the sum over models: independent gradients
            if normalized:
                _normalize(sets)
            opt.step()
            if k % eval_every == 0 or k == steps:
                record(k)
        with torch.no_grad():  # the last checkpoint (after the last step)
            f = model(Xtr, ztr, vtr)
            record_train(f, _loss(f, Ytr))
    out = {"step": torch.tensor(steps_seen, device=data.X.device)}
    for key, val in rec.items():
        x = torch.stack(val)  # (C, L*S, ...)
        out[key] = x.reshape(x.shape[0], L, S, *x.shape[2:]).transpose(0, 1)  # (L, C, S, ...)
    out["status"] = report(_status(out, opt))
    return out


def _status(out: dict, opt) -> RunStatus:
    """Models whose loss or weights turned non-finite, and the optimiser's own verdict."""
    fin = torch.isfinite(out["train_loss"]).all(1) & torch.isfinite(out["W"]).flatten(3).all(
        (1, 3))  # (L, S)
    bad, first = int((~fin).sum()), getattr(opt, "nonfinite", -1)
    causes = ((f"{bad} model(s) with a non-finite loss or W",) if bad else ()) + \
        ((opt.cause,) if first >= 0 else ())  # a skipped step skips every model (one tensor)
    return RunStatus(runs=fin.numel(), nonfinite=fin.numel() if first >= 0 else bad,
                     first_nonfinite=first, causes=causes)


def _norm_sets(model, qs: list[float], z) -> list[tuple]:
    r"""What :func:`_normalize` normalises together, found once per run: (q, parameters,
    columns) for W and for v, the groups g sharing the dual exponent q = ``qs[g]``.

    ``columns``: W's columns that a gradient :math:`\sum_i g_{bi} z_i^\top` can reach (those
    where some training query ``z`` (N, d) is nonzero: a [CLS] query's one), on the CPU for
    q ≠ 2 when not all of them; ``None`` otherwise."""
    live = (z != 0).any(0).nonzero().flatten()
    cols = None if len(live) == z.shape[-1] or z.device.type != "cpu" else live
    return [(q, [p for p, qg in zip(pars, qs) if qg == q and p.requires_grad],
             cols if pars is model.Ws and q != 2.0 else None)
            for pars in (model.Ws, model.vs) for q in dict.fromkeys(qs)]


def _normalize(sets: list[tuple]) -> None:
    r"""Each model's gradient divided by its ℓq norm, in place, for :func:`_norm_sets`'s sets.

    The gradients of a set are normalised together, one row per model (the norm is a row's
    own: the group-by-group result, in one call). With ``columns``, on those entries alone (the
    others are exact zeros, kept): the CPU's ℓq norm (q ≠ 2) adds :math:`|g_j|^q` one entry
    after the other, and a term 0 leaves the partial sum as it was, so the step is the whole
    row's, bit for bit (tests/test_realdata.py checks it). A non-finite gradient is the
    exception (the whole row's step would be NaN everywhere, this one only in ``columns``):
    the optimizer skips any step whose gradient is not finite."""
    for q, pars, cols in sets:
        same = [p for p in pars if p.grad is not None]
        if not same:
            continue
        g = torch.cat([p.grad.flatten(1) for p in same]) if len(same) > 1 else \
            same[0].grad.flatten(1)
        if cols is None:
            step = normalized_step(g, 1.0, q, 0.0)
        else:
            gw = g.view(g.shape[0], -1, same[0].shape[-1])  # (B, d, d): rows, columns
            part = normalized_step(gw.index_select(2, cols).flatten(1), 1.0, q, 0.0)
            step = gw.clone().index_copy_(2, cols, part.view(gw.shape[0], gw.shape[1], -1))
        for p, s in zip(same, step.split([p.shape[0] for p in same])):
            p.grad = s.view_as(p)


def select(val_acc, val_loss, eligible=None) -> tuple[int, torch.Tensor]:
    """Model selection on the validation split only.

    For every run (learning rate ``l``, seed ``b``) the checkpoint with the highest validation
    accuracy is kept (ties broken by the lower validation loss); the learning rate is the one
    whose kept checkpoints have the highest mean validation accuracy over seeds (ties: lower
    mean validation loss). Test metrics are not arguments, so they cannot influence it.

    Parameters
    ----------
    val_acc, val_loss : Tensor (L, C, B)
        Validation accuracy and loss of L learning rates at C checkpoints for B seeds.
    eligible : bool Tensor (L, C, B), optional
        Checkpoints that may be kept (e.g. those that separate the training data, the regime
        of the theory). A run with none keeps its best checkpoint among all; a learning rate
        is chosen among those whose every run has an eligible checkpoint, if there is one.

    Returns
    -------
    (int, Tensor (B,))
        The chosen learning-rate index and, for each seed, the chosen checkpoint.
    """
    val_acc, val_loss = torch.as_tensor(val_acc), torch.as_tensor(val_loss)
    if val_acc.ndim != 3 or val_acc.shape != val_loss.shape:
        raise ValueError(f"val_acc and val_loss must both be (L, C, B), got "
                         f"{tuple(val_acc.shape)} and {tuple(val_loss.shape)}")
    loss = torch.nan_to_num(val_loss, nan=math.inf)
    acc = torch.nan_to_num(val_acc, nan=-1.0)
    # lexicographic: accuracy first, then lower loss (loss squashed into [0, 1))
    key = acc - 1e-6 * (1 - torch.exp(-loss))  # (L, C, B)
    full = torch.ones(val_acc.shape[0], dtype=torch.bool)
    if eligible is not None:
        eligible = torch.as_tensor(eligible, dtype=torch.bool, device=key.device)
        if eligible.shape != key.shape:
            raise ValueError(f"eligible must be (L, C, B) like val_acc, got "
                             f"{tuple(eligible.shape)}")
        some = eligible.any(1, keepdim=True)  # (L, 1, B): runs with an eligible checkpoint
        key = torch.where(eligible | ~some, key, -math.inf)
        full = some.squeeze(1).all(-1).cpu()  # (L,): every seed reached the regime
    best = key.argmax(dim=1)  # (L, B)
    kept_acc = acc.gather(1, best[:, None]).squeeze(1)  # (L, B)
    kept_loss = loss.gather(1, best[:, None]).squeeze(1)
    lr_key = kept_acc.mean(-1) - 1e-6 * (1 - torch.exp(-kept_loss.mean(-1)))
    if full.any():
        lr_key = torch.where(full.to(lr_key.device), lr_key, -math.inf)
    li = int(lr_key.argmax())
    return li, best[li]


def attention_entropy(W, X, z):
    """Mean attention entropy (B,) and mean top-1 attention mass (B,) over the samples.

    .. math:: H_i = -\\sum_t s_{it} \\log s_{it}

    Parameters
    ----------
    W : Tensor (B, d, d)
    X, z : Tensor (N, T, d), (N, d)
    """
    logs = torch.log_softmax(torch.bmm(X, torch.einsum("bde,ne->ndb", W, z)), dim=1)  # (N,T,B)
    s = logs.exp()
    return -(s * logs).sum(1).mean(0), s.amax(1).mean(0)


def weight_sparsity(W, rel: float = 1e-3):
    """Fraction of entries with ``|W_ij|`` < rel · max|W| and the ratio ||W||_1/||W||_F, per model.

    Parameters
    ----------
    W : Tensor (B, d, d)
    """
    A = W.abs().flatten(1)  # (B, d*d)
    return sparsity(W, rel), A.sum(-1) / A.pow(2).sum(-1).sqrt()


def compare(data: DigitSplits | None = None, lp: float = 1.1, steps: int = 1000,
            eval_every: int = 25, seeds=(0, 1, 2, 3, 4), lrs: dict | None = None,
            init_scale: float = 0.1, progress: bool = False) -> dict:
    """ℓp mirror descent vs gradient descent vs Adam on the digits (chapter 10).

    Each optimizer trains one model per (learning rate of its grid, seed); :func:`select`
    chooses the learning rate and each seed's checkpoint on the validation split; the test
    split is read only at the chosen checkpoints.

    Returns
    -------
    dict of str to dict
        Per optimizer: ``"lr"`` (chosen), and per seed (B,) at the chosen checkpoint:
        ``"step"``, ``"val_acc"``, ``"test_acc"``, ``"sparsity"`` (fraction of
        ``|W_ij|`` < 1e-3·max|W|), ``"l1_over_fro"``, ``"entropy"`` and ``"top1"`` (attention on
        the test images); also ``"final_test_acc"`` (last step), ``"W"`` (B, d, d) and the
        curves ``"curve_step"`` (C,), ``"curve_val_acc"``, ``"curve_train_loss"`` (C, B).
    """
    data = digits_tokens() if data is None else data
    lrs = dict(DEFAULT_LRS if lrs is None else lrs)
    if set(lrs) != set(OPTIMIZERS):
        raise ValueError(f"lrs must give a grid for each of {OPTIMIZERS}, got {sorted(lrs)}")
    Xte, _, zte = data.part("test")
    b = torch.arange(len(tuple(seeds)), device=data.X.device)
    out = {}
    for name in OPTIMIZERS:
        run = fit(data, name, lrs[name], lp, steps, eval_every, seeds, init_scale, progress)
        li, ck = select(run["val_acc"], run["val_loss"])
        W = run["W"][li, ck, b]  # (B, d, d)
        frac, ratio = weight_sparsity(W)
        ent, top1 = attention_entropy(W, Xte, zte)
        out[name] = dict(lr=float(lrs[name][li]), step=run["step"][ck],
                         val_acc=run["val_acc"][li, ck, b], test_acc=run["test_acc"][li, ck, b],
                         final_test_acc=run["test_acc"][li, -1], sparsity=frac,
                         l1_over_fro=ratio, entropy=ent, top1=top1, W=W,
                         curve_step=run["step"], curve_val_acc=run["val_acc"][li],
                         curve_test_acc=run["test_acc"][li],
                         curve_train_loss=run["train_loss"][li])
    return out


DEFAULT_LRS = {"md": (0.3, 1.0, 3.0), "gd": (1.0, 3.0, 10.0), "adam": (0.01, 0.03, 0.1)}
"""Learning-rate grids of chapter 10 (each brackets the grid point chosen on validation)."""
