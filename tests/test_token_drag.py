"""The drag explorer's exporter (attnlib.explorers.token_drag) and its browser-side math.

Oracles: the paper's closed forms of E1 (``three_token_example().known``), the Att-SVM's
optimality conditions checked by hand (margins >= 1, p a non-negative combination of the
active constraints), a torch-autograd gradient-descent loop on the book's risk, and, where
node is installed, scripts/js/token-drag.js run on the exported configurations.
"""

from __future__ import annotations

import inspect
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from attnlib.examples import three_token_example
from attnlib.experiments.max_margin_measures import TOKEN_EXAMPLES
from attnlib.explorers import token_drag as td

ROOT = Path(__file__).resolve().parents[1]
JS = ROOT / "scripts" / "js" / "token-drag.js"


@pytest.fixture(scope="module")
def data():
    return td.token_drag_data()


def _rows(keys, alpha):
    """Constraint rows k_{i alpha_i} - k_it (t != alpha_i) with their (i, t)."""
    K = np.asarray(keys, dtype=float)
    return [(K[i, a] - K[i, t], i, t) for i, a in enumerate(alpha)
            for t in range(K.shape[1]) if t != a]


def _gd_autograd(keys, gamma, p0, lr, normalized, loss, iterations, eps):
    """Gradient descent on L(p) = mean_i loss(sum_t softmax(K_i p)_t gamma_it), autograd."""
    K = torch.tensor(keys, dtype=torch.float64)
    g = torch.tensor(gamma, dtype=torch.float64)
    ell = {"logistic": lambda u: torch.nn.functional.softplus(-u), "exp": lambda u: torch.exp(-u),
           "correlation": lambda u: -u}[loss]
    p = torch.tensor(p0, dtype=torch.float64)
    for _ in range(iterations):
        p = p.detach().requires_grad_(True)
        risk = ell((torch.softmax(K @ p, -1) * g).sum(-1)).mean()
        (G,) = torch.autograd.grad(risk, p)
        p = p - (lr * G / (G.norm() + eps) if normalized else lr * G)
    return p.detach().numpy()


def test_defaults_are_the_chapters(data):
    """It opens on the chapter's explorer: e2, step 0.1, normalised, logistic, 200 steps."""
    assert data["defaults"] == dict(example="e2", lr=0.1, normalized=True, loss="logistic",
                                    iterations=200)
    assert set(data["examples"]) == set(TOKEN_EXAMPLES)
    for name, ex in data["examples"].items():
        full = TOKEN_EXAMPLES[name][0]("cpu")
        X = full.data.X.numpy()
        np.testing.assert_allclose(ex["keys"], X[..., :2])  # W = diag(1, 1, 0): the plane
        np.testing.assert_allclose(ex["gamma"], X[..., 2])  # v = (0, 0, 1), Y = 1
        assert ex["p0"] == full.init["p"][0, :2].tolist()
        assert ex["eps"] == full.settings["eps"]
        assert ex["optimal"] == np.asarray(ex["gamma"]).argmax(-1).tolist()


def test_references_cover_the_defaults_and_the_moves(data):
    refs = data["references"]
    assert len(refs) == len(TOKEN_EXAMPLES) + len(td.MOVES)
    assert [r["example"] for r in refs[:3]] == list(TOKEN_EXAMPLES)
    moved = [r for r in refs if r["keys"] != data["examples"][r["example"]]["keys"]]
    assert len(moved) >= 4
    assert any(not r["attnlib"]["feasible"] for r in refs)  # one infeasible selection
    assert len({(r["lr"], r["normalized"], r["loss"], r["iterations"]) for r in refs}) >= 3


def test_e1_svm_matches_the_papers_closed_form(data):
    known = three_token_example("global").known
    e1 = data["references"][0]["attnlib"]
    np.testing.assert_allclose(e1["p_mm"], known["p_mm"][0][:2].numpy(), atol=1e-7)
    assert np.flatnonzero(e1["support"][0]).tolist() == known["support"][0]
    sel2 = next(r for r in data["references"] if r["example"] == "e1-global"
                and r["alpha"] == [1])["attnlib"]
    np.testing.assert_allclose(sel2["p_mm"], known["p_mm"][1][:2].numpy(), atol=1e-7)
    # the paper's labels: with scores (1, .9, .9) only x1 is locally optimal (x2's support
    # token x3 scores as much as x2); an infeasible selection is not
    assert e1["locally_optimal"] and not sel2["locally_optimal"]
    assert all(not r["attnlib"]["locally_optimal"] for r in data["references"]
               if not r["attnlib"]["feasible"])


def test_e2_selections_of_chapter_3(data):
    """Several inputs, a token chosen per input: a feasible selection that is not locally
    optimal (a support token scores as much as the selected one) and two infeasible ones,
    one where every selected token alone is separable from its input and one where it is not."""
    gamma = np.asarray(data["examples"]["e2"]["gamma"])
    opt = data["examples"]["e2"]["optimal"]
    refs = {tuple(r["alpha"]): r for r in data["references"]
            if r["example"] == "e2" and r["alpha"] != opt}
    assert {(0, 2, 0), (0, 0, 2), (0, 0, 1)} <= set(refs)
    feasible = refs[(0, 2, 0)]["attnlib"]
    assert feasible["feasible"] and not feasible["locally_optimal"]
    sup = np.asarray(feasible["support"])
    assert sup[1, 0] and gamma[1, 0] >= gamma[1, 2]  # x_{2,1} on x_{2,3}'s margin, scores more
    for alpha, alone in [((0, 0, 2), [True, True, True]), ((0, 0, 1), [True, True, False])]:
        r = refs[alpha]
        assert not r["attnlib"]["feasible"] and not r["attnlib"]["locally_optimal"]
        K, g = np.asarray(r["keys"]), gamma
        got = [td.reference(K[i:i + 1], g[i:i + 1], [a], (0, 0), iterations=0)["feasible"]
               for i, a in enumerate(alpha)]
        assert got == alone, alpha


def test_references_satisfy_the_svm_optimality_conditions(data):
    """Margins >= 1, p = sum of lambda_j a_j over the active rows with lambda >= 0, and the
    support tokens are exactly the active rows; an infeasible selection has a key that is a
    convex combination of the others (checked for the one-input case by a direction scan)."""
    for r in data["references"]:
        a = r["attnlib"]
        rows = _rows(r["keys"], r["alpha"])
        if not a["feasible"]:
            q = np.stack([np.cos(np.linspace(0, 2 * np.pi, 3601)),
                          np.sin(np.linspace(0, 2 * np.pi, 3601))], 1)
            margins = np.min([q @ row for row, _, _ in rows], 0)
            assert margins.max() <= 1e-9, r  # no direction separates: infeasible
            continue
        p = np.asarray(a["p_mm"])
        m = np.array([row @ p for row, _, _ in rows])
        assert m.min() >= 1 - 1e-6
        active = np.abs(m - 1) <= 1e-6
        A = np.stack([row for (row, _, _), on in zip(rows, active) if on], 1)
        lam, *_ = np.linalg.lstsq(A, p, rcond=None)
        assert lam.min() >= -1e-7 and np.allclose(A @ lam, p, atol=1e-7)
        sup = {(i, t) for (_, i, t), on in zip(rows, active) if on}
        got = {(i, t) for i, row in enumerate(a["support"]) for t, s in enumerate(row) if s}
        assert got == sup, r


def test_gd_endpoints_match_autograd(data):
    for r in data["references"]:
        gamma = data["examples"][r["example"]]["gamma"]
        want = _gd_autograd(r["keys"], gamma, r["p0"], r["lr"], r["normalized"], r["loss"],
                            r["iterations"], r["eps"])
        # 1e-5: late normalised steps divide a gradient of the size of eps (1e-12 on E2) by
        # ||G|| + eps, so rounding in G (a cancellation of O(1) terms) moves p(200) by ~1e-7
        np.testing.assert_allclose(r["attnlib"]["p_end"], want, rtol=1e-5, atol=1e-8)


def test_html_fragment_carries_the_data_and_the_relative_scripts(data, monkeypatch):
    calls, real = [], inspect.signature(td.token_drag_data)  # the module's data, asked for as:
    monkeypatch.setattr(td, "token_drag_data",
                        lambda *a, **kw: calls.append(real.bind(*a, **kw).arguments) or data)
    frag = td.token_drag().data
    assert calls == [dict(example="e2", lr=0.1, normalized=True, loss="logistic", iterations=200)]
    m = re.search(r'<script type="application/json" id="([^"]+)-data">(.*?)</script>', frag,
                  re.S)
    assert m and f'id="{m.group(1)}"' in frag
    payload = json.loads(m.group(2).replace("<\\/", "</"))
    assert payload == json.loads(json.dumps(data))  # all of it, "</" escaped
    assert 'data-plotly-src="../plotly/plotly-basic.min.js"' in frag
    assert '<script src="../explorers/token-drag.js"></script>' in frag
    assert "live explorer" in frag  # what Jupyter shows instead
    # the files those paths name are what scripts/setup.sh copies into _static_offline/
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert 'cp "$JS/token-drag.js" "$OFFLINE/explorers/"' in setup
    assert '"$OFFLINE/plotly/"' in setup and "plotly-basic.min.js" in setup
    lock = json.loads((ROOT / "scripts" / "js" / "package-lock.json").read_text())
    pinned = json.loads((ROOT / "scripts" / "js" / "package.json").read_text())
    ver = pinned["dependencies"]["plotly.js-basic-dist-min"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", ver)  # an exact pin
    assert lock["packages"]["node_modules/plotly.js-basic-dist-min"]["version"] == ver


@pytest.mark.parametrize("kwargs, name", [
    (dict(example="e9"), "example"), (dict(lr=0.0), "lr"), (dict(normalized="yes"), "normalized"),
    (dict(loss="hinge"), "loss"), (dict(iterations=5000), "iterations"),
])
def test_bad_settings_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        td.token_drag_data(**kwargs)


def test_reference_checks_its_arrays():
    with pytest.raises(ValueError, match="keys, gamma"):
        td.reference(np.zeros((1, 3, 3)), np.zeros((1, 3)), [0], (0, 1))
    with pytest.raises(ValueError, match="alpha"):
        td.reference(np.zeros((1, 3, 2)), np.zeros((1, 3)), [3], (0, 1))


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_browser_math_matches_attnlib_under_node(data, tmp_path):
    """token-drag.js's attSvm2d and gdPath (no page needed) on every exported configuration."""
    (tmp_path / "data.json").write_text(json.dumps(data))
    script = f"""
globalThis.window = globalThis;
require({json.dumps(str(JS))});
const d = require({json.dumps(str(tmp_path / "data.json"))});
const out = d.references.map((r) => {{
  const ex = d.examples[r.example];
  const svm = window.attnTokenDrag.attSvm2d(r.keys, r.alpha);
  const path = window.attnTokenDrag.gdPath(r.keys, ex.gamma, r.p0, r);
  const st = Object.assign({{examples: d.examples}}, r);
  const res = window.attnTokenDrag.compute(st);
  return {{svm: svm, p_end: path[path.length - 1], length: path.length,
          local: res.locally_optimal, alone: res.feasible_alone}};
}});
console.log(JSON.stringify(out));
"""
    res = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    for r, js in zip(data["references"], json.loads(res.stdout)):
        a = r["attnlib"]
        assert js["svm"]["feasible"] == a["feasible"]
        assert js["local"] == a["locally_optimal"]
        assert js["length"] == r["iterations"] + 1
        if a["feasible"]:
            np.testing.assert_allclose(js["svm"]["p"], a["p_mm"], rtol=1e-6, atol=1e-8)
            assert js["svm"]["support"] == a["support"]
        np.testing.assert_allclose(js["p_end"], a["p_end"], rtol=1e-5, atol=1e-8)  # as above
        if a["feasible"]:
            assert js["alone"] is None
        else:  # which selected tokens are infeasible on their own (the readout names them)
            gamma = np.asarray(data["examples"][r["example"]]["gamma"])
            K = np.asarray(r["keys"])
            assert js["alone"] == [td.reference(K[i:i + 1], gamma[i:i + 1], [a_i], (0, 0),
                                                iterations=0)["feasible"]
                                   for i, a_i in enumerate(r["alpha"])]


def test_the_page_is_phone_first():
    """What the browser tests (tests/test_site_drag.py) check on a built site, read from the
    script itself so that it holds without a site: the plots let a vertical swipe scroll the
    page (touch-action: pan-y), only the token handles take the pointer (touch-action: none),
    handles of at least 24 px (40 px on a coarse pointer), focusable and moved by the arrow
    keys, and pointer moves drawn once per animation frame."""
    js = JS.read_text(encoding="utf-8")
    css = re.search(r"const CSS = `(.*?)`;", js, re.S).group(1)
    rules = {}  # selector -> its first rule (the coarse-pointer one comes later)
    for sel, body in re.findall(r"(\.attnlib-drag [^{]+)\{([^}]*)\}", css):
        rules.setdefault(sel, body)
    plot = rules[".attnlib-drag .ad-plot"]
    assert "touch-action:pan-y" in plot.replace(" ", ""), plot
    nones = [sel for sel, body in rules.items() if "touch-action:none" in body.replace(" ", "")]
    assert nones == [".attnlib-drag .ad-handle"], nones
    handle = rules[".attnlib-drag .ad-handle"]
    sizes = [int(v) for v in re.findall(r"(?:^|;)\s*(?:width|height):(\d+)px", handle)]
    assert sizes and min(sizes) >= 24, sizes
    coarse = re.search(r"@media \(pointer:coarse\)\{\.attnlib-drag \.ad-handle\{width:(\d+)px;"
                       r"height:(\d+)px", css)
    assert coarse and min(map(int, coarse.groups())) >= 40
    assert "requestAnimationFrame" in js and "ArrowLeft" in js and "aria-label" in js
    assert 'el("button", { type: "button", class: "ad-handle"' in js  # focusable
