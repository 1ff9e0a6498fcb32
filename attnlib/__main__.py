"""The command line: ``python -m attnlib list`` and ``python -m attnlib reproduce NAME|all``.

``list`` names every registered experiment with its paper figure, chapter and default scale.
``reproduce`` runs one experiment (or ``all``) through :func:`attnlib.experiments.run`
(cached), writes its figure (PNG and PDF), its numbers (JSON) and arrays (NPZ) to ``--out``,
and prints a one-screen summary with every reproduction target (✓/✗). Settings the
experiment takes can be overridden: ``--trials``, ``--steps``, ``--seed``, ``--device`` and
any other with ``--set KEY=VALUE``. See the chapter "Reproduction report".
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import time
from pathlib import Path

COMMON = ("trials", "steps", "seed", "device")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m attnlib",
        description="Reproduce the experiments of the book 'Attention as a Support Vector "
                    "Machine'.")
    sub = p.add_subparsers(dest="command", required=True, metavar="{list,reproduce}")
    sub.add_parser("list", help="list the experiments with their paper figure and scale",
                   description="List the registered experiments.")
    r = sub.add_parser("reproduce", help="run an experiment (or all) and save its results",
                       description="Run an experiment (or all), write NAME.png, NAME.pdf, "
                                   "NAME.json and NAME.npz to --out, print a summary.")
    r.add_argument("name", help="experiment name (see `python -m attnlib list`) or 'all'")
    r.add_argument("--trials", type=_positive, help="number of independent trials")
    r.add_argument("--steps", type=_positive, help="number of optimisation steps")
    r.add_argument("--seed", type=int, help="random seed")
    r.add_argument("--device", help="torch device, e.g. cpu or cuda")
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   type=_key_value, help="any other setting of the experiment (repeatable)")
    r.add_argument("--out", default="reproductions", type=Path,
                   help="output folder (default: ./reproductions)")
    r.add_argument("--no-cache", action="store_true", help="recompute even if cached")
    r.add_argument("--no-figure", action="store_true", help="skip the figure")
    r.add_argument("--strict", action="store_true",
                   help="exit with status 1 if a reproduction target is missed")
    return p


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _key_value(text: str) -> tuple[str, object]:
    key, sep, raw = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw  # a plain string, e.g. --set loss=exp
    return key, value


def cmd_list(out=None) -> int:
    """Print one row per experiment: name, paper figure, chapter, default scale."""
    from attnlib import experiments

    out = out or sys.stdout
    rows = [("name", "paper figure", "chapter", "default scale", "targets")]
    for name in experiments.names():
        e = experiments.get(name)
        paper = e.paper if len(e.paper) <= 44 else e.paper[:43] + "…"
        rows.append((name, paper, e.chapter, e.scale or "-", str(len(e.targets))))
    if len(rows) == 1:
        print("no experiments are registered yet", file=out)
        return 0
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    for j, r in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip(), file=out)
        if j == 0:
            print("  ".join("-" * w for w in widths), file=out)
    return 0


def _settings(args, parser) -> dict:
    s = {k: getattr(args, k) for k in COMMON if getattr(args, k) is not None}
    for key, value in args.overrides:
        if key in s:
            parser.error(f"--set {key}=... repeats the option --{key}")
        s[key] = value
    if "device" in s:
        import torch

        if str(s["device"]).startswith("cuda") and not torch.cuda.is_available():
            parser.error(f"--device {s['device']}: CUDA is not available on this machine")
        try:
            torch.device(s["device"])
        except RuntimeError as e:
            parser.error(f"--device {s['device']!r} is not a torch device ({e})")
    return s


def _accepted(name, settings, parser, strict_names: bool) -> dict:
    """The settings ``name`` accepts; an error for one named experiment, a note for ``all``."""
    from attnlib import experiments

    known = experiments.get(name).defaults
    unknown = sorted(set(settings) - set(known))
    if unknown and strict_names:
        flags = ", ".join(f"--{k}" if k in COMMON else f"--set {k}=..." for k in unknown)
        parser.error(f"experiment {name!r} does not take {flags}; its settings are: "
                     f"{', '.join(sorted(known)) or '(none)'}")
    if unknown:
        print(f"  note: {name} does not take {', '.join(unknown)}; using its defaults")
    return {k: v for k, v in settings.items() if k in known}


def reproduce(name, settings, out: Path, cache=True, figure=True):
    """Run one experiment, save figure and numbers under ``out``, print the summary."""
    from attnlib import experiments

    t0 = time.perf_counter()
    res = experiments.run(name, cache=cache, **settings)
    res.save(out)
    written = [out / f"{name}.json", out / f"{name}.npz"]
    if figure and experiments.get(name).plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig = res.figure()
        for ext in ("png", "pdf"):
            fig.savefig(out / f"{name}.{ext}", bbox_inches="tight", dpi=150)
            written.append(out / f"{name}.{ext}")
        plt.close(fig)
    print(res.summary())
    print(f"  wrote {', '.join(str(p) for p in written)}  ({time.perf_counter() - t0:.1f} s)")
    return res


def cmd_reproduce(args, parser) -> int:
    from attnlib import experiments

    all_names = experiments.names()
    if args.name == "all":
        todo = all_names
        if not todo:
            parser.error("no experiments are registered yet")
    elif args.name in all_names:
        todo = [args.name]
    else:
        parser.error(f"unknown experiment {args.name!r}; choose 'all' or one of: "
                     f"{', '.join(all_names) or '(none registered)'}")
    settings = _settings(args, parser)
    plans = [(n, _accepted(n, settings, parser, strict_names=args.name != "all")) for n in todo]
    missed = []
    for k, (name, s) in enumerate(plans, 1):
        if len(plans) > 1:
            print(f"[{k}/{len(plans)}] {name}", flush=True)
        res = reproduce(name, s, args.out, cache=not args.no_cache, figure=not args.no_figure)
        missed += [f"{name}.{r['key']}" for r in res.check() if not r["ok"]]
    if missed:
        print(f"{len(missed)} target(s) missed: {', '.join(missed)}")
    return 1 if (missed and args.strict) else 0


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "list":
        return cmd_list()
    return cmd_reproduce(args, parser)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # e.g. `python -m attnlib list | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
