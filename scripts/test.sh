#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs the whole suite through
# ctest — unit tests (unit/<file>), IR goldens, model tests, the install tree with the C and
# CMake examples built against it (install/examples), the Python package under pytest
# (python/pytest), the formatting check, and the unit tests again under AddressSanitizer +
# UndefinedBehaviorSanitizer (built in build-asan/, run as `unit-asan/<file>`), and, where clang
# is installed, a 15 s run of each libFuzzer harness (built in build-fuzz/, run as
# `fuzz/<harness>`; AICF_TEST_FUZZ=0 skips them).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/setup.sh
scripts/cuda_tools.sh # cuobjdump for the CUDA tests' SASS checks (only where nvcc is)
scripts/python_env.sh # numpy, pytest and the Python package's build backend (.tools/pyvenv)
jobs=$(nproc 2>/dev/null || echo 2)

# Sanitizer build of the unit tests first, so the main ctest run below includes it. aicfc too:
# the unit tests that run the aicfc beside them (the bad-model corpus end to end) then run it
# under the sanitizers, and never a stale one left by an earlier build.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DAICF_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs" --target aicf_unit aicfc

# The fuzz harnesses (libraries + four harnesses only; clang, ASan + UBSan).
fuzz_dir=""
if [ "${AICF_TEST_FUZZ:-1}" != 0 ] && command -v clang++ >/dev/null; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DAICF_FUZZ=ON "${launcher[@]}" >/dev/null
  cmake --build build-fuzz -j"$jobs" --target fuzz_harnesses
  fuzz_dir="$PWD/build-fuzz"
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DAICF_ASAN_UNIT="$PWD/build-asan/tests/aicf_unit" -DAICF_FUZZ_DIR="$fuzz_dir" >/dev/null
cmake --build build -j"$jobs"

cd build
status=0
ctest --output-on-failure -j"$jobs" --timeout 900 || status=$?
echo "test.sh: total time $(( $(date +%s) - start ))s"
exit $status
