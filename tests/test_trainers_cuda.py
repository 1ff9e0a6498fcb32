"""The trainers on a GPU agree with the CPU: the same data and start, float64, the same result.

One small problem per trainer path (a few trials, tens to a few hundred steps): ``al.train``
with param W, (K, Q), p, W+v and v (the joint head), ℓp mirror descent (normalised and not),
the ReLU, MLP and λ heads and several-token selections, the causal sequence trainer, the
regularisation path (Frobenius and ℓp balls) and :class:`attnlib.train.LpMirrorDescent` on a
torch model. Each runs on the CPU and on CUDA from the same CPU-drawn data and start, and the
CUDA result, brought back, must equal the CPU's to ``RTOL`` (relative to the tensor's largest
entry).

Tolerance: float64 rounds at 1.1e-16; the GPU's kernels sum in another order, so each step
differs from the CPU's by a few ulps and the differences grow at most with the number of steps
and the conditioning of the softmax (100 trials x 2,000 steps of W agreed to 3e-13 on an H200).
``RTOL = 1e-9`` leaves three orders of magnitude for these shorter runs, and is still far below
what a device bug does (a wrong mask, index or default tensor changes a result at O(1)).

Every test is marked ``cuda`` (skipped without a GPU).
"""

from __future__ import annotations

import pytest
import torch

import attnlib as al
from attnlib import sequences
from attnlib.train import LpMirrorDescent

pytestmark = pytest.mark.cuda
DEVICE = "cuda"
RTOL = 1e-9
F64 = torch.float64


def close(gpu, cpu, what="", rtol=RTOL):
    """``gpu`` (on DEVICE) equals the CPU tensor ``cpu`` to ``rtol`` of its largest entry."""
    assert gpu.device.type == DEVICE, what
    got = gpu.detach().cpu()
    assert got.shape == cpu.shape, what
    assert torch.isfinite(cpu).all(), what
    scale = float(cpu.abs().max()) or 1.0
    err = float((got - cpu).abs().max())
    assert err <= rtol * scale, f"{what}: max |cuda - cpu| = {err:.3g}, scale {scale:.3g}"


def both(fn):
    """``fn(device)`` on the CPU and on DEVICE."""
    return fn("cpu"), fn(DEVICE)


def data(trials=4, n=5, T=6, d=4, seed=0, device="cpu"):
    return al.random_data(n, T, d, trials=trials, seed=seed, device=device)


TRAIN_CASES = {
    "W": dict(param="W"),
    "W-logistic-eps": dict(param="W", eps=1e-9, lr=0.2),
    "W-unnormalized": dict(param="W", normalized=False, lr=0.5),
    "KQ": dict(param="KQ", reg=1e-3, steps=30),
    "p": dict(param="p"),
    "W+v": dict(param="W+v"),
    "p+v": dict(param="p+v"),
    "v": dict(param="v"),
    "md-1.25": dict(param="W", method="md", lp=1.25, steps=30),
    "md-3": dict(param="W", method="md", lp=3.0, eps=1e-12),
    "md-unnormalized": dict(param="W", method="md", lp=1.5, normalized=False, lr=2.0),
    "md-KQ": dict(param="KQ", method="md", lp=1.5, steps=30),
    "exp-loss": dict(param="W", loss="exp"),
    "correlation-loss": dict(param="W", loss="correlation"),
}


@pytest.mark.parametrize("case", TRAIN_CASES)
def test_train_agrees_with_cpu(case):
    """150 steps, or 30 where the run turns chaotic later: there a relative change of 1e-15 in
    X moves the CPU's own result by 1e-9 (KQ), 8e-2 (ℓ1.25 MD on W) and 2e-7 (ℓ1.5 MD on KQ)
    after 100 steps, and by at most 2e-14 after 30 (measured), so the GPU's other order of
    summation, a few ulps a step, is amplified the same way (on an H200 after 150 steps:
    1.2e-9, 2.5e-2 and 4.4e-2 of the largest entry)."""
    kw = dict(TRAIN_CASES[case])
    steps = kw.pop("steps", 150)
    cpu_data = data()
    runs = both(lambda dev: al.train(cpu_data, steps=steps, record_every=10, seed=3, device=dev,
                                     **kw))
    cpu, gpu = runs
    for name in ("W", "K", "Q", "p", "v"):
        if getattr(cpu, name) is not None:
            close(getattr(gpu, name), getattr(cpu, name), f"{case}: {name}")
    for key in ("loss", "grad_norm", "max_prob"):
        close(gpu.history[key], cpu.history[key], f"{case}: history[{key!r}]")
    assert torch.equal(gpu.stopped.cpu(), cpu.stopped)
    assert torch.equal(gpu.nonfinite.cpu(), cpu.nonfinite)


def _head_init(head, d, m=3, seed=1):
    g = torch.Generator().manual_seed(seed)
    if head == "lambda":
        return {"lam": 0.5}
    init = {"V": torch.randn(d, m, generator=g, dtype=F64)}
    if head == "mlp":
        init["b"] = 0.1 * torch.randn(m, generator=g, dtype=F64)
    init["u"] = torch.tensor([1.0, -0.5, 0.8], dtype=F64)
    return init


@pytest.mark.parametrize("head", ["relu", "mlp", "lambda"])
def test_nonlinear_heads_agree_with_cpu(head):
    cpu_data = data(seed=2)
    init = _head_init(head, cpu_data.d)
    cpu, gpu = both(lambda dev: al.train(cpu_data, param="W", head=head, init=init, steps=120,
                                         record_every=40, seed=5, device=dev))
    close(gpu.W, cpu.W, f"{head}: W")
    close(gpu.history["loss"], cpu.history["loss"], f"{head}: loss")


def test_masked_inputs_agree_with_cpu():
    """A visibility mask (the mechanism of the sequence trainer, on plain inputs)."""
    cpu_data = data(seed=4)
    mask = torch.ones(cpu_data.n, cpu_data.T, dtype=torch.bool)
    mask[:, -2:] = False
    mask[0, 1:] = False  # one input sees a single token
    cpu, gpu = both(lambda dev: al.train(cpu_data, param="W", mask=mask, steps=100,
                                         record_every=50, device=dev))
    close(gpu.W, cpu.W, "masked W")


@pytest.mark.parametrize("param", ["W", "KQ"])
@pytest.mark.parametrize("causal", [True, False])
def test_sequence_trainer_agrees_with_cpu(param, causal):
    def run(dev):
        seqs = sequences.random_sequences(4, 5, 3, trials=3, seed=1, device=dev)
        return sequences.train_sequence(seqs, param=param, causal=causal, steps=100,
                                        record_every=50, seed=2, reg=1e-3 if param == "KQ"
                                        else 0.0)
    cpu, gpu = both(run)
    close(gpu.W, cpu.W, f"sequence {param} causal={causal}: W")
    sel_cpu = sequences.sequence_selected_tokens(
        sequences.random_sequences(4, 5, 3, trials=3, seed=1, device="cpu"), cpu.W, causal)
    sel_gpu = sequences.sequence_selected_tokens(
        sequences.random_sequences(4, 5, 3, trials=3, seed=1, device=DEVICE), gpu.W, causal)
    assert sel_gpu.device.type == DEVICE and torch.equal(sel_gpu.cpu(), sel_cpu)


@pytest.mark.parametrize("norm", ["fro", 1.5])
def test_regularization_path_agrees_with_cpu(norm):
    cpu_data = data(trials=2, seed=6)
    cpu, gpu = both(lambda dev: al.regularization_path(cpu_data, [0.5, 2.0, 8.0], steps=150,
                                                       device=dev, norm=norm))
    close(gpu.W, cpu.W, f"path {norm}: W")


@pytest.mark.parametrize("lp, normalized, keep_dual",
                         [(1.1, False, True), (1.5, True, True), (3.0, False, False),
                          (2.0, False, True)])
def test_lp_mirror_descent_optimizer_agrees_with_cpu(lp, normalized, keep_dual):
    """:class:`LpMirrorDescent` on a small torch model (a linear layer and a bias, logistic
    loss), trained for 60 steps from the same start on both devices."""
    g = torch.Generator().manual_seed(7)
    X = torch.randn(32, 6, generator=g, dtype=F64)
    y = torch.sign(torch.randn(32, generator=g, dtype=F64))
    W0 = 0.3 * torch.randn(6, 2, generator=g, dtype=F64)
    b0 = 0.1 * torch.randn(2, generator=g, dtype=F64)

    def run(dev):
        W = W0.to(dev).clone().requires_grad_(True)
        b = b0.to(dev).clone().requires_grad_(True)
        Xd, yd = X.to(dev), y.to(dev)
        opt = LpMirrorDescent([W, b], lr=0.05, lp=lp, normalized=normalized,
                              keep_dual=keep_dual)
        for _ in range(60):
            opt.zero_grad()
            f = (torch.tanh(Xd @ W) + b).sum(-1)
            torch.nn.functional.softplus(-yd * f).mean().backward()
            opt.step()
        assert opt.nonfinite == -1
        return W.detach(), b.detach()
    (Wc, bc), (Wg, bg) = both(run)
    close(Wg, Wc, f"LpMirrorDescent p={lp}: W")
    close(bg, bc, f"LpMirrorDescent p={lp}: b")


def test_several_token_selections_agree_with_cpu():
    """Trained on CUDA, the selection read off is the CPU's, and so is its SVM (solved on
    the CPU either way; the result comes back on the data's device)."""
    cpu_data = data(trials=2, n=3, T=4, d=6, seed=8)
    cpu, gpu = both(lambda dev: al.train(cpu_data, param="W", steps=200, record_every=100,
                                         device=dev))
    gpu_data = cpu_data.to(DEVICE)
    sel_cpu, sel_gpu = al.selected_tokens(cpu_data, cpu.W), al.selected_tokens(gpu_data, gpu.W)
    assert sel_gpu.device.type == DEVICE and torch.equal(sel_gpu.cpu(), sel_cpu)
    W_cpu = al.att_svm(cpu_data, alpha=sel_cpu)
    W_gpu = al.att_svm(gpu_data, alpha=sel_gpu)
    # both solved on the CPU from the same float64 numbers; the interior-point solver's answer
    # moves within its own tolerance with the problem solved before it, hence 1e-6, not RTOL
    close(W_gpu, W_cpu, "att_svm of the selection", rtol=1e-6)
