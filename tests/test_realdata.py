"""Tests for attnlib.realdata: digits as patch tokens, the batched classifier, selection."""

import pytest
import torch
from test_trainers_cuda import close

from attnlib import realdata as rd


@pytest.fixture(scope="module")
def data():
    return rd.digits_tokens()


def test_tokens_shapes_and_labels(data):
    assert data.X.shape == (1797, 16, 20) and data.z.shape == (1797, 20)
    assert set(data.Y.unique().tolist()) == {-1.0, 1.0}
    assert torch.equal(data.Y > 0, data.digit >= 5)
    # pixels in [0, 1], then a one-hot position
    assert data.X[..., :4].min() >= 0 and data.X[..., :4].max() <= 1
    assert torch.equal(data.X[0, :, 4:], torch.eye(16, dtype=data.X.dtype))
    assert torch.allclose(data.z, data.X.mean(1))
    # patch t of image 0 holds pixels (2r..2r+1, 2c..2c+1) with t = 4r + c
    from sklearn.datasets import load_digits

    img = torch.as_tensor(load_digits().images[0]) / 16
    assert torch.allclose(data.X[0, 5, :4].double(), img[2:4, 2:4].reshape(-1))


def test_cls_query():
    d = rd.digits_tokens(query="cls")
    assert d.X.shape == (1797, 17, 21)
    assert torch.equal(d.z, d.X[:, 0]) and (d.z[:, 0] == 1).all() and (d.z[:, 1:] == 0).all()


def test_split_disjoint_stratified_deterministic(data):
    idx = data.index
    allidx = torch.cat([idx["train"], idx["val"], idx["test"]])
    assert len(allidx) == 1797 and len(allidx.unique()) == 1797
    for c in range(10):  # every digit split ~50/25/25
        n = int((data.digit == c).sum())
        assert abs(int((data.digit[idx["train"]] == c).sum()) - n / 2) <= 1
    again = rd.split_indices(data.digit, seed=0)
    other = rd.split_indices(data.digit, seed=1)
    assert all(torch.equal(again[k], idx[k]) for k in idx)
    assert not torch.equal(other["test"], idx["test"])


def test_models_depend_only_on_their_seed(data):
    a = rd.AttentionClassifier(20, seeds=(0, 1))
    b = rd.AttentionClassifier(20, seeds=(1,))
    c = rd.AttentionClassifier(20, seeds=(0, 1), groups=3)
    assert torch.equal(a.W[1], b.W[0]) and torch.equal(a.v[1], b.v[0])
    assert not torch.equal(a.W[0], a.W[1])
    assert c.W.shape == (6, 20, 20) and torch.equal(c.W[2:4], a.W)


def test_batched_forward_equals_one_model_at_a_time(data):
    X, Y, z = data.part("val")
    m = rd.AttentionClassifier(20, seeds=(3, 4, 5))
    f = m(X, z)  # (3, N)
    s = m.attention(X, z)
    assert torch.allclose(s.sum(-1), torch.ones_like(s[..., 0]))
    for b in range(3):  # oracle: the book's formula, one model, plain einsum
        a = torch.einsum("ntd,de,ne->nt", X, m.W[b], z)
        fb = (torch.softmax(a, -1) * (X @ m.v[b])).sum(-1)
        assert torch.allclose(f[b], fb, atol=1e-5)


def test_a_shared_query_gives_the_logits_of_every_sample_its_own():
    """shared_query keeps one row only when every sample's query is the same; the logits of
    that one row are those of the full (N, d) queries (and of the book's formula)."""
    cls = rd.digits_tokens(query="cls")
    X, _, z = cls.part("val")
    one = rd.shared_query(z)
    assert one.shape == (1, cls.d) and torch.equal(one[0], z[0])
    m = rd.AttentionClassifier(cls.d, seeds=(3, 4), groups=2)
    full, shared = m.logits(X, z), m.logits(X, one)  # (N, T, B)
    assert shared.shape == full.shape
    torch.testing.assert_close(shared, full)
    for b in range(4):
        torch.testing.assert_close(shared[..., b], torch.einsum("ntd,de,ne->nt", X, m.W[b], z))
    mean_z = rd.digits_tokens().part("val")[2]  # per-sample queries: kept as they are
    assert rd.shared_query(mean_z) is mean_z
    z2 = z.clone()
    z2[-1, 1] = 1e-3  # one sample differs: not shared
    assert rd.shared_query(z2) is z2


@pytest.mark.parametrize("opt,lrs", [("md", (1.0,)), ("gd", (3.0,)), ("adam", (0.03,))])
def test_a_few_steps_reduce_the_loss(data, opt, lrs):
    r = rd.fit(data, opt, lrs, steps=10, eval_every=5, seeds=(0, 1))
    assert r["train_loss"].shape == (1, 3, 2) and r["W"].shape == (1, 3, 2, 20, 20)
    assert (r["train_loss"][0, -1] < r["train_loss"][0, 0] - 1e-4).all()
    assert torch.isfinite(r["val_acc"]).all()


def _md_loop(W, v, X, Y, z, lp, lr, steps):
    """One model, autograd, the ℓp dual step by hand (dual state in float64): (loss, W) per
    iterate."""
    theta = [torch.sign(t.double()) * t.double().abs() ** (lp - 1) for t in (W, v)]
    out = []
    for k in range(steps + 1):
        W, v = W.requires_grad_(True), v.requires_grad_(True)
        f = (torch.softmax(torch.einsum("ntd,de,ne->nt", X, W, z), -1) * (X @ v)).sum(-1)
        L = torch.nn.functional.softplus(-Y * f).mean()
        out.append((L.detach(), W.detach()))
        if k == steps:
            return out
        grads = torch.autograd.grad(L, (W, v))
        theta = [t - lr * g.double() for t, g in zip(theta, grads)]
        W, v = ((torch.sign(t) * t.abs() ** (1 / (lp - 1))).float() for t in theta)


def test_fit_on_a_tiny_split_is_per_model_mirror_descent(data):
    """fit(md) on 20 training images = a plain autograd loop with the ℓ1.1 dual step, per seed."""
    idx = {"train": torch.arange(20), "val": torch.arange(20, 30), "test": torch.arange(30, 40)}
    tiny = rd.DigitSplits(data.X[:40], data.Y[:40], data.z[:40], data.digit[:40], idx)
    lp, lr, steps = 1.1, 1.0, 4
    r = rd.fit(tiny, "md", (lr,), lp=lp, steps=steps, eval_every=2, seeds=(0, 1))
    assert r["step"].tolist() == [0, 2, 4]
    X, Y, z = tiny.part("train")
    init = rd.AttentionClassifier(20, seeds=(0, 1))
    for b in range(2):
        ref = _md_loop(init.W[b].detach().clone(), init.v[b].detach().clone(), X, Y, z, lp, lr,
                       steps)[::2]
        torch.testing.assert_close(r["train_loss"][0, :, b], torch.stack([L for L, _ in ref]),
                                   rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(r["W"][0, :, b], torch.stack([W for _, W in ref]),
                                   rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("query", ["mean", "cls"])
def test_fit_with_a_fixed_head_and_normalised_steps_is_per_model_mirror_descent(data, query):
    """fit(md, v fixed, normalized) with two learning-rate groups = a plain autograd loop per
    model: W only, the ℓ1.1 dual step of lr·g/||g||_q (the values of the fixed head hoisted,
    the groups normalised in one call: each model still gets its own norm and its own rate;
    with a [CLS] query, one shared by every sample, W z computed once per model)."""
    data = data if query == "mean" else rd.digits_tokens(query="cls")
    d = data.d
    idx = {"train": torch.arange(20), "val": torch.arange(20, 30), "test": torch.arange(30, 40)}
    tiny = rd.DigitSplits(data.X[:40], data.Y[:40], data.z[:40], data.digit[:40], idx)
    lp, lrs, steps = 1.1, (0.05, 0.2), 4
    q = lp / (lp - 1)
    v = torch.linspace(-1, 1, d)
    r = rd.fit(tiny, "md", lrs, lp=lp, steps=steps, eval_every=steps, seeds=(0, 1), v=v,
               normalized=True)
    X, Y, z = tiny.part("train")
    init = rd.AttentionClassifier(d, seeds=(0, 1))
    for li, lr in enumerate(lrs):
        for b in range(2):
            W = init.W[b].detach().clone()
            theta = torch.sign(W.double()) * W.double().abs() ** (lp - 1)
            for _ in range(steps):
                W = W.requires_grad_(True)
                f = (torch.softmax(torch.einsum("ntd,de,ne->nt", X, W, z), -1) * (X @ v)).sum(-1)
                g, = torch.autograd.grad(torch.nn.functional.softplus(-Y * f).mean(), W)
                g = g.double()
                theta = theta - lr * g / g.abs().pow(q).sum().pow(1 / q)
                W = (torch.sign(theta) * theta.abs() ** (1 / (lp - 1))).float()
            torch.testing.assert_close(r["W"][li, -1, b], W, rtol=1e-4, atol=1e-6)
            assert torch.equal(r["v"][li, -1, b], v)


def test_one_exponent_per_learning_rate_equals_separate_runs():
    """fit(md, lp=(p1, p2, p3)) trains group g with exponent p_g: the same models as one fit
    per p (p = 2 against "gd", SGD), normalised steps with each group's own q."""
    from attnlib import text

    data = text.sentiment_sentences(n=40, T=6, dim=8, distractors=1, seed=1,
                                    dtype=torch.float64)
    lps, lrs = (1.1, 2.0, 3.0), (0.01, 0.1, 0.3)
    kw = dict(steps=30, eval_every=10, seeds=(0, 1), v=data.v, normalized=True)
    both = rd.fit(data, "md", lrs, lp=lps, **kw)
    for g, (lp, lr) in enumerate(zip(lps, lrs)):
        one = rd.fit(data, "gd" if lp == 2 else "md", (lr,), lp=lp, **kw)
        torch.testing.assert_close(both["W"][g], one["W"][0], rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(both["train_loss"][g], one["train_loss"][0], rtol=1e-12,
                                   atol=1e-14)
    with pytest.raises(ValueError, match="lp"):
        rd.fit(data, "md", lrs, lp=(1.1, 2.0), **kw)


def test_learning_rate_groups_are_independent(data):
    both = rd.fit(data, "md", (0.1, 0.3), steps=10, eval_every=5, seeds=(0,))
    one = rd.fit(data, "md", (0.3,), steps=10, eval_every=5, seeds=(0,))
    assert torch.allclose(both["W"][1], one["W"][0], atol=1e-6)
    assert not torch.allclose(both["W"][0, -1], one["W"][0, -1])


def test_fit_is_deterministic(data):
    a = rd.fit(data, "adam", (0.01,), steps=5, eval_every=5, seeds=(2,))
    b = rd.fit(data, "adam", (0.01,), steps=5, eval_every=5, seeds=(2,))
    assert torch.equal(a["W"], b["W"])


def test_select_uses_accuracy_then_loss():
    acc = torch.tensor([[[0.5, 0.6], [0.7, 0.6]], [[0.9, 0.8], [0.9, 0.8]]])  # (L=2, C=2, B=2)
    loss = torch.tensor([[[0.5, 0.5], [0.4, 0.4]], [[0.3, 0.2], [0.1, 0.3]]])
    li, ck = rd.select(acc, loss)
    assert li == 1 and ck.tolist() == [1, 0]  # ties: lower validation loss wins
    with pytest.raises(ValueError, match="val_acc"):
        rd.select(acc[0], loss[0])


def test_selection_never_reads_the_test_split(data):
    """Flipping every test label changes test accuracy, never the choices."""
    flipped = rd.DigitSplits(data.X, data.Y.clone(), data.z, data.digit, data.index)
    flipped.Y[data.index["test"]] *= -1
    kw = dict(steps=10, eval_every=5, seeds=(0, 1),
              lrs={"md": (0.1, 1.0), "gd": (0.3, 3.0), "adam": (0.003, 0.03)})
    a, b = rd.compare(data, **kw), rd.compare(flipped, **kw)
    for k in rd.OPTIMIZERS:
        assert a[k]["lr"] == b[k]["lr"] and torch.equal(a[k]["step"], b[k]["step"])
        assert torch.allclose(a[k]["test_acc"] + b[k]["test_acc"], torch.ones(2))
        assert torch.equal(a[k]["val_acc"], b[k]["val_acc"])


def test_metrics():
    W = torch.zeros(2, 3, 3)
    W[0] = torch.eye(3)
    W[1] = 1.0
    frac, ratio = rd.weight_sparsity(W)
    assert torch.allclose(frac, torch.tensor([6 / 9, 0.0]))
    assert torch.allclose(ratio, torch.tensor([3 / 3**0.5, 9 / 3.0]))
    X = torch.randn(5, 4, 3)
    ent, top1 = rd.attention_entropy(torch.zeros(1, 3, 3), X, X.mean(1))
    assert torch.allclose(ent, torch.log(torch.tensor([4.0]))) and torch.allclose(top1,
                                                                                torch.tensor([0.25]))


def test_bad_input(data):
    with pytest.raises(ValueError, match="patch"):
        rd.digits_tokens(patch=3)
    with pytest.raises(ValueError, match="query"):
        rd.digits_tokens(query="first")
    with pytest.raises(ValueError, match="fractions"):
        rd.split_indices(data.digit, fractions=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="optimizer"):
        rd.fit(data, "sgd")
    with pytest.raises(ValueError, match="lrs"):
        rd.fit(data, "gd", lrs=(-1.0,))
    with pytest.raises(ValueError, match="name"):
        data.part("training")
    with pytest.raises(ValueError, match="lrs"):
        rd.compare(data, lrs={"md": (0.1,)})


# ----------------------------------------------------------------------------- on a GPU
# float64 on both devices, compared as the trainers are (test_trainers_cuda.close: 1e-9 of
# the largest entry; 30 steps of these small models, a device bug is an O(1) change)


def _on(device):
    return rd.digits_tokens(device=device, dtype=torch.float64)


def _same_fraction(gpu, cpu, what):
    """Fractions of samples (or entries): the same ones counted on both devices. A GPU's mean
    may round the last bit differently (it multiplies by 1/n), so the fractions are equal to
    1e-12; one sample counted differently moves a fraction by 1/n, at least 1e-4 here."""
    assert gpu.device.type == "cuda", what
    err = float((gpu.cpu() - cpu).abs().max())
    assert err <= 1e-12, f"{what}: max |cuda - cpu| = {err:.3g}"


@pytest.mark.cuda
@pytest.mark.parametrize("opt,lrs,kw", [("md", (0.3, 1.0), dict(lp=1.1)),
                                        ("md", (0.1,), dict(lp=(3.0,), normalized=True)),
                                        ("gd", (3.0,), {}), ("adam", (0.03,), {})])
def test_fit_on_cuda_agrees_with_cpu(opt, lrs, kw):
    """Every recorded tensor of fit, trained on CUDA, equals the CPU's (float64); the
    checkpoint steps live on the data's device."""
    args = dict(steps=30, eval_every=10, seeds=(0, 1), **kw)
    cpu, gpu = rd.fit(_on("cpu"), opt, lrs, **args), rd.fit(_on("cuda"), opt, lrs, **args)
    assert gpu["step"].device.type == "cuda" and torch.equal(gpu["step"].cpu(), cpu["step"])
    for key in ("train_loss", "val_loss", "W", "v"):
        close(gpu[key], cpu[key], f"fit {opt}: {key}")
    for key in ("train_acc", "val_acc", "test_acc"):
        _same_fraction(gpu[key], cpu[key], f"fit {opt}: {key}")
    assert gpu["status"].ok == cpu["status"].ok


@pytest.mark.cuda
def test_compare_on_cuda_agrees_with_cpu():
    """compare (the three optimizers, selection on validation, the chosen checkpoints) on
    CUDA data: the same choices as on the CPU and the same models and measures."""
    lrs = {"md": (0.3, 1.0), "gd": (1.0, 3.0), "adam": (0.01, 0.03)}
    args = dict(steps=20, eval_every=5, seeds=(0, 1), lrs=lrs)
    cpu, gpu = rd.compare(_on("cpu"), **args), rd.compare(_on("cuda"), **args)
    assert set(gpu) == set(cpu) == set(rd.OPTIMIZERS)
    for name in rd.OPTIMIZERS:
        c, g = cpu[name], gpu[name]
        assert g["lr"] == c["lr"], name
        assert torch.equal(g["step"].cpu(), c["step"]), name
        for key in ("val_acc", "test_acc", "final_test_acc", "sparsity"):
            _same_fraction(g[key], c[key], f"{name}: {key}")
        for key in ("W", "l1_over_fro", "entropy", "top1", "curve_train_loss"):
            close(g[key], c[key], f"compare {name}: {key}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("d", [20, 65, 200])
def test_the_query_column_step_is_the_whole_rows_bit_for_bit(dtype, d):
    """With a [CLS] query only W's query column takes a gradient: the normalised ℓq step taken
    on that column alone equals the step of the whole row, bit for bit (q ≠ 2)."""
    from types import SimpleNamespace

    g = torch.Generator().manual_seed(d)
    z = torch.zeros(5, d, dtype=dtype)
    z[:, 0] = 1.0
    grad = torch.zeros(3, d, d, dtype=dtype)
    grad[:, :, 0] = torch.randn(3, d, generator=g, dtype=dtype) * torch.rand(
        3, d, generator=g, dtype=dtype) ** 4
    for q in (1.5 / 0.5, 1.1 / 0.1, 101.0):
        W = torch.zeros(3, d, d, dtype=dtype, requires_grad=True)
        model = SimpleNamespace(Ws=[W], vs=[])
        (sets,) = [s for s in rd._norm_sets(model, [q], z) if s[1]]
        assert sets[2] is not None and sets[2].tolist() == [0]  # the column path is taken
        W.grad = grad.clone()
        rd._normalize([sets])
        whole = W.grad.clone()
        W.grad = grad.clone()
        rd._normalize([(q, [W], None)])
        assert torch.equal(whole, W.grad), q
