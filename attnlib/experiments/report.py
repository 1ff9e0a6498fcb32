"""The reproduction report: run many experiments, then one table row per declared target.

:func:`attnlib.experiments.run_all` runs experiments (cached, never stopping at a failure);
:func:`report_html`
(the book's report page, a dashboard), :func:`report_markdown` (the short tables of the
chapters) and :func:`report_notes` turn the results into tables. See the chapter
"Reproduction report".
"""

from __future__ import annotations

import html
import math
import re

from .ledger import report_anchor
from .registry import PAPERS, arxiv_id, get, not_run_targets
from .result import Result

__all__ = ["report_rows", "report_markdown", "report_notes", "report_html",
           "numerics_label",
           "report_notes_html", "report_revisions", "report_revisions_html"]

_ARXIV_ID = re.compile(r"\d{4}\.\d{4,5}")


def numerics_label(numbers: dict) -> str:
    """The numerical regime an experiment reports (its ``numerics_eps``,
    ``numerics_autograd``, ``numerics_float32``) in a few words: ``"exact, ε 0"``,
    ``"autograd, ε 1e-09, f32"``; ``""`` where it reports none.
    """
    if "numerics_eps" not in numbers:
        return ""
    grad = "autograd" if float(numbers.get("numerics_autograd", 0)) else "exact"
    eps = float(numbers["numerics_eps"])
    text = f"{grad}, ε {0 if eps == 0 else f'{eps:.3g}'}"
    return text + (", f32" if float(numbers.get("numerics_float32", 0)) else "")


def _fmt(v) -> str:
    v = float(v)
    if math.isnan(v):
        return "NaN"
    return str(int(v)) if v == int(v) and abs(v) < 1e15 else f"{v:.4g}"


def _cell(text) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _e(text) -> str:
    """Text safe inside HTML (and inside an attribute)."""
    return html.escape(str(text), quote=True)


def report_rows(results: dict, *, not_run: bool | str = False) -> list[dict]:
    """One row per target of every result (an exception gives one failed row).

    Each row's ``ok`` is True (met), False (missed) or None (not run, or a conditional
    target these settings do not compute); its ``numerics`` is the regime of the
    computation (``numerics_label``, ``""`` where the experiment reports none) and its
    ``citation`` where the reference value comes from (``Target.citation``, else the
    experiment's paper figure). Each row's ``evidence`` is ``"live"`` (computed in this
    build), ``"by construction"`` (an identity, not a reproduction), ``"regression guard"``
    (a bound from the book's own value, not a reproduction) or ``"not run"``; ``revisions``
    lists the target's recorded changes of bound (``"old bound -> new bound: why"``).
    ``not_run=True`` adds a row for every declared not-run target (``registry.not_run``) of
    the papers; a chapter stem (``"10_real_data"``) adds only that chapter's.
    """
    rows = []
    for name, res in results.items():
        exp = get(name)
        if isinstance(res, Exception):
            rows.append(dict(experiment=name, paper_figure=exp.paper, key="", what="(the "
                             f"experiment raised {type(res).__name__}: {res})", paper="",
                             book="", tolerance="", ok=False, source="", note="", seconds=None,
                             evidence="live"))
            continue
        regime = numerics_label(res.numbers)
        for r, t in zip(res.verdicts(), exp.targets):
            rows.append({**r, "paper_figure": exp.paper,
                         "book": _fmt(r["book"]) if r["applies"] else "not computed",
                         "seconds": res.seconds, "bound": t.bound(),
                         "revisions": list(t.revisions), "chapter": exp.chapter,
                         "numerics": regime})
        if not exp.targets:
            rows.append(dict(experiment=name, paper_figure=exp.paper, key="", what="(no "
                             "reproduction target declared)", paper="", book="", tolerance="",
                             ok=False, source="", note="", seconds=res.seconds,
                             evidence="live"))
    if not_run:
        for e in not_run_targets():
            if not_run is True or e.chapter == not_run:
                rows.append(dict(experiment="", paper_figure=e.paper, key=e.key, what=e.what,
                                 paper=e.paper_value, book="not run", tolerance="", ok=None,
                                 source="paper", note=e.reason, seconds=None,
                                 evidence="not run", chapter=e.chapter))
    return rows


def _paper(row) -> str:
    return arxiv_id(row["paper_figure"])


_KIND = {"live": "", "by construction": " (identity)", "regression guard": " (guard)"}


def _mark(row) -> str:
    if row["evidence"] == "not run":
        return "not run"
    if row["ok"] is None:
        return "not computed"
    return ("✓" if row["ok"] else "✗") + _KIND.get(row["evidence"], "")


def _source(row) -> str:
    """The row's source with its citation where the target gives its own (the experiment's
    paper figure is shown beside the experiment already)."""
    cite = row.get("citation") or ""
    cite = "" if cite == row.get("paper_figure") else cite
    return f"{row['source']} ({cite})" if row["source"] and cite else (row["source"] or cite)


def _with_revisions(row) -> str:
    """The row's note followed by its recorded changes of bound."""
    revs = row.get("revisions") or []
    text = row["note"]
    if revs:
        text = (text + " " if text else "") + "Bound revised: " + "; ".join(revs) + "."
    return text


def report_markdown(results: dict, *, not_run: bool | str = False) -> str:
    """The reproduction report: a summary, then one table per paper (Markdown, no pandas).

    Every row is a :class:`Target` of a registered experiment with the value computed now, or
    (``not_run``, see :func:`report_rows`) a paper target the book does not run, with the
    reason. The Evidence column says which: ``live`` (computed in this build, by this process
    or by the run that cached it), ``by construction`` (an identity), ``regression guard`` (a
    bound set from the book's own value) or ``not run``; identities and guards are shown but
    not counted as reproductions, and a live target the book misses is counted as missed. A
    target whose bound was revised carries its revisions in the Note column. The
    experiment's run time is shown once, on its first row.
    """
    if not results and not not_run:
        return "*No experiments are registered yet.*"
    rows = report_rows(results, not_run=not_run)
    by_paper: dict[str, list[dict]] = {}
    order = {pid: k for k, pid in enumerate(PAPERS)}  # the book's order of the papers
    for r in sorted(rows, key=lambda r: order.get(_paper(r), len(order))):
        by_paper.setdefault(_paper(r), []).append(r)
    out = ["| Paper | Experiments | Live targets met | Regression guards | By construction | "
           "Not run | Bounds revised | Run time |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for pid, rs in by_paper.items():
        exps = list(dict.fromkeys(r["experiment"] for r in rs if r["experiment"]))
        secs = sum(results[e].seconds for e in exps if isinstance(results[e], Result))
        counted = [r for r in rs if r["ok"] is not None]  # not run / not computed apart
        live = [r for r in counted if r["evidence"] == "live"]
        ident = [r for r in counted if r["evidence"] == "by construction"]
        guard = [r for r in counted if r["evidence"] == "regression guard"]
        out.append(f"| {_cell(PAPERS.get(pid, pid))} ({pid}) | {len(exps)} | "
                   f"{sum(bool(r['ok']) for r in live)} / {len(live)} | "
                   f"{sum(bool(r['ok']) for r in guard)} / {len(guard)} | "
                   f"{sum(bool(r['ok']) for r in ident)} / {len(ident)} | "
                   f"{sum(r['evidence'] == 'not run' for r in rs)} | "
                   f"{sum(bool(r.get('revisions')) for r in rs)} | {secs:.0f} s |")
    for pid, rs in by_paper.items():
        out += ["", f"**{_cell(PAPERS.get(pid, pid))}** (arXiv {pid})", "",
                "| Experiment | Target | Paper | Book | Tolerance | ✓/✗ | Evidence | Source "
                "| Note |",
                "|---|---|---|---|---|:-:|---|---|---|"]
        seen = set()
        for r in rs:
            first = r["experiment"] not in seen
            seen.add(r["experiment"])
            exp = ""
            if not r["experiment"]:
                exp = f"— ({_cell(r['paper_figure'])})"
            elif first:
                t = "" if r["seconds"] is None else f", {r['seconds']:.1f} s"
                exp = f"`{r['experiment']}` ({_cell(r['paper_figure'])}{t})"
            out.append("| " + " | ".join([exp, _cell(r["what"]), _cell(r["paper"]),
                                          _cell(r["book"]), _cell(r["tolerance"]),
                                          _mark(r), r["evidence"], _cell(_source(r)),
                                          _cell(_with_revisions(r))]) + " |")
    return "\n".join(out)


def report_notes_html(results: dict) -> str:
    """The notes of :func:`report_notes` as one folded HTML list (each is also in its row)."""
    items = [f"<li><code>{_e(n)}</code> — {_e(r['what'])}: {_e(r['note'])}</li>" for n in results
             for r in ([] if isinstance(results[n], Exception) else results[n].verdicts())
             if r["note"]]
    if not items:
        return "<p><em>No target declares a difference.</em></p>"
    return (f'<details class="attn-report-notes"><summary>All notes ({len(items)}), one per '
            "target that differs</summary><ul>" + "".join(items) + "</ul></details>")


def _revised(results: dict) -> list[tuple[str, str, tuple[str, ...]]]:
    """``(experiment, what, revisions)`` of every target of ``results`` whose bound was
    revised."""
    return [(n, t.what, t.revisions) for n in results
            if not isinstance(results[n], Exception)
            for t in get(n).targets if t.revisions]


def report_revisions(results: dict) -> str:
    """A bulleted list of every revised bound: ``old bound -> new bound: why``, per target."""
    items = [f"- `{n}` — {what}: " + "; ".join(revs) for n, what, revs in _revised(results)]
    return "\n".join(items) if items else "*No bound was revised.*"


def report_revisions_html(results: dict) -> str:
    """The revised bounds of :func:`report_revisions` as one HTML list (each row of
    :func:`report_html` shows its own as well)."""
    items = [f"<li><code>{_e(n)}</code> — {_e(what)}:<ul>"
             + "".join(f"<li>{_e(r)}</li>" for r in revs) + "</ul></li>"
             for n, what, revs in _revised(results)]
    if not items:
        return "<p><em>No bound was revised after its results were seen.</em></p>"
    return f'<ul class="attn-report-revisions">{"".join(items)}</ul>'


def report_notes(results: dict) -> str:
    """A bulleted list of every target note (where the book deliberately differs)."""
    items = [f"- `{n}` — {r['what']}: {r['note']}" for n in results for r in
             ([] if isinstance(results[n], Exception) else results[n].verdicts()) if r["note"]]
    return "\n".join(items) if items else "*No target declares a difference.*"


# --- the report page as a dashboard (HTML) ------------------------------------------------

_STATUS = {  # data-status -> (filter label, mark shown in the row)
    "met": ("✓ met", "✓"),
    "missed": ("✗ missed", "✗"),
    "guard": ("✓ regression guard", "✓ <small>guard</small>"),
    "identity": ("✓ identity", "✓ <small>identity</small>"),
    "not-run": ("not run", "not&nbsp;run"),
    "not-computed": ("not computed", "–"),
}


def _status(row) -> str:
    """``met`` (a live target met: a reproduction), ``missed`` (any target missed, a live
    one included: counted, never hidden), ``guard``, ``identity`` or ``not-run``."""
    if row["evidence"] == "not run":
        return "not-run"
    if row["ok"] is None:
        return "not-computed"
    if not row["ok"]:
        return "missed"
    return {"live": "met", "regression guard": "guard"}.get(row["evidence"], "identity")


def _chapter_of(row) -> str:
    """The chapter file stem of a row ("" where none is known)."""
    if row.get("chapter"):
        return row["chapter"]
    return get(row["experiment"]).chapter if row["experiment"] else ""


def _chapter_label(stem: str) -> str:
    head = stem.split("_", 1)[0]
    return f"Ch. {int(head)}" if head.isdigit() and int(head) > 0 else (stem or "—")


def _row_anchor(row) -> str:
    if row["evidence"] == "not run":
        return report_anchor("not-run", row["key"])
    if not row["key"]:  # an experiment that raised, or one without targets
        return report_anchor(row["experiment"], "no-target")
    return report_anchor(row["experiment"], row["key"])


def _css(uid: str, chapters: list[str]) -> str:
    r = f"#{uid}"
    hide = [f"{r}:has(#{uid}-st-{s}:not(:checked)) tr[data-status=\"{s}\"]" for s in _STATUS]
    hide += [f"{r}:has(#{uid}-ch-{c}:checked) tbody tr:not([data-chapter=\"{c}\"])"
             for c in chapters]
    hide += [f"{r}:has(#{uid}-ch-{c}:checked) section:not(:has(tr[data-chapter=\"{c}\"]))"
             for c in chapters]  # a paper with no target in the chapter
    return f"""
{r} {{ --attn-line: rgba(127,127,127,.35); max-width: 100%; }}
{r} .attn-report-cards {{ display: grid; gap: .6rem;
  grid-template-columns: repeat(auto-fit, minmax(min(100%, 15rem), 1fr)); margin: .5rem 0 1rem; }}
{r} .attn-report-card {{ border: 1px solid var(--attn-line); border-radius: .4rem;
  padding: .5rem .7rem; }}
{r} .attn-report-card h4 {{ font-size: 1rem; margin: 0 0 .3rem; }}
{r} .attn-report-card dl {{ display: grid; grid-template-columns: auto auto; gap: 0 .8rem;
  margin: 0; font-size: .9rem; }}
{r} .attn-report-card dd {{ margin: 0; text-align: right; font-variant-numeric: tabular-nums; }}
{r} fieldset {{ border: 0; padding: 0; margin: .3rem 0; display: flex; flex-wrap: wrap;
  gap: .3rem; align-items: center; }}
{r} legend {{ float: left; font-weight: 600; margin-right: .4rem; padding: 0; }}
{r} fieldset label {{ display: inline-flex; align-items: center; gap: .25rem;
  min-height: 28px; padding: 0 .55rem; border: 1px solid var(--attn-line);
  border-radius: 1rem; cursor: pointer; font-size: .9rem; }}
{r} fieldset input {{ margin: 0; }}
{r} .attn-report-scroll {{ overflow-x: auto; max-width: 100%; margin: .3rem 0 .2rem;
  -webkit-overflow-scrolling: touch; }}
{r} table {{ display: table; border-collapse: separate; border-spacing: 0;
  font-size: .85rem; line-height: 1.35; width: 100%; margin: 0; overflow: visible; }}
{r} th, {r} td {{ border-bottom: 1px solid var(--attn-line); padding: .25rem .4rem;
  vertical-align: top; text-align: left; white-space: normal; }}
{r} th:first-child, {r} td:first-child {{ position: sticky; left: 0; z-index: 1;
  background: var(--pst-color-background, #fff); min-width: 11rem; max-width: 18rem;
  box-shadow: 1px 0 0 var(--attn-line); }}
{r} td.attn-paper {{ min-width: 4rem; max-width: 12rem; }}
{r} td.attn-numerics {{ min-width: 4.5rem; max-width: 6.5rem; font-size: .75rem; }}
{r} td.attn-num {{ white-space: nowrap; font-variant-numeric: tabular-nums; }}
{r} td:nth-child(2) {{ min-width: 2.2rem; }}
{r} td details {{ min-width: 5rem; max-width: 22rem; }}
{r} td details[open] {{ min-width: 16rem; }}
{r} td details summary {{ cursor: pointer; }}
{r} td details dl {{ margin: .2rem 0 0; }}
{r} td details dt {{ font-weight: 600; }}
{r} td details dd {{ margin: 0 0 .25rem; }}
{r} tr[data-status="missed"] td:nth-child(2) {{ color: #b00020; font-weight: 700; }}
{r} tr[data-status="met"] td:nth-child(2), {r} tr[data-status="identity"] td:nth-child(2),
{r} tr[data-status="guard"] td:nth-child(2) {{ color: #1b7f3b; }}
{r} td .attn-revised {{ display: block; font-size: .75rem; font-style: italic; }}
{r} tbody tr {{ scroll-margin-top: 5rem; counter-increment: attn-shown; }}
{r} tbody tr:target td {{ background: rgba(255, 213, 79, .35); }}
{r} section {{ counter-reset: attn-shown; }}
{r} .attn-report-shown {{ font-size: .8rem; opacity: .75; margin: 0 0 1.2rem; }}
{r} .attn-report-shown::before {{ content: "Rows shown: " counter(attn-shown) " of "; }}
@media (max-width: 576px) {{
  {r} table {{ font-size: .8rem; }}
  {r} th:first-child, {r} td:first-child {{ min-width: 8.5rem; max-width: 9.5rem; }}
  {r} th, {r} td {{ padding: .25rem .35rem; }}
}}
{", ".join(hide)} {{ display: none; }}
"""


def report_html(results: dict, *, not_run: bool | str = False, uid: str = "attn-report") -> str:
    """The reproduction report as one HTML dashboard (static: CSS filters, no script).

    A card per paper with its counts (live targets met, targets missed, regression guards and
    identities, which are not reproductions, not run, bounds revised), filters by
    status and by chapter (checkboxes and radio buttons that work on the static site, offline),
    then a table per paper whose first column stays in view while the table scrolls sideways.
    Every target row has the id ``ledger.report_anchor(experiment, key)`` (the chapters'
    "What this chapter verified" blocks link to it), a ``data-status`` (``met``, ``missed``,
    ``guard``, ``identity``, ``not-run``), a ``data-chapter`` (the chapter's file stem) and a
    ``data-revised`` (how many times its bound was revised, shown under its tolerance), and
    links back to its chapter; its source, evidence, note and revisions are folded in a
    ``<details>``.
    Rows are those of :func:`report_rows`.
    """
    rows = report_rows(results, not_run=not_run)
    if not rows:
        return "<p><em>No experiments are registered yet.</em></p>"
    order = {pid: k for k, pid in enumerate(PAPERS)}
    by_paper: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: order.get(_paper(r), len(order))):
        by_paper.setdefault(_paper(r), []).append(r)
    chapters = sorted({_chapter_of(r) for r in rows} - {""})
    used: set[str] = set()

    cards, tables = [], []
    for pid, rs in by_paper.items():
        title = PAPERS.get(pid, pid)
        sec_id = f"{uid}-paper-{pid}".replace(".", "-")
        counts = {s: sum(_status(r) == s for r in rs) for s in _STATUS}
        revised = sum(bool(r.get("revisions")) for r in rs)
        exps = list(dict.fromkeys(r["experiment"] for r in rs if r["experiment"]))
        secs = sum(results[e].seconds for e in exps if isinstance(results.get(e), Result))
        arxiv = (f' (<a href="https://arxiv.org/abs/{_e(pid)}">arXiv {_e(pid)}</a>)'
                 if _ARXIV_ID.fullmatch(pid) else "")
        cards.append(
            f'<div class="attn-report-card" data-paper="{_e(pid)}"><h4><a href="#{sec_id}">'
            f"{_e(title)}</a></h4><dl>"
            f"<dt>✓ targets met</dt><dd data-count=\"met\">{counts['met']}</dd>"
            f"<dt>✗ targets missed</dt><dd data-count=\"missed\">{counts['missed']}</dd>"
            f"<dt>✓ regression guards (not counted)</dt><dd data-count=\"guard\">"
            f"{counts['guard']}</dd>"
            f"<dt>✓ identities (not counted)</dt><dd data-count=\"identity\">"
            f"{counts['identity']}</dd>"
            f"<dt>not run</dt><dd data-count=\"not-run\">{counts['not-run']}</dd>"
            + (f"<dt>not computed at these settings</dt><dd data-count=\"not-computed\">"
               f"{counts['not-computed']}</dd>" if counts["not-computed"] else "") +
            f"<dt>targets in all</dt><dd data-count=\"rows\">{len(rs)}</dd>"
            f"<dt>bounds revised</dt><dd data-count=\"revised\">{revised}</dd>"
            f"<dt>experiments</dt><dd>{len(exps)}</dd>"
            f"<dt>run time</dt><dd>{secs:.0f} s</dd></dl></div>")
        body = []
        for r in rs:
            anchor = _row_anchor(r)
            k = 2
            while anchor in used:  # two targets of one experiment sharing a key
                anchor = f"{_row_anchor(r)}-{k}"
                k += 1
            used.add(anchor)
            status = _status(r)
            stem = _chapter_of(r)
            chap = (f'<a href="{_e(stem)}.html">{_e(_chapter_label(stem))}</a>' if stem
                    else "—")
            exp = r["experiment"] or "not run by the book"
            t = "" if r["seconds"] is None else f", run in {r['seconds']:.1f} s"
            info = [("Experiment", f"<code>{_e(exp)}</code> ({_e(r['paper_figure'])}{t})"
                                   + (f", target <code>{_e(r['key'])}</code>" if r["key"] else "")),
                    ("Evidence", _e(r["evidence"])), ("Source", _e(r["source"] or "—"))]
            if r.get("citation"):
                info.append(("Reference", _e(r["citation"])))
            if r["note"]:
                info.append(("Note" if status != "not-run" else "Why not run", _e(r["note"])))
            revs = r.get("revisions") or []
            if revs:
                info.append(("Bound revised", "<br>".join(_e(x) for x in revs)))
            extra = [w for w, on in (("note", r["note"]), ("revised bound", revs)) if on]
            folded = ("<details><summary>"
                      + _e(r["source"] or r["evidence"]) + "".join(f" + {w}" for w in extra)
                      + "</summary><dl>" + "".join(f"<dt>{a}</dt><dd>{b}</dd>" for a, b in info)
                      + "</dl></details>")
            tol = _e(r["tolerance"] or r.get("bound", ""))
            if revs:
                tol += (f'<span class="attn-revised">revised {len(revs)}×, was '
                        f"{_e(revs[0].split('->', 1)[0].strip())}</span>")
            body.append(
                f'<tr id="{_e(anchor)}" data-status="{status}" data-chapter="{_e(stem)}" '
                f'data-evidence="{_e(r["evidence"])}" data-revised="{len(revs)}">'
                f"<td>{_e(r['what'])}</td>"
                f"<td>{_STATUS[status][1]}</td>"
                f'<td class="attn-num">{_e(r["book"])}</td>'
                f'<td class="attn-numerics">{_e(r.get("numerics") or "—")}</td>'
                f'<td class="attn-paper">{_e(r["paper"])}</td><td>{tol}</td><td>{chap}</td>'
                f"<td>{folded}</td></tr>")
        tables.append(
            f'<section id="{sec_id}" data-paper="{_e(pid)}"><h3>{_e(title)}{arxiv}</h3>'
            '<div class="attn-report-scroll" tabindex="0"><table><thead><tr>'
            "<th>Target</th><th>✓/✗</th><th>Book</th><th>Numerics</th><th>Paper</th>"
            "<th>Tolerance</th>"
            "<th>Chapter</th><th>Source, note</th></tr></thead><tbody>\n"
            + "\n".join(body) + "\n</tbody></table></div>"
            f'<p class="attn-report-shown">{len(rs)}</p></section>')

    status_boxes = "".join(
        f'<label><input type="checkbox" id="{uid}-st-{s}" checked> {_e(lab)}</label>'
        for s, (lab, _) in _STATUS.items()
        if s != "not-computed" or any(_status(r) == s for r in rows))
    chapter_radios = (f'<label><input type="radio" name="{uid}-ch" id="{uid}-ch-all" checked>'
                      " all</label>" + "".join(
                          f'<label><input type="radio" name="{uid}-ch" id="{uid}-ch-{_e(c)}">'
                          f" {_e(_chapter_label(c))}</label>" for c in chapters))
    return (f'<div class="attn-report" id="{uid}">'
            f"<style>{_css(uid, chapters)}</style>"
            '<div class="attn-report-cards">' + "".join(cards) + "</div>"
            f'<form class="attn-report-filters" aria-label="Filter the targets">'
            f"<fieldset><legend>Show</legend>{status_boxes}</fieldset>"
            f"<fieldset><legend>Chapter</legend>{chapter_radios}</fieldset></form>"
            + "".join(tables) + "</div>")
