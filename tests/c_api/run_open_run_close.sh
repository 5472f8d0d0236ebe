#!/bin/sh
# ctest driver for open_run_close.c: compiles two testdata models with aicfc, checks that neither
# the C test program nor the compiled libmodel.so loads an OpenMP runtime (host kernels own no
# threads: the runtime's pool runs them), then runs it with the pool's 4 threads and expects
# "ok" and exit 0 (a pool worker left running after aicf_close, or one that never stops, fails
# it).
# usage: run_open_run_close.sh AICFC TEST_PROGRAM TESTDATA WORK_DIR
set -u
aicfc=$1 prog=$2 testdata=$3 work=$4
rm -rf "$work" && mkdir -p "$work" || exit 1
if ldd "$prog" | grep -E 'lib(g|i)?omp'; then
  echo "FAIL: $prog loads an OpenMP runtime itself; it must link only libaicf_runtime"
  exit 1
fi
for m in mlp_op13 mlp_op17; do
  "$aicfc" "$testdata/models/$m/model.onnx" -o "$work/$m" >/dev/null || exit 1
  if ldd "$work/$m/libmodel.so" | grep -E 'lib(g|i)?omp'; then
    echo "FAIL: $work/$m/libmodel.so loads an OpenMP runtime"
    exit 1
  fi
done
out=$("$prog" \
  "$work/mlp_op13" "$testdata/models/mlp_op13/inputs/x.npy" "$testdata/models/mlp_op13/outputs/logits.npy" \
  "$work/mlp_op17" "$testdata/models/mlp_op17/inputs/x.npy" "$testdata/models/mlp_op17/outputs/logits.npy")
rc=$?
echo "$out"
if [ $rc -ne 0 ] || [ "$out" != "ok" ]; then
  echo "FAIL: exit $rc"
  exit 1
fi
rm -rf "$work"
