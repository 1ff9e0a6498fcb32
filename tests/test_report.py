"""attnlib.experiments.report: run_all and the reproduction report (Markdown and the HTML
dashboard of the report page)."""

import re
from html.parser import HTMLParser

from experiment_fakes import CALLS, dummy, fake_dummy, fakes  # noqa: F401  (fixtures)

from attnlib import experiments
from attnlib.experiments import Target
from attnlib.experiments.ledger import report_anchor
from attnlib.experiments.report import report_html


def _broken(seed: int = 0):
    raise RuntimeError("solver diverged")


def test_run_all_and_report(dummy, fakes):  # noqa: F811
    fakes("broken", _broken, paper="2306.13596 Fig. 9", title="broken")
    res = experiments.run_all(["dummy", "broken"], progress=False, cache=False)
    assert CALLS[-1]["progress"] is False  # run_all passes its progress to the experiment
    assert isinstance(res["dummy"], experiments.Result)
    assert isinstance(res["broken"], RuntimeError)
    assert list(experiments.run_all(["dummy", "broken"], paper="2306.13596",
                                    progress=False)) == ["broken"]
    assert list(experiments.run_all(chapter="00_test", progress=False)) == ["dummy", "broken"]
    md = experiments.report_markdown(res)
    lines = md.splitlines()
    assert lines[0] == ("| Paper | Experiments | Live targets met | Regression guards | By "
                        "construction | Not run | Bounds revised | Run time |")
    assert "| 2 / 2 |" in md  # dummy: both targets met
    assert "Max-Margin Token Selection in Attention Mechanism (2306.13596) | 1 | 0 / 1 | " \
        "0 / 0 | 0 / 0 | 0 | 0" in md
    assert md.index("(2306.13596) |") < md.index("| other (other) |")  # the papers' order
    row = next(x for x in lines if x.startswith("| `dummy`"))
    cells = [c.strip() for c in row.strip("|").split(" | ")]
    assert cells[1:] == ["mean equals steps", "10", "10", "±0.5", "✓", "live", "re-simulation",
                         "a test row"]
    assert "(the experiment raised RuntimeError: solver diverged)" in md
    assert next(x for x in lines if "raised RuntimeError" in x).count("✗") == 1
    assert experiments.report_notes(res) == "- `dummy` — mean equals steps: a test row"
    from attnlib.experiments.report import report_notes_html

    notes = report_notes_html(res)
    assert notes.startswith('<details class="attn-report-notes"><summary>All notes (1)')
    assert "<li><code>dummy</code> — mean equals steps: a test row</li>" in notes
    assert "No target declares" in report_notes_html({})
    assert experiments.report_markdown({}) == "*No experiments are registered yet.*"


def test_report_rows_flag_experiments_without_targets(fakes):  # noqa: F811
    fakes("bare", fake_dummy)
    rows = experiments.report_rows(experiments.run_all(["bare"], progress=False))
    assert [(r["what"], r["ok"]) for r in rows] == [("(no reproduction target declared)", False)]


def test_report_escapes_pipes(fakes):  # noqa: F811
    t = Target("mean", "|angle| of p", "≤ 8°", lo=0, hi=100, tolerance="|x| ≤ 8")
    fakes("piped", fake_dummy, targets=[t])
    md = experiments.report_markdown(experiments.run_all(["piped"], progress=False))
    assert "\\|angle\\| of p" in md and "\\|x\\| ≤ 8" in md


def test_identity_rows_are_marked_and_not_counted_as_reproductions(fakes):  # noqa: F811
    live = Target("mean", "mean equals steps", "10", lo=9.5, hi=10.5)
    ident = Target("mean", "mean is its own value", "10", lo=0, hi=100,
                   evidence="by construction")
    fakes("ident", fake_dummy, targets=[live, ident], paper="2308.16898 Fig. 2")
    res = experiments.run_all(["ident"], progress=False, cache=False)
    md = experiments.report_markdown(res)
    assert "(2308.16898) | 1 | 1 / 1 | 0 / 0 | 1 / 1 | 0 | 0 |" in md
    row = next(x for x in md.splitlines() if "its own value" in x)
    cells = [c.strip() for c in row.strip("|").split(" | ")]
    assert cells[5:7] == ["✓ (identity)", "by construction"]


def test_not_run_targets_get_a_row_with_their_reason(dummy):  # noqa: F811
    from attnlib.experiments import registry

    key = "test_not_run_imdb"
    registry.not_run(key, paper="2410.14581 Table 9", what="IMDb test accuracy",
                     paper_value="0.87", reason="needs the IMDb download", chapter="00_test")
    try:
        res = experiments.run_all(["dummy"], progress=False)
        assert "not run" not in experiments.report_markdown(res)  # off by default
        for sel in (True, "00_test"):
            md = experiments.report_markdown(res, not_run=sel)
            row = next(x for x in md.splitlines() if "IMDb test accuracy" in x)
            cells = [c.strip() for c in row.strip("|").split(" | ")]
            assert cells[2:] == ["0.87", "not run", "", "not run", "not run", "paper",
                                 "needs the IMDb download"]
            k = len([e for e in registry.not_run_targets("2410.14581")
                     if sel is True or e.chapter == sel])  # other modules declare some too
            assert f"(2410.14581) | 0 | 0 / 0 | 0 / 0 | 0 / 0 | {k} | 0 |" in md
        assert "IMDb" not in experiments.report_markdown(res, not_run="05_w_vs_kq")
        # rows of a paper with no run experiment still appear, under that paper
        assert "Optimizing Attention with Mirror Descent" in \
            experiments.report_markdown({}, not_run=True)
    finally:
        registry._NOT_RUN.pop(key)


class _Page(HTMLParser):
    """The dashboard's rows, cards, filter inputs and links, read back from its HTML."""

    def __init__(self, text):
        super().__init__()
        self.rows, self.cards, self.inputs, self.ids, self.counts = [], [], [], [], []
        self._tr = None
        self._count = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "tr" and "data-status" in a:
            self._tr = dict(a, links=[], cells=0)
            self.rows.append(self._tr)
        elif tag == "td" and self._tr is not None:
            self._tr["cells"] += 1
        elif tag == "a" and self._tr is not None:
            self._tr["links"].append(a["href"])
        elif tag == "div" and a.get("class") == "attn-report-card":
            self.cards.append({"paper": a["data-paper"]})
        elif tag == "dd" and "data-count" in a:
            self._count = a["data-count"]
        elif tag == "input":
            self.inputs.append(a)

    def handle_endtag(self, tag):
        if tag == "tr":
            self._tr = None

    def handle_data(self, data):
        if self._count is not None:
            self.cards[-1][self._count] = int(data)
            self._count = None


def _report_with_every_status(fakes, registry):  # noqa: F811
    live = Target("mean", "mean equals steps", "10", lo=9.5, hi=10.5, source="re-simulation",
                  note="a <b>note</b> with | a pipe")
    miss = Target("seed", "seed is one", "1", lo=1, hi=1, tolerance="exact")
    ident = Target("mean_again", "mean is its own value", "10", lo=0, hi=100,
                   evidence="by construction")
    fakes("dash_two", fake_dummy, targets=[live], paper="2308.16898 Fig. 2",
          chapter="05_w_vs_kq")
    fakes("dash_broken", _broken, paper="2410.14581 Fig. 3", chapter="09_mirror_descent")

    def again(trials: int = 3, steps: int = 10, seed: int = 0):
        n, a = fake_dummy(trials, steps, seed)
        return {**n, "mean_again": n["mean"]}, a

    fakes("dash_one", again, targets=[live, miss, ident], paper="2306.13596 Fig. 1",
          chapter="02_att_svm")
    registry.not_run("dash_not_run", paper="2410.14581 Table 9", what="IMDb accuracy",
                     paper_value="0.87", reason="needs the IMDb download",
                     chapter="00_test")
    res = experiments.run_all(["dash_one", "dash_two", "dash_broken"], progress=False,
                              cache=False)
    return res, report_html(res, not_run="00_test")


def test_report_html_rows_anchors_counts_and_filters(fakes):  # noqa: F811
    from attnlib.experiments import registry

    try:
        res, page = _report_with_every_status(fakes, registry)
        p = _Page(page)
        rows = experiments.report_rows(res, not_run="00_test")
        # every row of report_rows is one table row, with its anchor as id
        assert len(p.rows) == len(rows) == 3 + 1 + 1 + 1
        ids = [r["id"] for r in p.rows]
        assert len(set(ids)) == len(ids)  # unique
        assert len(set(p.ids)) == len(p.ids)  # no id of the page twice
        for key in ("mean", "seed", "mean_again"):
            assert report_anchor("dash_one", key) in ids
        assert "target-dash-one-mean" in ids and "target-dash-two-mean" in ids
        assert report_anchor("not-run", "dash_not_run") in ids
        # statuses: met, missed, identity, not run, and a raised experiment is a miss
        status = {r["id"]: r["data-status"] for r in p.rows}
        assert status["target-dash-one-mean"] == "met"
        assert status["target-dash-one-seed"] == "missed"
        assert status["target-dash-one-mean-again"] == "identity"
        assert status["target-not-run-dash-not-run"] == "not-run"
        assert status[report_anchor("dash_broken", "no-target")] == "missed"
        assert set(status.values()) <= {"met", "missed", "guard", "identity", "not-run"}
        # every row: its chapter as data attribute, a link back to the chapter page, 8 cells
        for r in p.rows:
            assert re.fullmatch(r"\d\d_\w+", r["data-chapter"])
            assert f"{r['data-chapter']}.html" in r["links"]
            assert r["cells"] == 8
            assert r["data-evidence"] in ("live", "by construction", "regression guard",
                                          "not run")
        # one card per paper; its counts add up to its rows, and the cards to the table
        assert [c["paper"] for c in p.cards] == ["2306.13596", "2308.16898", "2410.14581"]
        for c in p.cards:
            assert c["met"] + c["missed"] + c["guard"] + c["identity"] + c["not-run"] \
                == c["rows"]
        assert sum(c["rows"] for c in p.cards) == len(p.rows)
        assert (p.cards[0]["met"], p.cards[0]["missed"], p.cards[0]["identity"]) == (1, 1, 1)
        assert (p.cards[2]["missed"], p.cards[2]["not-run"]) == (1, 1)
        # filters: a checkbox per status, a radio per chapter present in the rows (+ all),
        # and a CSS rule hiding the rows each one deselects (no script)
        boxes = {i["id"] for i in p.inputs if i["type"] == "checkbox"}
        assert boxes == {f"attn-report-st-{s}" for s in ("met", "missed", "guard", "identity",
                                                           "not-run")}
        radios = {i["id"] for i in p.inputs if i["type"] == "radio"}
        chapters = {r["data-chapter"] for r in p.rows}
        assert radios == {"attn-report-ch-all"} | {f"attn-report-ch-{c}" for c in chapters}
        for s in ("met", "missed", "guard", "identity", "not-run"):
            assert (f'#attn-report:has(#attn-report-st-{s}:not(:checked)) '
                    f'tr[data-status="{s}"]') in page
        for c in chapters:
            assert (f'#attn-report:has(#attn-report-ch-{c}:checked) '
                    f'tbody tr:not([data-chapter="{c}"])') in page
            assert (f'#attn-report:has(#attn-report-ch-{c}:checked) '
                    f'section:not(:has(tr[data-chapter="{c}"]))') in page
        assert "<script" not in page and "http://" not in page
        # long text is folded per row and escaped
        assert page.count("<details>") == len(p.rows)
        assert "a &lt;b&gt;note&lt;/b&gt; with | a pipe" in page
        assert "needs the IMDb download" in page
    finally:
        registry._NOT_RUN.pop("dash_not_run", None)


def test_report_html_without_results():
    assert "No experiments" in report_html({})


def _guarded(fakes, revisions=()):  # noqa: F811
    """An experiment of 2410.14581 with a live paper target it misses, a live one it meets,
    a regression guard it meets, and (optionally) a revised bound on the met one."""
    miss = Target("mean", "accuracy gain over GD", "+1.5 to +2.3", lo=15, hi=23,
                  tolerance="in [15, 23]")
    met = Target("mean", "mean equals steps", "10", lo=9, hi=11, tolerance="±1",
                 revisions=revisions)
    guard = Target("seed", "seed is zero", "0", lo=0, hi=0, tolerance="exact",
                   evidence="regression guard")
    fakes("guarded", fake_dummy, targets=[miss, met, guard], paper="2410.14581 Table 1",
          chapter="10_real_data")
    return experiments.run_all(["guarded"], progress=False, cache=False)


def test_a_regression_guard_is_not_counted_and_a_missed_paper_target_is(fakes):  # noqa: F811
    res = _guarded(fakes)
    md = experiments.report_markdown(res)
    # live: 1 of 2 met (the missed paper target is counted, never re-bounded), 1 guard apart
    assert "(2410.14581) | 1 | 1 / 2 | 1 / 1 | 0 / 0 | 0 | 0 |" in md
    row = next(x for x in md.splitlines() if "seed is zero" in x)
    assert [c.strip() for c in row.strip("|").split(" | ")][5:7] == ["✓ (guard)",
                                                                     "regression guard"]
    p = _Page(report_html(res))
    status = {r["id"]: r["data-status"] for r in p.rows}
    assert status[report_anchor("guarded", "seed")] == "guard"
    assert sorted(status.values()) == ["guard", "met", "missed"]
    card = p.cards[0]
    assert (card["met"], card["missed"], card["guard"], card["identity"]) == (1, 1, 1, 0)


def test_the_report_shows_revised_bounds(fakes):  # noqa: F811
    why = ">= 9.5 -> in [9, 11]: the paper's ±1 (the first bound was the book's own value)"
    res = _guarded(fakes, revisions=(why,))
    md = experiments.report_markdown(res)
    assert "(2410.14581) | 1 | 1 / 2 | 1 / 1 | 0 / 0 | 0 | 1 |" in md
    row = next(x for x in md.splitlines() if "mean equals steps" in x)
    assert row.rstrip(" |").endswith("Bound revised: " + why + ".")
    assert experiments.report.report_revisions(res) == \
        "- `guarded` — mean equals steps: " + why
    assert "<li>&gt;= 9.5 -&gt; in [9, 11]: the paper" in \
        experiments.report.report_revisions_html(res)
    page = report_html(res)
    p = _Page(page)
    revised = {r["id"]: r["data-revised"] for r in p.rows}
    assert revised[report_anchor("guarded", "mean-2")] == "1"  # the second 'mean' target
    assert revised[report_anchor("guarded", "mean")] == "0"
    assert p.cards[0]["revised"] == 1
    assert 'revised 1×, was &gt;= 9.5</span>' in page
    assert "<dt>Bound revised</dt><dd>&gt;= 9.5 -&gt; in [9, 11]" in page
    assert "No bound was revised" in experiments.report.report_revisions({})


def test_numerics_label_names_the_regime():
    from attnlib.experiments.report import numerics_label

    assert numerics_label({"x": 1}) == ""
    assert numerics_label({"numerics_eps": 0.0, "numerics_autograd": 0.0,
                           "numerics_float32": 0.0}) == "exact, ε 0"
    assert numerics_label({"numerics_eps": 1e-9, "numerics_autograd": 1.0,
                           "numerics_float32": 1.0}) == "autograd, ε 1e-09, f32"


def _numerics_fake(steps: int = 10, radii: tuple[float, ...] = (1.0, 8.0)):
    out = {"mean": float(steps), "numerics_eps": 1e-12, "numerics_autograd": 1.0,
           "numerics_float32": 0.0}
    if 8.0 in radii:
        out["at8"] = 1.0
    return out, {}


def test_report_shows_numerics_citation_and_not_computed_rows(fakes):  # noqa: F811
    cited = Target("mean", "mean equals steps", "10", lo=9.5, hi=10.5, source="paper",
                   citation="2306.13596 Table 9")
    cond = Target("at8", "read at R = 8", "1", lo=1, hi=1, when=lambda s: 8.0 in s["radii"],
                  condition="radii include 8")
    fakes("num_fake", _numerics_fake, targets=[cited, cond], paper="2306.13596 Fig. 1",
          chapter="02_att_svm")
    res = experiments.run_all(["num_fake"], progress=False, cache=False)
    html = report_html(res)
    assert "<th>Numerics</th>" in html and '<td class="attn-numerics">autograd, ε 1e-12</td>' \
        in html
    assert "2306.13596 Table 9" in html
    md = experiments.report_markdown(res)
    assert "paper (2306.13596 Table 9)" in md
    # a setting without R = 8: the conditional row is "not computed", neither met nor missed
    one = experiments.run("num_fake", cache=False, radii=(1.0,))
    html = report_html({"num_fake": one})
    p = _Page(html)
    status = {r["id"]: r["data-status"] for r in p.rows}
    assert status[report_anchor("num_fake", "at8")] == "not-computed"
    assert status[report_anchor("num_fake", "mean")] == "met"
    assert one.missed() == [] and one.passed
    md = experiments.report_markdown({"num_fake": one})
    assert "| not computed |" in md and "1 / 1" in md


def test_a_conditional_target_needs_its_condition_in_words():
    import pytest

    with pytest.raises(ValueError, match="condition"):
        Target("k", "w", "1", when=lambda s: True)
    with pytest.raises(ValueError, match="condition"):
        Target("k", "w", "1", condition="radii include 8")
    with pytest.raises(ValueError, match="tracker"):
        Target("k", "w", "1", citation="issue 25")


def test_defaults_must_compute_every_conditional_target(fakes):  # noqa: F811
    import pytest

    never = Target("at8", "read at R = 8", "1", when=lambda s: 3.0 in s["radii"],
                   condition="radii include 3")
    with pytest.raises(TypeError, match="defaults do not compute"):
        fakes("num_bad", _numerics_fake, targets=[never])
