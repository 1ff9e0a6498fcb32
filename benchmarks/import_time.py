"""Import-time benchmark: what ``import attnlib`` and the first use of a name cost.

Run ``python benchmarks/import_time.py`` (``--repeat N``, ``--write`` to put the table in
benchmarks/RESULTS.md). Each command runs ``--repeat`` times in a fresh interpreter; the table
gives the median wall seconds (and the median CPU seconds of the child) and whether the child
had imported torch by its end. The cost of each module comes from ``python -X importtime -c
"import attnlib"``: the slowest top-level imports (cumulative microseconds) are listed. Timings
go to RESULTS.md, never into tests; the test that ``import attnlib`` loads no torch is
tests/test_import_graph.py.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: label -> Python arguments (run as ``sys.executable ARGS``)
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "import torch": ["-c", "import torch"],
    "import attnlib": ["-c", "import attnlib"],
    "dir(attnlib)": ["-c", "import attnlib; dir(attnlib)"],
    "al.random_data (first use)": ["-c", "import attnlib as al; al.random_data"],
    "al.train (first use)": ["-c", "import attnlib as al; al.train"],
    "al.att_svm (first use)": ["-c", "import attnlib as al; al.att_svm"],
    "python -m attnlib --help": ["-m", "attnlib", "--help"],
    "python -m attnlib list": ["-m", "attnlib", "list"],
}
TORCH_PROBE = ("import atexit, sys; atexit.register(lambda: sys.stderr.write("
               "'\\ntorch-loaded=%s\\n' % ('torch' in sys.modules)))")


def run_once(args: list[str]) -> tuple[float, float]:
    """Wall seconds and child CPU seconds of one run."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    r = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"{args}: exit {r.returncode}\n{r.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def loads_torch(args: list[str]) -> bool:
    """Whether the command has imported torch by its exit (a separate, untimed run)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    probe_args = ["-c", f"{TORCH_PROBE}\n{args[1]}"] if args[0] == "-c" else \
        ["-c", f"{TORCH_PROBE}\nimport runpy, sys; sys.argv = {['attnlib', *args[2:]]!r}\n"
               "try:\n    runpy.run_module('attnlib', run_name='__main__')\n"
               "except SystemExit:\n    pass"]
    p = subprocess.run([sys.executable, *probe_args], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    return "torch-loaded=True" in p.stderr


def importtime(top: int = 8) -> list[tuple[int, str]]:
    """The ``top`` slowest imports under ``import attnlib`` (cumulative µs, module)."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", "import attnlib"], cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                       text=True, timeout=300, check=True)
    rows = []
    for line in r.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line[len("import time:"):].split("|")
        if len(name) - len(name.lstrip()) == 1:  # imported at the top, not by another module
            rows.append((int(cumulative), name.strip()))
    return sorted(rows, reverse=True)[:top]


def measure(repeat: int) -> str:
    lines = [
        "| command | median wall s | median CPU s | torch loaded |",
        "|---|---|---|---|"]
    for label, args in COMMANDS.items():
        runs = [run_once(args) for _ in range(repeat)]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        lines.append(f"| `{label}` | {wall:.2f} | {cpu:.2f} | "
                     f"{'yes' if loads_torch(args) else 'no'} |")
        print(lines[-1], flush=True)
    slow = importtime()
    lines += ["", "Slowest top-level imports under `python -X importtime -c \"import attnlib\"` "
              "(cumulative ms): " + ", ".join(f"{name} {us / 1000:.0f}" for us, name in slow)
              + "."]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=5, help="runs per command (default 5)")
    p.add_argument("--write", action="store_true", help="write the table to RESULTS.md")
    a = p.parse_args(argv)
    table = measure(a.repeat)
    print(table.split("\n\n", 1)[1])
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0]
    text = (f"## Import time (`python benchmarks/import_time.py --write`)\n\n"
            f"Measured {when}, {platform.machine()}, {os.cpu_count()} cores, load average at "
            f"the end {load:.1f}. Each command in a fresh interpreter, {a.repeat} runs; "
            f"*torch loaded*: whether the child had imported torch when it exited.\n\n{table}")
    if a.write:
        sys.path.insert(0, str(Path(__file__).parent))
        from results_md import write_section

        write_section("import_time", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
