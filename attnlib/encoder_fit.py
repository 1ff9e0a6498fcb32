r"""Training the review encoder as the paper does: all parameters, mini-batches, a stop rule.

:func:`fit_encoder` trains the members of one :class:`attnlib.encoder.ReviewEncoder` on the
training split, one member per run and seed; a run is an optimizer with its learning rate:

- ``"md"``: unnormalised ℓp mirror descent on **every** parameter tensor,
  :math:`\Theta\leftarrow\mathrm{sign}(w)|w|^{p-1}-\eta\nabla\mathcal L`,
  :math:`w\leftarrow\mathrm{sign}(\Theta)|\Theta|^{1/(p-1)}`, with
  :class:`attnlib.train.mirror.LpMirrorDescent` in the official code's variant
  (``keep_dual=False``: the dual point recomputed from the weights at every step); p = 2 is
  plain gradient descent;
- ``"adam"``: ``torch.optim.Adam``, the practitioner's baseline.

Each member has its own optimizer, acting on its own slice of every parameter tensor (a
parameter that shares the tensor's storage), so the members are independent models computed
in one batch: a step that :class:`attnlib.train.mirror.LpMirrorDescent` skips for one member
(its update leaves the float range) leaves the other members' steps alone. The loss
is the binary cross-entropy summed over each mini-batch of ``batch`` sentences (the official
``BCELoss(reduction="sum")``). Each member sees the training sentences in its own order (a
generator seeded by its seed); the members of one seed start from the same weights whatever
their run. A member stops, as in the paper, after the first epoch whose running training
accuracy reaches ``stop_acc`` (0.995), or at ``max_epochs``; from then on its weights are
restored after every step. Validation and test accuracy are recorded after every epoch
(dropout off), or validation after the last epoch only (``val_every_epoch=False``: a stopped
member's weights are its weights at its stop, so its last row is the same). A member's step
is skipped when its gradient has NaN or Inf entries (or, for mirror descent, when its update
leaves the float range): the skips are counted per member and reported as the run's status
(:mod:`attnlib.status`), which ``--strict`` fails on.
See chapter 10, *Real reviews*.
"""

from __future__ import annotations

import warnings

import torch

from ._validate import choice, flag, number
from .encoder import EncoderConfig, ReviewEncoder, bce_sum
from .reviews import ReviewData
from .status import RunStatus, collect, report
from .train.mirror import LpMirrorDescent, rows_within

__all__ = ["fit_encoder", "evaluate"]


@torch.no_grad()
def evaluate(model: ReviewEncoder, tokens, mask, Y, chunk: int = 500):
    """Accuracy and mean loss of every member on one split: two (M,) tensors."""
    was = model.training
    model.eval()
    hits = torch.zeros(model.M, dtype=torch.float64)
    loss = torch.zeros(model.M, dtype=torch.float64)
    order = mask.sum(1).argsort()  # chunks of similar length: little padding
    for i in range(0, len(Y), chunk):
        j = order[i:i + chunk]
        t, m, y = tokens[j], mask[j], Y[j]
        T = int(m.sum(1).max())
        f = model(t[:, :T], m[:, :T])
        hits += ((f > 0) == (y > 0)).sum(-1).cpu()
        loss += bce_sum(f, y).double().cpu()
    model.train(was)
    return hits / len(Y), loss / len(Y)


def _members_batch(order, step, batch, tokens, mask, Y):
    """Each member's mini-batch ``step``: (M, B, T) tokens and mask trimmed to the longest
    sentence, and (M, B) labels."""
    idx = order[:, step * batch:(step + 1) * batch]  # (M, B)
    m = mask[idx]
    T = int(m.sum(-1).max())
    return tokens[idx][..., :T], m[..., :T], Y[idx]


def _optimizer(kind: str, lp: float, lr: float, params):
    if kind == "md":  # the official code's variant: the dual point recomputed from w each step
        return LpMirrorDescent(params, lr=lr, lp=lp, keep_dual=False)
    return torch.optim.Adam(params, lr=lr, foreach=False)


def fit_encoder(data: ReviewData, runs: dict, seeds=(0, 1, 2), config: EncoderConfig | None = None,
                batch: int = 100, max_epochs: int = 30, stop_acc: float = 0.995,
                progress: bool = False, device=None, val_every_epoch: bool = True) -> dict:
    """Train one member per run and seed, all in one batched model.

    Parameters
    ----------
    runs : dict of str to (optimizer, lp, lr)
        ``optimizer`` is ``"md"`` (ℓp mirror descent, ``lp`` > 1; 2 is gradient descent) or
        ``"adam"`` (``lp`` ignored). Every run trains ``len(seeds)`` members, which start from
        the same weights as the other runs' members of the same seed.
    device : str, optional
        Where to compute (default: the CPU).
    val_every_epoch : bool
        Evaluate the validation split after every epoch (default), or after the last one
        only: ``val_acc`` and ``val_loss`` then have one row, equal to the last row of the
        per-epoch record (a member's weights stay those of its stop).

    Returns
    -------
    dict with the trained ``model``; ``run`` (M,) the run of each member, ``seed`` (M,),
    ``epochs`` (M,) epochs run, ``stopped`` (M,) reached ``stop_acc``; and per epoch and
    member, (E, M): ``train_acc``, ``train_loss`` (running, per sentence), ``val_acc``,
    ``val_loss``, ``test_acc`` (after a member's stop its rows repeat its stopped values;
    ``val_acc`` and ``val_loss`` (1, M) with ``val_every_epoch=False``);
    ``skipped`` (M,) the steps skipped, at least (every one skipped for a non-finite gradient;
    of those skipped for an update out of the float range, which the optimizer flags once,
    the first), ``first_skipped`` (M,) the first (-1: none), and
    ``status`` (:class:`attnlib.status.RunStatus`, also reported): the members with a
    skipped step or non-finite final weights.
    """
    batch = number("batch", batch, lo=1, integer=True)
    max_epochs = number("max_epochs", max_epochs, lo=1, integer=True)
    stop_acc = number("stop_acc", stop_acc, lo=0, hi=1)
    flag("val_every_epoch", val_every_epoch)
    if config is None:
        config = EncoderConfig(vocab_size=len(data.vocab), max_len=data.tokens.shape[1])
    names, S = list(runs), len(seeds)
    for name, (kind, lp, lr) in runs.items():
        choice(f"runs[{name!r}] optimizer", kind, ("md", "adam"))
        number(f"runs[{name!r}] lp", lp, lo=1, lo_open=True)
        number(f"runs[{name!r}] lr", lr, lo=0, lo_open=True)
    seed_m = [int(s) for _ in names for s in seeds]
    dev = torch.device(device or "cpu")
    model = ReviewEncoder(config, seeds=seed_m).to(dev)  # each run starts from the same seeds
    params = list(model.parameters())
    opts = []  # one optimizer per member: a step one member skips (its update overflows)
    for j, name in enumerate(names):  # must not hold back the other seeds of its run
        kind, lp, lr = runs[name]
        for i in range(j * S, (j + 1) * S):  # member i is a slice of every parameter tensor
            views = [torch.nn.Parameter(p.data[i:i + 1]) for p in params]  # shared storage
            opts.append((_optimizer(kind, float(lp), float(lr), views), views, i))
    tr_tok, tr_mask, tr_Y = data.part("train")
    tr_tok, tr_mask, tr_Y = tr_tok.to(dev), tr_mask.to(dev), tr_Y.to(dev)
    va = [t.to(dev) for t in data.part("val")]
    te = [t.to(dev) for t in data.part("test")]
    N, M = len(tr_Y), model.M
    gens = [torch.Generator().manual_seed(s) for s in seed_m]
    active = torch.ones(M, dtype=torch.bool)
    skipped = torch.zeros(M, dtype=torch.long)
    first = torch.full((M,), -1, dtype=torch.long)
    causes = [""] * M
    k = -1  # the step, counted over the epochs
    frozen = {}  # member -> its weights at its stop
    rec = {k: [] for k in ("train_acc", "train_loss", "val_acc", "val_loss", "test_acc")}
    epochs = torch.zeros(M, dtype=torch.long)
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=max_epochs, desc="epochs", leave=False)
    with collect():  # the optimizers' own reports: summed up per member below
        for _ in range(max_epochs):
            order = torch.stack([torch.randperm(N, generator=g) for g in gens]).to(dev)  # (M, N)
            hits = torch.zeros(M, dtype=torch.float64)
            loss_sum = torch.zeros(M, dtype=torch.float64)
            for step in range((N + batch - 1) // batch):
                k += 1
                t, m, y = _members_batch(order, step, batch, tr_tok, tr_mask, tr_Y)
                model.zero_grad(set_to_none=False)
                f = model(t, m)
                loss = bce_sum(f, y)  # (M,)
                hits += ((f.detach() > 0) == (y > 0)).sum(-1).cpu()
                loss_sum += loss.detach().double().cpu()
                loss.sum().backward()
                finite = rows_within([p.grad for p in params if p.grad is not None],
                                     M).cpu()  # (M,) per member: every entry finite
                for opt, views, i in opts:
                    if not active[i]:
                        continue  # a stopped member stays put
                    md = isinstance(opt, LpMirrorDescent)  # skips such a step itself
                    if not finite[i]:
                        _skip(skipped, first, causes, i, k, "its gradient has NaN or Inf "
                              "entries", warn=not md)
                        if not md:
                            continue  # Adam would write NaN
                    for v, p in zip(views, params):
                        v.grad = p.grad[i:i + 1]
                    flagged = opt.nonfinite if md else -1
                    opt.step()
                    if md and finite[i] and opt.nonfinite != flagged:  # its update overflowed
                        _skip(skipped, first, causes, i, k, opt.cause)
                with torch.no_grad():
                    for i, ws in frozen.items():  # stopped members stay put
                        for p, w in zip(params, ws):
                            p[i] = w
            acc = hits / N
            te_acc, _ = evaluate(model, *te)
            new = {"train_acc": acc, "train_loss": loss_sum / N, "test_acc": te_acc}
            if val_every_epoch:
                new["val_acc"], new["val_loss"] = evaluate(model, *va)
            for key, v in new.items():
                prev = rec[key][-1] if rec[key] else v
                rec[key].append(torch.where(active, v, prev))
            epochs += active.long()
            for i in torch.nonzero(active & (acc >= stop_acc)).flatten().tolist():
                frozen[i] = [p.detach()[i].clone() for p in params]
            active &= acc < stop_acc
            if bar is not None:
                bar.update(1)
                bar.set_postfix(train=f"{float(acc.mean()):.3f}", running=int(active.sum()))
            if not active.any():
                break
    if bar is not None:
        bar.close()
    if not val_every_epoch:  # each member's weights are those of its stop, or its last epoch's
        va_acc, va_loss = evaluate(model, *va)
        rec["val_acc"], rec["val_loss"] = [va_acc], [va_loss]
    out = {key: torch.stack(v) for key, v in rec.items()}
    run = [n for n in names for _ in seeds]
    bad = torch.zeros(M, dtype=torch.bool)
    with torch.no_grad():
        for p in params:
            bad |= ~torch.isfinite(p).flatten(1).all(1).cpu()
    for i in torch.nonzero(bad & (first < 0)).flatten().tolist():
        causes[i] = "its final weights are not finite"
    broken = (first >= 0) | bad
    why = [f"{run[i]} seed {seed_m[i]}: at least {int(skipped[i])} step(s) skipped, the first "
           f"at step {int(first[i])} ({causes[i]})" if first[i] >= 0 else
           f"{run[i]} seed {seed_m[i]}: {causes[i]}" for i in broken.nonzero().flatten().tolist()]
    status = report(RunStatus(runs=M, nonfinite=int(broken.sum()),
                              first_nonfinite=int(first[first >= 0].min()) if (first >= 0).any()
                              else -1, causes=tuple(why[:4])))
    return out | {"model": model, "run": run, "seed": torch.tensor(seed_m), "epochs": epochs,
                  "stopped": out["train_acc"][-1] >= stop_acc, "skipped": skipped,
                  "first_skipped": first, "status": status}


def _skip(skipped, first, causes, i: int, k: int, cause: str, warn: bool = False) -> None:
    """Count a skipped step ``k`` of member ``i`` (the first one's cause is kept; with
    ``warn``, a ``RuntimeWarning`` the first time)."""
    skipped[i] += 1
    if first[i] < 0:
        first[i], causes[i] = k, cause
        if warn:
            warnings.warn(f"fit_encoder: step {k} of member {i} skipped: {cause}; its weights "
                          "keep their last finite values (see the status)", RuntimeWarning,
                          stacklevel=3)
