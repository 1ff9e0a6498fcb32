#!/usr/bin/env bash
# make check: the contributor's fast loop before a commit (make test runs everything).
#   1. lint    ruff check .
#   2. unit    the unit tests on two pytest-xdist workers, except the browser tests and those
#              marked slow (a test that took 3 s or more on a quiet 2-core machine); make test
#              runs them all
#   3. nbval   only the notebooks the change touches: a changed notebook, and each chapter whose
#              experiments live in a changed attnlib/experiments/ module (from the registry:
#              every experiment names its chapter), or that imports a changed figures/explorers
#              module by name.
# The change is the working tree against BASE (default HEAD: what is not committed yet); e.g.
# BASE=HEAD~3 make check for the last three commits too.  Extra arguments go to the unit step.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
BASE=${BASE:-HEAD}

changed=$( { git diff --name-only "$BASE"; git ls-files --others --exclude-standard; } | sort -u)
mapfile -t notebooks < <(python - "$changed" <<'PY'
import importlib, inspect, json, re, sys
from pathlib import Path

changed = [c for c in sys.argv[1].split("\n") if c]
out = {c for c in changed if c.startswith("book/") and c.endswith(".ipynb") and Path(c).exists()}
mods = {c for c in changed if c.startswith("attnlib/") and c.endswith(".py")}
if any(m.startswith("attnlib/experiments/") for m in mods):
    from attnlib.experiments import registry
    importlib.import_module("attnlib.experiments")  # registers every experiment
    for name in registry.names():
        e = registry.get(name)
        src = Path(inspect.getsourcefile(e.func)).resolve().relative_to(Path.cwd().resolve())
        if str(src) in mods:
            out.add(f"book/{e.chapter}.ipynb")
for m in mods:
    parts = Path(m).with_suffix("").parts  # attnlib/figures/mirror -> figures, mirror
    if len(parts) == 3 and parts[1] in ("figures", "explorers"):
        pat = re.compile(rf"attnlib\.{parts[1]}\.{parts[2]}\b|from attnlib\.{parts[1]} import"
                         rf"[^\n]*\b{parts[2]}\b")
        for nb in Path("book").glob("*.ipynb"):
            src = "".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"])
            if pat.search(src):
                out.add(str(nb))
print("\n".join(sorted(p for p in out if Path(p).exists())))
PY
)
# (an empty answer is one empty line: no notebook, not a notebook named "")
[ "${#notebooks[@]}" -eq 1 ] && [ -z "${notebooks[0]}" ] && notebooks=()

rc=0
echo "================ [check] lint ================"
ruff check . || rc=1
echo "================ [check] unit ================"
python -m pytest tests -m "not browser and not slow" -n 2 --dist loadfile -p no:cacheprovider -q -x "$@" || rc=1
echo "================ [check] nbval: ${notebooks[*]:-(no notebook touched)} ================"
if [ "${#notebooks[@]}" -gt 0 ]; then
  ( unset ATTNLIB_EXPLORER
    workers=(); [ "${#notebooks[@]}" -ge 2 ] && workers=(-n 2 --dist loadfile)
    python -m pytest --nbval-lax --nbval-current-env --nbval-cell-timeout=600 \
      -p no:cacheprovider "${workers[@]}" -q "${notebooks[@]}" ) || rc=1
fi
[ "$rc" -eq 0 ] && echo "[check] passed (make test runs everything, the browser tests included)"
exit "$rc"
