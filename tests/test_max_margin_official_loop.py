"""Chapter 2 says: in float64 the official notebook's loop and the book's trainer agree.

Oracle: the official E2 loop written out independently (autograd through
``log(1 + exp(-Y f))``, the gradient divided by its norm + 1e-12, an SGD step of 0.1; its
own torch seed-0 data recipe), run in float64 and compared with ``mm_e2_multi_input``'s
recorded paths. A wrong trainer (other normalisation, step, sign or data) moves the paths.
"""

import pytest
import torch

import attnlib.experiments as E


def _official_e2_data():
    g = torch.Generator().manual_seed(0)
    X = torch.randn((3, 7, 3), generator=g) * 0.2  # float32 draw, as the notebook
    X[:, 0] += torch.tensor([1.0, 0, 0])
    X[:, 1:4] += torch.tensor([-1.0, 1, 0])
    X[:, -3:] += torch.tensor([-0.5, -0.5, 0])
    X[:, 0, -1] = 1.0
    X[:, 1:, -1] = 0.5
    return X.double()


def _official_loop(p0, steps, lr=0.1, eps=1e-12):
    X = _official_e2_data()
    K = torch.diag(torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64))  # key = query
    v = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    p = p0.clone().double().requires_grad_(True)
    path = [p.detach().clone()]
    for _ in range(steps):
        att = torch.softmax((X @ K.T) @ (K @ p), dim=-1)  # (n, T)
        f = (att[..., None] * X).sum(1) @ v
        loss = torch.log(1 + torch.exp(-f)).mean()  # Y = 1
        (grad,) = torch.autograd.grad(loss, p)
        with torch.no_grad():
            p -= lr * grad / (grad.norm() + eps)
        path.append(p.detach().clone())
    return torch.stack(path)


def test_official_float64_loop_matches_the_book_trainer():
    steps = 60
    res = E.run("mm_e2_multi_input", cache=False, steps=steps)
    book = torch.as_tensor(res.arrays["ngd_paths"])  # (6, S, 2)
    for j, c in enumerate((1.0, 0.5, 0.0, -0.5, -1.0, -1.5)):
        ref = _official_loop(torch.tensor([c, 0.0, 0.0]), steps)
        assert book.shape[1] == ref.shape[0]
        assert torch.allclose(book[j], ref[:, :2], atol=1e-9), (c, (book[j] - ref[:, :2])
                                                                .abs().max())


def _official_e1_loop(c, steps, lr=0.1, eps=0.0):
    X = torch.tensor([[-0.1, 1.0, 1.0], [1.0, 0.0, 0.9], [0.0, 0.0, 0.9]],
                     dtype=torch.float64)  # E1, global scores
    K = torch.diag(torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64))
    v = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    p = torch.tensor([0.0, c, 0.0], dtype=torch.float64, requires_grad=True)
    for _ in range(steps):
        f = torch.softmax((X @ K.T) @ (K @ p), dim=-1) @ (X @ v)
        (grad,) = torch.autograd.grad(torch.log(1 + torch.exp(-f)), p)
        with torch.no_grad():
            p -= lr * grad / (grad.norm() + eps)
    return p.detach()


def test_e1_no_stall_runs_match_the_official_loop_with_eps_zero():
    steps = 300  # past the stall of ε = 1e-9 (‖p‖ ≈ 21.5): the ε = 0 runs reach ≈ 30
    nb = E.run("mm_e1_basins", cache=False, steps=steps, sweep=0).numbers
    P = torch.stack([_official_e1_loop(c, steps) for c in (1.0, 0.5, 0.0, -0.5, -1.0, -1.5)])
    q = torch.tensor([-0.1, 1.0, 0.0], dtype=torch.float64)  # p_mm(1) ∝ k_1 (closed form)
    cos = (P @ q) / (P.norm(dim=-1) * q.norm())
    # float64 round-off of two implementations, amplified by the normalisation: 1e-6
    assert nb["global_nostall_cos1000_lo"] == pytest.approx(float(cos.min()), abs=1e-6)
    assert nb["global_nostall_norm"] == pytest.approx(float(P.norm(dim=-1).mean()), abs=1e-6)
    assert nb["global_nostall_norm"] > nb["global_final_norm"] + 5  # the other runs stall
