#!/usr/bin/env bash
# make serve-demo: serves a bundled model on Triton Inference Server (PyPI nvidia-pytriton, which
# bundles tritonserver) through the aicf Python package, and checks it under concurrent load
# (scripts/serve_demo.py). Sets up what it needs: the build, an install tree in
# .tools/serve-prefix, and a Python environment in .tools/tritonvenv (about 400 MB from PyPI).
# Not part of the test command. Arguments go to serve_demo.py (--requests, --clients, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh >/dev/null
prefix="$PWD/.tools/serve-prefix"
cmake --install build --prefix "$prefix" >/dev/null
venv="$PWD/.tools/tritonvenv"
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
if ! "$venv/bin/python" -c 'import pytriton, numpy, scikit_build_core, pybind11' 2>/dev/null; then
  "$venv/bin/python" -m pip install -q nvidia-pytriton numpy "scikit-build-core>=0.8" "pybind11>=2.10"
fi
CMAKE_PREFIX_PATH="$prefix" "$venv/bin/python" -m pip install -q --no-build-isolation \
  --force-reinstall --no-deps ./python
exec "$venv/bin/python" scripts/serve_demo.py "$@"
