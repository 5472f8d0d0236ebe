#!/bin/sh
# ctest driver for the install tree and the examples built against it (docs/deploying.md):
# installs the build into a fresh prefix, checks its files (the runtime's SONAME, its header, the
# CMake package, aicf.pc; the runtime loading nothing of the compiler: no protobuf, no ONNX),
# compiles testdata models with the *installed* aicfc --bundle, builds examples/c with pkg-config
# and examples/cmake with find_package(aicf), and runs both on the models' stored inputs against
# their stored outputs, plus the C example's errors; then examples/ci's golden check.
# usage: run_install_examples.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -u
build=$1 src=$2 work=$3
testdata=$src/testdata
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || exit 1
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "cmake --install"; }
for f in bin/aicfc bin/aicf-run bin/aicf-opt bin/aicf-diff include/aicf_runtime.h lib/libaicf_runtime.so \
  lib/cmake/aicf/aicfConfig.cmake lib/cmake/aicf/aicfConfigVersion.cmake \
  lib/cmake/aicf/aicfTargets.cmake lib/pkgconfig/aicf.pc; do
  [ -e "$prefix/$f" ] || fail "the install tree lacks $f"
done
soname=$(readelf -d "$prefix/lib/libaicf_runtime.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ -n "$soname" ] && [ -e "$prefix/lib/$soname" ] || fail "libaicf_runtime.so has no SONAME file ($soname)"
if ldd "$prefix/lib/libaicf_runtime.so" | grep -E 'protobuf|onnx|omp'; then
  fail "the runtime loads a compiler dependency"
fi

# The installed compiler, bundles only: exactly what the runtime reads.
aicfc=$prefix/bin/aicfc
"$aicfc" "$testdata/models/mlp_op17/model.onnx" -o "$work/mlp" --bundle --quiet || fail "aicfc mlp"
"$aicfc" "$testdata/models/dtypes_op17/model.onnx" -o "$work/dtypes" --bundle --quiet || fail "aicfc dtypes"
"$aicfc" "$testdata/models/mlp_dyn_op13/model.onnx" --dim batch=1..64@8 -o "$work/mlp_dyn" --bundle \
  --quiet || fail "aicfc mlp_dyn"
files=$(cd "$work/mlp" && ls -A | tr '\n' ' ')
[ "$files" = ".aicf-output libmodel.so plan.yaml weights.bin " ] || fail "--bundle wrote: $files"

# examples/c through pkg-config.
pc="env PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -O2 "$src/examples/c/run_folder.c" -I"$src/examples/common" \
  $($pc --cflags --libs aicf) -lm -Wl,-rpath,"$($pc --variable=libdir aicf)" -o "$work/run_folder" ||
  fail "building examples/c"
in=$testdata/models
"$work/run_folder" "$work/mlp" x="$in/mlp_op17/inputs/x.npy" --threads 2 \
  --reference "$in/mlp_op17/outputs" || fail "run_folder mlp"
set -- $(cd "$in/dtypes_op17/inputs" && for f in *.npy; do echo "${f%.npy}=$in/dtypes_op17/inputs/$f"; done)
"$work/run_folder" "$work/dtypes" "$@" --reference "$in/dtypes_op17/outputs" --save "$work" ||
  fail "run_folder dtypes"
"$work/run_folder" "$work/mlp_dyn" x="$in/mlp_dyn_op13/inputs/x.npy" \
  --reference "$in/mlp_dyn_op13/outputs" || fail "run_folder mlp_dyn"
# The saved outputs read back as references: the writer and the reader agree.
"$work/run_folder" "$work/dtypes" "$@" --reference "$work" >/dev/null || fail "--save round trip"
# Errors: a missing input (1), a folder that is not one (2), a wrong reference (3).
out=$("$work/run_folder" "$work/mlp" 2>&1); rc=$?
[ $rc -eq 1 ] && [ "$out" = "run_folder: error: input 'x' needs x=FILE.npy" ] || fail "missing input: $rc $out"
out=$("$work/run_folder" "$work/nothing" x=y.npy 2>&1); rc=$?
[ $rc -eq 2 ] && [ "$out" = "run_folder: error: cannot open $work/nothing/plan.yaml" ] || fail "no folder: $rc $out"
mkdir -p "$work/wrong" && cp "$work/features.npy" "$work/wrong/logits.npy" || exit 1
"$work/run_folder" "$work/mlp" x="$in/mlp_op17/inputs/x.npy" --reference "$work/wrong" \
  >/dev/null 2>&1; rc=$?
[ $rc -eq 3 ] || fail "a wrong reference gave exit $rc, not 3"

# examples/cmake through find_package(aicf), the model compiled at build time by AICF_AICFC.
cmake -S "$src/examples/cmake" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror" \
  -DAICF_EXAMPLE_MODEL="$in/mlp_op17/model.onnx" >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "configuring examples/cmake"; }
cmake --build "$work/cmake" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "building examples/cmake"; }
out=$("$work/cmake/time_folder" "$work/cmake/model" x="$in/mlp_op17/inputs/x.npy" --runs 3) ||
  fail "time_folder"
echo "$out"
echo "$out" | grep -q "^logits f32 (320 bytes): sum " || fail "time_folder printed: $out"

# examples/ci: a golden folder, checked against a new compile with the installed tools.
gc="env AICF_BIN=$prefix/bin sh $src/examples/ci/golden_check.sh"
$gc --update "$in/mlp_op13/model.onnx" "$work/golden" >/dev/null || fail "golden_check --update"
$gc "$in/mlp_op13/model.onnx" "$work/golden" || fail "golden_check of the same compile"
$gc "$in/mlp_op13/model.onnx" "$work/golden" --schedule default >"$work/golden.txt"; rc=$?
[ $rc -eq 1 ] && grep -q "target.schedule: cost -> default" "$work/golden.txt" ||
  { cat "$work/golden.txt"; fail "golden_check of another schedule gave exit $rc"; }
echo "ok"
