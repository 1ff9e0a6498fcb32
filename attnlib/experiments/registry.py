"""The registry of named experiments: :class:`Target`, :class:`Experiment`, :func:`experiment`.

Every official experiment is one function registered with :func:`experiment`. It takes the
paper's settings as typed defaults (plus ``trials``, ``steps``, ``seed``, ``device`` where they
make sense; see ``attnlib.experiments.settings``) and returns ``(numbers, arrays)``: a flat
dict of scalar results, and a dict of arrays behind its figure. The reproduction targets live
beside each experiment, with their source; the book's reproduction report is generated from
them. See the chapter "Reproduction report".
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .settings import Setting, check_settings, settings_of

__all__ = ["SOURCES", "EVIDENCE", "PAPERS", "Target", "Experiment", "experiment", "names", "get",
           "unregister", "paper_of", "arxiv_id", "format_value", "parse_bound", "bound_snapshot",
           "unrecorded_changes", "NotRun",
           "not_run", "not_run_targets"]

SOURCES = ("paper", "official code", "re-simulation", "suggested")
EVIDENCE = ("live", "by construction", "regression guard")

PAPERS = {
    "2306.13596": "Max-Margin Token Selection in Attention Mechanism",
    "2308.16898": "Transformers as Support Vector Machines",
    "2410.14581": "Optimizing Attention with Mirror Descent: Generalized Max-Margin Token "
                  "Selection",
}
_ARXIV = re.compile(r"\d{4}\.\d{4,5}")
_TRACKER = re.compile(r"\bissues?\b|#\d+|\bPR\b|pull request", re.I)


def format_value(v) -> str:
    """A number as the checks print it (6 significant digits, integers as integers)."""
    try:
        v = float(v)
    except (TypeError, ValueError):
        return str(v)
    if math.isnan(v) or math.isinf(v):
        return str(v)
    return str(int(v)) if v == int(v) and abs(v) < 1e15 else f"{v:.6g}"


_NUM = r"\s*([-+]?(?:inf|nan|\d+\.?\d*(?:e[-+]?\d+)?|\.\d+(?:e[-+]?\d+)?))\s*"
_BOUND_FORMS = (  # (pattern, (lo, hi) from the match)
    (re.compile(r"(?:>=|≥|>)" + _NUM, re.I), lambda m: (float(m[1]), math.inf)),
    (re.compile(r"(?:<=|≤|<)" + _NUM, re.I), lambda m: (-math.inf, float(m[1]))),
    (re.compile(r"(?:==|=)" + _NUM, re.I), lambda m: (float(m[1]), float(m[1]))),
    (re.compile(r"(?:in\s*)?\[" + _NUM + "," + _NUM + r"\]", re.I),
     lambda m: (float(m[1]), float(m[2]))),
    (re.compile(r"any value", re.I), lambda m: (-math.inf, math.inf)),
)


def parse_bound(text: str) -> tuple[float, float]:
    """The interval ``(lo, hi)`` of a bound written as :meth:`Target.bound` writes it.

    ``">= 0.99"`` (or ``"≥ 0.99"``), ``"<= 1e-06"``, ``"== 1"``, ``"in [0, 0.9]"``,
    ``"any value"``; a strict ``>``/``<`` reads as its closed form, and a typeset minus
    ``−`` as ``-``.

    Raises
    ------
    ValueError
        Text in none of these forms.
    """
    t = str(text).strip().replace("−", "-")  # a typeset minus sign reads as "-"
    for pattern, interval in _BOUND_FORMS:
        m = pattern.fullmatch(t)
        if m:
            return interval(m)
    raise ValueError(f"bound: expected '>= x', '<= x', '== x', 'in [a, b]' or 'any value', "
                     f"got {text!r}")


@dataclass(frozen=True)
class Target:
    """One reproduction target: the accepted interval ``[lo, hi]`` for ``numbers[key]``.

    Parameters
    ----------
    key : str
        Entry of ``Result.numbers`` that is checked.
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
    evidence : str
        ``"live"`` (default): the value is computed by the experiment and could miss the bound
        if the claim were false. ``"by construction"``: an identity that holds whatever the
        algorithm does (shown as such; the report does not count it as a reproduction).
        ``"regression guard"``: a bound set from the book's own observed value (not from a
        paper or an official number); it guards the code against a change, and the report
        does not count it as a reproduction.
    revisions : tuple of str
        Every change of ``lo``/``hi`` after results were seen, one line each in the form
        ``"old bound -> new bound: why"``. The report shows them beside the target; a bound
        changes only with its reason recorded here.
    when : callable, optional
        A conditional target: ``when(settings) -> bool`` over the experiment's checked
        settings (a dict) says whether these settings compute it (``None``: every allowed
        setting does). Where it is false the result says "not computed at these settings"
        instead of checking the target.
    condition : str
        ``when`` in words ("radii include 1 and 8"), shown where the target is not computed;
        required with ``when``.
    citation : str
        Where the reference value comes from: the paper and its table or figure
        (``"2306.13596 Fig. 1 (E1)"``), or ``"book"`` for a control the book sets itself.
        Empty: the experiment's ``paper`` field. Never a tracker reference.
    """

    key: str
    what: str
    paper: str
    lo: float = -math.inf
    hi: float = math.inf
    tolerance: str = ""
    source: str = "paper"
    note: str = ""
    evidence: str = "live"
    revisions: tuple[str, ...] = ()
    when: Callable[[dict], bool] | None = field(default=None, compare=False)
    condition: str = ""
    citation: str = ""

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, got {self.source!r}")
        if self.evidence not in EVIDENCE:
            raise ValueError(f"evidence must be one of {EVIDENCE}, got {self.evidence!r}")
        if self.lo > self.hi:
            raise ValueError(f"target {self.key!r}: lo={self.lo} > hi={self.hi}")
        if isinstance(self.revisions, str) or not all(
                isinstance(r, str) and "->" in r and ":" in r for r in self.revisions):
            raise ValueError(f"target {self.key!r}: revisions must be a tuple of lines "
                             f"'old bound -> new bound: why', got {self.revisions!r}")
        if self.when is not None and not callable(self.when):
            raise ValueError(f"target {self.key!r}: when must be a predicate over the "
                             f"settings, got {self.when!r}")
        if (self.when is None) != (not str(self.condition).strip()):
            raise ValueError(f"target {self.key!r}: a conditional target gives both when= "
                             "(a predicate over the settings) and condition= (it in words)")
        if _TRACKER.search(str(self.citation)):
            raise ValueError(f"target {self.key!r}: citation names the paper and its table "
                             f"or figure, or 'book', not a tracker entry; got "
                             f"{self.citation!r}")

    def applies(self, settings: dict) -> bool:
        """Whether ``settings`` (an experiment's checked settings) compute this target."""
        return self.when is None or bool(self.when(settings))

    def history(self) -> list[tuple[tuple[float, float], tuple[float, float], str]]:
        """The recorded revisions as ``((old_lo, old_hi), (new_lo, new_hi), why)``, oldest first.

        Raises
        ------
        ValueError
            A revision whose bounds are not in the form of ``parse_bound``.
        """
        out = []
        for line in self.revisions:
            old, rest = line.split("->", 1)
            new, why = rest.split(":", 1)
            out.append((parse_bound(old), parse_bound(new), why.strip()))
        return out

    def revision_problems(self) -> list[str]:
        """Where the recorded revisions disagree with the bound (empty when they agree).

        The revisions must chain (each one starts from the bound the previous one set), each
        must change the bound and say why, and the last must end at ``[lo, hi]``: a bound
        that differs from its recorded history is a problem.
        """
        try:
            hist = self.history()
        except ValueError as err:
            return [f"{self.key}: {err}"]
        problems = []
        for k, (old, new, why) in enumerate(hist):
            if not why:
                problems.append(f"{self.key}: revision {k + 1} gives no reason")
            if _same(old, new):
                problems.append(f"{self.key}: revision {k + 1} does not change the bound")
            if k and not _same(hist[k - 1][1], old):
                problems.append(f"{self.key}: revision {k + 1} starts from "
                                f"{_interval(old)}, not from {_interval(hist[k - 1][1])}")
        if hist and not _same(hist[-1][1], (self.lo, self.hi)):
            problems.append(f"{self.key}: the bound is {self.bound()}, but its last revision "
                            f"sets {_interval(hist[-1][1])}")
        return problems

    def bound(self) -> str:
        """The accepted interval in words: ``">= 0.99"``, ``"<= 1e-06"``, ``"in [a, b]"``."""
        lo, hi = format_value(self.lo), format_value(self.hi)
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


def _same(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Two intervals equal to the 6 significant digits :func:`format_value` writes."""
    return all(x == y or (math.isfinite(x) and math.isfinite(y)
                          and math.isclose(x, y, rel_tol=5e-6, abs_tol=1e-300))
               for x, y in zip(a, b))


def _interval(iv: tuple[float, float]) -> str:
    return Target("_", "_", "_", lo=iv[0], hi=iv[1]).bound()


@dataclass(frozen=True)
class Experiment:
    """A registered experiment: the function, its figure, its targets and typed settings.

    ``seconds`` is the run time at paper scale (the defaults): CPU seconds of one process
    alone on a 2-core CPU (machines differ up to twofold), or ``None`` where it was not
    measured.
    """

    name: str
    func: Callable
    paper: str  # e.g. "2306.13596 Fig. 1 (E1)"
    chapter: str  # book chapter file stem, e.g. "03_local_global"
    title: str
    targets: tuple[Target, ...] = ()
    plot: Callable | None = None  # plot(result) -> matplotlib Figure
    seconds: float | None = None
    settings: dict[str, Setting] = field(default_factory=dict, compare=False, repr=False)

    @property
    def defaults(self) -> dict:
        sig = inspect.signature(self.func)
        return {k: p.default for k, p in sig.parameters.items()
                if p.default is not inspect.Parameter.empty}

    def cites(self, target: Target) -> str:
        """Where ``target``'s reference value comes from: its ``citation``, else this
        experiment's ``paper`` field."""
        return target.citation or self.paper

    @property
    def scale(self) -> str:
        d = self.defaults
        keys = [k for k in ("trials", "steps", "n", "T", "d") if k in d]
        return ", ".join(f"{k}={d[k]}" for k in keys)

    def check_settings(self, given: dict) -> dict:
        """All settings (``given`` over the defaults), converted to their types and checked.

        Raises
        ------
        attnlib.experiments.settings.SettingError
            One line naming this experiment, the setting, what it expects and what was given.
        """
        return check_settings(self.name, self.settings, given)


_REGISTRY: dict[str, Experiment] = {}


def experiment(name: str, *, paper: str, chapter: str, title: str,
               targets: tuple[Target, ...] | list[Target] = (), plot: Callable | None = None,
               bounds: dict | None = None, seconds: float | None = None):
    """Register ``func(**settings) -> (numbers, arrays)`` as the experiment ``name``.

    Parameters
    ----------
    bounds : dict, optional
        ``{"setting": (lo, hi)}`` overriding the default bounds of
        ``attnlib.experiments.settings`` (``None``: unbounded).
    seconds : float, optional
        Expected run time at paper scale on a 2-core CPU (shown by ``python -m attnlib list``).

    Raises
    ------
    TypeError
        A setting without a default, with an unsupported annotation, or whose default does not
        pass its own check; a conditional target (``Target.when``) that the defaults do not
        compute.
    """

    targets = tuple(targets)

    def deco(func):
        if name in _REGISTRY and _REGISTRY[name].func.__qualname__ != func.__qualname__:
            raise ValueError(f"experiment {name!r} registered twice")
        settings = settings_of(func, bounds, experiment=name)
        try:
            params = check_settings(name, settings, {})
        except ValueError as err:
            raise TypeError(f"a default does not pass its check: {err}") from None
        off = [t.key for t in targets if not t.applies(params)]
        if off:  # the report runs the defaults: they compute every target
            raise TypeError(f"experiment {name!r}: its defaults do not compute the "
                            f"conditional target(s) {off}")
        _REGISTRY[name] = Experiment(name=name, func=func, paper=paper, chapter=chapter,
                                     title=title, targets=tuple(targets), plot=plot,
                                     seconds=seconds, settings=settings)
        return func

    return deco


def names() -> list[str]:
    """Names of all registered experiments, in registration order."""
    return list(_REGISTRY)


def get(name: str) -> Experiment:
    """The registered experiment ``name``; a ValueError lists the valid names otherwise."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown experiment {name!r}; expected one of: {', '.join(names())}")
    return _REGISTRY[name]


def unregister(name: str) -> None:
    """Remove experiment ``name`` from the registry (tests register and remove fakes)."""
    get(name)
    del _REGISTRY[name]


def _target_ids():
    """``("experiment.key", target)`` for every registered target (``#2`` marks a key's second
    target in one experiment)."""
    for name in _REGISTRY:
        seen: dict[str, int] = {}
        for t in _REGISTRY[name].targets:
            seen[t.key] = seen.get(t.key, 0) + 1
            yield f"{name}.{t.key}" + ("" if seen[t.key] == 1 else f"#{seen[t.key]}"), t


def bound_snapshot() -> dict[str, str]:
    """Every registered target's bound, ``{"experiment.key": "bound"}``: the record that
    :func:`unrecorded_changes` compares later bounds with."""
    return {tid: t.bound() for tid, t in _target_ids()}


def unrecorded_changes(snapshot: dict[str, str]) -> list[str]:
    """The targets whose bound differs from ``snapshot`` (a :func:`bound_snapshot` taken
    earlier) with no revision that records the change, and those whose revisions disagree
    with their bound (:meth:`Target.revision_problems`).

    A changed bound is recorded when one of its revisions starts from the snapshot's bound
    (the chain of revisions then leads to the bound declared now). Targets added since the
    snapshot are checked against their own revisions only.
    """
    out = []
    for tid, t in _target_ids():
        out += [f"{tid.split('.')[0]}.{p}" for p in t.revision_problems()]
        if tid not in snapshot:
            continue
        was = parse_bound(snapshot[tid])
        if _same(was, (t.lo, t.hi)):
            continue
        try:
            olds = [old for old, _, _ in t.history()]
        except ValueError:
            olds = []
        if not any(_same(was, old) for old in olds):
            out.append(f"{tid}: bound {snapshot[tid]} -> {t.bound()} with no revision "
                       "recording the change ('old bound -> new bound: why')")
    return out


def arxiv_id(text: str) -> str:
    """The arXiv id in ``text`` (a ``paper`` field such as ``"2306.13596 Fig. 1"``), or
    ``"other"`` if it names none."""
    m = _ARXIV.search(text)
    return m.group(0) if m else "other"


def paper_of(name: str) -> str:
    """The arXiv id in experiment ``name``'s ``paper`` field (``"other"`` if none)."""
    return arxiv_id(get(name).paper)


@dataclass(frozen=True)
class NotRun:
    """A paper target the book does not run, with the reason (a "not run" report row)."""

    key: str
    paper: str  # the paper figure/table, e.g. "2410.14581 Table 1 (IMDb)"
    what: str
    paper_value: str
    reason: str
    chapter: str


_NOT_RUN: dict[str, NotRun] = {}


def not_run(key: str, *, paper: str, what: str, paper_value: str, reason: str,
            chapter: str) -> NotRun:
    """Declare a paper target that the book does not run, and why.

    The reproduction report lists it as a row marked "not run" with ``reason``, so every
    target of the papers has a row. Call it at import time, next to the experiment
    that would run it.

    Raises
    ------
    ValueError
        An empty ``reason``, a ``paper`` field without an arXiv id, or ``key`` declared twice
        with different contents.
    """
    if not str(reason).strip():
        raise ValueError(f"not_run({key!r}): reason must say why the target is not run")
    if not _ARXIV.search(paper):
        raise ValueError(f"not_run({key!r}): paper must name the arXiv id, got {paper!r}")
    entry = NotRun(key=key, paper=paper, what=what, paper_value=paper_value, reason=reason,
                   chapter=chapter)
    if key in _NOT_RUN and _NOT_RUN[key] != entry:
        raise ValueError(f"not-run target {key!r} declared twice")
    _NOT_RUN[key] = entry
    return entry


def not_run_targets(paper: str | None = None) -> list[NotRun]:
    """The declared not-run targets (of arXiv id ``paper`` if given), in declaration order."""
    return [e for e in _NOT_RUN.values()
            if paper is None or arxiv_id(e.paper) == paper]
