"""md_text (chapter 10): a tiny run separates, and its numbers match a direct recomputation;
md_text_svm: its ℓp-AttSVM distances and equal-step numbers, and the prose and tables built
from both (each run once, in a module fixture, for every test that reads it).

Oracles: sentence-by-sentence loops over the stored attention maps, a plain-torch forward
pass of the selected models, a direct ``att_svm`` + ``bregman_direction`` recomputation for
the SVM distances, and a column count for every Markdown table.
"""

import math

import numpy as np
import pytest
import torch

import attnlib as al
from attnlib import realdata, text
from attnlib.experiments import not_run_targets
from attnlib.figures import mirror_text
from attnlib.metrics import bregman_direction
from attnlib.svm import att_svm

SMALL = dict(n=240, steps=200, eval_every=50, seeds=2, lr_md=(0.01,), lr_gd=(0.3,),
             lr_md3=(30.0,), lr_adam=(0.1,))


def _tables_well_formed(md: str):
    """Every Markdown table: a header, a |---| rule with as many cells, rows with as many."""
    lines = md.splitlines()
    i, seen = 0, 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            ncol = lines[i].count("|")
            assert lines[i + 1].count("|") == ncol
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                assert lines[j].count("|") == ncol, lines[j]
                j += 1
            assert j > i + 2  # at least one row
            seen += 1
            i = j
        else:
            i += 1
    return seen


@pytest.fixture(scope="module")
def res(tmp_path_factory):
    return al.experiments.run("md_text", cache=False, **SMALL)


@pytest.fixture(scope="module")
def svm_res():
    """md_text_svm, small: read by three tests below."""
    return al.experiments.run("md_text_svm", cache=False, steps=600, seeds=2)


def test_a_tiny_run_separates_and_selects_the_planted_word():
    data = text.sentiment_sentences(n=60, T=8, dim=16, distractors=3, seed=5)
    run = realdata.fit(data, "md", (100.0,), lp=1.1, steps=800, eval_every=800, seeds=(0, 1),
                       v=data.v)
    W = run["W"][0, -1]  # (2, d, d) last step
    Xtr, Ytr, ztr = data.part("train")
    f = text.outputs(W, data.v, Xtr, ztr)
    assert ((f > 0) == (Ytr > 0)).all()  # separated
    rel = data.relevant[data.index["train"]]
    mass, hit = text.relevant_attention(text.attention(W, Xtr, ztr), rel)
    assert (mass > 0.8).all() and (hit == 1).all()  # uniform would be 1/8
    # the head stayed fixed: only W trained
    assert torch.equal(run["v"][0, -1], data.v.expand(2, -1))


def test_numbers_match_a_recomputation(res):
    a, num = res.arrays, res.numbers
    data = text.sentiment_sentences(n=SMALL["n"], seed=0, query="cls")  # the default query
    Xte, _, zte = data.part("test")
    rel = data.relevant[data.index["test"]]
    for k in ("md", "gd", "md3", "adam"):
        W = torch.as_tensor(a[f"W_{k}"])  # (S, d, d)
        for b in range(SMALL["seeds"]):
            s_loop = [torch.softmax(Xte[i] @ W[b] @ zte[i], 0) for i in range(len(rel))]
            m = np.mean([float(s[r]) for s, r in zip(s_loop, rel)])
            h = np.mean([int(s.argmax()) == int(r) for s, r in zip(s_loop, rel)])
            assert a[f"{k}_mass"][b] == pytest.approx(m, abs=1e-5)
            assert a[f"{k}_hit"][b] == pytest.approx(h)
            # the maps kept for the figures are those of the first test sentences
            np.testing.assert_allclose(a[f"attention_{k}"][b, 0], s_loop[0].numpy(), atol=1e-5)
    assert num["mass_seeds"] == int((a["md_mass"] > a["gd_mass"]).sum())
    assert num["mass_diff"] == pytest.approx(float(a["md_mass"].mean() - a["gd_mass"].mean()))
    tr = [float(a[f"{k}_train_acc"].min()) for k in ("md", "gd", "md3", "adam")]
    assert num["separated"] == pytest.approx(min(tr))
    words = ["[CLS]" if w < 0 else data.vocab[w] for w in a["words"][0]]
    assert words == data.sentence(int(data.index["test"][0]))


def test_targets_are_declared_and_read(res):
    keys = {t.key for t in al.experiments.get("md_text").targets}
    assert {"separated", "mass_seeds", "mass_diff", "sparsity_ratio"} <= keys
    rows = {r["key"]: r for r in res.verdicts()}
    assert set(rows) == keys
    assert all(r["book"] == pytest.approx(res.numbers[k]) for k, r in rows.items())


def test_figures_and_explorer_draw(res):
    import matplotlib

    matplotlib.use("Agg")
    from attnlib.figures import mirror_text

    assert len(res.figure().axes) == 3
    assert len(mirror_text.plot_sentences(res, sentences=2).axes) == 8
    assert "ℓ1.1-MD" in mirror_text.text_table(res)
    ex = al.explorers.word_attention(res, sentence=1, optimizer="gd", mode="live")
    ex.update(optimizer="md3", sentence=2)
    assert len(ex.figure.axes) == 2
    st = al.explorers.word_attention(res, static={"sentence": (0, 1), "optimizer": ("md", "gd")},
                                   mode="static")
    assert 'data-explorer="word-attention"' in st.html and st.html.count("<img") >= 1


def test_the_explorer_names_a_run_with_no_test_sentence_to_show():
    # n = 6 leaves no sentence in the test split: no explorer can open on one
    tiny = al.experiments.run("md_text", cache=False, n=6, steps=2, eval_every=1, seeds=1,
                              progress=False)
    assert np.asarray(tiny.arrays["words"]).shape[0] == 0
    with pytest.raises(ValueError, match="result: this md_text run kept no test sentence"):
        al.explorers.word_attention(tiny, mode="static")


def test_fixed_head_must_match_d():
    data = text.sentiment_sentences(n=20, T=6, dim=8, distractors=1, seed=0)
    with pytest.raises(ValueError, match="v: expected shape"):
        realdata.fit(data, "gd", (1.0,), steps=1, seeds=(0,), v=torch.zeros(3))


def test_digits_blank_attention_against_a_loop():
    from attnlib.experiments.mirror_digits import blank_attention

    data = realdata.digits_tokens()
    X, _, z = data.part("test")
    X, z = X[:30], z[:30]
    W = 0.5 * torch.randn(3, data.d, data.d, generator=torch.Generator().manual_seed(0))
    mass, top = blank_attention(W, X, z)
    for b in range(3):
        m = t = 0.0
        for i in range(30):
            s = torch.softmax(X[i] @ W[b] @ z[i], 0)
            blank = [bool((X[i, j, :4] == 0).all()) for j in range(data.T)]
            m += sum(float(s[j]) for j in range(data.T) if blank[j])
            t += blank[int(s.argmax())]
        assert mass[b].item() == pytest.approx(m / 30, abs=1e-5)
        assert top[b].item() == pytest.approx(t / 30)
    assert 0 < top.max()  # the random W do put their top patch on blanks sometimes


@pytest.mark.slow
def test_equal_step_check_is_the_exact_gradient_run_against_its_own_svm(svm_res):
    """md_text_svm's equal-step numbers: l1.1-MD and GD at GD's normalised step, eps = 0,
    from the runs' W0, with attnlib.train's exact gradient, D_dir to their own SVMs."""
    from attnlib.data import AttentionData
    from attnlib.metrics import bregman_direction
    from attnlib.svm import att_svm

    n = svm_res.numbers
    data = text.sentiment_sentences(n=48, T=8, dim=12, distractors=3, seed=0,
                                    dtype=torch.float64)
    X, Y, z = data.part("train")
    W0 = realdata.fit(data, "gd", (0.1,), lp=2.0, steps=1, eval_every=1, seeds=(0, 1),
                      v=data.v, normalized=True)["W"][0, 0]
    Ws = al.train(AttentionData(X, Y, z, v=data.v), param="W", method="md", lr=0.1,
                  steps=600, lp=1.1, eps=0.0, init={"W": W0}).W  # both seeds at once
    alpha = text.attention(Ws, X, z).argmax(-1)
    d = [float(bregman_direction(att_svm(X, z, alpha[b], norm=1.1), Ws[b], 1.1))
         for b in range(2)]
    assert n["ddir_md_equal"] == pytest.approx(np.mean(d), rel=1e-6, abs=1e-9)
    assert n["ddir_md_equal_max"] == pytest.approx(max(d), rel=1e-6, abs=1e-9)
    assert n["svm_equal_eta_ratio"] == pytest.approx(n["ddir_gd_equal"] / n["ddir_md_equal"])
    # GD's exact-gradient run is the table's GD run (same rate, same start)
    assert n["ddir_gd_equal"] == pytest.approx(n["ddir_gd_q2"], rel=1e-3)


@pytest.mark.slow
def test_equal_step_autograd_runs_are_their_own(svm_res):
    """The equal-step autograd numbers: GD's is the table's GD run (the same call, trained
    once, its SVMs solved once), l1.1-MD's is its own run at GD's rate, not the table's l1.1
    run at lr_md."""
    n = svm_res.numbers
    assert n["ddir_gd_equal_autograd"] == pytest.approx(n["ddir_gd_q2"], rel=1e-12)
    data = text.sentiment_sentences(n=48, T=8, dim=12, distractors=3, seed=0,
                                    dtype=torch.float64)
    X, _, z = data.part("train")
    W = realdata.fit(data, "md", (0.1,), lp=1.1, steps=600, eval_every=600, seeds=(0, 1),
                     v=data.v, normalized=True)["W"][0, -1]
    alpha = text.attention(W, X, z).argmax(-1)
    d = [float(bregman_direction(att_svm(X, z, alpha[b], norm=1.1), W[b], 1.1))
         for b in range(2)]
    assert n["ddir_md_equal_autograd"] == pytest.approx(np.mean(d), rel=1e-6, abs=1e-9)


@pytest.mark.slow
def test_svm_distances_match_a_recomputation(svm_res):
    D = torch.as_tensor(svm_res.arrays["ddir"])  # (p, seed, q)
    assert D.shape == (3, 2, 3) and torch.isfinite(D).all()
    data = text.sentiment_sentences(n=48, T=8, dim=12, distractors=3, seed=0,
                                    dtype=torch.float64)
    X, _, z = data.part("train")
    run = realdata.fit(data, "gd", (0.1,), lp=2.0, steps=600, eval_every=600, seeds=(0, 1),
                       v=data.v, normalized=True)
    W = run["W"][0, -1]
    alpha = text.attention(W, X, z).argmax(-1)
    for b in range(2):
        for j, q in enumerate((1.1, 2.0, 3.0)):
            Wm = att_svm(X, z, alpha[b], norm=q)
            assert float(D[1, b, j]) == pytest.approx(float(bregman_direction(Wm, W[b], q)),
                                                      abs=1e-6)
    n = svm_res.numbers
    Dm = D.mean(1)
    assert n["svm_ddir_p2"] == pytest.approx(float(Dm[1, 1]))
    ratios = [min(float(Dm[i, j]) for j in range(3) if j != i) / float(Dm[i, i])
              for i in range(3)]
    assert n["svm_diag_ratio"] == pytest.approx(min(ratios))
    assert n["svm_solved"] == 1.0
    assert _tables_well_formed(mirror_text.svm_table(svm_res)) == 1


@pytest.mark.slow
def test_prose_and_closing_table_are_built_from_the_results(res, svm_res):
    # the two-distractor run and the digits: the smallest runs the summaries can quote
    two = al.experiments.run("md_text", cache=False,
                             **{**SMALL, "distractors": 2, "n": 60, "steps": 50})
    dig = al.experiments.run("md_digits", cache=False, steps=10, eval_every=5, seeds=2)
    n = res.numbers
    summary = mirror_text.text_summary(res)
    assert f"{n['md_mass']:.2f}" in summary and f"{100 * n['gd_hit']:.1f}%" in summary
    assert ("Every model separates" in summary) == (n["separated"] == 1.0)
    assert f"{two.numbers['md_mass']:.2f}" in mirror_text.two_summary(two)
    dsum = mirror_text.digits_summary(dig)
    assert f"{dig.numbers['md_entropy']:.2f}" in dsum
    assert ("above" if dig.numbers["acc_diff"] > 0 else "below") in dsum
    table = mirror_text.closing_table(res, two, dig, svm_res, not_run_targets("2410.14581"))
    assert _tables_well_formed(table) == 1
    assert table.count("not run:") >= 2  # the exact IMDb replica and the ViT
    for row in table.splitlines()[2:]:  # every row says its evidence
        evidence = row.rstrip(" |").split("|")[-1].strip()
        assert evidence.startswith(("✓ live", "✗ live", "live", "not run: ")), row
    assert f"{n['md_mass']:.3f} vs {n['gd_mass']:.3f}" in table
    assert not math.isnan(dig.numbers["uniform_blank"])
