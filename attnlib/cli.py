"""The command line: ``python -m attnlib list | reproduce NAME|all | cache info|clear``.

``list`` names every registered experiment with its paper figure, chapter, default scale and
the expected run time at that (paper) scale on a 2-core CPU. ``reproduce`` runs one experiment
(or ``all``) through :func:`attnlib.experiments.run` (cached), writes its figure (PNG and PDF),
its numbers (JSON) and arrays (NPZ) to ``--out``, and prints a one-screen summary with every
reproduction target (✓/✗). Settings can be overridden: ``--trials``, ``--steps``, ``--seed``,
``--device`` and any other with ``--set KEY=VALUE``; every value is checked against the
experiment's typed settings, and the output folder is checked, before any computation.
``cache info`` shows where results are cached, how many and their size; ``cache clear``
empties the cache.

Errors are one line on stderr and exit with status 2 (``--debug`` shows the traceback); a
missed target, or a result whose status (:class:`attnlib.status.RunStatus`) is not ok (a
training run that turned non-finite or stalled), exits with status 1 under ``--strict``. An
experiment's files are written to a temporary folder and moved into ``--out`` at the end: an
interrupted run (Ctrl-C: status 130, no traceback) leaves the previous files as they were, and
an ``--out`` folder it created stays only if something was written into it. See the chapter
"Reproduction report".
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

__all__ = ["main", "UsageError"]

COMMON = ("trials", "steps", "seed", "device")
OUTPUTS = ("json", "npz", "png", "pdf")  # what `reproduce` writes per experiment
PROG = "python -m attnlib"


class UsageError(Exception):
    """A command-line error: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line instead of usage + message
        raise UsageError(f"{message} (see {self.prog} --help)")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Reproduce the experiments of the book 'Attention as "
                                       "a Support Vector Machine'.")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = p.add_subparsers(dest="command", required=True,
                           metavar="{list,reproduce,cache}", parser_class=_Parser)
    sub.add_parser("list", help="list the experiments with their paper figure, scale and time",
                   description="List the registered experiments.")
    r = sub.add_parser("reproduce", help="run an experiment (or all) and save its results",
                       description="Run an experiment (or all), write NAME.png, NAME.pdf, "
                                   "NAME.json and NAME.npz to --out, print a summary.")
    r.add_argument("name", help="experiment name (see `python -m attnlib list`) or 'all'")
    r.add_argument("--trials", help="number of independent trials")
    r.add_argument("--steps", help="number of optimisation steps")
    r.add_argument("--seed", help="random seed")
    r.add_argument("--device", help="torch device, e.g. cpu or cuda")
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   type=_key_value, help="any other setting of the experiment (repeatable)")
    r.add_argument("--out", default="reproductions", type=Path,
                   help="output folder (default: ./reproductions)")
    r.add_argument("--no-cache", action="store_true", help="recompute even if cached")
    r.add_argument("--no-figure", action="store_true", help="skip the figure")
    r.add_argument("--strict", action="store_true",
                   help="exit with status 1 if a reproduction target is missed or a training "
                        "run turned non-finite or stalled")
    r.add_argument("--debug", action="store_true", help="show the traceback of an error")
    c = sub.add_parser("cache", help="show or clear the result cache",
                       description="Show (info) or empty (clear) the result cache "
                                   "($ATTNLIB_CACHE or ~/.cache/attnlib).")
    c.add_argument("action", choices=("info", "clear"))
    c.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return p


def _key_value(text: str) -> tuple[str, str]:
    key, sep, raw = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, raw


def _duration(seconds) -> str:
    if seconds is None:
        return "?"
    if seconds < 1:
        return "<1 s"
    if seconds < 90:
        return f"~{seconds:.0f} s"
    if seconds < 5400:
        return f"~{seconds / 60:.0f} min"
    return f"~{seconds / 3600:.1f} h"


def cmd_list(out=None) -> int:
    """Print one row per experiment: name, paper figure, chapter, default scale, time."""
    from attnlib import experiments

    out = out or sys.stdout
    rows = [("name", "paper figure", "chapter", "default scale", "targets", "time (2 cores)")]
    for name in experiments.names():
        e = experiments.get(name)
        paper = e.paper if len(e.paper) <= 44 else e.paper[:43] + "…"
        rows.append((name, paper, e.chapter, e.scale or "-", str(len(e.targets)),
                     _duration(e.seconds)))
    if len(rows) == 1:
        print("no experiments are registered yet", file=out)
        return 0
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    for j, r in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip(), file=out)
        if j == 0:
            print("  ".join("-" * w for w in widths), file=out)
    return 0


def _given(args) -> dict[str, str]:
    """The settings given on the command line, as text."""
    s = {k: getattr(args, k) for k in COMMON if getattr(args, k) is not None}
    for key, value in args.overrides:
        if key in s:
            raise UsageError(f"--set {key}=... repeats the option --{key}")
        s[key] = value
    return s


def _flag(key: str) -> str:
    return f"--{key}" if key in COMMON else f"--set {key}=..."


def _plan(name: str, given: dict[str, str], strict_names: bool) -> dict:
    """The checked settings of ``name``; unknown ones: an error for one name, a note for all."""
    from attnlib import experiments
    from attnlib.experiments.settings import parse_setting

    exp = experiments.get(name)
    unknown = sorted(set(given) - set(exp.settings))
    if unknown and strict_names:
        raise UsageError(f"experiment {name!r} does not take "
                         f"{', '.join(_flag(k) for k in unknown)}; its settings are: "
                         f"{', '.join(exp.settings) or '(none)'}")
    if unknown:
        print(f"  note: {name} does not take {', '.join(unknown)}; using its defaults")
    settings = {k: parse_setting(name, exp.settings[k], v)
                for k, v in given.items() if k in exp.settings}
    if "progress" in exp.settings:
        settings.setdefault("progress", True)
    if settings.get("device") is not None:
        from attnlib._runtime import resolve_device

        try:
            resolve_device(settings["device"])
        except ValueError as err:
            raise UsageError(f"--device {settings['device']}: {err}") from None
    exp.check_settings(settings)  # every value, before any computation
    return settings


def _check_out(out: Path) -> list[Path]:
    """The output folder exists (or is created) and is writable; UsageError otherwise.

    Returns the folders it created (innermost last), to remove again if nothing is written.
    """
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file, expected a folder")
    created = [p for p in (out, *out.parents) if not p.exists()][::-1]
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as err:
        raise UsageError(f"--out {out}: not a writable folder ({err.strerror or err})") from None
    return created


def _remove_if_empty(folders: list[Path]) -> None:
    """Remove the folders ``_check_out`` created that are still empty (innermost first)."""
    for p in reversed(folders):
        with contextlib.suppress(OSError):
            p.rmdir()  # only an empty folder


@contextlib.contextmanager
def _elapsed(name: str, expected, enabled: bool):
    """A time bar on stderr (elapsed of the expected seconds) while the block runs.

    For experiments that draw no progress bar of their own (they take no ``progress``).
    """
    if not enabled:
        yield
        return
    from tqdm.auto import tqdm

    total = None if expected is None else max(1, round(expected))
    bar = tqdm(total=total, desc=name, unit="s", leave=False,
               bar_format="{desc}: {bar}| {n:.0f}/{total} s expected" if total else None)
    stop = threading.Event()

    def tick():
        t0 = time.monotonic()
        while not stop.wait(0.5):
            bar.n = min(time.monotonic() - t0, total) if total else time.monotonic() - t0
            bar.refresh()

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        bar.close()


def reproduce(name, settings, out: Path, cache=True, figure=True):
    """Run one experiment, save figure and numbers under ``out``, print the summary.

    The files are written into a temporary folder inside ``out`` and moved into place at the
    end, so an interrupted run leaves the previous run's files as they were, never a mix of two
    runs; files of the previous run that this one does not write (a figure, with
    ``figure=False``) are removed.
    """
    from attnlib import experiments

    t0 = time.perf_counter()
    exp = experiments.get(name)
    with _elapsed(name, exp.seconds, "progress" not in exp.settings and sys.stderr.isatty()):
        res = experiments.run(name, cache=cache, **settings)
    tmp = Path(tempfile.mkdtemp(dir=out, prefix=f".{name}.", suffix=".tmp"))
    try:
        res.save(tmp)
        if figure and experiments.get(name).plot is not None:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            fig = res.figure()
            for ext in ("png", "pdf"):
                fig.savefig(tmp / f"{name}.{ext}", bbox_inches="tight", dpi=150)
            plt.close(fig)
        new = sorted(p.name for p in tmp.iterdir())
        for ext in OUTPUTS:
            stale = out / f"{name}.{ext}"
            if stale.name not in new and stale.is_file():
                stale.unlink()
        for f in sorted(new, key=lambda f: f.endswith(".json")):  # the JSON last
            os.replace(tmp / f, out / f)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    written = [out / f for f in sorted(new)]
    print(res.summary())
    print(f"  wrote {', '.join(str(p) for p in written)}  ({time.perf_counter() - t0:.1f} s)")
    return res


def cmd_reproduce(args) -> int:
    from attnlib import experiments

    all_names = experiments.names()
    if args.name == "all":
        todo = all_names
        if not todo:
            raise UsageError("no experiments are registered yet")
    elif args.name in all_names:
        todo = [args.name]
    else:
        raise UsageError(f"unknown experiment {args.name!r}; choose 'all' or one of: "
                         f"{', '.join(all_names) or '(none registered)'}")
    given = _given(args)
    plans = [(n, _plan(n, given, strict_names=args.name != "all")) for n in todo]
    created = _check_out(args.out)
    missed, unsound = [], []
    try:
        for k, (name, s) in enumerate(plans, 1):
            if len(plans) > 1:
                print(f"[{k}/{len(plans)}] {name}", flush=True)
            res = reproduce(name, s, args.out, cache=not args.no_cache,
                            figure=not args.no_figure)
            missed += [f"{name}.{k}" for k in res.missed()]  # (not computed: not missed)
            if not res.status.ok:
                unsound.append(f"{name} ({res.status})")
    finally:
        _remove_if_empty(created)
    if missed:
        print(f"{len(missed)} target(s) missed: {', '.join(missed)}")
    if unsound:
        print(f"{len(unsound)} run(s) with non-finite or stalled training: {'; '.join(unsound)}")
    return 1 if ((missed or unsound) and args.strict) else 0


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def cmd_cache(args) -> int:
    from attnlib.experiments import store

    if args.action == "info":
        info = store.cache_info()
        print(f"path: {info['path']}")
        print(f"entries: {info['entries']}")
        print(f"size: {_size(info['bytes'])}")
    else:
        n = store.cache_clear()
        print(f"removed {n} cache entr{'y' if n == 1 else 'ies'} from {store.cache_dir()}")
        left = store.cache_info()["entries"]
        if left:
            print(f"{left} entr{'y remains' if left == 1 else 'ies remain'} (another "
                  "process is computing or writing it now)")
    return 0


def main(argv=None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        args = _parser().parse_args(argv)  # --help and a usage error need no torch
        # Every command reads the registry or the cache of attnlib.experiments, which loads
        # torch (seconds). Load it while Ctrl-C still exits at once (the package's handler
        # when run as the command line), then put Python's handler back: from here on Ctrl-C
        # is a KeyboardInterrupt and an interrupted run cleans up its files.
        from attnlib import experiments  # noqa: F401
        if getattr(signal.getsignal(signal.SIGINT), "__module__", None) == "attnlib":
            signal.signal(signal.SIGINT, signal.default_int_handler)  # the package has loaded
        if args.command == "list":
            return cmd_list()
        if args.command == "cache":
            return cmd_cache(args)
        return cmd_reproduce(args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `python -m attnlib list | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as err:  # noqa: BLE001 - every error is one line (--debug: traceback)
        if debug:
            traceback.print_exc()
        msg = str(err) if isinstance(err, (UsageError, ValueError)) else \
            f"{type(err).__name__}: {err}"
        print(f"{PROG}: error: {' '.join(msg.split())}", file=sys.stderr)
        return 2
