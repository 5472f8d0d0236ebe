#!/usr/bin/env bash
# Compile-time scaling (issue 15, item 12): times `aicfc --emit source` and `aicfc -o` on
# generated chain models of 1k / 2.5k / 5k / 10k nodes and prints the growth ratio per doubling
# of the model (about 2 when compile time is linear, 4 when quadratic). Not part of `make test`:
# timings depend on the machine and its load.
#   scripts/bench_compile.sh [relu|block] [SIZES...]    (default: relu 1000 2500 5000 10000)
# relu: a chain of Relus (pointwise fusion cuts it into kernels of at most 256 nodes);
# block: MatMul + Add + Relu layers with distinct weights (one kernel per layer, one function).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
kind="${1:-relu}"
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000 2500 5000 10000)
aicfc="$root/build/aicfc"
[ -x "$aicfc" ] || { echo "bench_compile: build first (make build): $aicfc" >&2; exit 1; }
export AICF_HOST_HARDWARE="${AICF_HOST_HARDWARE:-$root/testdata/targets/ci-host.yaml}"
work="$(mktemp -d /tmp/aicf-bench-compile.XXXXXX)"
trap 'rm -rf "$work"' EXIT

seconds() { # command... -> wall seconds
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}

growth() { # t2 t1 n2 n1 -> (t2/t1)^(log 2 / log(n2/n1))
  awk -v a="$1" -v b="$2" -v n="$3" -v m="$4" \
    'BEGIN { if (a <= 0 || b <= 0) print "-"; else printf "%.2f", exp(log(a / b) * log(2) / log(n / m)) }'
}

printf "%-6s %8s %14s %10s %14s %10s %9s\n" kind nodes "source (s)" growth "-o (s)" growth functions
prev_n="" prev_s="" prev_o=""
for n in "${sizes[@]}"; do
  /usr/bin/python3 "$root/scripts/gen_chain_model.py" "$n" "$work/m$n.onnx" --kind "$kind"
  s=$(seconds "$aicfc" "$work/m$n.onnx" --emit source)
  o=$(seconds "$aicfc" "$work/m$n.onnx" -o "$work/out$n")
  fns=$(grep -c '^extern "C" void k' "$work/out$n/kernels.cpp" || true)
  gs="-" go="-"
  if [ -n "$prev_n" ]; then
    # Growth normalised to a doubling of the model: (t2/t1)^(log 2 / log(n2/n1)).
    gs=$(growth "$s" "$prev_s" "$n" "$prev_n")
    go=$(growth "$o" "$prev_o" "$n" "$prev_n")
  fi
  printf "%-6s %8d %14.2f %10s %14.2f %10s %9s\n" "$kind" "$n" "$s" "$gs" "$o" "$go" "$fns"
  prev_n=$n prev_s=$s prev_o=$o
done
echo "growth: time ratio per doubling of the model (2 = linear, 4 = quadratic)"
