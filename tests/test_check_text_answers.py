"""Chapter 10's write-it-yourself checks (issue 14): the selection statistics on sentences
(attnlib/check/text_answers.py) and the mirror-descent step (check_md_step, now computed in
NumPy, independently of attnlib.train), and the diagnosed mistakes of ch10's check cells."""

import importlib
import re
import types
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

import attnlib as al
from attnlib import text
from attnlib.check import text_answers

ROOT = Path(__file__).resolve().parents[1]
CH10 = ROOT / "book" / "10_real_data.ipynb"


def _problem(seed=0, N=30, T=6, d=5, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(N, T, d, generator=g, dtype=torch.float64)
    z = torch.randn(N, d, generator=g, dtype=torch.float64)
    W = scale * torch.randn(d, d, generator=g, dtype=torch.float64)
    r = torch.randint(0, T, (N,), generator=g)
    return W, X, z, r


def _stats(W, X, z, r):
    """The statistics as a learner writes them in torch (batched)."""
    s = torch.softmax(torch.einsum("ntd,de,ne->nt", X, W, z), -1)
    rows = torch.arange(len(r))
    return s, float(s[rows, r].mean()), float((s.argmax(-1) == r).double().mean())


def test_oracle_agrees_with_the_definition_and_the_library():
    W, X, z, r = _problem()
    o = text_answers.planted_attention_oracle(W, X, z, r)
    # the definition, written out once more with Python loops over tokens
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


def test_a_correct_answer_passes_also_on_real_sentences_in_float32():
    W, X, z, r = _problem(1)
    _, mass, hit = _stats(W, X, z, r)
    assert al.check.check_planted_attention((mass, hit), W, X, z, r)
    assert al.check.check_planted_attention([np.float64(mass), torch.tensor(hit)], W, X, z, r)
    sents = text.sentiment_sentences(n=40)
    g = torch.Generator().manual_seed(0)
    W32 = 0.3 * torch.randn(sents.d, sents.d, generator=g)
    _, mass, hit = _stats(W32, sents.X, sents.z, sents.relevant)
    fb = al.check.check_planted_attention((mass, hit), W32, sents.X, sents.z, sents.relevant)
    assert fb, fb
    assert not al.check.check_planted_attention((mass * 1.01, hit), W32, sents.X, sents.z,
                                                sents.relevant)


def _mistaken(W, X, z, r):
    s, mass, hit = _stats(W, X, z, r)
    rows, N = torch.arange(len(r)), len(r)
    sT = torch.softmax(torch.einsum("ntd,ed,ne->nt", X, W, z), -1)
    a = torch.einsum("ntd,de,ne->nt", X, W, z)
    return {
        "transposed": (float(sT[rows, r].mean()), float((sT.argmax(-1) == r).double().mean())),
        "shifted by one": (float(s[rows, r - 1].mean()),
                           float((s.argmax(-1) == r - 1).double().mean())),
        "summed over the sentences": (mass * N, hit * N),
        "not normalised": (float(torch.exp(a)[rows, r].mean()), hit),
        "most attended token": (float(s.max(-1).values.mean()), hit),
    }


@pytest.mark.parametrize("seed", [0, 3])
def test_common_mistakes_are_named_and_the_expected_value_is_never_shown(seed):
    W, X, z, r = _problem(seed)
    o = text_answers.planted_attention_oracle(W, X, z, r)
    for key, answer in _mistaken(W, X, z, r).items():
        fb = al.check.check_planted_attention(answer, W, X, z, r)
        assert not fb and key in fb.message, (key, fb.message)
        assert fb.message.count(key) == 1  # a mistake in both numbers is named once
        shown = [float(x) for x in re.findall(r"\d+\.\d+(?:e-?\d+)?", fb.message)]
        for expected in (o["mass"], o["hit"]):
            assert not [x for x in shown if abs(x - expected) <= 1e-4 * expected], fb.message


def test_hit_tolerance_is_one_sentence_unless_logits_tie():
    W, X, z, r = _problem(2)
    _, mass, hit = _stats(W, X, z, r)
    N = len(r)
    assert not al.check.check_planted_attention((mass, hit + 1 / N), W, X, z, r)
    assert al.check.check_planted_attention((mass, hit + 0.4 / N), W, X, z, r)
    X2 = X.clone()
    X2[0, 1] = X2[0, 0]  # two identical tokens in sentence 0: its top token is a tie
    o = text_answers.planted_attention_oracle(W, X2, z, r)
    assert o["ties"] >= 1
    _, mass2, hit2 = _stats(W, X2, z, r)
    assert al.check.check_planted_attention((mass2, hit2 + 1 / N), W, X2, z, r)


def test_unanswered_malformed_and_overflowing_answers_get_feedback():
    W, X, z, r = _problem()
    check = al.check.check_planted_attention
    assert "not answered" in check(None, W, X, z, r).message
    assert "pair (mass, hit)" in check(0.5, W, X, z, r).message
    assert "pair (mass, hit)" in check((0.5,), W, X, z, r).message
    assert "one number" in check((torch.ones(3), 0.5), W, X, z, r).message
    assert "not finite" in check((float("inf"), 0.5), W, X, z, r).message
    with pytest.raises(ValueError, match="relevant"):
        check((0.5, 0.5), W, X, z, r + X.shape[1])
    with pytest.raises(ValueError, match="W"):
        check((0.5, 0.5), W[:2], X, z, r)


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
    if not (ROOT / "book").is_dir():  # a copy of attnlib/ and tests/ only (mutation testing)
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
