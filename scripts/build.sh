#!/usr/bin/env bash
# Build the HTML book strictly into _build/html:  scripts/build.sh [--all] [jupyter-book options]
# (make book runs scripts/setup.sh first).  Any warning or failing notebook cell fails the build.
#
# Notebooks execute during the build, with results cached in _build/.jupyter_cache (keyed by
# the notebooks' code).  attnlib is part of the key: when the hash of attnlib/** (code and
# package data) differs from the last build's, the cache and Sphinx's environment are emptied
# first, so a change in the library re-executes every notebook.  --all re-reads every page (all warnings
# are reported again) but still reuses cached executions.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
# Explorers render as static, browser-only figures on the website (attnlib.explorers reads it).
export ATTNLIB_EXPLORER=static

[ -x .venv/bin/jupyter-book ] || { echo "[build] no .venv: run 'make book' (or scripts/setup.sh)" >&2; exit 1; }
[ -f _static_offline/mathjax/tex-mml-chtml.js ] || { echo "[build] no offline MathJax: run scripts/setup.sh" >&2; exit 1; }

mkdir -p _build
# (every file of the package: its source and its package data, such as recorded results)
src_hash=$(find attnlib -type f -not -path '*/__pycache__/*' -not -name '*.pyc' | LC_ALL=C sort \
           | xargs sha256sum | sha256sum | cut -c1-16)
if [ "$(cat _build/.attnlib-source-hash 2>/dev/null)" != "$src_hash" ]; then
  echo "[build] attnlib source hash $src_hash is new: clearing the execution cache"
  rm -rf _build/.jupyter_cache _build/.doctrees _build/html _build/jupyter_execute
  echo "$src_hash" > _build/.attnlib-source-hash
fi

t0=$(date +%s)
# Notebooks without a cached execution run in parallel first (one per CPU core); the build
# then reads them from the cache.  If this step fails, the build executes them itself.
prerun_ok=1
set +e
python scripts/prerun.py 2>&1 | tee _build/prerun.log
[ "${PIPESTATUS[0]}" -eq 0 ] || { prerun_ok=0; echo "[build] parallel pre-execution failed: the build executes the notebooks"; }
jupyter-book build . -W -n --keep-going "$@" 2>&1 | tee _build/build.log
rc=${PIPESTATUS[0]}
set -e
echo "[build] jupyter-book exited with $rc after $(( $(date +%s) - t0 )) s (log: _build/build.log)"
# Each notebook runs once: after a successful pre-execution the build must find every notebook
# in the cache but those the pre-execution left to it (a cell that failed or timed out).  A
# notebook that myst-nb executes again means the cache keys differ (the notebook as prerun.py
# stores it against the notebook as the build reads it): that fails the build.
if [ "$prerun_ok" -eq 1 ] && [ "$rc" -eq 0 ]; then
  left=$(sed -n 's/^\[prerun\] \([^ ]*\.ipynb\): .*(left to the build)$/\1/p' _build/prerun.log)
  again=$(grep -E "Executing notebook using" _build/build.log | grep -v -F "${left:-//none//}" || true)
  if [ -n "$again" ]; then
    echo "[build] FAILED: the build executed notebooks that the pre-execution had cached:" >&2
    echo "$again" >&2
    rc=1
  fi
fi
if [ "$rc" -eq 0 ]; then
  echo "[build] The book is in _build/html. Open file://$ROOT/_build/html/index.html"
  echo "[build] or serve it with 'make serve' (http://127.0.0.1:8000)."
fi
exit "$rc"
