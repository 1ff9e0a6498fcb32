"""Chapter 2 says: in float64 the official notebook's loop and the book's trainer agree.

Oracle: the official E2 loop (autograd through ``log(1 + exp(-Y f))``, the gradient divided
by its norm + 1e-12, an SGD step of 0.1), attnlib's one copy of it
(``official_numerics.official_prompt_loop``), on the official seed-0 data recipe written out
here, run in float64 and compared with ``mm_e2_multi_input``'s recorded paths (attnlib's
analytic gradient). A wrong trainer (other normalisation, step, sign or data) moves the paths.
"""

import pytest
import torch

import attnlib.experiments as E
from attnlib.experiments.official_numerics import official_prompt_loop

_C = (1.0, 0.5, 0.0, -0.5, -1.0, -1.5)
_K = torch.diag(torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64))  # key = query
_V = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)


def _official_e2_data():
    g = torch.Generator().manual_seed(0)
    X = torch.randn((3, 7, 3), generator=g, dtype=torch.float32) * 0.2  # the notebook's draw
    X[:, 0] += torch.tensor([1.0, 0, 0])
    X[:, 1:4] += torch.tensor([-1.0, 1, 0])
    X[:, -3:] += torch.tensor([-0.5, -0.5, 0])
    X[:, 0, -1] = 1.0
    X[:, 1:, -1] = 0.5
    return X.double()


def test_official_float64_loop_matches_the_book_trainer():
    steps = 60
    res = E.run("mm_e2_multi_input", cache=False, steps=steps)
    book = torch.as_tensor(res.arrays["ngd_paths"])  # (6, S, 2)
    P0 = torch.zeros(len(_C), 3, dtype=torch.float64)
    P0[:, 0] = torch.tensor(_C, dtype=torch.float64)
    ref, _ = official_prompt_loop(_official_e2_data(), _K, _V, P0, steps=steps, eps=1e-12)
    assert book.shape[1] == ref.shape[1]
    assert torch.allclose(book, ref[..., :2], atol=1e-9), (book - ref[..., :2]).abs().max()


def test_e1_no_stall_runs_match_the_official_loop_with_eps_zero():
    steps = 300  # past the stall of ε = 1e-9 (‖p‖ ≈ 21.5): the ε = 0 runs reach ≈ 30
    nb = E.run("mm_e1_basins", cache=False, steps=steps, sweep=0).numbers
    X = torch.tensor([[[-0.1, 1.0, 1.0], [1.0, 0.0, 0.9], [0.0, 0.0, 0.9]]],
                     dtype=torch.float64)  # E1, global scores
    P0 = torch.zeros(len(_C), 3, dtype=torch.float64)
    P0[:, 1] = torch.tensor(_C, dtype=torch.float64)
    P = official_prompt_loop(X, _K, _V, P0, steps=steps, eps=0.0)[0][:, -1]
    q = torch.tensor([-0.1, 1.0, 0.0], dtype=torch.float64)  # p_mm(1) ∝ k_1 (closed form)
    cos = (P @ q) / (P.norm(dim=-1) * q.norm())
    # float64 round-off of two implementations, amplified by the normalisation: 1e-6
    assert nb["global_nostall_cos1000_lo"] == pytest.approx(float(cos.min()), abs=1e-6)
    assert nb["global_nostall_norm"] == pytest.approx(float(P.norm(dim=-1).mean()), abs=1e-6)
    assert nb["global_nostall_norm"] > nb["global_final_norm"] + 5  # the other runs stall
