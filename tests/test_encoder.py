"""The review encoder against a forward pass written out sentence by sentence, head by head,
and mirror descent on all its parameters against the official optimizer's update rule
(attnlib.encoder, attnlib.encoder_fit)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnlib import encoder, encoder_fit, reviews
from attnlib.train.mirror import LpMirrorDescent


def _ln(x, w):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w


def _gelu(x):
    from scipy.special import erf
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def hand_forward(model, m, ids, n_real):
    """Member m's logit for one sentence (ids, its first n_real tokens real), in NumPy, one
    query row and one head at a time, with the official mask rule."""
    c = model.config
    P = {k: v.detach().double().numpy()[m] for k, v in model.named_parameters()}
    C, h, T = c.n_embd, c.n_head, len(ids)
    dh = C // h
    x = P["tok"][ids] + P["pos"][:T]
    for b in range(c.n_blocks):
        W = P[f"qkv.{b}"]
        Wq, Wk, Wv = W[:, :C], W[:, C:2 * C], W[:, 2 * C:]
        out = np.zeros((T, C))
        for i in range(T):
            for j in range(h):
                sl = slice(j * dh, (j + 1) * dh)
                q = x[i] @ Wq[:, sl]
                keys = [t for t in range(T) if t == 0 or (i < n_real and t < n_real)]
                a = np.array([q @ (x[t] @ Wk[:, sl]) / math.sqrt(dh) for t in keys])
                s = np.exp(a - a.max())
                s /= s.sum()
                out[i, sl] = sum(sk * (x[t] @ Wv[:, sl]) for sk, t in zip(s, keys))
        x = _ln(x + out @ P[f"proj.{b}"], P[f"ln1.{b}"])
        x = _ln(x + _gelu(x @ P[f"fc1.{b}"]) @ P[f"fc2.{b}"], P[f"ln2.{b}"])
    return float(x[0] @ P["head"])


@pytest.fixture(scope="module")
def small():
    cfg = encoder.EncoderConfig(vocab_size=11, max_len=7, n_embd=6, n_blocks=2, n_head=2,
                                n_hidden=5, dropout=0.0)
    model = encoder.ReviewEncoder(cfg, seeds=(3, 4)).double()
    tokens = torch.tensor([[1, 5, 6, 7, 8, 9, 10], [1, 4, 3, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0]])
    return model, tokens, tokens != reviews.PAD


def test_forward_matches_the_hand_written_pass(small):
    model, tokens, mask = small
    model.eval()
    f = model(tokens, mask).detach()  # (M, B)
    for m in range(model.M):
        for b in range(len(tokens)):
            ref = hand_forward(model, m, tokens[b].numpy(), int(mask[b].sum()))
            assert abs(float(f[m, b]) - ref) < 1e-10 * max(1, abs(ref))


def test_padding_does_not_change_the_cls_logit(small):
    model, tokens, mask = small
    model.eval()
    short = model(tokens[1:2, :3], mask[1:2, :3])
    assert torch.allclose(short, model(tokens[1:2], mask[1:2]), rtol=0, atol=1e-12)


def test_members_are_independent_models(small):
    model, tokens, mask = small
    model.eval()
    alone = encoder.ReviewEncoder(model.config, seeds=(4,)).double()
    alone.eval()
    assert torch.allclose(model(tokens, mask)[1], alone(tokens, mask)[0], rtol=0, atol=1e-12)


def test_min_max_of_the_raw_rows_is_the_normalised_cls_attention(small):
    """min_max(cls_attention(...)) = cls_attention(..., normalize=True), exactly; each row is
    (s - min)/(max - min) over the sentence's own tokens, padding 0."""
    model, tokens, mask = small
    raw = encoder.cls_attention(model, tokens, mask)
    nrm = encoder.min_max(raw, mask)
    assert torch.equal(nrm, encoder.cls_attention(model, tokens, mask, normalize=True))
    for b, n in enumerate(mask.sum(1).tolist()):
        r = raw[:, b, :n]
        lo, hi = r.amin(-1, keepdim=True), r.amax(-1, keepdim=True)
        want = (r - lo) / (hi - lo).clamp_min(1e-30)
        torch.testing.assert_close(nrm[:, b, :n], want)
        assert (nrm[:, b, n:] == 0).all()
    with pytest.raises(ValueError, match="mask"):
        encoder.min_max(raw, mask[:, :3])


def test_bce_sum_is_the_official_loss():
    f = torch.tensor([[0.3, -2.0, 5.0]], dtype=torch.float64)
    Y = torch.tensor([1.0, 1.0, -1.0], dtype=torch.float64)
    p = torch.sigmoid(f)
    ref = torch.nn.BCELoss(reduction="sum")(p[0], (Y > 0).double())
    assert torch.allclose(encoder.bce_sum(f, Y), ref.view(1))


@pytest.mark.parametrize("lp", [1.1, 2.0, 3.0])
def test_md_step_on_all_parameters_is_the_official_rule(small, lp):
    model, tokens, mask = small
    model.train()
    torch.manual_seed(0)
    loss = encoder.bce_sum(model(tokens, mask), torch.tensor([1.0, -1.0, 1.0])).sum()
    model.zero_grad()
    loss.backward()
    lr = 0.05
    before = {k: (p.detach().clone(), p.grad.clone()) for k, p in model.named_parameters()}
    # the official optimizer's update (AttentionMD real-data/tools/optimizer.py, unnormalised)
    ref = {}
    for k, (w, g) in before.items():
        theta = torch.sign(w) * w.abs() ** (lp - 1) - lr * g
        ref[k] = torch.sign(theta) * theta.abs() ** (1 / (lp - 1))
    for keep in (False, True):
        for k, p in model.named_parameters():
            p.data.copy_(before[k][0])
        LpMirrorDescent(model.parameters(), lr=lr, lp=lp, keep_dual=keep).step()
        for k, p in model.named_parameters():
            assert torch.allclose(p.detach(), ref[k], rtol=1e-12, atol=1e-15), (k, keep)
    for k, p in model.named_parameters():
        p.data.copy_(before[k][0])


def test_runs_side_by_side_equal_runs_alone():
    """Runs trained side by side equal runs trained alone; a member stops at stop_acc."""
    data = reviews.review_data(max_len=12)
    sub = {k: v[:200] for k, v in data.index.items()}
    data = reviews.ReviewData(**{**data.__dict__, "index": sub})
    cfg = encoder.EncoderConfig(vocab_size=len(data.vocab), max_len=12, n_embd=8,
                                n_blocks=1, n_head=2, n_hidden=8, dropout=0.0)
    for opt, lp, lrs in (("md", 1.1, (2e-3, 5e-3)), ("adam", 2.0, (1e-3, 3e-3))):
        both = encoder_fit.fit_encoder(data, {lr: (opt, lp, lr) for lr in lrs}, seeds=(0,),
                                       config=cfg, max_epochs=2, batch=50)
        for j, lr in enumerate(lrs):
            one = encoder_fit.fit_encoder(data, {lr: (opt, lp, lr)}, seeds=(0,), config=cfg,
                                          max_epochs=2, batch=50)
            for p1, p2 in zip(one["model"].parameters(), both["model"].parameters()):
                assert torch.allclose(p1[0], p2[j], rtol=1e-5, atol=1e-6), (opt, lr)
            assert torch.equal(one["val_acc"][:, 0], both["val_acc"][:, j])
    stopped = encoder_fit.fit_encoder(data, {"gd": ("md", 2.0, 1e-3)}, seeds=(0,),
                                      config=cfg, max_epochs=3, batch=50, stop_acc=0.0)
    assert stopped["epochs"].tolist() == [1] and bool(stopped["stopped"][0])


def test_a_member_whose_step_overflows_does_not_hold_back_the_other_seeds():
    """ℓ1.1 at a large rate: one seed's update leaves float32 and is skipped; the other seeds
    of the same run train exactly as they would alone."""
    data = reviews.review_data(max_len=12)
    sub = {k: v[:200] for k, v in data.index.items()}
    data = reviews.ReviewData(**{**data.__dict__, "index": sub})
    cfg = encoder.EncoderConfig(vocab_size=len(data.vocab), max_len=12, n_embd=8,
                                n_blocks=1, n_head=2, n_hidden=8, dropout=0.0)
    run = {"md": ("md", 1.1, 1e-2)}
    with pytest.warns(RuntimeWarning, match="skipped"):
        both = encoder_fit.fit_encoder(data, run, seeds=(0, 1, 2), config=cfg, max_epochs=2,
                                       batch=50)
    for j, s in enumerate((0, 1, 2)):
        one = encoder_fit.fit_encoder(data, run, seeds=(s,), config=cfg, max_epochs=2,
                                      batch=50)
        for p1, p2 in zip(one["model"].parameters(), both["model"].parameters()):
            assert torch.allclose(p1[0], p2[j], rtol=1e-5, atol=1e-6, equal_nan=True), s


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_validation_after_the_last_epoch_only_equals_the_last_epochs_record(device):
    """``val_every_epoch=False`` evaluates once, at the end: each member's row equals the
    per-epoch record's last, also for members that stopped early (their weights stay those
    of their stop). The same on a GPU, where validation is computed on the device."""
    data = reviews.review_data(max_len=12)
    sub = {k: v[:200] for k, v in data.index.items()}
    data = reviews.ReviewData(**{**data.__dict__, "index": sub})
    cfg = encoder.EncoderConfig(vocab_size=len(data.vocab), max_len=12, n_embd=8,
                                n_blocks=1, n_head=2, n_hidden=8, dropout=0.0)
    run = {"md": ("md", 1.1, 5e-3), "adam": ("adam", 2.0, 0.3)}
    mixed = False
    for stop_acc in (0.0, 0.9, 1.0):  # every member stops at once / at different epochs / none
        kw = dict(seeds=(0, 1), config=cfg, max_epochs=3, batch=50, stop_acc=stop_acc,
                  device=device)
        every = encoder_fit.fit_encoder(data, run, **kw)
        last = encoder_fit.fit_encoder(data, run, val_every_epoch=False, **kw)
        mixed |= len(set(every["epochs"].tolist())) > 1
        assert last["val_acc"].shape == (1, 4) and every["val_acc"].shape[0] >= 1
        assert next(last["model"].parameters()).device.type == device
        assert torch.equal(last["val_acc"][0], every["val_acc"][-1])
        assert torch.equal(last["val_loss"][0], every["val_loss"][-1])
        assert torch.equal(last["test_acc"], every["test_acc"])
    assert mixed  # in one of the runs the members stopped at different epochs
    with pytest.raises(ValueError, match="val_every_epoch"):
        encoder_fit.fit_encoder(data, run, seeds=(0,), config=cfg, val_every_epoch=1)
