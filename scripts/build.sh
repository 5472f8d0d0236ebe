#!/usr/bin/env bash
# Configures and builds aicf into build/ (Release). Used by demo.sh and test.sh.
# Extra arguments go to `cmake --build` (e.g. --target aicfc).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build build -j"$jobs" "$@"
