#!/usr/bin/env bash
# The README's main job: installs what is missing, builds, compiles the bundled example model
# (a GPT-2-style transformer block exported from PyTorch at opset 17) for the host CPU, and
# runs the compiled folder on PyTorch's input, checking the result against PyTorch's output.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
model=testdata/models/gpt2_block_op17/model.onnx
out=build/demo/gpt2_block_op17
# A folder left by an aicfc older than the .aicf-output marker would be refused by -o (aicfc
# never deletes what it cannot prove it wrote); this one lives in our own build tree.
[ -d "$out" ] && [ ! -f "$out/.aicf-output" ] && rm -rf "$out"
echo "== aicfc $model -o $out --explain --verify-passes"
build/aicfc "$model" -o "$out" --explain --verify-passes
echo
echo "== aicf-run $out (PyTorch's input; output compared with PyTorch's reference)"
build/aicf-run "$out" --input x=testdata/models/gpt2_block_op17/inputs/x.npy \
  --reference testdata/models/gpt2_block_op17/outputs --print --bench 20
