#!/usr/bin/env bash
# Run EVERY notebook under book/ top to bottom with nbval (--nbval-lax: every cell runs, a cell
# fails the test if it raises; only cells marked "# NBVAL_CHECK_OUTPUT" compare outputs).
#   scripts/nbval.sh [extra pytest options]
# MyST-markdown notebooks (.md pages with a kernelspec in their front matter) are converted to
# .ipynb with jupytext under _build/nbval/ first, since nbval reads only .ipynb files.
# Two pytest-xdist workers; --dist loadfile keeps each notebook on one worker (one kernel).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
# Explorers run in "both" mode: the live explorer a reader's Jupyter shows is built and drawn
# (ipywidgets, no browser), and the static page the website shows is returned.  What nbval
# executes is recorded (scripts/nbval_record.py) into _build/nbval_exec/, and the build's
# pre-execution (scripts/prerun.py) caches those records instead of executing the notebooks
# again: in make test each notebook runs once.
export ATTNLIB_EXPLORER=both
export NBVAL_RECORD="$ROOT/_build/nbval_exec"
export PYTHONPATH="$ROOT/scripts${PYTHONPATH:+:$PYTHONPATH}"

mapfile -t nbs < <(find book -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' | LC_ALL=C sort)
mapfile -t mds < <(find book -name '*.md' -not -path '*/.ipynb_checkpoints/*' -print0 \
                   | xargs -0 -r grep -l -E '^[[:space:]]*kernelspec:' | LC_ALL=C sort)
if [ "${#mds[@]}" -gt 0 ]; then
  rm -rf _build/nbval && mkdir -p _build/nbval
  for md in "${mds[@]}"; do
    out=_build/nbval/${md%.md}.ipynb
    mkdir -p "$(dirname "$out")"
    jupytext --quiet --to ipynb --output "$out" "$md"
    nbs+=("$out")
  done
fi
if [ "${#nbs[@]}" -eq 0 ]; then
  echo "[nbval] no notebooks under book/: nothing to run"
  exit 0
fi
echo "[nbval] ${#nbs[@]} notebook(s): ${nbs[*]}"
# (the notebooks finished so far are listed in $NBVAL_RECORD/.finished/, scripts/nbval_record.py:
# scripts/test.sh starts the unit tests when one is left)
rm -rf "$NBVAL_RECORD/.finished" && mkdir -p "$NBVAL_RECORD/.finished"
echo "${#nbs[@]}" > "$NBVAL_RECORD/.finished/expected"
# Two workers take the notebooks in the order given (--no-loadscope-reorder): the slowest
# first, so that no core is left idle while the other runs a long chapter at the end (the
# order and its measured run times: scripts/book_toc.py, one home for nbval and the build's
# pre-execution); the reproduction report last: it reuses the results the chapters have just
# cached (ATTNLIB_CACHE), computes only what no chapter runs at its default settings, and
# waits for (never computes twice) a result that the chapter on the other core is computing,
# while scripts/test.sh starts the unit tests on the core left free.  The per-cell timeout is
# long enough for the report's own experiments.
mapfile -t ordered < <(python scripts/book_toc.py --order report-last "${nbs[@]}")
[ "${#ordered[@]}" -eq "${#nbs[@]}" ] || { echo "[nbval] scripts/book_toc.py could not order the notebooks" >&2; exit 1; }
workers=()
[ "${#ordered[@]}" -ge 2 ] && workers=(-n 2 --dist loadfile --no-loadscope-reorder)
python -m pytest --nbval-lax --nbval-current-env --nbval-cell-timeout=900 \
  -p nbval_record -p no:cacheprovider "${workers[@]}" -q -rfE "$@" "${ordered[@]}"
