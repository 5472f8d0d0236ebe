#!/usr/bin/env bash
# The README's main job: installs what is missing, builds, and compiles the bundled example
# model (a GPT-2-style transformer block exported from PyTorch at opset 17).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
model=testdata/models/gpt2_block_op17/model.onnx
echo "== aicfc $model --emit graph"
build/aicfc "$model" --emit graph
