"""Chapter 10's write-it-yourself checks: the selection statistics on sentences
(attnlib/check/text_answers.py) against a batched torch oracle written here (the module
computes in NumPy, one sentence at a time): the statistics, the values of the diagnosed
mistakes and the float32 ties, each from its definition; a correct answer passes, each
diagnosed mistake fails and is named once, never with the expected value; the mirror-descent
step (check_md_step, computed in NumPy, independently of attnlib.train); and the diagnosed
mistakes of ch10's check cells."""

import importlib
import math
import re
import types
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch
from check_helpers import assert_no_leak

import attnlib as al
from attnlib import text
from attnlib.check import check_planted_attention as check
from attnlib.check import text_answers

ROOT = Path(__file__).resolve().parents[1]
CH10 = ROOT / "book" / "10_real_data.ipynb"
TITLE = "attention on the planted word"
# the diagnosed mistakes, by a keyword of their hint
MISTAKES = ["transposed", "shifted by one", "summed over the sentences", "not normalised",
            "most attended token"]


def _problem(seed=0, N=30, T=6, d=5, scale=2.0):
    """Random sentences X (N, T, d), queries z, a non-symmetric W and planted positions r
    (r_0 = 0: the one-based mistake then reads position -1)."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(N, T, d, generator=g, dtype=torch.float64)
    z = torch.randn(N, d, generator=g, dtype=torch.float64)
    W = scale * torch.randn(d, d, generator=g, dtype=torch.float64)
    r = torch.randint(0, T, (N,), generator=g)
    r[0] = 0
    return W, X, z, r


def _torch_oracle(W, X, z, r):
    """Mass, hit rate, float32 ties and (mass, hit) of each mistake, batched in torch."""
    rows, N = torch.arange(len(r)), len(r)
    a = torch.einsum("ntd,de,ne->nt", X, W, z)
    s, sT = torch.softmax(a, -1), torch.softmax(torch.einsum("ntd,ed,ne->nt", X, W, z), -1)
    mass, hit = float(s[rows, r].mean()), float((s.argmax(-1) == r).double().mean())
    top2 = a.topk(2, -1).values
    ties = int((top2[:, 0] - top2[:, 1] <= 1e-5 * (1 + a.abs().amax(-1))).sum())
    return dict(mass=mass, hit=hit, ties=ties, N=N, mistakes={
        "transposed": (float(sT[rows, r].mean()), float((sT.argmax(-1) == r).double().mean())),
        "shifted by one": (float(s[rows, r - 1].mean()),
                           float((s.argmax(-1) == r - 1).double().mean())),
        "summed over the sentences": (mass * N, hit * N),
        "not normalised": (float(torch.exp(a[rows, r].clamp(max=700.0)).mean()), None),
        "most attended token": (float(s.amax(-1).mean()), None)})


@pytest.mark.parametrize("seed", [0, 3])
def test_oracle_agrees_with_the_definition_and_the_library(seed):
    """The module's oracle and each of its mistakes' values equal the torch oracle; its mass
    and hit rate also equal Python loops over the tokens and attnlib.text's batched ones."""
    W, X, z, r = _problem(seed)
    o, t = text_answers.planted_attention_oracle(W, X, z, r), _torch_oracle(W, X, z, r)
    assert (o["N"], o["ties"]) == (t["N"], t["ties"]) == (30, 0)
    assert (o["mass"], o["hit"]) == (pytest.approx(t["mass"], rel=1e-12), t["hit"])
    for i, part in enumerate(("mistakes_mass", "mistakes_hit")):
        keys = [k for k in MISTAKES if t["mistakes"][k][i] is not None]
        assert [[k for k in keys if k in hint] for hint in o[part]] == [[k] for k in keys]
        for hint, value in o[part].items():
            (k,) = (k for k in keys if k in hint)
            assert value == pytest.approx(t["mistakes"][k][i], rel=1e-12), hint
    mass = hit = 0.0
    for i in range(len(r)):
        a = [float(X[i, t] @ W @ z[i]) for t in range(X.shape[1])]
        e = [np.exp(x - max(a)) for x in a]
        mass += e[int(r[i])] / sum(e) / len(r)
        hit += (int(np.argmax(a)) == int(r[i])) / len(r)
    assert o["mass"] == pytest.approx(mass, rel=1e-12) and o["hit"] == pytest.approx(hit)
    lib_mass, lib_hit = text.relevant_attention(text.attention(W[None], X, z), r)
    assert o["mass"] == pytest.approx(float(lib_mass[0]), rel=1e-10)
    assert o["hit"] == pytest.approx(float(lib_hit[0]))
    assert 0 < o["hit"] < 1 and 0 < o["mass"] < 1  # a problem where the statistic can be off


def test_huge_logits_ties_and_the_float32_margin():
    """Logits (900, 0, -1): exp capped at 700 for the unnormalised mistake (finite); top two
    logits within 1e-5 (1 + max |a|) count as a tie: 2 and 2 + 2.5e-5 do, 2 + 3.5e-5 not,
    exactly equal ones do."""
    W, X, z, r = _problem(1, N=4, T=3, d=2)
    X, z, W = X.clone(), z.clone(), torch.eye(2, dtype=torch.float64)
    z[:] = torch.tensor([1.0, 0.0])
    X[0] = torch.tensor([[900.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    X[1] = torch.tensor([[2.0, 0.0], [2.0 + 2.5e-5, 0.0], [0.0, 0.0]])
    X[2] = torch.tensor([[2.0, 0.0], [2.0 + 3.5e-5, 0.0], [0.0, 0.0]])
    X[3] = torch.tensor([[1.0, 0.0], [1.0, 5.0], [0.5, 0.0]])
    o, t = text_answers.planted_attention_oracle(W, X, z, r), _torch_oracle(W, X, z, r)
    assert o["ties"] == t["ties"] == 2
    raw = [v for h, v in o["mistakes_mass"].items() if "not normalised" in h][0]
    assert raw == pytest.approx(t["mistakes"]["not normalised"][0], rel=1e-12)
    assert math.isfinite(raw) and raw > 1e303
    assert o["mass"] == pytest.approx(t["mass"], rel=1e-12)


def test_arguments_are_validated_by_name():
    W, X, z, r = _problem(N=4, T=3, d=2)
    for W_, X_, z_ in ((W, X[0], z), (W[:1], X, z), (W, X, z[:3]), (W, X, z[:, :1]),
                       (W[None], X, z)):
        with pytest.raises(ValueError, match=r"X must be \(N,T,d\), W \(d,d\) and z \(N,d\); "
                           + re.escape(f"got {tuple(X_.shape)}, {tuple(W_.shape)}, "
                                       f"{tuple(z_.shape)}")):
            text_answers.planted_attention_oracle(W_, X_, z_, r)
    for rel in (r[:3], r.double() + 0.5, torch.tensor([0, 1, 2, 3]), torch.tensor([0, -1, 2, 0]),
                r[None]):
        with pytest.raises(ValueError, match=r"relevant must hold N = 4 token positions in 0\.\.2"):
            check((0.5, 0.5), W, X, z, rel)
    assert text_answers.planted_attention_oracle(W, X, z, r.double())["N"] == 4  # integral
    assert text_answers.planted_attention_oracle(W, X, z, torch.tensor([0, 1, 2, 2]))["N"] == 4


def test_a_correct_answer_passes_within_the_tolerances():
    """The mass to rtol 1e-4 plus atol 1e-6, the hit rate to (ties + 0.5) / N: in any numeric
    form, also on real sentences in float32; just outside fails, naming the number."""
    W, X, z, r = _problem(1)
    t = _torch_oracle(W, X, z, r)
    mass, hit, N = t["mass"], t["hit"], t["N"]
    fb = check((mass, hit), W, X, z, r)
    assert (fb.ok, fb.title, fb.details) == (True, TITLE, {"N": 30, "ties": 0})
    assert "30 sentences" in fb.message
    for ok in ([np.float64(mass), torch.tensor(hit)], (torch.tensor([mass]), np.float32(hit)),
               (mass * (1 + 0.5e-4), hit), (mass + 0.9e-6 - 1e-4 * mass, hit),
               (mass, hit + 0.4 / N)):
        assert check(ok, W, X, z, r), ok
    tol = {"mass": "rtol=0.0001, atol=1e-06", "hit rate": "rtol=0, atol=0.0166667"}
    bad_mass, bad_hit = (mass * (1 + 2e-4), hit), (mass, hit - 1 / N)
    for bad, off in ((bad_mass, "too large"), (bad_hit, "too small")):
        fb = check(bad, W, X, z, r)
        assert (fb.ok, fb.title, fb.details) == (False, TITLE, {"N": 30, "ties": 0})
        assert_no_leak(fb.message, (mass, hit), own=bad)
        (name, x), = ((k, x) for k, x, y in zip(tol, bad, (mass, hit)) if x != y)
        assert f"{name} = {x:.6g} is {off}" in fb.message and tol[name] in fb.message
    both = check((bad_mass[0], bad_hit[1]), W, X, z, r).message  # one after the other
    assert both == check(bad_mass, W, X, z, r).message + " " + check(bad_hit, W, X, z, r).message
    perm = torch.tensor([3, 0, 5, 1, 4, 2])  # the tokens reordered, the planted words followed
    fb_perm = check((mass, hit), W, X[:, perm], z, torch.argsort(perm)[r])
    assert fb_perm and fb_perm.details == fb.details
    sents = text.sentiment_sentences(n=40)
    W32 = 0.3 * torch.randn(sents.d, sents.d, generator=torch.Generator().manual_seed(0))
    t = _torch_oracle(W32, sents.X, sents.z, sents.relevant)
    assert check((t["mass"], t["hit"]), W32, sents.X, sents.z, sents.relevant)
    assert not check((t["mass"] * 1.01, t["hit"]), W32, sents.X, sents.z, sents.relevant)
    X2, top = X.clone(), int(torch.argmax(X[0] @ W @ z[0]))
    X2[0, top - 1] = X2[0, top]  # two copies of sentence 0's top token: a tie
    t2 = _torch_oracle(W, X2, z, r)
    assert t2["ties"] >= 1 and check((t2["mass"], t2["hit"] + 1 / N), W, X2, z, r)


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("mistake", MISTAKES)
def test_each_mistake_is_named_once_never_with_the_expected_value(seed, mistake):
    """Both numbers wrong the same way: two numbers off, the hint named once (with the mass);
    a mistake in the hit rate alone names the hit rate only; the expected values never show."""
    W, X, z, r = _problem(seed)
    t = _torch_oracle(W, X, z, r)
    wrong_mass, wrong_hit = t["mistakes"][mistake]

    def told(answer):  # the feedback on a wrong answer, which never shows an expected value
        fb = check(answer, W, X, z, r)
        assert (fb.ok, fb.title) == (False, TITLE)
        assert_no_leak(fb.message, (t["mass"], t["hit"]), own=answer)
        return fb.message

    msg = told((wrong_mass, t["hit"] if wrong_hit is None else wrong_hit))
    assert msg.count(mistake) == 1
    if wrong_hit is not None and wrong_hit != t["hit"]:
        # named with the mass: the message is the mass's, then the hit rate's without the hint
        hit_alone = told((t["mass"], wrong_hit))
        assert mistake in hit_alone and "mass" not in hit_alone
        (hint,) = (h for h in text_answers.planted_attention_oracle(W, X, z, r)["mistakes_hit"]
                   if mistake in h)
        assert msg == told((wrong_mass, t["hit"])) + " " + hit_alone.replace(" " + hint, "")
        both = told((t["mistakes"]["not normalised"][0], wrong_hit))  # both named
        assert both.count(mistake) == both.count("not normalised") == 1


def test_unanswered_malformed_and_overflowing_answers_are_named():
    W, X, z, r = _problem()
    t = _torch_oracle(W, X, z, r)
    mass, hit = t["mass"], t["hit"]
    for answer, words in ((None, "stats is None"), (0.5, "pair (mass, hit)"),
                          (np.array([mass, hit]), "pair (mass, hit)"),
                          ((mass, hit, 0.0), "pair (mass, hit)"), ((mass,), "pair (mass, hit)"),
                          ((None, hit), "mass is None"), ((mass, None), "hit is None"),
                          ((mass, [hit, hit]), "hit must be one number|(2,)"),
                          ((torch.ones(1, 2), hit), "mass must be one number|(1, 2)"),
                          ((float("nan"), hit), "mass is not finite|softmax"),
                          ((mass, float("inf")), "hit is not finite|softmax"),
                          (("abc", hit), "mass could not be read")):
        fb = check(answer, W, X, z, r)
        assert (fb.ok, fb.title) == (False, TITLE)
        assert all(w in fb.message for w in words.split("|")), (answer, fb.message)
        assert fb.details == {} or "could not" in words


def test_md_step_reference_is_independent_of_the_library(monkeypatch):
    """check_md_step computes its reference in NumPy: breaking attnlib.train's mirror maps
    does not change its verdict, and the library's optimizer agrees with it."""
    g = torch.Generator().manual_seed(0)
    W = torch.randn(3, 4, generator=g, dtype=torch.float64)
    G = torch.randn(3, 4, generator=g, dtype=torch.float64)
    lp, lr = 1.5, 0.05
    theta = W.sign() * W.abs() ** (lp - 1) - lr * G
    by_hand = theta.sign() * theta.abs() ** (1 / (lp - 1))
    w = torch.nn.Parameter(W.clone())
    w.grad = G.clone()
    al.LpMirrorDescent([w], lr=lr, lp=lp).step()
    assert torch.allclose(w.detach(), by_hand, rtol=1e-12, atol=1e-14)
    for mod in ("attnlib.train", "attnlib.train.mirror", "attnlib.check.numeric"):
        mod = importlib.import_module(mod)  # the check module too, had it imported them
        monkeypatch.setattr(mod, "mirror_map", lambda W, lp: W * 0, raising=False)
        monkeypatch.setattr(mod, "inverse_mirror_map", lambda t, lp: t * 0, raising=False)
    assert al.check.check_md_step(by_hand, W, G, lr=lr, lp=lp)
    assert not al.check.check_md_step(torch.zeros_like(W), W, G, lr=lr, lp=lp)


def test_md_step_names_the_swapped_exponents_and_the_plain_step():
    g = torch.Generator().manual_seed(1)
    W = torch.randn(2, 5, generator=g, dtype=torch.float64)
    G = torch.randn(2, 5, generator=g, dtype=torch.float64)
    lp, lr = 1.5, 0.05
    pw = lambda x, e: x.sign() * x.abs() ** e
    swapped = pw(pw(W, 1 / (lp - 1)) - lr * G, lp - 1)
    fb = al.check.check_md_step(swapped, W, G, lr=lr, lp=lp)
    assert not fb and "exponents are swapped" in fb.message
    fb = al.check.check_md_step(W - lr * G, W, G, lr=lr, lp=lp)
    assert not fb and "plain gradient step" in fb.message
    fb = al.check.check_md_step(pw(pw(W, lp - 1) + lr * G, 1 / (lp - 1)), W, G, lr=lr, lp=lp)
    assert not fb and "sign of the gradient term" in fb.message


# -- chapter 10's check cells: their diagnosed mistakes ------------------------------------
def _cell(label_id):
    if not (ROOT / "book").is_dir():  # a copy of attnlib/ and tests/ alone, without the book
        pytest.skip("book/ is not in this copy")
    return next(c for c in nbformat.read(CH10, as_version=4).cells if c.get("id") == label_id)


def test_ch10_maxtest_check_names_its_mistakes():
    g = torch.Generator().manual_seed(0)
    md, gd = torch.rand(12, 5, generator=g), torch.rand(12, 5, generator=g)
    res = types.SimpleNamespace(arrays={"curve_test_acc_md": md.numpy(),
                                        "curve_test_acc_gd": gd.numpy()})
    src = _cell("1a5860b3").source.replace("al.check.check_value(", "__fb__ = "
                                            "al.check.check_value(", 1)

    def run(ans):
        ns = {"al": al, "torch": torch, "res": res, "max_test_md": ans}
        exec(compile(src, "c", "exec"), ns)
        return ns["__fb__"]

    assert run(float(md.amax(0).mean()))
    for wrong, key in ((md.amax(1).mean(), "best seed at each checkpoint"),
                       (md.mean(1).max(), "seed-averaged curve"),
                       (gd.amax(0).mean(), "gradient descent's curve")):
        fb = run(float(wrong))
        assert not fb and key in fb.message, (key, fb.message)
    assert "checkpoint" not in run(0.5).message  # an unrecognised answer: no hint


def test_ch10_shortcut_check_names_its_mistakes():
    sents = text.sentiment_sentences(n=60)
    src = _cell("53e8eb43").source.replace("al.check.check_value(", "__fb__ = "
                                            "al.check.check_value(", 1)
    lex = text.lexicon()
    rating = np.array([sum(lex.get(w, 0.0) for w in sents.sentence(i)) for i in range(60)])
    share = float(((rating > 0) != (sents.Y.numpy() > 0)).mean())

    def run(ans):
        ns = {"al": al, "text": text, "sents": sents, "opposite_3": ans}
        exec(compile(src, "c", "exec"), ns)
        return ns["__fb__"]

    assert run(share)
    fb = run(1 - share)
    assert not fb and "*with* their label" in fb.message
    fb = run(share * 60)
    assert not fb and "count" in fb.message
