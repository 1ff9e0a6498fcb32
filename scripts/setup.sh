#!/usr/bin/env bash
# Set up everything the book needs, idempotently (make setup; make book and make test call it;
# with --python-only, steps 1 and 2 alone, for make assignments):
#   1. a virtual environment in .venv (Python >= 3.11; choose the interpreter with PYTHON=...),
#   2. torch==2.13.0 first, then every pinned package of requirements.txt, then attnlib
#      in editable mode (with uv, or with pip where uv cannot be had),
#   3. the offline JavaScript (MathJax 3, RequireJS, the ipywidgets HTML manager, plotly.js's
#      basic bundle) from the npm registry, copied into _static_offline/ (served at the site's
#      root via html_extra_path) with our own scripts of scripts/js/.
# Each step leaves a stamp (a hash of its inputs); a step whose inputs did not change is
# skipped, so a second run takes about a second.
#
# Environment: PYTHON (interpreter for the venv, default python3), TORCH_INDEX_URL (an extra
# package index for torch, e.g. https://download.pytorch.org/whl/cpu for a small CPU build or
# https://download.pytorch.org/whl/cu128 for CUDA; see README.md "Running on a GPU"),
# ATTNLIB_INSTALLER=pip (install with pip alone, not with uv).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=.venv
PY=$VENV/bin/python
JS=scripts/js
OFFLINE=_static_offline
# uv, the installer (step 2): pinned here, as the packages are in requirements.txt
UV_VERSION=0.13.9

log() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }
hash_of() { cat "$@" | sha256sum | cut -c1-16; }

# 1. virtual environment ------------------------------------------------------------------
if [ ! -x "$PY" ]; then
  interp=${PYTHON:-python3}
  command -v "$interp" >/dev/null || die "no '$interp' found; install Python >= 3.11 or set PYTHON=..."
  "$interp" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "$("$interp" -V 2>&1) is too old: Python >= 3.11 is required (set PYTHON=...)"
  log "creating $VENV with $("$interp" -V 2>&1)"
  "$interp" -m venv "$VENV" || die "'$interp -m venv' failed (on Debian/Ubuntu: apt-get install python3-venv)"
fi

# 3a. The npm packages are fetched in the background while pip installs the Python packages
# (npm and pip each wait on the network and on the disk much of the time); step 3 waits for them.
want_js=$(hash_of "$JS/package.json" "$JS/package-lock.json")
stamp_js=$JS/node_modules/.attnlib-setup-stamp
npm_pid=""
if [ "${1:-}" != "--python-only" ] && [ "$(cat "$stamp_js" 2>/dev/null)" != "$want_js" ]; then
  command -v npm >/dev/null || die "npm is required for MathJax (Debian/Ubuntu: apt-get install nodejs npm)"
  log "installing MathJax 3, RequireJS, @jupyter-widgets/html-manager and plotly.js from npm (in the background)"
  npm_log=$(mktemp)
  trap 'rm -f "$npm_log"' EXIT
  (cd "$JS" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error) > "$npm_log" 2>&1 &
  npm_pid=$!
fi

# 2. Python packages ------------------------------------------------------------------------
want_py="$(hash_of requirements.txt pyproject.toml)|${TORCH_INDEX_URL:-}"
stamp_py=$VENV/.attnlib-setup-stamp
# (two halves, compiled side by side: the library's stack, and the tools of the build and tests)
warm_up=("import attnlib, attnlib.experiments, attnlib.explorers, attnlib.check, attnlib.course, \
torch, cvxpy, scipy.stats, sklearn, matplotlib.pyplot, tqdm.auto"
"import ipywidgets, ipykernel.kernelapp, nbformat, nbclient, jupytext, pytest, xdist, nbval, \
hypothesis, selenium.webdriver, sphinx.application, myst_nb, jupyter_book, jupyter_cache, \
jupyterlab")
if [ "$(cat "$stamp_py" 2>/dev/null)" != "$want_py" ]; then
  extra=()
  [ -n "${TORCH_INDEX_URL:-}" ] && extra=(--extra-index-url "$TORCH_INDEX_URL")
  torch_pin=$(grep -E '^torch==' requirements.txt) || die "requirements.txt must pin torch==..."
  # The installer: uv (pinned; fetched by the venv's pip) installs the same pinned packages as
  # pip in a few seconds instead of a minute of CPU, reading pip's own configuration (pip.conf
  # and PIP_* variables: indexes, find-links, constraints) and choosing among all indexes as
  # pip does.  Where uv cannot be had or fails, pip installs.
  # (--no-compile for pip; uv does not compile: pip would byte-compile every module of every
  # package, a minute of CPU on two cores; Python compiles a module the first time it is
  # imported and keeps the result, and the warm-up below does that now for what the book, its
  # build and its tests import)
  install() {
    if [ -n "$uv" ]; then
      "$uv" pip install --quiet --python "$PY" --index-strategy unsafe-best-match \
        "${uv_conf[@]}" "${extra[@]}" "$@" && return 0
      log "uv failed: pip installs instead"
      uv=""
    fi
    "$PY" -m pip install --quiet --no-compile "${extra[@]}" "$@"
  }
  uv=""
  if [ "${ATTNLIB_INSTALLER:-uv}" = uv ] \
      && "$PY" -m pip install --quiet --no-compile "uv==$UV_VERSION" >/dev/null 2>&1; then
    uv=$VENV/bin/uv
    mapfile -t uv_conf < <("$PY" "$ROOT/scripts/pip_conf_for_uv.py")
  fi
  log "installing $torch_pin (first, so that no other torch build is pulled in)${uv:+ with uv}"
  install "$torch_pin"
  log "installing requirements.txt"
  install -r requirements.txt
  log "installing attnlib (editable)"
  install --no-deps -e .
  log "compiling what the chapters, the build and the tests import"
  pids=()
  for code in "${warm_up[@]}"; do
    (cd / && env -u PYTHONDONTWRITEBYTECODE "$ROOT/$PY" -c "$code") &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || die "the installed packages do not import: ${warm_up[$i]}"
  done
  echo "$want_py" > "$stamp_py"
fi
# The editable install must point at THIS checkout (a copied or moved venv would not).
origin=$(cd / && "$ROOT/$PY" -c 'import importlib.util as u; s = u.find_spec("attnlib"); print(s.origin if s else "")')
if [ "$origin" != "$ROOT/attnlib/__init__.py" ]; then
  log "installing attnlib (editable) from $ROOT"
  "$PY" -m pip install --quiet --no-deps -e .
fi

# (--python-only: the course kit, make assignments, needs no JavaScript)
[ "${1:-}" = "--python-only" ] && { log "ready (Python only): $("$PY" -V)"; exit 0; }

# JupyterLab: jupytext (the build's converter for MyST pages) ships a lab extension built against
# another @jupyterlab/docregistry, whose remote entry logs "#RUNTIME-012" in the console on every
# JupyterLab page load, even when disabled. The book does not use it in JupyterLab (the build
# needs only jupytext's converter), so its files are removed from this environment.
rm -rf "$VENV/share/jupyter/labextensions/jupyterlab-jupytext"

# 3. Offline JavaScript ---------------------------------------------------------------------
if [ -n "$npm_pid" ]; then
  wait "$npm_pid" || { cat "$npm_log" >&2; die "npm ci failed in $JS (its output above)"; }
  cat "$npm_log"
  echo "$want_js" > "$stamp_js"
fi
want_off="$want_js|$(hash_of scripts/setup.sh "$JS/widgets-offline.js" "$JS/token-drag.js")"
stamp_off=$JS/node_modules/.attnlib-offline-stamp
if [ "$(cat "$stamp_off" 2>/dev/null)" != "$want_off" ] || [ ! -f "$OFFLINE/mathjax/tex-mml-chtml.js" ]; then
  log "copying the offline JavaScript into $OFFLINE/"
  nm=$JS/node_modules
  rm -rf "$OFFLINE"
  mkdir -p "$OFFLINE/mathjax/output/chtml" "$OFFLINE/require" "$OFFLINE/widgets" \
    "$OFFLINE/plotly" "$OFFLINE/explorers"
  # MathJax 3: the combined TeX+MathML -> CHTML component, its fonts, and the TeX extensions
  # it loads on demand (3.3 MB in all).
  cp "$nm/mathjax/es5/tex-mml-chtml.js" "$nm/mathjax/LICENSE" "$OFFLINE/mathjax/"
  cp -r "$nm/mathjax/es5/output/chtml/fonts" "$OFFLINE/mathjax/output/chtml/"
  cp -r "$nm/mathjax/es5/input" "$OFFLINE/mathjax/"
  # RequireJS and the ipywidgets embed manager (with the icon fonts it references), used by
  # myst-nb to render saved widget states (nb_ipywidgets_js in _config.yml).
  cp "$nm/requirejs/require.js" "$OFFLINE/require/"
  cp "$nm/@jupyter-widgets/html-manager/dist/embed-amd.js" "$JS/widgets-offline.js" "$OFFLINE/widgets/"
  find "$nm/@jupyter-widgets/html-manager/dist" -maxdepth 1 -type f \
    \( -name '*.woff' -o -name '*.woff2' -o -name '*.ttf' -o -name '*.eot' -o -name '*.svg' \) \
    -exec cp {} "$OFFLINE/widgets/" \;
  # plotly.js's basic bundle (scatter traces: 1.2 MB, the full bundle is 4.8 MB) and the drag
  # explorer of chapter 2 that draws with it (ours); only that page loads them
  # (attnlib/explorers/token_drag.py writes the relative <script> paths).
  cp "$nm/plotly.js-basic-dist-min/plotly-basic.min.js" "$OFFLINE/plotly/"
  cp "$nm/plotly.js-basic-dist-min/LICENSE" "$OFFLINE/plotly/LICENSE"
  cp "$JS/token-drag.js" "$OFFLINE/explorers/"
  echo "$want_off" > "$stamp_off"
fi
log "ready: $("$PY" -V), torch $("$PY" -c 'import importlib.metadata as m; print(m.version("torch"))')"
