#!/usr/bin/env bash
# make test: every test of the project (make test runs scripts/setup.sh first):
#   0. lint   ruff check (the configuration in pyproject.toml)
#   1. nbval  every notebook under book/, top to bottom (scripts/nbval.sh)
#   2. build  a strict build of the book, every page re-read (scripts/build.sh --all)
#   3. site   the browser test against that build (pytest -m browser)
#   4. unit   pytest tests/ (all but the browser tests), run beside the end of step 1 and
#             beside steps 2 and 3
# nbval's last notebook (usually the reproduction report) runs alone on one core, the build
# uses one core and the browser test waits part of the time (for pages, for animations played
# in real time), so the unit tests take what the three leave of the cores: they start when one
# notebook is left, their output is kept and shown once the browser test has finished
# (CONTRIBUTING.md, "How long it takes").
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
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# CPU_OF FILE: the CPU seconds (user + system) of finished child processes in the output of
# bash's `times` (its second line), written by the shell whose children they were.
cpu_of() {
  awk 'NR==2 { split($1, u, /[ms]/); split($2, s, /[ms]/)
               printf "%.0f", u[1]*60 + u[2] + s[1]*60 + s[2] }' "$1"
}
# RUN NAME COMMAND...: the command in a subshell that writes its exit status, wall seconds and
# its processes' CPU seconds to $logs/NAME.{rc,sec,cpu} (each step counts its own processes,
# also while another step runs beside it).
run() {
  local name=$1; shift
  ( t0=$(date +%s)
    "$@"
    echo $? > "$logs/$name.rc"; echo $(( $(date +%s) - t0 )) > "$logs/$name.sec"
    times > "$logs/$name.cpu" )
}
record() {
  names+=("$1"); codes+=("$(cat "$logs/$1.rc")"); secs+=("$(cat "$logs/$1.sec")")
  cpus+=("$(cpu_of "$logs/$1.cpu")")
}
step() {
  local name=$1; shift
  echo
  echo "================ [test] $name: $* ================"
  run "$name" "$@"
  record "$name"
}
t_all=$(date +%s)

step lint    ruff check .
# (two pytest-xdist workers, one test file per worker; the files handed out dearest first, by
# their tests marked slow, tests/conftest.py, so that neither worker waits long for the other
# at the end; the ten slowest tests are listed at the end of the step)
unit=(python -m pytest tests -m "not browser" -n 2 --dist loadfile -p no:cacheprovider -q
      -rfEs --durations=10)
# The unit tests start once nbval is down to its last notebook (usually the reproduction
# report, which runs alone on one core): scripts/nbval.sh lists the notebooks it has finished in
# _build/nbval_exec/.finished/ (scripts/nbval_record.py), with their number in "expected".
finished=_build/nbval_exec/.finished
rm -rf "$finished"
unit_when_one_notebook_is_left() {
  local n k
  while [ ! -f "$logs/nbval.rc" ]; do
    if [ -f "$finished/expected" ]; then
      n=$(cat "$finished/expected")
      k=$(find "$finished" -type f -not -name expected | wc -l)
      [ "$k" -ge $(( n - 1 )) ] && break
    fi
    sleep 2
  done
  run unit "${unit[@]}" > "$logs/unit.log" 2>&1
}
unit_when_one_notebook_is_left &
unit_pid=$!
step nbval   scripts/nbval.sh
echo
echo "================ [test] unit (beside nbval's last notebook, the build and site; output below): ${unit[*]} ================"
step build   scripts/build.sh --all
# (two workers again, one Chromium each for the whole session; all tests of one page in one
# worker, tests/conftest.py, so that each page is loaded once and read at both screen sizes:
# site_helpers.visit; groups in the order of the files, so that JupyterLab's ten chapters, the
# longest group, start first)
# (only the files that hold browser tests, each marked `pytest.mark.browser` in its file: each
# of the three pytest processes would otherwise import every test module, about 7 s apiece)
mapfile -t browser_files < <(grep -l "mark\.browser" tests/test_*.py)
step site    python -m pytest "${browser_files[@]}" -m browser -n 2 --dist loadgroup \
               --no-loadscope-reorder -p no:cacheprovider -q \
               -rfEs --durations=10
wait "$unit_pid"
echo
echo "================ [test] unit: ${unit[*]} ================"
cat "$logs/unit.log"
record unit

echo
echo "================ [test] summary ================"
# (wall seconds, and the CPU seconds of the step's processes: user + system, as `time` counts
# them; a process that outlives its parent, such as a browser the driver left behind, is not
# counted)
fail=0; cpu=0
for i in "${!names[@]}"; do
  status=passed; [ "${codes[$i]}" -ne 0 ] && { status="FAILED (exit ${codes[$i]})"; fail=1; }
  printf '  %-6s %-20s %5s s   %5s CPU-s\n' "${names[$i]}" "$status" "${secs[$i]}" "${cpus[$i]}"
  cpu=$(( cpu + cpus[i] ))
done
wall=$(( $(date +%s) - t_all ))
printf '  %-6s %-20s %5s s   %5s CPU-s   (unit ran beside the last notebook, build and site)\n' all "" "$wall" "$cpu"
[ -d _build/screenshots ] && echo "  screenshots: _build/screenshots/"
exit "$fail"
