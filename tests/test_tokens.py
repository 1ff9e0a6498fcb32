"""Tests of attnlib.tokens: scores, selections, support tokens, sets O_i, input helpers."""

import re
from types import SimpleNamespace

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


# ----------------------------------------------------------------------------- loop oracles
def _loops(X, Y, v, z, W, p=None, mask=None):
    """Scores, logits, optimal and selected tokens of ONE instance, entry by entry."""
    n, T, d = X.shape
    gam = [[float(Y[i]) * sum(float(v[k] * X[i, t, k]) for k in range(d)) for t in range(T)]
           for i in range(n)]
    if p is None:
        lg = [[sum(float(X[i, t, k] * W[k, e] * z[i, e]) for k in range(d) for e in range(d))
               for t in range(T)] for i in range(n)]
    else:
        Wp = [sum(float(W[k, e] * p[e]) for e in range(d)) for k in range(d)]
        lg = [[sum(float(X[i, t, k]) * Wp[k] for k in range(d)) for t in range(T)]
              for i in range(n)]
    vis = [[mask is None or bool(mask[i, t]) for t in range(T)] for i in range(n)]

    def arg(rows):
        return [max((t for t in range(T) if vis[i][t]), key=lambda t: rows[i][t])
                for i in range(n)]
    f64 = torch.float64
    return torch.tensor(gam, dtype=f64), torch.tensor(lg, dtype=f64), arg(gam), arg(lg)


def test_batched_and_masked_functions_match_loops():
    g = torch.Generator().manual_seed(7)
    B, n, T, d = 2, 3, 4, 3
    data = random_data(n, T, d, trials=B, seed=11, device="cpu")
    W = torch.randn(B, d, d, dtype=torch.float64, generator=g)
    p = torch.randn(B, d, dtype=torch.float64, generator=g)
    mask = torch.rand(B, n, T, generator=g) > 0.4
    mask[..., 1] = True  # every input sees a token
    eye = torch.eye(d, dtype=torch.float64)
    for b in range(B):
        X, Y, v, z = data.X[b], data.Y[b], data.v[b], data.z[b]
        gam, lg, opt, sel = _loops(X, Y, v, z, W[b])
        _, lgm, optm, selm = _loops(X, Y, v, z, W[b], mask=mask[b])
        _, lp, _, selp = _loops(X, Y, v, z, eye, p=p[b])
        _, lpw, _, selpw = _loops(X, Y, v, z, W[b], p=p[b], mask=mask[b])
        torch.testing.assert_close(tokens.scores(data)[b], gam)
        assert tokens.optimal_tokens(data)[b].tolist() == opt
        assert tokens.optimal_tokens(data, mask=mask)[b].tolist() == optm
        torch.testing.assert_close(tokens.attention_logits(data, W)[b], lg)
        torch.testing.assert_close(tokens.attention_logits(data, p=p)[b], lp)
        torch.testing.assert_close(tokens.attention_logits(data.X, W, p=p)[b],
                                   _loops(X, Y, v, z, W[b], p=p[b])[1])
        assert tokens.selected_tokens(data, W)[b].tolist() == sel
        assert tokens.selected_tokens(data, W, mask=mask)[b].tolist() == selm
        assert tokens.selected_tokens(data.X, W, p=p, mask=mask)[b].tolist() == selpw
        assert tokens.selected_tokens(data.X, p=p)[b].tolist() == selp
        # margins of the selected tokens and of an arbitrary selection
        alpha = torch.tensor([[0, 3, 2], [1, 1, 0]])
        marg = tokens.token_margins(data, W, alpha)[b]
        want = torch.tensor([[lg[i][int(alpha[b, i])] - lg[i][t] for t in range(T)]
                             for i in range(n)], dtype=torch.float64)
        torch.testing.assert_close(marg, want)
        # unbatched inputs give the same numbers
        one = data.trial(b)
        torch.testing.assert_close(tokens.attention_logits(one, W[b]), lg)
        torch.testing.assert_close(tokens.token_margins(one.X, W[b], alpha[b], z=z), want)


def test_support_tokens_match_a_loop():
    g = torch.Generator().manual_seed(3)
    B, n, T, d = 2, 2, 4, 3
    X = torch.randn(B, n, T, d, dtype=torch.float64, generator=g)
    z = torch.randn(B, n, d, dtype=torch.float64, generator=g)
    mask = torch.ones(B, n, T, dtype=torch.bool)
    mask[0, 1, 3] = mask[1, 0, 2] = False
    W = torch.randn(B, d, d, dtype=torch.float64, generator=g)
    lg = torch.einsum("bntd,bde,bne->bnt", X, W, z)
    for use_mask in (False, True):
        m = mask if use_mask else None
        alpha = lg.masked_fill(~mask, -torch.inf).argmax(-1) if use_mask else lg.argmax(-1)
        for tol in (0.0, 0.3, 2.0):
            sup = tokens.support_tokens(X, W, alpha, z=z, mask=m, tol=tol)
            for b in range(B):
                marg = {(i, t): float(lg[b, i, alpha[b, i]] - lg[b, i, t])
                        for i in range(n) for t in range(T)
                        if t != alpha[b, i] and (m is None or bool(mask[b, i, t]))}
                low = min(marg.values())
                want = [[(i, t) in marg and marg[(i, t)] <= low * (1 + tol) for t in range(T)]
                        for i in range(n)]
                assert sup[b].tolist() == want
                if tol == 0.0:  # exactly the argmin of the margins
                    assert int(sup[b].sum()) == 1
    # a selection W does not make: some margin is <= 0
    wrong = lg.argmin(-1)
    with pytest.raises(ValueError, match="W_mm: some margin is <= 0, so W_mm does not select"):
        tokens.support_tokens(X, W, wrong, z=z)
    # a margin of exactly 0 (a tie) is refused as well
    Xt = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]]], dtype=torch.float64)
    zt = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    with pytest.raises(ValueError, match="W_mm"):
        tokens.support_tokens(Xt, torch.eye(2, dtype=torch.float64), [0], z=zt)
    assert tokens.support_tokens(Xt, torch.eye(2, dtype=torch.float64), [0], z=zt,
                                 mask=[[True, False, True]]).tolist() == [[False, False, True]]


def test_sets_match_a_loop():
    g = torch.Generator().manual_seed(4)
    B, n, T = 3, 2, 5
    s = torch.softmax(12 * torch.randn(B, n, T, dtype=torch.float64, generator=g), -1)
    s[1, 0] = torch.tensor([0.5, 0.5 - 2e-6, 2e-6, 0.0, 0.0])  # one ambiguous token
    s[2] = torch.tensor([0.2] * 5)  # nothing masked
    for thr, msk in ((1e-3, 1e-6), (1e-2, 1e-5), (0.3, 1e-1)):
        O = tokens.selected_sets(s, threshold=thr)
        assert O.tolist() == [[[float(s[b, i, t]) > thr for t in range(T)] for i in range(n)]
                              for b in range(B)]
        want = []
        for b in range(B):
            vals = [float(u) for u in s[b].flatten()]
            want.append(not any(msk < u <= thr for u in vals) and any(u <= msk for u in vals))
        assert tokens.cleanly_masked(s, threshold=thr, masked=msk).tolist() == want
    assert tokens.cleanly_masked(s).tolist() == [
        not any(1e-6 < float(u) <= 1e-3 for u in s[b].flatten())
        and any(float(u) <= 1e-6 for u in s[b].flatten()) for b in range(B)]
    # lists are probabilities too (float64), a probability of 1 + 1e-7 is round-off
    assert tokens.selected_sets([[1 + 1e-7, 0.0]]).tolist() == [[True, False]]
    assert tokens.selected_sets([[0.75, 0.25]], threshold=0.25).tolist() == [[True, False]]
    with pytest.raises(ValueError, match=r"s: expected softmax probabilities \(n,T\) or "
                                         r"\(B,n,T\), got \(3,\)"):
        tokens.selected_sets([0.2, 0.3, 0.5])
    for bad in ([[1.1, 0.0]], [[-1e-9, 1.0]]):
        with pytest.raises(ValueError, match=r"s: expected probabilities in \[0, 1\]"):
            tokens.cleanly_masked(bad)
    with pytest.raises(ValueError, match=r"threshold: expected a number in \(0, 1\), got 1"):
        tokens.selected_sets([[0.5, 0.5]], threshold=1)
    with pytest.raises(ValueError, match=r"masked, threshold: expected 0 < masked < threshold "
                                         r"< 1, got 0.001, 0.001"):
        tokens.cleanly_masked([[0.5, 0.5]], threshold=1e-3, masked=1e-3)
    with pytest.raises(ValueError, match="masked, threshold"):
        tokens.cleanly_masked([[0.5, 0.5]], threshold=1.0, masked=1e-3)


def test_argument_names_dtypes_and_full_messages():
    data = random_data(3, 4, 5, seed=0, device="cpu")
    X, W = data.X, torch.eye(5, dtype=torch.float64)
    nan55 = torch.full((5, 5), float("nan"))
    for call, name in [(lambda: tokens.attention_logits(data, nan55), "W"),
                       (lambda: tokens.attention_logits(data, p=[float("nan")] * 5), "p"),
                       (lambda: tokens.attention_logits(X, W, z=torch.full((3, 5), torch.inf)),
                        "z"),
                       (lambda: tokens.token_inputs(X.clone().fill_(torch.nan)), "X"),
                       (lambda: tokens.scores(SimpleNamespace(X=X, Y=[1.0, torch.nan, 1.0],
                                                              v=data.v)), "data.Y"),
                       (lambda: tokens.scores(SimpleNamespace(X=X, Y=data.Y,
                                                              v=[torch.inf] * 5)), "data.v"),
                       (lambda: tokens.scores(SimpleNamespace(X=X * torch.nan, Y=data.Y,
                                                              v=data.v)), "data.X")]:
        with pytest.raises(ValueError, match=rf"^{re.escape(name)}: contains NaN or Inf$"):
            call()
    # float32 data: W, p, z, Y, v of another dtype are cast to the data's dtype
    d32 = random_data(3, 4, 5, seed=0, device="cpu", dtype=torch.float32)
    W64 = torch.randn(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    p64 = W64[0]
    for out in (tokens.attention_logits(d32, W64), tokens.attention_logits(d32, p=p64),
                tokens.attention_logits(d32, W64, p=p64),
                tokens.attention_logits(d32.X, W64, z=d32.z.double()),
                tokens.scores(SimpleNamespace(X=d32.X, Y=d32.Y.double(), v=d32.v.double()))):
        assert out.dtype == torch.float32 and out.shape == (3, 4)
    assert tokens.token_inputs(d32.X.double(), dtype=torch.float32, need_z=False)[0].dtype \
        == torch.float32
    assert tokens.token_inputs(SimpleNamespace(X=d32.X), dtype=torch.float64,
                               need_z=False)[0].dtype == torch.float64
    # objects with X but without the other attributes
    assert tokens.token_inputs(SimpleNamespace(X=X), need_z=False)[1] is None
    with pytest.raises(ValueError, match=r"^data: the token scores need the labels Y and the "
                                         r"head v \(data.v is None\)$"):
        tokens.scores(SimpleNamespace(X=X, Y=data.Y))
    with pytest.raises(ValueError, match=r"^z: the query tokens are needed \(pass z=, or data "
                                         r"with data.z; self-attention uses z = X\[..., 0, :\]\)$"):
        tokens.attention_logits(X, W)
    with pytest.raises(ValueError, match=r"^W: give the key-query matrix W \(or the prompt "
                                         r"p=\)$"):
        tokens.attention_logits(data)
    with pytest.raises(ValueError, match=r"^W_mm: some margin is <= 0, so W_mm does not select "
                                         r"alpha; pass the SVM solution for this selection$"):
        tokens.support_tokens(data, -W, tokens.selected_tokens(data, W))
    with pytest.raises(ValueError, match=r"^alpha: expected shape \(n,\)=\(3,\) or \(B,n\), got "
                                         r"\(2, 3\)$"):
        tokens.as_selection([[0, 1, 2]] * 2, X)  # a trials dimension the data does not have
    with pytest.raises(ValueError, match=r"^s: expected probabilities in \[0, 1\]$"):
        tokens.selected_sets([[1.5, 0.0]])


def test_batched_W_on_unbatched_data_and_boundaries():
    data = random_data(3, 4, 5, seed=1, device="cpu")
    g = torch.Generator().manual_seed(2)
    Wb = torch.randn(2, 5, 5, dtype=torch.float64, generator=g)
    alpha = torch.tensor([0, 3, 1])
    marg = tokens.token_margins(data.X, Wb, alpha, z=data.z)  # (B, n, T) from (n,) alpha
    for b in range(2):
        a = torch.einsum("ntd,de,ne->nt", data.X, Wb[b], data.z)
        torch.testing.assert_close(marg[b], a[torch.arange(3), alpha][:, None] - a)
    # a probability of exactly 1 + 1e-6 is round-off, exactly the threshold is ambiguous
    assert tokens.selected_sets([[1 + 1e-6, 0.0]]).tolist() == [[True, False]]
    assert not bool(tokens.cleanly_masked([[1 - 1e-3, 1e-3, 0.0]]))
    # a float32 tensor is compared in float32: float32(1e-3) is not above the threshold 1e-3
    s32 = torch.tensor([[1e-3, 1 - 1e-3]], dtype=torch.float32)
    assert tokens.selected_sets(s32).tolist() == [[False, True]]
    assert tokens.selected_sets(s32.double()).tolist() == [[True, True]]


def test_mask_and_query_shapes_and_messages_in_full():
    # mutation survivors: extra leading dims accepted, any() over the wrong axis, messages
    X = torch.zeros(2, 3, 4, dtype=torch.float64)  # unbatched: n=2, T=3, d=4
    with pytest.raises(ValueError, match=r"^z: expected shape \(n,d\)=\(2,4\) \(optionally "
                                         r"with the trials dimension of X\), got \(1, 2, 4\)$"):
        tokens.token_inputs(X, torch.zeros(1, 2, 4))  # a trials dim on z but not on X
    Xb = X.expand(5, 2, 3, 4)
    assert tokens.token_inputs(Xb, torch.zeros(5, 2, 4))[1].shape == (5, 2, 4)
    assert tokens.token_inputs(Xb, torch.zeros(2, 4))[1].shape == (2, 4)
    with pytest.raises(ValueError, match=r"^mask: expected shape \(n,T\)=\(2,3\) or \(B,n,T\), "
                                         r"got \(1, 2, 3\)$"):
        tokens.as_mask(torch.ones(1, 2, 3, dtype=torch.bool), X)  # (B,n,T) on unbatched X
    assert tokens.as_mask(torch.ones(5, 2, 3, dtype=torch.bool), Xb).shape == (5, 2, 3)
    with pytest.raises(ValueError, match=r"^mask: expected booleans \(True = visible token\)$"):
        tokens.as_mask([[1, 0, 2], [1, 1, 1]], X)
    assert tokens.as_mask([[1, 0, 1], [0, 0, 1]], X).tolist() == [[True, False, True],
                                                                   [False, False, True]]
    # batched: input 1 of trial 0 sees nothing, although every token is visible to some input
    m = torch.tensor([[[True, True, True], [False, False, False]]] * 5)
    with pytest.raises(ValueError, match=r"^mask: every input needs at least one visible "
                                         r"token$"):
        tokens.as_mask(m, Xb)
    m[:, 1, 2] = True
    assert tokens.as_mask(m, Xb).equal(m)
