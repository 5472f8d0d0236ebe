#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer harnesses (tests/fuzz, clang, ASan + UBSan) in build-fuzz/,
# seeds each one's corpus from testdata, runs each for FUZZ_SECONDS and reports executions and
# coverage. New crashes are deduplicated by their sanitizer summary and saved as
# testdata/fuzz/pending/<harness>/<name> with <name>.crash (the summary); once fixed, move the
# input to testdata/fuzz/<harness>/ and give it a <name>.expected (see docs/contributing.md, "Fuzzing").
#
#   scripts/fuzz.sh [--seconds N] [--targets "onnx ir npy runtime"] [--build-dir DIR]
#                   [--no-build] [--check]
# Environment: FUZZ_SECONDS (default 60), FUZZ_TARGETS (default: all four).
# --check (the fuzz/* ctest tests): stop at the first crash and fail; nothing is saved under
# testdata.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

seconds=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-onnx ir npy runtime}
build=build-fuzz
do_build=1
check=0
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --check) check=1; shift ;;
    *) echo "fuzz.sh: unknown argument '$1'" >&2; exit 1 ;;
  esac
done
case $seconds in ''|*[!0-9]*) echo "fuzz.sh: --seconds wants a number, got '$seconds'" >&2; exit 1 ;; esac
for t in $targets; do
  case $t in onnx|ir|npy|runtime) ;; *) echo "fuzz.sh: unknown harness '$t' (onnx ir npy runtime)" >&2; exit 1 ;; esac
done

if [ $do_build = 1 ]; then
  if ! command -v clang++ >/dev/null; then
    echo "fuzz.sh: the fuzz harnesses need clang (apt-get install clang)" >&2
    exit 1
  fi
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DAICF_FUZZ=ON "${launcher[@]}" >/dev/null
  cmake --build "$build" -j"$(nproc 2>/dev/null || echo 2)" --target fuzz_harnesses
fi

# Per harness: the longest input worth mutating, and the seeds (files or folders) from testdata.
max_len() {
  case $1 in
    onnx) echo 80000 ;;   # the small models whole (the cnn 28 KB, the mlp 72 KB), every one shrunk
    ir) echo 16384 ;;
    npy) echo 8192 ;;
    runtime) echo 16384 ;; # plan.yaml + weights.bin of the harness' small model
  esac
}

# Copies the seeds of harness $1 into $2 (regenerated each run; the corpus itself persists).
seed() {
  local h=$1 dir=$2
  rm -rf "$dir" && mkdir -p "$dir"
  local f
  case $h in
    onnx)
      # Every ONNX model under testdata, the small ones whole and each one shrunk (its large
      # initializers made inputs: writeOnnxSeeds in tests/fuzz/fuzz_bodies.h).
      for f in $(find testdata -name '*.onnx' -not -path '*/fuzz/*' | sort); do
        [ "$(stat -c %s "$f")" -le 80000 ] && cp "$f" "$dir/$(echo "$f" | tr / _)"
      done
      AICF_FUZZ_ONNX_SEEDS="$dir/shrunk" "$build/tests/fuzz/fuzz_onnx" -runs=0 >/dev/null 2>&1
      mv "$dir"/shrunk/* "$dir"/ 2>/dev/null && rmdir "$dir/shrunk" ;;
    ir)
      find testdata/ir -name '*.mcir' | while read -r f; do cp "$f" "$dir/$(echo "$f" | tr / _)"; done ;;
    npy)
      find testdata -name '*.npy' -size -8k | while read -r f; do cp "$f" "$dir/$(echo "$f" | tr / _)"; done ;;
    runtime)
      AICF_FUZZ_RUNTIME_SEED="$dir/valid" "$build/tests/fuzz/fuzz_runtime" -runs=0 >/dev/null 2>&1 ;;
  esac
  # The saved regressions are seeds too; the known unfixed crashes (pending/) only for
  # `make fuzz`, which skips past crashes (--check would stop at them).
  local saved=(testdata/fuzz/"$h"/*)
  [ $check = 1 ] || saved+=(testdata/fuzz/pending/"$h"/*)
  for f in "${saved[@]}"; do
    case $f in *.expected|*.crash) continue ;; esac
    [ -f "$f" ] && cp "$f" "$dir/saved_$(basename "$f")"
  done
  return 0
}

# The line identifying a crash: the sanitizer's SUMMARY, else the harness' internal error, else
# libFuzzer's verdict (timeout, out-of-memory).
signature() {
  local log=$1
  grep -m1 -E '^SUMMARY: ' "$log" | sed -E 's/ \(BuildId: [0-9a-f]+\)//' ||
    grep -m1 -E '^internal error: ' "$log" ||
    grep -m1 -E '^==[0-9]+== ERROR: libFuzzer: ' "$log" | sed 's/^==[0-9]*== //' ||
    echo "unknown crash"
}

# intercept_tls_get_addr=0: see tests/CMakeLists.txt (GCC 12's runtime misreads some dynamic TLS
# blocks of dlopened plans and LeakSanitizer's tracer crashes at exit).
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:intercept_tls_get_addr=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export AICF_HOST_HARDWARE=${AICF_HOST_HARDWARE:-$root/testdata/targets/ci-host.yaml}

summary="$build/fuzz-summary.txt"
: >"$summary"
status=0
for h in $targets; do
  bin="$build/tests/fuzz/fuzz_$h"
  [ -x "$bin" ] || { echo "fuzz.sh: $bin is not built" >&2; exit 1; }
  corpus="$build/corpus/$h" seeds="$build/seeds/$h" art="$build/artifacts/$h/" log="$build/fuzz-$h.log"
  mkdir -p "$corpus" "$art"
  seed "$h" "$seeds"
  echo "fuzz.sh: $h for ${seconds}s (corpus $corpus, log $log)"
  args=(-max_total_time="$seconds" -max_len="$(max_len "$h")" -timeout=30 -rss_limit_mb=4096 -print_funcs=0
        -print_final_stats=1 -artifact_prefix="$art")
  if [ $check = 1 ]; then
    rc=0
    "$bin" "${args[@]}" "$corpus" "$seeds" >"$log" 2>&1 || rc=$?
    if [ $rc != 0 ]; then
      echo "fuzz.sh: $h crashed: $(signature "$log")" >&2
      grep -m1 -E '^artifact_prefix=|Test unit written to' "$log" >&2 || true
      tail -n 60 "$log" >&2
      status=1
    fi
  else
    # Keep going after a crash (-fork with -ignore_*): one run finds several distinct bugs.
    "$bin" "${args[@]}" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
      "$corpus" "$seeds" >"$log" 2>&1 || true
  fi
  stats=$(grep -E 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1 || true)
  execs=$(grep -E '^stat::number_of_executed_units' "$log" | tail -n 1 | awk '{print $2}' || true)
  echo "$h: ${stats:-no stats} ${execs:+(executed units: $execs)}" | tee -a "$summary"

  [ $check = 1 ] && continue
  # Save each new distinct crash under testdata/fuzz/pending/$h.
  pending="testdata/fuzz/pending/$h"
  for a in "$art"crash-* "$art"timeout-* "$art"oom-* "$art"leak-*; do
    [ -f "$a" ] || continue
    name=$(basename "$a")
    if [ -e "testdata/fuzz/$h/$name" ] || [ -e "$pending/$name" ]; then rm -f "$a"; continue; fi
    replay="$build/replay-$h.log"
    "$bin" -timeout=30 -rss_limit_mb=4096 "$a" >"$replay" 2>&1 || true
    sig=$(signature "$replay")
    if grep -qsxF -- "$sig" "$pending"/*.crash "testdata/fuzz/$h"/*.crash 2>/dev/null; then
      rm -f "$a"; continue  # a known crash
    fi
    mkdir -p "$pending"
    mv "$a" "$pending/$name"
    echo "$sig" >"$pending/$name.crash"
    echo "fuzz.sh: NEW $h crash: $pending/$name: $sig" | tee -a "$summary"
    status=1
  done
done
echo "fuzz.sh: summary in $summary"
exit $status
