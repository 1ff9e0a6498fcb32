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
# Explorers run live here (ipywidgets, no browser), as a reader's Jupyter would run them.
unset ATTNLIB_EXPLORER

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
# The reproduction report reuses the results the chapters have just cached (ATTNLIB_CACHE), so it
# runs last, on its own, with a per-cell timeout long enough for the experiments that no chapter
# runs at the paper's scale (the report computes those itself).
report=(); rest=()
for nb in "${nbs[@]}"; do
  if [ "$nb" = book/reproduction.ipynb ]; then report=("$nb"); else rest+=("$nb"); fi
done
workers=()
[ "${#rest[@]}" -ge 2 ] && workers=(-n 2 --dist loadfile)
rc=0
if [ "${#rest[@]}" -gt 0 ]; then
  python -m pytest --nbval-lax --nbval-current-env --nbval-cell-timeout=300 \
    -p no:cacheprovider "${workers[@]}" -q -rfE "$@" "${rest[@]}" || rc=$?
fi
if [ "${#report[@]}" -gt 0 ]; then
  python -m pytest --nbval-lax --nbval-current-env --nbval-cell-timeout=1800 \
    -p no:cacheprovider -q -rfE "$@" "${report[@]}" || rc=$?
fi
exit "$rc"
