"""Running an experiment: :func:`run` returns a :class:`Result`, cached on disk.

:func:`run` checks the settings against the experiment's typed settings before any
computation, then reads the result from the cache (:mod:`attnlib.experiments.store`) or
computes and stores it. A :class:`Result` gives the verdict on each of its reproduction
targets (:meth:`Result.verdicts`, :meth:`Result.require`) and draws its figure. Every result
is computed live (none is shipped recorded). See the chapter "Reproduction report".
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import attnlib.experiments.store as store
from attnlib._runtime import resolve_device, resolve_dtype
from attnlib._validate import choice
from attnlib.status import RunStatus, collect, total
from attnlib.svm.engine import fresh_start

from .ledger import record_target
from .registry import Experiment, format_value, get, paper_of
from .registry import names as registered
from .settings import SettingError

__all__ = ["Result", "run", "run_all", "NOT_IN_KEY"]

NOT_IN_KEY = frozenset({"progress"})  # settings that do not change a result


@dataclass
class Result:
    """What :func:`run` returns: settings, numbers, arrays, the time it took, and its status.

    ``status`` (:class:`attnlib.status.RunStatus`) is the "no NaN, no stall" verdict of the
    computation: the sum of what its training runs reported (:func:`attnlib.train`,
    :class:`attnlib.train.LpMirrorDescent`, :func:`attnlib.realdata.fit`). A number may be NaN
    by design (a quantity a setting does not compute); a missed target is one of :meth:`verdicts`.
    """

    name: str
    params: dict
    numbers: dict
    arrays: dict = field(default_factory=dict)
    seconds: float = 0.0
    cached: bool = False
    status: RunStatus = field(default_factory=RunStatus)

    @property
    def experiment(self) -> Experiment:
        return get(self.name)

    def verdicts(self) -> list[dict]:
        """One row per target: what, paper and book value, tolerance, ok, source, note, evidence.

        ``ok`` is True (met), False (missed) or None: a conditional target (``Target.when``)
        that these settings do not compute (``radii`` without the radius it is read at) is a
        row with ``book`` NaN, ``ok`` None, ``computed`` False and a note "not computed at
        these settings", neither met nor missed. A target that these settings should compute
        but that the experiment did not return is a miss (``ok`` False), not a crash.
        """
        rows = []
        exp = self.experiment
        for tg in exp.targets:
            applies = tg.applies(self.params)
            computed = applies and tg.key in self.numbers
            val = self.numbers[tg.key] if computed else float("nan")
            if computed:
                ok, note = tg.ok(val), tg.note
            elif not applies:
                ok, note = None, f"not computed at these settings (only when {tg.condition})"
            else:
                ok, note = False, "not computed with these settings"
            rows.append(
                dict(experiment=self.name, key=tg.key, what=tg.what, paper=tg.paper,
                     book=float(val), tolerance=tg.tolerance, ok=ok, source=tg.source,
                     note=note, evidence=tg.evidence, computed=computed, applies=applies,
                     citation=exp.cites(tg))
            )
        return rows

    def missed(self) -> list[str]:
        """The keys of the targets these settings compute and miss (``ok`` False)."""
        return [r["key"] for r in self.verdicts() if r["ok"] is False]

    def require(self, *keys, verbose: bool = False):
        """Check the declared targets ``keys``, record them, and return their values.

        Each checked target is recorded in the chapter's ledger
        (``attnlib.experiments.ledger``), which the chapter's last cell shows as the folded
        block "What this chapter verified". With ``verbose=True`` one line per target is
        printed as well: ``✓ key = value  target >= lo  paper P  [evidence; source, paper
        figure]``, where the evidence is ``live`` (computed by this run, it could have missed the
        bound) or ``by construction`` (an identity, not a reproduction). The
        bound is the experiment's declared :class:`Target` (the one source of truth), so a
        chapter writes ``res.require("corr")`` instead of restating the bound as a literal.

        Returns
        -------
        The value of the one key, or a tuple of values in the order of ``keys``.

        Raises
        ------
        KeyError
            A key that is not a declared target (the message lists the declared ones).
        ValueError
            A conditional target that these settings do not compute (the message gives its
            condition).
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
        for tg in exp.targets:
            if tg.key in keys and not tg.applies(self.params):
                raise ValueError(f"experiment {self.name!r}: target {tg.key!r} is computed "
                                 f"only when {tg.condition}; not at these settings")
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
                record_target(self.name, key, value, ok)
                if verbose or not ok:
                    print(f"{'✓' if ok else '✗'} {key} = {format_value(value)}  target "
                          f"{tg.bound()}  paper {tg.paper}  [{tg.evidence}; {tg.source}, "
                          f"{exp.paper}]")
                if not ok:
                    failed.append(f"{key} = {format_value(value)} (target {tg.bound()}: "
                                  f"{tg.what})")
        if failed:
            raise AssertionError(f"experiment {self.name!r} misses its target(s): "
                                 + "; ".join(failed))
        return values[0] if len(values) == 1 else tuple(values)

    @property
    def passed(self) -> bool:
        return not self.missed()

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
                 f"time: {self.seconds:.1f} s" + (" (cached)" if self.cached else ""),
                 f"status: {self.status}"]
        for r in self.verdicts():
            mark = {True: "✓", False: "✗", None: "–"}[r["ok"]]
            book = f"book {r['book']:.6g}" if r["computed"] else r["note"]
            lines.append(f"  {mark} {r['what']}: {book}  paper {r['paper']}  ({r['tolerance']})")
        return "\n".join(lines)

    # -- persistence -------------------------------------------------------------------
    def _meta(self) -> dict:
        return dict(params=store.jsonable(self.params),
                    numbers={k: float(v) for k, v in self.numbers.items()},
                    seconds=self.seconds, targets=self.verdicts(), status=self.status.to_dict(),
                    attnlib_source=store.source_hash(), versions=store.versions())

    def save(self, folder) -> Path:
        """Write ``NAME.json`` (settings, numbers, targets) and ``NAME.npz`` (arrays).

        Each file is written to a temporary file and renamed into place (arrays first), so a
        reader never sees half a result and a failure leaves no temporary file behind.
        """
        return store.write_entry(folder, self.name, self._meta(), self.arrays)

    @classmethod
    def load(cls, folder, name) -> Result:
        """Read a result written by :meth:`save`; ValueError if it is unreadable or inconsistent."""
        meta, arrays = store.read_entry(folder, name)
        return cls(name=name, params=meta["params"], numbers=meta["numbers"], arrays=arrays,
                   seconds=meta.get("seconds", 0.0), cached=True,
                   status=RunStatus.from_dict(meta.get("status", RunStatus().to_dict())))


def _device_dtype(name: str, params: dict) -> tuple[str, str]:
    """The device and dtype the experiment will run on (part of the cache key)."""
    try:
        return str(resolve_device(params.get("device"))), str(resolve_dtype(params.get("dtype")))
    except ValueError as err:
        raise SettingError(f"experiment {name!r}: {err}") from None


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

    An experiment that another process is computing at that moment (a chapter run beside
    this one) is left to the end, then waited for and read: meanwhile this process computes
    the others.

    Returns
    -------
    dict name -> :class:`Result`, or the exception the experiment raised (in the order asked).
    """
    todo = [n for n in (registered() if names is None else names)
            if (paper is None or paper_of(n) == paper)
            and (chapter is None or get(n).chapter == chapter)]
    out, later, bar = {}, [], None
    if progress and todo:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc="experiments")

    def one(n, wait):
        kw = dict(run_kw)
        if "progress" in get(n).defaults:  # the experiment's own bars follow ``progress``
            kw.setdefault("progress", progress)
        try:
            out[n] = _run(n, kw.pop("cache", True), kw, wait=wait)
        except store.Busy:
            later.append(n)
            return
        except Exception as e:  # noqa: BLE001 - the report shows the failure in its row
            out[n] = e
        if bar is not None:
            bar.update()

    for n in todo:
        one(n, wait=False)
    for n in later:  # (waiting, one never raises Busy: nothing is added to ``later`` here)
        one(n, wait=True)
    if bar is not None:
        bar.close()
    return {n: out[n] for n in todo}


def run(name: str, *, cache: bool = True, **settings) -> Result:
    """Run experiment ``name`` with its defaults overridden by ``settings``.

    The settings are converted to their declared types and checked first (numpy and torch
    scalars are accepted). The result is cached on disk under ``store.cache_dir``, keyed by
    the name, the exact settings, attnlib's source, the versions of Python and of the packages
    a result depends on (``store.versions``), and the device and dtype; settings that do not
    change the result (``progress``) are not part of the key. Every read is verified (one
    digest over settings, numbers and arrays): an unreadable, edited or misplaced entry is a
    miss, recomputed with a :class:`store.CacheWarning`; a result that cannot be written to the
    cache is returned all the same (with a warning). ``cache=False`` recomputes and does not
    write. A result that another process is computing at the same moment is waited for and
    read, not computed twice (``attnlib.experiments.store.entry_lock``).

    Raises
    ------
    ValueError
        ``cache`` that is not a bool; an unknown experiment, an unknown setting, or a value of
        the wrong type or out of bounds (:class:`attnlib.experiments.settings.SettingError`),
        before any computation.
    """
    return _run(name, cache, settings, wait=True)


def _run(name: str, cache, settings: dict, wait: bool) -> Result:
    """:func:`run`; ``wait=False``: raise :class:`store.Busy` instead of waiting for another
    process that is computing the same result (what :func:`run_all` tries first)."""
    exp = get(name)
    cache = choice("cache", cache, (True, False))
    params = exp.check_settings(settings)
    device, dtype = _device_dtype(name, params)
    key = store.cache_key(name, {k: v for k, v in params.items() if k not in NOT_IN_KEY},
                          device, dtype)
    folder = store.cache_dir() / key
    if not cache:
        return _compute(exp, name, params)
    hit = _cached(folder, name, key, params)
    if hit is not None:
        return hit
    entry = folder / f"{name}.json"
    absent = not entry.exists()
    # computed once: a second process that needs it now waits here and reads the entry
    with store.entry_lock(folder, wait=wait) as free:
        # written meanwhile: while this process waited, or by one that finished just before
        if not free or (absent and entry.exists()):
            hit = _cached(folder, name, key, params)
            if hit is not None:
                return hit
        res = _compute(exp, name, params)
        try:
            store.write_entry(folder, name, dict(res._meta(), key=key, device=device,
                                                 dtype=dtype), res.arrays)
        except OSError as err:  # the result is kept; only its cache entry is lost
            warnings.warn(f"the result of {name!r} could not be cached: {err}",
                          store.CacheWarning, stacklevel=3)
    return res


def _cached(folder, name: str, key: str, params: dict) -> Result | None:
    """The verified cache entry as a Result; None when there is none or it is unreadable."""
    try:
        meta, arrays = store.read_entry(folder, name, key=key)
        status = RunStatus.from_dict(meta.get("status"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        warnings.warn(f"cache entry of {name!r} is unreadable, recomputing: {err}",
                      store.CacheWarning, stacklevel=4)
        return None
    return Result(name=name, params=params, numbers=meta["numbers"], arrays=arrays,
                  seconds=meta.get("seconds", 0.0), cached=True, status=status)


def _compute(exp, name: str, params: dict) -> Result:
    fresh_start()  # the SVM solvers start cold: the numbers do not depend on what ran before
    t0 = time.perf_counter()
    with collect() as reports:
        numbers, arrays = exp.func(**params)
    return Result(name=name, params=params, numbers=dict(numbers),
                  arrays={k: store.to_numpy(v) for k, v in dict(arrays).items()},
                  seconds=time.perf_counter() - t0, status=total(reports))
