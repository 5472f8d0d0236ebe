#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs the whole suite through
# ctest — unit tests, IR goldens, model tests, the formatting check, and the unit tests again
# under AddressSanitizer + UndefinedBehaviorSanitizer (built in build-asan/, run as `unit-asan`).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)

# Sanitizer build of the unit tests first, so the main ctest run below includes it.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DAICF_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs" --target aicf_unit

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DAICF_ASAN_UNIT="$PWD/build-asan/tests/aicf_unit" >/dev/null
cmake --build build -j"$jobs"

cd build
status=0
ctest --output-on-failure -j"$jobs" --timeout 900 || status=$?
echo "test.sh: total time $(( $(date +%s) - start ))s"
exit $status
