#!/usr/bin/env bash
# The checks a session runs when it is lent a GPU machine (docs/gpu-results.md), in two halves:
#
#   scripts/gpu_session.sh pack   here (the build tree built): .gpu/bundle.tar.xz with aicfc,
#                                 aicf-run, the unit tests, the runtime and the Debian libraries
#                                 they link (the GPU machine has another distribution), and the
#                                 host emulation's outputs of every reduced-precision test plan
#   scripts/gpu_session.sh run    there, from the repository root, with .gpu carried: the CUDA
#                                 unit tests; every testdata model's fp32 / tf32 / fp16 / bf16
#                                 plans against its reference and the host emulation; the bench
#                                 cases (bundled blocks and six torchvision CNNs exported there)
#                                 against PyTorch's CUDA Graph replay at each precision
#
# Results go to $OUT (default /tmp/gpu-out): unit.txt, check.txt, run.txt, session.log,
# profiles.tar.gz, smi.txt. Every step has its own time limit so that one stuck step still
# leaves the others' results.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PRECISIONS=${PRECISIONS:-fp32 tf32 fp16 bf16}
RUN_PRECISIONS=${RUN_PRECISIONS:-fp32 fp16 bf16}

pack() {
  local py=bench/.venv/bin/python
  [ -x "$py" ] || py=python3
  rm -rf .gpu && mkdir -p .gpu/lib
  cp -L /lib/x86_64-linux-gnu/{libonnx.so.1,libonnx_proto.so.1,libprotobuf.so.32,libyaml-cpp.so.0.7,libgomp.so.1} .gpu/lib/
  mkdir -p .gpu/stage/build/tests
  for f in aicfc aicf-run tests/aicf_unit tests/libaicf_fake_cudart.so; do
    strip -o .gpu/stage/build/$f build/$f
  done
  strip -o .gpu/stage/build/libaicf_runtime.so.0.1.0 build/libaicf_runtime.so.0.1.0
  ln -s libaicf_runtime.so.0.1.0 .gpu/stage/build/libaicf_runtime.so.0.1
  ln -s libaicf_runtime.so.0.1 .gpu/stage/build/libaicf_runtime.so
  cp -r .gpu/lib .gpu/stage/build/gpu-libs
  tar -C .gpu/stage -cJf .gpu/bundle.tar.xz build
  rm -rf .gpu/stage .gpu/lib
  # shellcheck disable=SC2086 # word splitting intended
  "$py" bench/gpu_bench.py emulate --precisions $(echo $PRECISIONS | sed 's/fp32//') \
    --out /tmp/gpu-emulate --emulated .gpu/emulated --jobs "$(nproc)"
  du -sh .gpu
}

run() {
  local out=${OUT:-/tmp/gpu-out} work=/tmp/gpu-work t0=$SECONDS
  mkdir -p "$out" "$work"
  local log=$out/session.log
  say() { echo "[gpu-session +$((SECONDS - t0))s] $*" | tee -a "$log"; }
  # The binaries were built at /work/main: their test data and runtime paths name it.
  [ -e /work/main ] || { mkdir -p /work && ln -s "$ROOT" /work/main; }
  tar -xJf .gpu/bundle.tar.xz
  export LD_LIBRARY_PATH=$ROOT/build/gpu-libs:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  export PYTHONUNBUFFERED=1
  nvidia-smi > "$out/smi.txt" 2>&1
  build/aicfc --version >> "$log" 2>&1 || say "aicfc does not start here"
  say "unit tests and CNN export in the background"
  # One process per group, as ctest runs them: the device-choice cases load a fake libcudart
  # (AICF_CUDART_LIBRARY), and the runtime keeps the first libcudart it loads for the process.
  (for f in 'cuda:*' 'runtime cuda*' '*device choice*'; do
     echo "== $f"
     timeout 150 build/tests/aicf_unit -tc="$f" 2>&1 | tail -4
   done > "$out/unit.txt" 2>&1) &
  local unit=$!
  (timeout 200 python3 scripts/gen_cnn_models.py bench/models >> "$log" 2>&1) &
  local export=$!
  say "check: every testdata model at $PRECISIONS"
  # shellcheck disable=SC2086
  timeout 180 python3 bench/gpu_bench.py check --precisions $PRECISIONS --emulated .gpu/emulated \
    --out "$work" --jobs 12 > "$out/check.txt" 2>> "$log"
  say "check rc=$?"
  wait "$export"
  say "compile the bench cases at $RUN_PRECISIONS"
  # shellcheck disable=SC2086
  timeout 120 python3 bench/gpu_bench.py compile --precisions $RUN_PRECISIONS --out "$work/run" \
    --jobs 16 2>> "$log"
  wait "$unit"
  say "unit: $(grep -c SUCCESS "$out/unit.txt") of 3 groups passed"
  say "run: aicf against PyTorch"
  # shellcheck disable=SC2086
  timeout "${RUN_LIMIT:-230}" python3 bench/gpu_bench.py run --precisions $RUN_PRECISIONS \
    --out "$work/run" --peer torch --reps 100 --rounds 2 > "$out/run.txt" 2>> "$log"
  say "run rc=$?"
  tar -C "$work/run" -czf "$out/profiles.tar.gz" $(cd "$work/run" && ls ./*.profile.txt 2>/dev/null)
  say "done"
}

case "${1:-}" in
  pack) pack ;;
  run) run ;;
  *) echo "usage: scripts/gpu_session.sh pack|run" >&2; exit 2 ;;
esac
