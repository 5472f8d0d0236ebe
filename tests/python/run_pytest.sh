#!/bin/sh
# ctest driver for the Python package: installs the build into a fresh prefix, builds the
# package from python/ against it into the project's Python environment (.tools/pyvenv, made by
# scripts/python_env.sh), and runs tests/python with pytest.
# usage: run_pytest.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -u
build=$1 src=$(cd "$2" && pwd) work=$3
rm -rf "$work" && mkdir -p "$work" || exit 1
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
py=$src/.tools/pyvenv/bin/python
[ -x "$py" ] || { echo "FAIL: no $py: run scripts/python_env.sh (scripts/test.sh does)"; exit 1; }
"$py" -c 'import numpy, pytest, scikit_build_core, pybind11' ||
  { echo "FAIL: $py lacks numpy / pytest / scikit-build-core / pybind11 (scripts/python_env.sh installs them from PyPI)"; exit 1; }
if ! CMAKE_PREFIX_PATH="$work/prefix" "$py" -m pip install --no-build-isolation --force-reinstall \
  --no-deps -q "$src/python" >"$work/pip.log" 2>&1; then
  cat "$work/pip.log"
  echo "FAIL: pip install python/"
  exit 1
fi
cd "$work" && AICF_TESTDATA="$src/testdata" timeout 600 "$py" -m pytest -q -p no:cacheprovider "$src/tests/python"
