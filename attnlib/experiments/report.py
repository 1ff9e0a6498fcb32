"""The reproduction report: run many experiments, then one table row per declared target.

:func:`run_all` runs experiments (cached, never stopping at a failure); :func:`report_markdown`
and :func:`report_notes` turn the results into the book's report page. See the chapter
"Reproduction report".
"""

from __future__ import annotations

import math

from .registry import PAPERS, arxiv_id, get, names, not_run_targets, paper_of
from .result import Result, run

__all__ = ["run_all", "report_rows", "report_markdown", "report_notes"]


def run_all(names=None, *, paper: str | None = None, chapter: str | None = None,
            progress: bool = True, **run_kw) -> dict:
    """Run several experiments at their defaults (cached); never stops at a failure.

    Parameters
    ----------
    names : list of str, optional
        Default: every registered experiment (of ``paper`` if given).
    paper : str, optional
        Only the experiments of this arXiv id, e.g. ``"2306.13596"``.
    chapter : str, optional
        Only the experiments of this chapter (file stem), e.g. ``"05_w_vs_kq"``.
    progress : bool
        A tqdm bar over the experiments.
    **run_kw
        Passed to :func:`run` (e.g. ``cache=False``).

    Returns
    -------
    dict name -> :class:`Result`, or the exception the experiment raised.
    """
    todo = [n for n in (_registered() if names is None else names)
            if (paper is None or paper_of(n) == paper)
            and (chapter is None or get(n).chapter == chapter)]
    out = {}
    it = todo
    if progress and todo:
        from tqdm.auto import tqdm

        it = tqdm(todo, desc="experiments")
    for n in it:
        kw = dict(run_kw)
        if "progress" in get(n).defaults:  # the experiment's own bars follow ``progress``
            kw.setdefault("progress", progress)
        try:
            out[n] = run(n, **kw)
        except Exception as e:  # noqa: BLE001 - the report shows the failure in its row
            out[n] = e
    return out


_registered = names  # the argument of run_all is called ``names``


def _fmt(v) -> str:
    v = float(v)
    if math.isnan(v):
        return "NaN"
    return str(int(v)) if v == int(v) and abs(v) < 1e15 else f"{v:.4g}"


def _cell(text) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def report_rows(results: dict, *, not_run: bool | str = False) -> list[dict]:
    """One row per target of every result (an exception gives one failed row).

    Each row's ``evidence`` is ``"live"`` (computed in this build), ``"by construction"`` (an
    identity, not a reproduction) or ``"not run"``. ``not_run=True`` adds a row for every
    declared not-run target (``registry.not_run``) of the papers;
    a chapter stem (``"10_real_data"``) adds only that chapter's.
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
        for r in res.check():
            rows.append({**r, "paper_figure": exp.paper, "book": _fmt(r["book"]),
                         "seconds": res.seconds})
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
                                 evidence="not run"))
    return rows


def _paper(row) -> str:
    return arxiv_id(row["paper_figure"])


def _mark(row) -> str:
    if row["evidence"] == "not run":
        return "not run"
    return ("✓" if row["ok"] else "✗") + ("" if row["evidence"] == "live" else " (identity)")


def report_markdown(results: dict, *, not_run: bool | str = False) -> str:
    """The reproduction report: a summary, then one table per paper (Markdown, no pandas).

    Every row is a :class:`Target` of a registered experiment with the value computed now, or
    (``not_run``, see :func:`report_rows`) a paper target the book does not run, with the
    reason. The Evidence column says which: ``live`` (computed in this build, by this process
    or by the run that cached it), ``by construction`` (an identity, shown but not counted as
    a reproduction) or ``not run``. The experiment's run time is shown once, on its first row.
    """
    if not results and not not_run:
        return "*No experiments are registered yet.*"
    rows = report_rows(results, not_run=not_run)
    by_paper: dict[str, list[dict]] = {}
    order = {pid: k for k, pid in enumerate(PAPERS)}  # the book's order of the papers
    for r in sorted(rows, key=lambda r: order.get(_paper(r), len(order))):
        by_paper.setdefault(_paper(r), []).append(r)
    out = ["| Paper | Experiments | Live targets met | By construction | Not run | Run time |",
           "|---|---:|---:|---:|---:|---:|"]
    for pid, rs in by_paper.items():
        exps = list(dict.fromkeys(r["experiment"] for r in rs if r["experiment"]))
        secs = sum(results[e].seconds for e in exps if isinstance(results[e], Result))
        live = [r for r in rs if r["evidence"] == "live"]
        ident = [r for r in rs if r["evidence"] == "by construction"]
        out.append(f"| {_cell(PAPERS.get(pid, pid))} ({pid}) | {len(exps)} | "
                   f"{sum(bool(r['ok']) for r in live)} / {len(live)} | "
                   f"{sum(bool(r['ok']) for r in ident)} / {len(ident)} | "
                   f"{sum(r['evidence'] == 'not run' for r in rs)} | {secs:.0f} s |")
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
                                          _mark(r), r["evidence"], _cell(r["source"]),
                                          _cell(r["note"])]) + " |")
    return "\n".join(out)


def report_notes(results: dict) -> str:
    """A bulleted list of every target note (where the book deliberately differs)."""
    items = [f"- `{n}` — {r['what']}: {r['note']}" for n in results for r in
             ([] if isinstance(results[n], Exception) else results[n].check()) if r["note"]]
    return "\n".join(items) if items else "*No target declares a difference.*"
