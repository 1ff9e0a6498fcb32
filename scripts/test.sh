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

names=(); codes=(); secs=(); cpus=()
# CPU_NOW: the CPU seconds (user + system) of this script's finished child processes so far,
# from bash's `times` (second line), which must run in this shell: called as `cpu_now`, never
# inside $( ), whose subshell has children of its own.
cpu_now() {
  times > _build/.test-cpu
  CPU_NOW=$(awk 'NR==2 { split($1, u, /[ms]/); split($2, s, /[ms]/)
                         printf "%.0f", u[1]*60 + u[2] + s[1]*60 + s[2] }' _build/.test-cpu)
}
step() {
  local name=$1; shift
  echo
  echo "================ [test] $name: $* ================"
  local t0 c0; t0=$(date +%s); cpu_now; c0=$CPU_NOW
  "$@"
  local rc=$?
  names+=("$name"); codes+=("$rc"); secs+=("$(( $(date +%s) - t0 ))")
  cpu_now; cpus+=("$(( CPU_NOW - c0 ))")
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
# (wall seconds, and the CPU seconds of the step's processes: user + system, as `time` counts
# them; a process that outlives its parent, such as a browser the driver left behind, is not
# counted)
fail=0; wall=0; cpu=0
for i in "${!names[@]}"; do
  status=passed; [ "${codes[$i]}" -ne 0 ] && { status="FAILED (exit ${codes[$i]})"; fail=1; }
  printf '  %-6s %-20s %5s s   %5s CPU-s\n' "${names[$i]}" "$status" "${secs[$i]}" "${cpus[$i]}"
  wall=$(( wall + secs[i] )); cpu=$(( cpu + cpus[i] ))
done
printf '  %-6s %-20s %5s s   %5s CPU-s\n' all "" "$wall" "$cpu"
[ -d _build/screenshots ] && echo "  screenshots: _build/screenshots/"
exit "$fail"
