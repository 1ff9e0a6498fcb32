"""Chapter 2 says: in float64 the official notebook's loop and the book's trainer agree.

Oracle: the official E2 loop written out independently (autograd through
``log(1 + exp(-Y f))``, the gradient divided by its norm + 1e-12, an SGD step of 0.1; its
own torch seed-0 data recipe), run in float64 and compared with ``mm_e2_multi_input``'s
recorded paths. A wrong trainer (other normalisation, step, sign or data) moves the paths.
"""

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
