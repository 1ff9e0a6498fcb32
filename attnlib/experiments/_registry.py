"""Named, scalable reproductions of the papers' experiments.

Every official experiment is one function registered with :func:`experiment`. It takes the
paper's settings as defaults (plus ``trials``, ``steps``, ``seed``, ``device`` where they make
sense) and returns ``(numbers, arrays)``: a flat dict of scalar results, and a dict of
arrays behind its figure. :func:`run` wraps the call, caches the result on disk (keyed by the
experiment, its settings and attnlib's own source, so a library change recomputes) and returns
a :class:`Result`, which can check its reproduction targets and draw its figure.

The reproduction targets live here, beside each experiment, with their source; the book's
reproduction report is generated from them. See the chapter "Reproduction report".
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

SOURCES = ("paper", "official code", "re-simulation", "suggested")


@dataclass(frozen=True)
class Target:
    """One reproduction target: the accepted interval ``[lo, hi]`` for ``numbers[key]``.

    Parameters
    ----------
    key : str
        Entry of :attr:`Result.numbers` that is checked.
    what : str
        One line saying what is checked, in the book's words.
    paper : str
        The paper's, official code's or re-simulation's value, as text (``"0.99010"``,
        ``"18–21"``, ``"{1, 2}"``).
    lo, hi : float
        Accepted interval for the book's value (inclusive). Booleans are numbers 0/1.
    tolerance : str
        The tolerance in words, as the summary gives it (``"±1e-4"``, ``"≥ 0.99"``).
    source : str
        One of ``"paper"``, ``"official code"``, ``"re-simulation"``, ``"suggested"``.
    note : str
        Where the book deliberately differs from the official notebook, say so here.
    """

    key: str
    what: str
    paper: str
    lo: float = -math.inf
    hi: float = math.inf
    tolerance: str = ""
    source: str = "paper"
    note: str = ""

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, got {self.source!r}")
        if self.lo > self.hi:
            raise ValueError(f"target {self.key!r}: lo={self.lo} > hi={self.hi}")

    def bound(self) -> str:
        """The accepted interval in words: ``">= 0.99"``, ``"<= 1e-06"``, ``"in [a, b]"``."""
        lo, hi = _fmt_value(self.lo), _fmt_value(self.hi)
        if self.lo == self.hi:
            return f"== {lo}"
        if math.isinf(self.lo) and math.isinf(self.hi):
            return "any value"
        if math.isinf(self.lo):
            return f"<= {hi}"
        if math.isinf(self.hi):
            return f">= {lo}"
        return f"in [{lo}, {hi}]"

    def ok(self, value) -> bool:
        """Whether ``value`` lies in ``[lo, hi]`` (NaN never does)."""
        value = float(value)
        return (not math.isnan(value)) and self.lo <= value <= self.hi


@dataclass(frozen=True)
class Experiment:
    """A registered experiment: the function, its figure, and its targets."""

    name: str
    func: Callable
    paper: str  # e.g. "2306.13596 Fig. 1 (E1)"
    chapter: str  # book chapter file stem, e.g. "03_local_global"
    title: str
    targets: tuple[Target, ...] = ()
    plot: Callable | None = None  # plot(result) -> matplotlib Figure

    @property
    def defaults(self) -> dict:
        sig = inspect.signature(self.func)
        return {
            k: p.default for k, p in sig.parameters.items() if p.default is not inspect._empty
        }

    @property
    def scale(self) -> str:
        d = self.defaults
        keys = [k for k in ("trials", "steps", "n", "T", "d") if k in d]
        return ", ".join(f"{k}={d[k]}" for k in keys)


@dataclass
class Result:
    """What :func:`run` returns: settings, numbers, arrays, and the time it took."""

    name: str
    params: dict
    numbers: dict
    arrays: dict = field(default_factory=dict)
    seconds: float = 0.0
    cached: bool = False
    recorded: bool = False  # read from attnlib/experiments/recorded/ (see :func:`recorded`)

    @property
    def experiment(self) -> Experiment:
        return get(self.name)

    def check(self) -> list[dict]:
        """One row per target: what, paper value, book value, tolerance, ok, source, note."""
        rows = []
        for tg in self.experiment.targets:
            if tg.key not in self.numbers:
                raise KeyError(f"experiment {self.name!r} did not compute target {tg.key!r}")
            val = self.numbers[tg.key]
            rows.append(
                dict(experiment=self.name, key=tg.key, what=tg.what, paper=tg.paper,
                     book=float(val), tolerance=tg.tolerance, ok=tg.ok(val),
                     source=tg.source, note=tg.note)
            )
        return rows

    def require(self, *keys):
        """Check the declared targets ``keys``; print one line each; return their values.

        Each line reads ``✓ key = value  target >= lo  paper P  [source, paper figure]``. The
        bound is the experiment's declared :class:`Target` (the one source of truth), so a
        chapter writes ``res.require("corr")`` instead of restating the bound as a literal.

        Returns
        -------
        The value of the one key, or a tuple of values in the order of ``keys``.

        Raises
        ------
        KeyError
            A key that is not a declared target (the message lists the declared ones).
        AssertionError
            A target that is not met, naming the target, its value and its bound (all lines
            are printed first).
        """
        if not keys:
            raise TypeError("require: name at least one declared target, e.g. "
                            "res.require('corr')")
        exp = self.experiment
        declared = [t.key for t in exp.targets]
        for key in keys:
            if key not in declared:
                raise KeyError(f"experiment {self.name!r} declares no target {key!r}; "
                               f"declared: {', '.join(declared) or '(none)'}")
        failed, values = [], []
        for key in keys:
            if key not in self.numbers:
                raise KeyError(f"experiment {self.name!r} did not compute target {key!r}")
            value = self.numbers[key]
            values.append(value)
            for tg in exp.targets:
                if tg.key != key:
                    continue
                ok = tg.ok(value)
                print(f"{'✓' if ok else '✗'} {key} = {_fmt_value(value)}  target "
                      f"{tg.bound()}  paper {tg.paper}  [{tg.source}, {exp.paper}]")
                if not ok:
                    failed.append(f"{key} = {_fmt_value(value)} (target {tg.bound()}: "
                                  f"{tg.what})")
        if failed:
            raise AssertionError(f"experiment {self.name!r} misses its target(s): "
                                 + "; ".join(failed))
        return values[0] if len(values) == 1 else tuple(values)

    @property
    def passed(self) -> bool:
        return all(r["ok"] for r in self.check())

    def figure(self):
        """The experiment's figure (matplotlib), drawn from the stored arrays."""
        plot = self.experiment.plot
        if plot is None:
            raise ValueError(f"experiment {self.name!r} has no figure")
        return plot(self)

    def summary(self) -> str:
        """A one-screen text summary: settings, numbers, targets."""
        lines = [f"{self.name}: {self.experiment.title}  [{self.experiment.paper}]",
                 "settings: " + ", ".join(f"{k}={v}" for k, v in self.params.items()),
                 f"time: {self.seconds:.1f} s" + (" (cached)" if self.cached else "")]
        for r in self.check():
            mark = "✓" if r["ok"] else "✗"
            lines.append(f"  {mark} {r['what']}: book {r['book']:.6g}  paper {r['paper']}"
                         f"  ({r['tolerance']})")
        return "\n".join(lines)

    # -- persistence -------------------------------------------------------------------
    def save(self, folder) -> Path:
        """Write ``NAME.json`` (settings, numbers, targets) and ``NAME.npz`` (arrays)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        meta = dict(name=self.name, params=_jsonable(self.params),
                    numbers={k: float(v) for k, v in self.numbers.items()},
                    seconds=self.seconds, targets=self.check(),
                    attnlib_source=source_hash(),
                    date=time.strftime("%Y-%m-%d", time.gmtime()))
        # arrays first, the JSON last, each renamed into place: the JSON's presence is what
        # marks a cache hit, so a notebook running at the same time never reads half a result
        tmp = f".{os.getpid()}.tmp"
        with open(folder / f"{self.name}.npz{tmp}", "wb") as f:
            np.savez_compressed(f, **{k: np.asarray(v) for k, v in self.arrays.items()})
        os.replace(folder / f"{self.name}.npz{tmp}", folder / f"{self.name}.npz")
        (folder / f"{self.name}.json{tmp}").write_text(json.dumps(meta, indent=2, default=float))
        os.replace(folder / f"{self.name}.json{tmp}", folder / f"{self.name}.json")
        return folder / f"{self.name}.json"

    @classmethod
    def load(cls, folder, name) -> Result:
        folder = Path(folder)
        meta = json.loads((folder / f"{name}.json").read_text())
        with np.load(folder / f"{name}.npz") as z:
            arrays = {k: z[k] for k in z.files}
        return cls(name=name, params=meta["params"], numbers=meta["numbers"], arrays=arrays,
                   seconds=meta["seconds"], cached=True)


_REGISTRY: dict[str, Experiment] = {}

RECORDED = Path(__file__).with_name("recorded")


def recorded(name: str) -> Result:
    """The paper-scale result of ``name`` recorded with attnlib (no arrays).

    Some experiments take minutes to an hour at the paper's full scale (for example the
    multi-token experiment of chapter 7, which trains tens of thousands of candidate runs).
    Their default-scale result is recorded with ``python -m attnlib reproduce NAME --out DIR``
    and shipped as ``attnlib/experiments/recorded/NAME.json`` (settings, numbers, run time).
    :meth:`Result.check` re-evaluates the targets declared *now* against the recorded numbers,
    so a change of a target is still checked; rerun the command to recompute the numbers.
    """
    path = RECORDED / f"{name}.json"
    if not path.exists():
        raise ValueError(f"name: no recorded result {name!r} in {RECORDED}; recorded ones: "
                         f"{', '.join(recorded_names()) or 'none'}")
    meta = json.loads(path.read_text())
    return Result(name=meta["name"], params=meta["params"], numbers=meta["numbers"], arrays={},
                  seconds=meta["seconds"], cached=True, recorded=True)


def recorded_names() -> list[str]:
    """Experiments with a recorded paper-scale result shipped with attnlib."""
    return sorted(f.stem for f in RECORDED.glob("*.json"))


def experiment(name: str, *, paper: str, chapter: str, title: str,
               targets: tuple[Target, ...] | list[Target] = (), plot: Callable | None = None):
    """Register ``func(**settings) -> (numbers, arrays)`` as the experiment ``name``."""

    def deco(func):
        if name in _REGISTRY and _REGISTRY[name].func.__qualname__ != func.__qualname__:
            raise ValueError(f"experiment {name!r} registered twice")
        _REGISTRY[name] = Experiment(name=name, func=func, paper=paper, chapter=chapter,
                                     title=title, targets=tuple(targets), plot=plot)
        return func

    return deco


def names() -> list[str]:
    """Names of all registered experiments, in registration order."""
    return list(_REGISTRY)


_all_names = names  # for functions whose argument is called ``names``


def get(name: str) -> Experiment:
    """The registered experiment ``name``; a ValueError lists the valid names otherwise."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown experiment {name!r}; expected one of: {', '.join(names())}")
    return _REGISTRY[name]


def source_hash() -> str:
    """SHA-256 of attnlib's own source files: part of every cache key."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def cache_dir() -> Path:
    """Where results are cached: ``$ATTNLIB_CACHE`` or ``~/.cache/attnlib``."""
    return Path(os.environ.get("ATTNLIB_CACHE", Path.home() / ".cache" / "attnlib"))


NOT_IN_KEY = frozenset({"progress"})  # settings that do not change a result


def run(name: str, *, cache: bool = True, **settings) -> Result:
    """Run experiment ``name`` with its defaults overridden by ``settings``.

    The result is cached on disk under :func:`cache_dir` keyed by (name, settings, attnlib's
    source hash); settings that do not change the result (``progress``) are not part of the
    key. ``cache=False`` recomputes. Unknown settings raise ValueError.
    """
    exp = get(name)
    defaults = exp.defaults
    unknown = set(settings) - set(defaults)
    if unknown:
        raise ValueError(f"experiment {name!r} has no setting(s) {sorted(unknown)}; "
                         f"expected some of {sorted(defaults)}")
    params = {**defaults, **settings}
    same = {k: v for k, v in params.items() if k not in NOT_IN_KEY}  # settings that matter
    key = hashlib.sha256(json.dumps([name, _jsonable(same), source_hash()],
                                    sort_keys=True, default=str).encode()).hexdigest()[:20]
    folder = cache_dir() / key
    if cache and (folder / f"{name}.json").exists():
        return Result.load(folder, name)
    t0 = time.perf_counter()
    numbers, arrays = exp.func(**params)
    res = Result(name=name, params=params, numbers=dict(numbers),
                 arrays={k: _to_numpy(v) for k, v in dict(arrays).items()},
                 seconds=time.perf_counter() - t0)
    if cache:
        res.save(folder)
    return res


def _to_numpy(v):
    if hasattr(v, "detach"):
        v = v.detach().cpu().numpy()
    return np.asarray(v)


def _jsonable(params: dict) -> dict:
    out = {}
    for k, v in params.items():
        if isinstance(v, (int, float, str, bool)) or v is None:
            out[k] = v
        elif isinstance(v, (list, tuple)):
            out[k] = [x if isinstance(x, (int, float, str, bool)) else str(x) for x in v]
        else:
            out[k] = str(v)
    return out


# -- running many, and the reproduction report ------------------------------------------------
PAPERS = {
    "2306.13596": "Max-Margin Token Selection in Attention Mechanism",
    "2308.16898": "Transformers as Support Vector Machines",
    "2410.14581": "Optimizing Attention with Mirror Descent: Generalized Max-Margin Token "
                  "Selection",
}
_ARXIV = re.compile(r"\d{4}\.\d{4,5}")


def paper_of(name: str) -> str:
    """The arXiv id in experiment ``name``'s ``paper`` field (``"other"`` if none)."""
    m = _ARXIV.search(get(name).paper)
    return m.group(0) if m else "other"


def run_all(names=None, *, paper: str | None = None, chapter: str | None = None,
            progress: bool = True, use_recorded: bool = False, **run_kw) -> dict:
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
    use_recorded : bool
        Take the shipped paper-scale result (:func:`recorded`) for the experiments that have
        one instead of recomputing them (the book build does this for runs too long for it).
    **run_kw
        Passed to :func:`run` (e.g. ``cache=False``).

    Returns
    -------
    dict name -> :class:`Result`, or the exception the experiment raised.
    """
    todo = [n for n in (_all_names() if names is None else names)
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
            out[n] = recorded(n) if use_recorded and n in recorded_names() else run(n, **kw)
        except Exception as e:  # noqa: BLE001 - the report shows the failure in its row
            out[n] = e
    return out


def _fmt_value(v) -> str:
    """A number as the checks print it (6 significant digits, integers as integers)."""
    try:
        v = float(v)
    except (TypeError, ValueError):
        return str(v)
    if math.isnan(v) or math.isinf(v):
        return str(v)
    return str(int(v)) if v == int(v) and abs(v) < 1e15 else f"{v:.6g}"


def _fmt(v) -> str:
    v = float(v)
    if math.isnan(v):
        return "NaN"
    return str(int(v)) if v == int(v) and abs(v) < 1e15 else f"{v:.4g}"


def _cell(text) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def report_rows(results: dict) -> list[dict]:
    """One row per target of every result (an exception gives one failed row)."""
    rows = []
    for name, res in results.items():
        exp = get(name)
        if isinstance(res, Exception):
            rows.append(dict(experiment=name, paper_figure=exp.paper, key="", what="(the "
                             f"experiment raised {type(res).__name__}: {res})", paper="",
                             book="", tolerance="", ok=False, source="", note="", seconds=None))
            continue
        for r in res.check():
            rows.append({**r, "paper_figure": exp.paper, "book": _fmt(r["book"]),
                         "seconds": res.seconds})
        if not exp.targets:
            rows.append(dict(experiment=name, paper_figure=exp.paper, key="", what="(no "
                             "reproduction target declared)", paper="", book="", tolerance="",
                             ok=False, source="", note="", seconds=res.seconds))
    return rows


def report_markdown(results: dict) -> str:
    """The reproduction report: a summary, then one table per paper (Markdown, no pandas).

    Every row is a :class:`Target` of a registered experiment with the value computed now;
    the experiment's run time is shown once, on its first row.
    """
    if not results:
        return "*No experiments are registered yet.*"
    rows = report_rows(results)
    by_paper: dict[str, list[dict]] = {}
    order = {pid: k for k, pid in enumerate(PAPERS)}  # the book's order of the papers
    for r in sorted(rows, key=lambda r: order.get(paper_of(r["experiment"]), len(order))):
        by_paper.setdefault(paper_of(r["experiment"]), []).append(r)
    out = ["| Paper | Experiments | Targets met | Run time |", "|---|---:|---:|---:|"]
    for pid, rs in by_paper.items():
        exps = list(dict.fromkeys(r["experiment"] for r in rs))
        secs = sum(results[e].seconds for e in exps if isinstance(results[e], Result))
        out.append(f"| {_cell(PAPERS.get(pid, pid))} ({pid}) | {len(exps)} | "
                   f"{sum(r['ok'] for r in rs)} / {len(rs)} | {secs:.0f} s |")
    for pid, rs in by_paper.items():
        out += ["", f"**{_cell(PAPERS.get(pid, pid))}** (arXiv {pid})", "",
                "| Experiment | Target | Paper | Book | Tolerance | ✓/✗ | Source | Note |",
                "|---|---|---|---|---|:-:|---|---|"]
        seen = set()
        for r in rs:
            first = r["experiment"] not in seen
            seen.add(r["experiment"])
            exp = ""
            if first:
                t = "" if r["seconds"] is None else f", {r['seconds']:.1f} s"
                if isinstance(results[r["experiment"]], Result) and \
                        results[r["experiment"]].recorded:
                    t += ", recorded run"
                exp = f"`{r['experiment']}` ({_cell(r['paper_figure'])}{t})"
            out.append("| " + " | ".join([exp, _cell(r["what"]), _cell(r["paper"]),
                                          _cell(r["book"]), _cell(r["tolerance"]),
                                          "✓" if r["ok"] else "✗", _cell(r["source"]),
                                          _cell(r["note"])]) + " |")
    return "\n".join(out)


def report_notes(results: dict) -> str:
    """A bulleted list of every target note (where the book deliberately differs)."""
    items = [f"- `{n}` — {r['what']}: {r['note']}" for n in results for r in
             ([] if isinstance(results[n], Exception) else results[n].check()) if r["note"]]
    return "\n".join(items) if items else "*No target declares a difference.*"
