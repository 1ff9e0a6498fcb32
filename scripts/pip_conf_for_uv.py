"""Print pip's package sources as uv options, one per line (scripts/setup.sh reads them).

uv does not read pip's configuration. This script asks pip (``pip config list``: the
``PIP_*`` variables and every pip.conf) for the settings that decide which files are
installed (index-url, extra-index-url, find-links, constraint, no-index) and prints the same
options for ``uv pip install``, so that both installers install the same files: on a machine
whose pip.conf points at a local index or wheel folder, uv looks there too. A variable
overrides a file, as in pip. Prints nothing if pip cannot be asked.

Usage: python scripts/pip_conf_for_uv.py
"""

from __future__ import annotations

import ast
import subprocess
import sys

#: pip's option -> uv's; a value may list several, separated by white space
OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url",
           "find-links": "--find-links", "constraint": "--constraint"}
#: the scopes of ``pip config list`` from the strongest: variables, then the files
RANK = {":env:": 0, "site": 1, "user": 2, "global": 3}


def uv_options(listing: str) -> list[str]:
    """uv options from the text of ``pip config list`` (lines ``scope.name='value'``)."""
    best: dict[str, tuple[int, str]] = {}
    for line in listing.splitlines():
        key, sep, raw = line.partition("=")
        scope, _, name = key.rpartition(".")
        if not sep or name not in (*OPTIONS, "no-index"):
            continue
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        rank = RANK.get(scope, len(RANK))
        if name not in best or rank < best[name][0]:
            best[name] = (rank, str(value))
    out = []
    for name, flag in OPTIONS.items():
        for value in best.get(name, (0, ""))[1].split():
            out += [flag, value]
    if best.get("no-index", (0, ""))[1].lower() in ("1", "true", "yes", "on"):
        out.append("--no-index")
    return out


def main() -> None:
    try:
        listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                                 capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return
    options = uv_options(listing)
    if options:
        print("\n".join(options))


if __name__ == "__main__":
    main()
