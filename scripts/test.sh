#!/usr/bin/env bash
# make test: every test of the project, in this order (make test runs scripts/setup.sh first):
#   0. lint   ruff check (the configuration in pyproject.toml)
#   1. unit   pytest tests/ (all but the browser tests)
#   2. nbval  every notebook under book/, top to bottom (scripts/nbval.sh)
#   3. build  a strict build of the book, every page re-read (scripts/build.sh --all)
#   4. site   the browser test against that build (pytest -m browser)
# Every step runs even when an earlier one failed (so one run shows every failure); the exit
# status is non-zero if any step failed.  With CI=true the build starts from an empty _build/.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

if [ "${CI:-}" = "true" ]; then
  echo "[test] CI=true: starting from an empty _build/"
  rm -rf _build
fi
mkdir -p _build

names=(); codes=(); secs=()
step() {
  local name=$1; shift
  echo
  echo "================ [test] $name: $* ================"
  local t0; t0=$(date +%s)
  "$@"
  local rc=$?
  names+=("$name"); codes+=("$rc"); secs+=("$(( $(date +%s) - t0 ))")
}

step lint    ruff check .
# (two pytest-xdist workers, one test file per worker: the machine's two cores; the files
# handed out dearest first, by their tests marked slow, tests/conftest.py, so that neither
# worker waits long for the other at the end; the ten slowest tests are listed at the end of
# each step)
step unit    python -m pytest tests -m "not browser" -n 2 --dist loadfile -p no:cacheprovider -q \
               -rfEs --durations=10
step nbval   scripts/nbval.sh
step build   scripts/build.sh --all
# (two workers again, one Chromium each for the whole session; all tests of one page in one
# worker, tests/conftest.py, so that each page is loaded once and read at both screen sizes:
# site_helpers.visit; groups in the order of the files, so that JupyterLab's ten chapters, the
# longest group, start first)
step site    python -m pytest tests -m browser -n 2 --dist loadgroup --no-loadscope-reorder \
               -p no:cacheprovider -q \
               -rfEs --durations=10

echo
echo "================ [test] summary ================"
fail=0
for i in "${!names[@]}"; do
  status=passed; [ "${codes[$i]}" -ne 0 ] && { status="FAILED (exit ${codes[$i]})"; fail=1; }
  printf '  %-6s %-20s %5s s\n' "${names[$i]}" "$status" "${secs[$i]}"
done
[ -d _build/screenshots ] && echo "  screenshots: _build/screenshots/"
exit "$fail"
