#!/usr/bin/env bash
# The Python environment of the tests (.tools/pyvenv): Debian's python3 with numpy, pytest and
# the build backend of the aicf Python package (scikit-build-core, pybind11) from PyPI.
# Idempotent: nothing is downloaded when they are present.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$PWD/.tools/pyvenv"
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import numpy, pytest, scikit_build_core, pybind11' 2>/dev/null; then
  # A failed download does not stop the test command: the other tests still run, and ctest's
  # python/pytest fails saying what is missing.
  "$venv/bin/python" -m pip install -q numpy pytest "scikit-build-core>=0.8" "pybind11>=2.10" ||
    echo "python_env: warning: could not install numpy / pytest / scikit-build-core / pybind11" >&2
fi
