"""Tests of attnlib.tokens: scores, selections, support tokens, sets O_i, input helpers."""

import pytest
import torch

from attnlib import svm, tokens
from attnlib.data import AttentionData, random_data

PROMPT_W = torch.diag(torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64))


def _three_token(g3, z=None):
    X = torch.tensor([[[-0.1, 1.0, 1.0], [1.0, 0.0, 0.9], [0.0, 0.0, g3]]], dtype=torch.float64)
    return AttentionData(X, torch.tensor([1.0]), z=z, v=torch.tensor([0.0, 0.0, 1.0]))


def test_scores_and_optimal_tokens():
    X = torch.tensor([[[1.0, 0.0], [0.0, 2.0]], [[3.0, 0.0], [0.0, 1.0]]], dtype=torch.float64)
    data = AttentionData(X, torch.tensor([1.0, -1.0]), v=torch.tensor([1.0, 1.0]))
    torch.testing.assert_close(tokens.scores(data),
                               torch.tensor([[1.0, 2.0], [-3.0, -1.0]], dtype=torch.float64))
    assert tokens.optimal_tokens(data).tolist() == [1, 1]
    mask = torch.tensor([[True, False], [True, True]])
    assert tokens.optimal_tokens(data, mask=mask).tolist() == [0, 1]
    batched = data.batched(3)
    assert tokens.scores(batched).shape == (3, 2, 2)
    assert tokens.optimal_tokens(batched).tolist() == [[1, 1]] * 3


def test_selected_tokens_W_prompt_and_mask():
    data = random_data(4, 5, 6, seed=0, device="cpu")
    W = torch.randn(6, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    a = torch.einsum("ntd,de,ne->nt", data.X, W, data.z)  # reference logits, written out
    assert (tokens.selected_tokens(data, W) == a.argmax(-1)).all()
    mask = torch.ones(4, 5, dtype=torch.bool)
    mask[torch.arange(4), a.argmax(-1)] = False  # hide the winners
    sel = tokens.selected_tokens(data, W, mask=mask)
    assert mask[torch.arange(4), sel].all()
    assert (sel == a.masked_fill(~mask, -float("inf")).argmax(-1)).all()
    p = torch.tensor([0.3, -1.0, 0.2, 0.0, 0.5, 1.0], dtype=torch.float64)
    assert (tokens.selected_tokens(data, p=p) == (data.X @ p).argmax(-1)).all()
    assert (tokens.selected_tokens(data, W, p=p) == (data.X @ (W @ p)).argmax(-1)).all()
    Wb = torch.stack([W, -W])  # a batch of W on unbatched data
    assert tokens.selected_tokens(data, Wb).shape == (2, 4)


def test_support_tokens_match_positive_duals():
    data = random_data(6, 8, 10, trials=3, seed=5, device="cpu")
    alpha = tokens.optimal_tokens(data)
    W, lam = svm.att_svm(data, alpha=alpha, return_dual=True)
    sup = tokens.support_tokens(data, W, alpha)
    assert not sup[torch.arange(3)[:, None], torch.arange(6), alpha].any()  # never the selected
    assert sup[lam > 1e-6].all()  # a positive multiplier means an active constraint
    assert sup.any(-1).any(-1).all()  # some constraint is tight in every trial
    # a rescaled SVM solution (a trained direction) has the same support tokens
    assert (tokens.support_tokens(data, 37.0 * W, alpha) == sup).all()


def test_three_token_support_sets():
    data = _three_token(0.9)
    for a, support in [(0, [2]), (1, [2]), (2, [0, 1])]:
        p = svm.prompt_svm(data, alpha=[a], W=PROMPT_W)
        sup = tokens.support_tokens(data.X, PROMPT_W, [a], z=p[None])  # queries z_1 = p
        assert torch.nonzero(sup[0]).flatten().tolist() == support


def test_selected_sets_and_cleanly_masked():
    s = torch.tensor([[[0.6, 0.4 - 1e-9, 1e-9], [1 - 2e-8, 1e-8, 1e-8]],
                      [[0.5, 0.5 - 1e-4, 1e-4], [1.0, 0.0, 0.0]]], dtype=torch.float64)
    O = tokens.selected_sets(s)
    assert O.tolist() == [[[True, True, False], [True, False, False]],
                          [[True, True, False], [True, False, False]]]
    assert tokens.cleanly_masked(s).tolist() == [True, False]  # 1e-4 is ambiguous
    assert not bool(tokens.cleanly_masked(torch.full((2, 2), 0.5)))  # nothing masked


def test_bad_inputs():
    data = random_data(3, 4, 5, seed=0, device="cpu")
    W = torch.eye(5, dtype=torch.float64)
    with pytest.raises(ValueError, match="head v"):
        tokens.scores(AttentionData(data.X, data.Y))
    with pytest.raises(ValueError, match="W"):
        tokens.selected_tokens(data, torch.eye(4))
    with pytest.raises(ValueError, match="p"):
        tokens.selected_tokens(data, p=torch.ones(4))
    with pytest.raises(ValueError, match="mask"):
        tokens.selected_tokens(data, W, mask=torch.ones(3, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="alpha"):
        tokens.support_tokens(data, W, [0, 1, 7])
    with pytest.raises(ValueError, match="tol"):
        tokens.support_tokens(data, W, [0, 1, 2], tol=-1)
    with pytest.raises(ValueError, match="threshold"):
        tokens.selected_sets(torch.full((2, 2), 0.5), threshold=2.0)
    with pytest.raises(ValueError, match="s"):
        tokens.selected_sets(torch.tensor([[1.5, -0.5]]))
    with pytest.raises(ValueError, match="masked"):
        tokens.cleanly_masked(torch.full((2, 2), 0.5), threshold=1e-6, masked=1e-3)


def test_input_helpers_validate_and_convert():
    data = random_data(3, 4, 5, trials=2, seed=0, device="cpu")
    X, z = tokens.token_inputs(data)
    assert X is not None and torch.equal(X, data.X) and torch.equal(z, data.z)
    X2, z2 = tokens.token_inputs(data.X.numpy(), z=data.z)
    assert torch.equal(X2, data.X) and torch.equal(z2, data.z)
    assert tokens.token_inputs(data.X, need_z=False)[1] is None
    with pytest.raises(ValueError, match="z: the query tokens"):
        tokens.token_inputs(data.X)
    with pytest.raises(ValueError, match="z: expected shape"):
        tokens.token_inputs(data.X, z=torch.ones(3, 4))
    with pytest.raises(ValueError, match="X: expected shape"):
        tokens.token_inputs(torch.ones(4, 5))
    a = tokens.as_selection([0.0, 3.0, 1.0], X)
    assert a.dtype == torch.long and a.tolist() == [0, 3, 1]
    for bad in ([0, 4, 1], [0, -1, 1], [0.5, 1, 1], [0, 1], [True, False, True]):
        with pytest.raises(ValueError, match="alpha"):
            tokens.as_selection(bad, X)
    assert tokens.as_mask(None, X) is None
    m = tokens.as_mask([[1, 0, 1, 1]] * 3, X)
    assert m.dtype == torch.bool and m.sum() == 9
    for bad in ([[2, 0, 1, 1]] * 3, [[0, 0, 0, 0]] + [[1, 1, 1, 1]] * 2, [[1, 1, 1]] * 3):
        with pytest.raises(ValueError, match="mask"):
            tokens.as_mask(bad, X)


def test_sets_boundaries_and_query_override():
    s = torch.tensor([[0.5, 0.5 - 1e-6, 1e-6]], dtype=torch.float64)
    # a probability exactly at `masked` is masked, not ambiguous
    assert bool(tokens.cleanly_masked(s, threshold=1e-3, masked=1e-6))
    assert not bool(tokens.cleanly_masked(s, threshold=1e-3, masked=1e-7))
    assert tokens.selected_sets([[0.999, 0.001, 0.0]]).tolist() == [[True, False, False]]
    with pytest.raises(ValueError, match="threshold"):
        tokens.selected_sets(s, threshold=0.0)
    with pytest.raises(ValueError, match="masked"):
        tokens.cleanly_masked(s, threshold=1e-3, masked=0.0)
    with pytest.raises(ValueError, match="s: contains NaN"):
        tokens.selected_sets(torch.tensor([[float("nan"), 1.0]]))
    data = random_data(3, 4, 5, seed=0, device="cpu")
    W = torch.eye(5, dtype=torch.float64)
    z2 = -data.z  # reversed queries select the opposite extreme
    a2 = torch.einsum("ntd,nd->nt", data.X, z2)
    assert (tokens.selected_tokens(data, W, z=z2) == a2.argmax(-1)).all()
    assert not (tokens.selected_tokens(data, W, z=z2) == tokens.selected_tokens(data, W)).all()
