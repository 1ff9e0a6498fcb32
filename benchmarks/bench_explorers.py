"""Explorer speed: live redraw time and static rendering (time, frames, size) per explorer.

Run: ``python benchmarks/bench_explorers.py [--write]``. For every explorer of the book
(:mod:`attnlib.explorers`, called as the chapters do: ``al.explorers.<name>(...)``) it
measures, in one process,

* the first live display (data computed: training, SVMs, and the first draw),
* the live redraw after a cheap control change (the slider control: no recomputation),
  median of ``--repeat`` redraws, wall-clock and CPU time of this process,
* a recomputing change (a control that retrains, where the explorer has one), wall and CPU,
* the static rendering of the chapter defaults: seconds, frames, HTML size.

CPU time (``time.process_time``) is reported beside wall time because the machine may be
shared: on a loaded machine wall time is inflated, CPU time much less (the redraw is single
threaded). ``--write`` replaces the explorers' section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import statistics
import time
from pathlib import Path

from attnlib import explorers

RESULTS = Path(__file__).with_name("RESULTS.md")
BEGIN, END = "<!-- bench_explorers: begin -->", "<!-- bench_explorers: end -->"

#: explorer -> (constructor kwargs, cheap changes cycled for the redraw, one retraining change)
CASES = {
    "token_plane": (dict(example="e1-local"),
                    [dict(iterations=100), dict(iterations=200), dict(init=5)],
                    dict(lr=0.3)),
    "parameterisation": (dict(), [dict(iterations=200), dict(iterations=1000)],
                         dict(lr=0.5)),
    "selection": (dict(), [dict(alpha=2), dict(alpha=1)], dict(score=0.9)),
    "mirror_descent": (dict(lp=1.75), [dict(iterations=500), dict(iterations=1500)],
                       dict(lp=1.5)),
    "sweep": (dict(result="tf_svm_rank", trials=5, ds=(2, 4, 6, 10),
                   cells=((5, 5), (10, 5)), progress=False),
              [dict(d=4), dict(d=10)], None),
    "softmax_explorer": (dict(), [dict(norm=4.0), dict(norm=1.0)], None),
    "joint_explorer": (dict(), [dict(iterations=100), dict(iterations=200)], None),
    "causal_explorer": (dict(), [dict(iterations=1000), dict(iterations=2000)], None),
}


def _timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def bench(name, repeat):
    kw, cheap, heavy = CASES[name]
    make = getattr(explorers, name)
    live, first_w, first_c = _timed(lambda: make(mode="live", **kw))
    walls, cpus = [], []
    for j in range(repeat):
        change = cheap[j % len(cheap)]
        _, w, c = _timed(lambda change=change: live.update(**change))
        walls.append(w)
        cpus.append(c)
    row = dict(name=name, first_wall=first_w, first_cpu=first_c,
               redraw_wall=statistics.median(walls), redraw_cpu=statistics.median(cpus))
    if heavy is not None:
        _, row["heavy_wall"], row["heavy_cpu"] = _timed(lambda: live.update(**heavy))
    st, row["static_wall"], row["static_cpu"] = _timed(lambda: make(mode="static", **kw))
    row.update(frames=len(st.frames) * len(st.frames[0]), panels=len(st.frames[0]),
               mb=st.nbytes / 1e6, dpi=st.dpi)
    return row


def table(rows):
    head = ("| explorer | first display s (cpu) | redraw s (cpu) | retrain s (cpu) | "
            "static s (cpu) | frames × panels | static MB | dpi |\n"
            "|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        heavy = f"{r['heavy_wall']:.2f} ({r['heavy_cpu']:.2f})" if "heavy_wall" in r else "—"
        lines.append(
            f"| {r['name']} | {r['first_wall']:.2f} ({r['first_cpu']:.2f}) | "
            f"{r['redraw_wall']:.3f} ({r['redraw_cpu']:.3f}) | {heavy} | "
            f"{r['static_wall']:.1f} ({r['static_cpu']:.1f}) | "
            f"{r['frames'] // r['panels']} × {r['panels']} | {r['mb']:.2f} | {r['dpi']:g} |")
    return head + "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", nargs="*", default=list(CASES))
    ap.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = ap.parse_args()
    rows = [bench(name, args.repeat) for name in args.only]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    meta = (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
            f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"load average at the end {load:.1f}")
    text = table(rows)
    print(meta)
    print(text)
    if args.write:
        section = (f"{BEGIN}\n## Explorers (`python benchmarks/bench_explorers.py --write`)\n\n"
                   f"Measured {meta}. Wall seconds, with this process's CPU seconds in "
                   f"brackets (the machine was shared: wall time is inflated by the load, "
                   f"CPU time much less). *redraw*: median of {args.repeat} changes of a "
                   f"control that needs no recomputation (the slider); *retrain*: a change "
                   f"that retrains; *static*: rendering the chapter default.\n\n{text}{END}\n")
        old = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
        if BEGIN in old:
            new = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END) + "\n?", section, old,
                         flags=re.S)
        else:
            new = old.rstrip("\n") + "\n\n" + section
        RESULTS.write_text(new)
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
