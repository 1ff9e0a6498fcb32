"""Write one benchmark's section of benchmarks/RESULTS.md, between its own markers."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")


def write_section(name: str, text: str, path=None) -> None:
    """Put ``text`` between ``<!-- name: begin -->`` and ``<!-- name: end -->`` in RESULTS.md
    (replacing what was there; appended at the end the first time)."""
    path = RESULTS if path is None else Path(path)
    begin, end = f"<!-- {name}: begin -->", f"<!-- {name}: end -->"
    old = path.read_text() if path.exists() else "# Benchmark results\n"
    block = f"{begin}\n{text.strip()}\n{end}"
    if begin in old and end in old:
        new = old[:old.index(begin)] + block + old[old.index(end) + len(end):]
    else:
        new = old.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(new)
