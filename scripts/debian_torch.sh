#!/usr/bin/env bash
# Debian's torch, torchvision and onnx for /usr/bin/python3 (torch 1.13: the exporter every
# bench model and committed test model was made with), installed with apt-get where missing.
# Idempotent. Used by the scripts that export models: bench.sh, serve_demo.sh.
set -euo pipefail
if /usr/bin/python3 -c 'import torch, torchvision, onnx' >/dev/null 2>&1; then
  exit 0
fi
echo "debian_torch: installing python3-torch python3-torchvision python3-onnx libopenblas0-pthread"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends python3-torch python3-torchvision \
  python3-onnx python3-numpy libopenblas0-pthread
