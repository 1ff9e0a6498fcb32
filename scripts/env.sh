# Sourced by scripts/build.sh and scripts/test.sh: the environment every build and test runs in.
# shellcheck shell=bash
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The venv's python (and its kernel, whose kernel.json runs plain "python") comes first, and its
# "python3" kernelspec wins over one a user may have installed elsewhere.
export PATH="$ROOT/.venv/bin:$PATH"
export JUPYTER_PATH="$ROOT/.venv/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}"
# Results of attnlib.experiments.run (keyed by settings and attnlib's source): computed once by
# the chapters (under nbval or the build) and reused by the reproduction report page.
export ATTNLIB_CACHE="${ATTNLIB_CACHE:-$ROOT/_build/attnlib_cache}"
# Bytecode is written on first import and kept (.venv's packages, and __pycache__/ folders that
# git ignores): set-up installs without compiling every module (scripts/setup.sh), so a process
# that may not write it would compile what it imports again, every time.
unset PYTHONDONTWRITEBYTECODE
# Notebooks run two at a time (nbval workers, build pre-execution) on small tensors: one BLAS /
# OpenMP thread per kernel avoids oversubscribing the cores (two threads each made tiny torch
# operations up to 50x slower on a busy 2-core machine).  Override by exporting your own value.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
export MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
