#!/usr/bin/env bash
# SASS disassembly for the CUDA tests: `cuobjdump -sass` (and the nvdisasm it runs) shows which
# instructions libmodel.so's kernels use (HMMA: tensor cores). The CUDA toolkit of these machines
# ships nvcc and ptxas without them, so where nvcc is found and cuobjdump is not, this installs
# NVIDIA's own wheels from PyPI (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm) into a virtual
# environment under .tools/ and links both into .tools/cuda/bin, which the tests look in.
# Idempotent; without nvcc it does nothing. A failed download only warns: the tests then say
# the SASS check was skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$PWD/.tools/cuda/bin"
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc" ]; then
  exit 0
fi
if [ -x "$(dirname "$nvcc")/cuobjdump" ] || { [ -x "$bin/cuobjdump" ] && [ -x "$bin/nvdisasm" ]; }; then
  exit 0
fi
py=${PYTHON:-python3}
if ! "$py" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  echo "cuda_tools: installing python3-venv"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends python3-venv python3-pip
fi
venv="$PWD/.tools/venv"
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
if ! "$venv/bin/python" -m pip install -q "nvidia-cuda-cuobjdump>=13,<14" \
  "nvidia-cuda-nvdisasm>=13,<14"; then
  echo "cuda_tools: warning: could not install cuobjdump / nvdisasm; SASS checks will be skipped" >&2
  exit 0
fi
mkdir -p "$bin"
for tool in cuobjdump nvdisasm; do
  found=$(find "$venv" -path "*/nvidia/*/bin/$tool" -type f | head -n 1)
  if [ -n "$found" ]; then
    chmod +x "$found"
    ln -sf "$found" "$bin/$tool"
  fi
done
echo "cuda_tools: cuobjdump and nvdisasm in $bin"
