"""Chapter 6, second reading: under equal non-optimal scores (condition (a) of the global GD
remark) a non-optimal selection cannot be locally optimal unless an input whose selected
token is not optimal has no support token. The chapter relies on this to explain why no
exception of ``tf_global_equal_scores`` sits on a locally optimal selection."""

import numpy as np
import torch

import attnlib as al
from attnlib.data import AttentionData
from attnlib.experiments.tf_svm_overparam import equal_scores


def _one(D, b):
    return AttentionData(D.X[b], D.Y[b], D.z[b], D.v[b])


def test_equal_scores_leave_only_the_optimal_selection_locally_optimal():
    n, T, d = 3, 4, 5  # d >= max(T - 1, n): every selection is feasible
    E = equal_scores(al.random_data(n, T, d, trials=12, seed=2, device="cpu"), gap=0.5)
    g = torch.Generator().manual_seed(0)
    tested = 0
    for b in range(12):
        data = _one(E, b)
        opt = al.optimal_tokens(data)
        assert al.is_locally_optimal(data, opt)  # the optimal selection always is
        shift = torch.randint(1, T, (n,), generator=g)
        alpha = (opt + shift) % T  # every input selects a non-optimal token
        W = al.att_svm(data, alpha=alpha, norm="fro").double().numpy()
        X, z = data.X.double().numpy(), data.z.double().numpy()
        a = alpha.numpy()
        D = X[np.arange(n), a][:, None, :] - X  # x_{i alpha_i} - x_{it}
        marg = np.einsum("ntd,de,ne->nt", D, W, z)
        marg[np.arange(n), a] = np.inf
        support = marg <= 1 + 1e-6
        if support.any(-1).all():  # every input has a support token
            tested += 1
            assert not al.is_locally_optimal(data, alpha)
    assert tested >= 6


def test_raw_scores_can_make_a_non_optimal_selection_locally_optimal():
    """The converse on the raw tokens: some non-optimal selection is locally optimal, so the
    test above is about the equal scores, not about non-optimal selections in general."""
    n, T, d = 3, 4, 5
    D = al.random_data(n, T, d, trials=12, seed=2, device="cpu")
    found = 0
    for b in range(12):
        data = _one(D, b)
        opt = al.optimal_tokens(data)
        for i in range(n):
            for t in range(T):
                if t == int(opt[i]):
                    continue
                alpha = opt.clone()
                alpha[i] = t
                found += bool(al.is_locally_optimal(data, alpha))
    assert found > 0
