r"""The candidate trainer of the multi-token experiment (E4): many tiny problems at once.

The paper's E4 trains ~50,000 candidate runs (n = 3, T = 4, d ≤ 10, 2001 normalised-GD steps on
W with the fixed ReLU head) and keeps the few whose final softmax separates cleanly. Each run
is tiny, so :func:`attnlib.train` (general: any head, parameterisation and loss, in the
trials-first layout) spends its time on small batched matrix products. Here the same
iteration is written in the coordinates where it is smallest.

W enters the risk only through the logits :math:`a_{it} = \langle W, x_{it} z_i^\top\rangle`,
and every gradient is a combination of the same matrices,
:math:`\nabla_W\mathcal L = \sum_{it} \delta_{it}\, x_{it} z_i^\top` with
:math:`\delta = \partial\mathcal L/\partial a`. So along normalised GD

.. math::

    W(k) = W(0) + \sum_{it} A_{it}(k)\, x_{it} z_i^\top,\qquad
    a(k) = a(0) + \mathcal K A(k),\qquad
    \mathcal K_{(it),(j\tau)} = (x_{it}^\top x_{j\tau})(z_i^\top z_j),

with :math:`\|\nabla_W\mathcal L\|_F^2 = \delta^\top\mathcal K\delta`, and the step
:math:`W \leftarrow W - \eta\nabla/(\|\nabla\|_F + \varepsilon)` is exactly

.. math::

    A \leftarrow A - \frac{\eta\,\delta}{\sqrt{\delta^\top\mathcal K\delta} + \varepsilon},
    \qquad a \leftarrow a - \frac{\eta\,\mathcal K\delta}{\sqrt{\delta^\top\mathcal K\delta}
    + \varepsilon}:

nT = 12 numbers per run instead of d² (and one 12×12 product per step instead of four
d-sized ones). The ReLU head's token values :math:`g_{it} = x_{it}^\top V\,
\mathbb 1[V^\top h_i > 0]` use :math:`V^\top x_{it}`, computed once. The batch is the last
(contiguous) dimension, so every operation is one vectorised pass over the candidates; the
pair form :math:`\delta_{it} \propto s_{it}\sum_\tau s_{i\tau}(g_{it} - g_{i\tau})` keeps the
gradient of a saturated softmax accurate in float64 (no cancellation). A candidate whose
update is exactly zero (for example a ReLU head that is off on every input) can never move
again: it leaves the batch. See chapter 7, *Nonlinear heads select several tokens*.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import torch

from .. import models as M
from ..data import AttentionData, random_data
from ..examples import EPS
from ..train import train

__all__ = ["CandidateRuns", "relu_candidates", "train_relu_candidates", "train_relu_reference",
           "map_chunks", "chunk_bounds"]


class CandidateRuns:
    """What :func:`train_relu_candidates` returns for B candidate runs.

    Attributes
    ----------
    W : tensor (B, d, d)
        The final matrices :math:`W(\\text{steps})`.
    steps : tensor (S,)
        The recorded iterations: 0, ``record_every``, ... and the last.
    exited : tensor (B,) int64
        Step at which the candidate left the batch because its update had become exactly zero
        (checked every ``exit_every`` steps; it is frozen from there on, so its later recorded
        iterates repeat), or -1.
    """

    def __init__(self, X, z, W0, A_hist, steps, exited):
        self._X, self._z, self._W0, self._A = X, z, W0, A_hist  # A_hist (B, S, n, T)
        self.steps, self.exited = steps, exited
        self.W = self.iterates(-1)

    def iterates(self, k=None, rows=None):
        """:math:`W` at the recorded index ``k`` (all of them if None) of the runs ``rows``:
        (B, d, d) or (B, S, d, d)."""
        r = slice(None) if rows is None else rows
        A = self._A[r] if k is None else self._A[r][:, k]
        X, z, W0 = self._X[r], self._z[r], self._W0[r]
        if k is None:
            return W0[:, None] + torch.einsum("bsnt,bntd,bne->bsde", A, X, z)
        return W0 + torch.einsum("bnt,bntd,bne->bde", A, X, z)


def relu_candidates(d: int, n: int, T: int, B: int, seed: int, device=None):
    """B candidate runs of E4 at dimension d: data (:func:`attnlib.data.random_data`, trial b from
    seed ``seed + b``, cross-attention), the fixed value matrices V (N(0,1), ||V||_F = 1) and
    W(0) ~ U(-1/sqrt d, 1/sqrt d), both drawn for the whole batch from one generator seeded
    with ``seed``. See chapter 7."""
    data = random_data(n, T, d, trials=B, seed=seed, device=device)
    g = torch.Generator().manual_seed(seed)
    V = torch.randn(B, d, d, generator=g, dtype=torch.float64)
    V = V / V.flatten(-2).norm(dim=-1)[:, None, None]
    W0 = (2 * torch.rand(B, d, d, generator=g, dtype=torch.float64) - 1) / math.sqrt(d)
    return data, V.to(data.X), W0.to(data.X)


def _prepare(X, Y, z, V, W0):
    """The per-candidate constants, batch last: kernel K (nT, nT, B) in (t, i) order, initial
    logits (T, n, B), head values V^T x_it as (T, m, n, B) and (m, T, n, B), Y/n (n, B)."""
    B, n, T, _ = X.shape
    Xt = X.transpose(1, 2)  # (B, T, n, d): token index (t, i)
    K = torch.einsum("btid,bsjd->btisj", Xt, Xt) * (z @ z.mT)[:, None, :, None, :]
    vx = torch.einsum("bntd,bdm->btmn", X, V)  # (B, T, m, n)
    a0 = torch.einsum("bntd,bde,bne->btn", X, W0, z)

    def last(t, *pat):
        return t.permute(*pat).contiguous()

    return (last(K.reshape(B, T * n, T * n), 1, 2, 0), last(a0, 1, 2, 0),
            last(vx, 1, 2, 3, 0), last(vx, 2, 1, 3, 0), last(Y / n, 1, 0))


def train_relu_candidates(data: AttentionData, V, W0, steps: int = 2001, lr: float = 0.1,
                          eps: float = EPS, record_every: int = 100,
                          exit_every: int | None = 100) -> CandidateRuns:
    r"""Normalised GD on W for B candidate runs of E4's ReLU head, as :func:`attnlib.train`
    computes it (``param="W"``, logistic loss, ``head=ReluHead(V, 1)``), in the kernel
    coordinates of this module.

    .. math::

        W \leftarrow W - \eta\,\frac{\nabla_W\mathcal L}{\|\nabla_W\mathcal L\|_F + \varepsilon},
        \qquad \mathcal L = \frac1n\sum_i \log\big(1 + e^{-Y_i\,
        \mathbf 1^\top\mathrm{ReLU}(V^\top X_i^\top \mathrm{softmax}(X_i W z_i))}\big)

    The thread settings are the caller's (the experiment runs one intra-op thread per worker,
    see :func:`map_chunks`).

    Parameters
    ----------
    data : AttentionData with B trials (X, Y, z)
    V : tensor (B, d, m)
        The fixed value matrices (readout all ones).
    W0 : tensor (B, d, d)
        Initial matrices.
    steps, lr, eps, record_every
        As in :func:`attnlib.train`.
    exit_every : int or None
        Every so many steps, candidates whose last update was exactly zero leave the batch
        (None: never; the result is the same).

    Returns
    -------
    CandidateRuns

    See chapter 7, *Nonlinear heads select several tokens*.
    """
    X, Y, z = data.X, data.Y, data.z
    B, n, T, _ = X.shape
    dev, dt = X.device, X.dtype
    record = list(range(0, steps + 1, record_every))
    if record[-1] != steps:
        record.append(steps)
    with torch.inference_mode():  # no autograd bookkeeping on the ~25 operations of a step
        K, a, vh, vg, y = _prepare(X, Y, z, V.to(X), W0.to(X))
        m = vh.shape[1]
        A = torch.zeros(T * n, B, device=dev, dtype=dt)
        hist = torch.zeros(len(record), T * n, B, device=dev, dtype=dt)
        exited = torch.full((B,), -1, dtype=torch.int64, device=dev)
        rows = torch.arange(B, device=dev)  # the candidates still in the batch
        a = a.view(T * n, -1)
        r = 0
        for k in range(steps + 1):
            if k == record[r]:
                hist[r, :, rows] = A
                r += 1
            if k == steps:
                break
            b = a.shape[-1]
            s = torch.log_softmax(a.view(T, n, b), dim=0).exp_()  # (T, n, b)
            Vh = (vh * s.view(T, 1, n, b)).sum(0)  # V^T h_i, (m, n, b)
            act = Vh.gt(0)  # bool: a factor 1 or 0 below, without a float copy
            f = Vh.clamp_min_(0).sum(0)  # head output, (n, b)
            w = torch.sigmoid(f.mul_(y).mul_(-n)).mul_(y)  # |l'(Y_i f_i)| Y_i / n
            g = (vg * act.view(m, 1, n, b)).sum(0)  # token values g_it, (T, n, b)
            pair = (g.view(T, 1, n, b) - g.view(1, T, n, b)) * s.view(1, T, n, b)
            delta = pair.sum(1).mul_(s).mul_(w).view(T * n, b)  # -dL/da, (nT, b)
            Kd = (K * delta).sum(1)  # (nT, b)
            step = lr / (Kd * delta).sum(0).sqrt_().add_(eps)
            a.addcmul_(Kd, step)
            A.addcmul_(delta, step)
            if exit_every and (k + 1) % exit_every == 0:
                still = (Kd != 0).any(0)  # a zero update leaves every later step the same
                if not bool(still.all()):
                    out = rows[~still]
                    exited[out] = k
                    for j in range(r, len(record)):  # frozen: the later iterates repeat
                        hist[j, :, out] = A[:, ~still]
                    rows = rows[still]
                    K, a, vh, vg, y, A = (t[..., still].contiguous()
                                          for t in (K, a, vh, vg, y, A))
    hist = hist.clone()  # an ordinary tensor, out of inference mode
    A_hist = hist.view(len(record), T, n, B).permute(3, 0, 2, 1)  # (B, S, n, T)
    return CandidateRuns(X, z, W0.to(X), A_hist,
                         torch.tensor(record, device=dev), exited.clone())


def train_relu_reference(data: AttentionData, V, W0, steps: int = 2001, lr: float = 0.1,
                         eps: float = EPS, record_every: int = 100):
    """The same candidates through :func:`attnlib.train` (the straightforward path, the
    oracle of the tests and the 'before' of the benchmark): its :class:`TrainResult`."""
    head = M.ReluHead(V, torch.ones(V.shape[-1], dtype=V.dtype, device=V.device))
    return train(data, "W", head=head, init={"W": W0}, lr=lr, steps=steps, eps=eps,
                 record_every=record_every)


def map_chunks(fn, chunks, workers: int = 1):
    """``fn`` over ``chunks`` in order, ``workers`` at a time (threads: torch releases the GIL
    inside its operations, so two chunks use two cores); a generator, so a caller that stops
    early trains at most ``workers - 1`` chunks too many."""
    chunks = iter(chunks)
    if workers <= 1:
        for c in chunks:
            yield fn(c)
        return
    with ThreadPoolExecutor(workers) as pool:
        pending = []
        for c in chunks:
            pending.append(pool.submit(fn, c))
            if len(pending) == workers:
                yield pending.pop(0).result()
        for p in pending:
            yield p.result()


def chunk_bounds(total: int, chunk: int, wanted=None):
    """(start, stop) of consecutive chunks out of ``total``, lazily: each at most ``chunk``
    long, and at most ``wanted()`` (at least 64) when given, read as each chunk is drawn (so a
    stream close to its quota trains smaller chunks)."""
    lo = 0
    while lo < total:
        size = chunk if wanted is None else min(chunk, max(64, int(wanted())))
        yield lo, min(lo + size, total)
        lo += size
