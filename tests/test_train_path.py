"""Tests of attnlib.train.path: the regularisation path (chapter 2)."""

import math

import pytest
import torch

import attnlib as al
import attnlib.models as M
from attnlib.train import regularization_path

F64 = torch.float64


def test_regularization_path_turns_to_max_margin():
    ex = al.three_token_example("global", device="cpu")
    path = regularization_path(ex.data, [1, 4, 16], param="p", init={"W": ex.init["W"]},
                               steps=800)
    c = al.correlation(path.p, ex.known["p_mm"][0])
    assert torch.allclose(path.p.norm(dim=-1), torch.tensor([1.0, 4, 16], dtype=F64))
    assert c[0] < c[1] < c[2] and c[2] > 0.99
    W = regularization_path(al.random_data(3, 4, 6, trials=2, device="cpu"), [2.0, 8.0],
                            steps=300)  # from zero the iterate grows by about 1 + lr a step
    assert W.W.shape == (2, 2, 6, 6) and W.loss.shape == (2, 2)
    assert (W.loss[:, 1] < W.loss[:, 0]).all()


def test_path_solution_is_stationary_on_the_ball():
    """At the solution the gradient points out of the ball: -grad L is parallel to W (KKT)."""
    data = al.random_data(3, 4, 5, seed=2, device="cpu")
    path = regularization_path(data, [0.5], steps=3000)
    W = path.W[0]
    G = al.models.grad_W(data.X, data.Y, data.z, W, data.v)
    assert torch.allclose(W.norm(), torch.tensor(0.5, dtype=F64))
    assert al.correlation(-G, W) > 1 - 1e-6


# ----------------------------------------------------------------------------- the oracle
def _path_oracle(data, radii, param, init, steps, lr, loss="logistic"):
    """One trial, every radius: the documented algorithm as a plain autograd loop. Each step:
    the continuation (in increasing R, a radius takes the point of strictly lowest loss among
    the radii up to its own, with its gradient), then per radius the step
    eta_k * rho * g / ||g|| (eta_k from lr to lr/1000 linearly, rho the point's norm, at the
    zero start the bound or, if smaller, 1 / max ||x_it|| ||z_i||, the radius at which every
    logit has moved by at most 1; max ||W^T x_it|| for the prompt) and the projection onto
    the ball of radius bound = R, or sqrt(2R) for (K, Q). After the last step, the
    continuation once more."""
    names = {"W": ["W"], "p": ["p"], "KQ": ["K", "Q"]}[param]
    bounds = [R if param != "KQ" else math.sqrt(2 * R) for R in radii]
    order = sorted(range(len(radii)), key=lambda j: radii[j])

    def project(P, bound):
        nrm = torch.sqrt(sum((t ** 2).sum() for t in P))
        return [t * min(1.0, bound / max(float(nrm), 1e-300)) for t in P]

    def risk(P):
        if param == "p":
            a = M.logits_prompt(data.X, init["W"], P[0])
        else:
            W = P[0] @ P[1].mT if param == "KQ" else P[0]
            a = M.logits(data.X, W, data.z)
        return M.risk(data.X, data.Y, M.softmax(a), data.v, None, loss)

    def continuation(state):  # state[j] = [P, loss, ...]
        new = list(state)
        for pos, j in enumerate(order):
            i = min(order[:pos + 1], key=lambda i: state[i][1])
            if state[i][1] < state[j][1]:
                new[j] = state[i]
        return new

    # from zero: the radius at which every logit has moved by at most 1
    keys = data.X @ init["W"] if param == "p" else data.X
    lip = keys.norm(dim=-1) * (1.0 if param == "p" else data.z.norm(dim=-1)[:, None])
    first = 1 / float(lip.max())
    Ps = [project([init[k].clone() for k in names], b) for b in bounds]
    resid = [0.0] * len(radii)
    for k in range(steps):
        state = []
        for j, P in enumerate(Ps):
            P = [t.detach().requires_grad_(True) for t in P]
            L = risk(P)
            g = torch.autograd.grad(L, P)
            state.append([[t.detach() for t in P], float(L.detach()), g, resid[j]])
        state = continuation(state)
        eta = lr * (1 - (1 - 1e-3) * k / max(steps - 1, 1))
        for j, (P, _, g, _) in enumerate(state):
            gn = torch.sqrt(sum((x ** 2).sum() for x in g))
            rho = float(torch.sqrt(sum((t ** 2).sum() for t in P))) or min(bounds[j], first)
            new = project([t - eta * rho * x / gn for t, x in zip(P, g)], bounds[j])
            resid[j] = float(torch.sqrt(sum(((a - b) ** 2).sum() for a, b in zip(new, P))))
            Ps[j] = new
    state = continuation([[P, float(risk(P)), r] for P, r in zip(Ps, resid)])
    return [(dict(zip(names, P)), L, r) for P, L, r in state]


@pytest.mark.parametrize("param", ["W", "p", "KQ"])
def test_path_matches_plain_projected_loop(param):
    """Every radius and trial of one batched call equals the plain per-radius loop: the iterate,
    the loss there and the last projected step."""
    data = al.random_data(3, 4, 5, trials=2, seed=4, device="cpu")
    g = torch.Generator().manual_seed(3)
    radii, steps, lr, loss = [0.3, 2.5], 7, 0.4, "exp"
    kw = {}
    if param == "p":
        W0 = torch.randn(5, 5, generator=g, dtype=F64)
        kw["init"] = {"W": W0}
    elif param == "KQ":
        K0, Q0 = (torch.randn(5, 2, generator=g, dtype=F64) for _ in range(2))
        kw["init"] = {"K": K0, "Q": Q0}
    path = regularization_path(data, radii, param=param, steps=steps, lr=lr, loss=loss, **kw)
    assert torch.equal(path.radii, torch.tensor(radii, dtype=F64))
    init = {"W": torch.zeros(5, 5, dtype=F64), "p": torch.zeros(5, dtype=F64),
            **kw.get("init", {})}
    for b in range(2):
        db = data.trial(b)
        for j, (P, L, res) in enumerate(_path_oracle(db, radii, param, init, steps, lr, loss)):
            for k, t in P.items():
                assert torch.allclose(getattr(path, k)[b, j], t, rtol=1e-10, atol=1e-12), k
            W = P["K"] @ P["Q"].mT if param == "KQ" else P.get("W", init["W"])
            assert torch.allclose(path.W[b, j], W, rtol=1e-10, atol=1e-12)
            assert math.isclose(float(path.loss[b, j]), L, rel_tol=1e-10)
            assert math.isclose(float(path.residual[b, j]), res, rel_tol=1e-8, abs_tol=1e-14)
    if param == "W":  # two steps: the step falls from lr to lr/1000 in one go
        two = regularization_path(data.trial(0), [1.5], steps=2, lr=lr, loss=loss)
        ((P, L, res),) = _path_oracle(data.trial(0), [1.5], "W", init, 2, lr, loss)
        assert torch.allclose(two.W[0], P["W"], rtol=1e-10, atol=1e-12)
        assert math.isclose(float(two.residual[0]), res, rel_tol=1e-8)
    missing = {"W": ("p", "K", "Q"), "p": ("K", "Q"), "KQ": ("p",)}[param]
    assert all(getattr(path, k) is None for k in missing)


def test_path_unbatched_and_progress_equal_batched():
    data = al.random_data(3, 4, 5, trials=2, seed=4, device="cpu")
    both = regularization_path(data, [1.0, 2.0], steps=4)
    one = regularization_path(data.trial(1), [1.0, 2.0], steps=4, progress=True)
    assert one.W.shape == (2, 5, 5) and one.loss.shape == (2,) and one.residual.shape == (2,)
    # equal up to float64 round-off: a batched and an unbatched run may reduce in another order
    # on another CPU's vector units
    close = dict(rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(one.W, both.W[1], **close)
    torch.testing.assert_close(one.loss, both.loss[1], **close)
    torch.testing.assert_close(one.residual, both.residual[1], **close)
    single = regularization_path(data.trial(1), 2.0, steps=4)  # a scalar radius
    torch.testing.assert_close(single.W[0], both.W[1, 1], **close)


@pytest.mark.parametrize("radii", [[], [0.0], [1.0, float("inf")], [float("nan")], [-1.0]])
def test_path_rejects_radii(small_data, radii):
    with pytest.raises(ValueError, match="^radii: expected positive finite numbers"):
        regularization_path(small_data, radii, steps=1)


@pytest.mark.parametrize("kw, msg", [
    (dict(lr=0.0), "^lr: expected a finite number > 0"),
    (dict(steps=0), "^steps: expected an int >= 1"), (dict(param="v"), "^param: expected one of"),
    (dict(norm=1.0), r"^norm: expected a finite number > 1, got 1.0"),
    *[(dict(param="KQ", norm=x), rf"^norm: the \(K,Q\) path is Frobenius only, got norm={x}")
      for x in (1.5, 3.0)],
])
def test_path_names_the_bad_setting(small_data, kw, msg):
    with pytest.raises(ValueError, match=msg):
        regularization_path(small_data, [1.0], **{"steps": 1, **kw})
    with pytest.raises(ValueError, match="^data: expected an attnlib.AttentionData, got Tensor$"):
        regularization_path(small_data.X, [1.0], steps=1)


def test_kq_path_accepts_norm_2_as_frobenius():
    data = al.random_data(3, 4, 3, seed=1, device="cpu")
    a = regularization_path(data, [1.0, 3.0], param="KQ", norm=2.0, steps=20)
    b = regularization_path(data, [1.0, 3.0], param="KQ", steps=20)
    assert torch.equal(a.K, b.K) and torch.equal(a.W, b.W)


@pytest.mark.parametrize("lp", [1.5, 3.0])
def test_lp_path_two_steps_by_hand(lp):
    """Two steps of the lp path written out per radius: mirror step in the dual with the
    normalised gradient (dual lq norm) times eta_k rho^(p-1), rho the iterate's lp norm (at
    the zero start R or, if smaller, 1 / max ||x_it|| ||z_i||; the dual of the radius-rho
    sphere has radius rho^(p-1)), back through the inverse mirror map, rescaled into the
    ball; the gradient by autograd."""
    data = al.random_data(3, 4, 3, seed=1, device="cpu")
    radii, lr, q = [0.5, 3.0], 0.4, lp / (lp - 1)
    res = regularization_path(data, radii, norm=lp, steps=2, lr=lr)
    lip = float((data.X.norm(dim=-1) * data.z.norm(dim=-1)[:, None]).max())
    for j, R in enumerate(radii):
        W = torch.zeros(3, 3, dtype=F64)
        for k in range(2):
            eta = lr * (1 - (1 - 1e-3) * k)
            Wg = W.clone().requires_grad_(True)
            L = M.risk(data.X, data.Y, M.softmax(M.logits(data.X, Wg, data.z)), data.v)
            (G,) = torch.autograd.grad(L, Wg)
            rho = float(W.norm(p=lp)) or min(R, 1 / lip)
            dual = W.sign() * W.abs() ** (lp - 1) - eta * rho ** (lp - 1) * G / G.norm(p=q)
            W = dual.sign() * dual.abs() ** (1 / (lp - 1))
            W = W * min(1.0, R / float(W.norm(p=lp)))
        torch.testing.assert_close(res.W[j], W, rtol=1e-10, atol=1e-13)


def test_path_signature_is_the_documented_one():
    """The public call (CONTRIBUTING: signatures stay stable) with its defaults."""
    import inspect

    got = {k: p.default for k, p in inspect.signature(regularization_path).parameters.items()}
    assert got == dict(data=inspect.Parameter.empty, radii=inspect.Parameter.empty, param="W",
                       loss="logistic", steps=2000, lr=0.1, head="linear", init=None, seed=0,
                       progress=False, device=None, dtype=None, norm="fro")


def test_path_in_float32_and_on_a_bad_device():
    """dtype converts the data (radii too: every result in float32, equal to float32 data);
    the device is passed on (no CUDA here: a clear error)."""
    data = al.random_data(3, 4, 5, seed=4, device="cpu")
    a = regularization_path(data, [0.5, 2.0], steps=5, dtype=torch.float32)
    b = regularization_path(data.to("cpu", torch.float32), [0.5, 2.0], steps=5)
    for r in (a, b):
        assert r.W.dtype == r.loss.dtype == r.residual.dtype == torch.float32
    assert torch.equal(a.W, b.W) and torch.equal(a.residual, b.residual)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device"):
            regularization_path(data, [1.0], steps=1, device="cuda")


def test_path_progress_bar_and_thread_limit(monkeypatch):
    """The bar counts the steps (tqdm.auto, cleared after); the loop runs under few_threads
    with the size of one step, B*n*T*max(T, d) for B = trials x radii, on the data's device."""
    import importlib

    import tqdm.auto

    path_mod = importlib.import_module("attnlib.train.path")  # attnlib.train is the function

    bars, calls = [], []

    class Bar(tqdm.auto.tqdm):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.kw = kw
            bars.append(self)

    real = path_mod.few_threads

    def few(work=None, device=None):
        calls.append((work, device))
        return real(work, device)

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    monkeypatch.setattr(path_mod, "few_threads", few)
    data = al.random_data(3, 4, 5, trials=2, seed=4, device="cpu")
    regularization_path(data, [1.0, 2.0, 3.0], steps=6, progress=True)
    (bar,) = bars
    assert bar.kw == dict(desc="regularization path", leave=False) and bar.n == 6
    assert calls == [(2 * 3 * 3 * 4 * 5, torch.device("cpu"))]


@pytest.mark.slow
def test_path_defaults_are_the_documented_ones(monkeypatch):
    """The signature's defaults are the documented values (steps=2000, lr=0.1, seed=0 for the
    random (K, Q) start, no progress bar), and a call that leaves them out equals one that
    spells them out (steps given: the rest are the defaults the body sees; two 2000-step
    paths cost 3 s for what the signature shows)."""
    import inspect

    import tqdm.auto

    documented = dict(param="W", loss="logistic", steps=2000, lr=0.1, head="linear",
                      init=None, seed=0, progress=False, device=None, dtype=None, norm="fro")
    sig = inspect.signature(regularization_path).parameters
    assert {k: p.default for k, p in sig.items() if k not in ("data", "radii")} == documented

    def no_bar(*a, **kw):
        raise AssertionError("a progress bar by default")

    monkeypatch.setattr(tqdm.auto, "tqdm", no_bar)
    data = al.random_data(2, 2, 2, seed=1, device="cpu")
    a = regularization_path(data, [1.0], param="KQ", steps=50)
    b = regularization_path(data, [1.0], param="KQ", loss="logistic", steps=50, lr=0.1,
                            head="linear", init=None, seed=0, progress=False)
    assert torch.equal(a.W, b.W) and torch.equal(a.residual, b.residual)
