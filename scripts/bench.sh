#!/usr/bin/env bash
# `make bench`: aicf against its CPU peers on every testdata model (not part of the tests).
# Idempotent: installs the Debian packages (setup.sh, plus python3-venv when venv is missing),
# builds aicf, creates bench/.venv with the peers from PyPI (onnxruntime required; apache-tvm
# and iree-base-compiler/-runtime where they install: a peer that fails to install is reported
# in the table, not dropped), then runs bench/run_bench.py, which writes bench/results.md and
# bench/latency_ratio.png and prints the tables. Extra arguments go to run_bench.py
# (e.g. --reps 20, --threads 1, --only mlp_op17 gpt2_block_op17).
# Models: testdata/models and the torchvision networks scripts/gen_cnn_models.py exports into
# bench/models (resnet18, mobilenet_v2, ...; AICF_BENCH_NO_CNN=1 leaves them out), and the
# widened corpus in bench/models_wide (scripts/gen_wide_models.py, scripts/gen_exporter_models.py;
# AICF_BENCH_NO_WIDE=1 leaves it out). Peers: ORT, OpenVINO pinned to f32, TVM, IREE.
# Runs on the host CPU only; takes a few minutes (most of it TVM and IREE compiling).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
# Only what the bench runs. AICF_BENCH_NO_BUILD=1 uses the binaries already in build/.
if [ "${AICF_BENCH_NO_BUILD:-0}" != 1 ] || [ ! -x build/aicfc ]; then
  scripts/build.sh --target aicfc aicf-run aicf_runtime
fi

py=${PYTHON:-python3}
if ! "$py" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  echo "bench: installing python3-venv"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends python3-venv python3-pip
fi

venv=bench/.venv
work=bench/work
mkdir -p "$work"
if [ ! -x "$venv/bin/python" ]; then
  echo "bench: creating $venv"
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
fi
vpy="$venv/bin/python"

# Required: the harness itself and the baseline peer.
if ! "$vpy" -c 'import numpy, onnx, onnxruntime, matplotlib, yaml' >/dev/null 2>&1; then
  echo "bench: installing numpy onnx onnxruntime matplotlib pyyaml"
  "$vpy" -m pip install -q numpy onnx onnxruntime matplotlib pyyaml
fi

# Optional peers: try each once per run when missing; the log tells run_bench.py why it failed.
install_peer() { # name import-check packages...
  local name=$1 check=$2; shift 2
  if "$vpy" -c "$check" >/dev/null 2>&1; then
    rm -f "$work/install_$name.log"
    return 0
  fi
  echo "bench: installing $*"
  if ! "$vpy" -m pip install -q "$@" >"$work/install_$name.log" 2>&1; then
    echo "bench: $name did not install (see $work/install_$name.log); it is reported as unavailable"
  fi
}
install_peer ov 'import openvino' openvino
install_peer tvm 'import tvm.relax.frontend.onnx' apache-tvm
install_peer iree 'import iree.compiler, iree.runtime' iree-base-compiler iree-base-runtime

# The torchvision networks (CNN issue): exported once with Debian's torch and torchvision into
# bench/models (ignored by git, ~100 MB). AICF_BENCH_NO_CNN=1 skips them.
models=(testdata/models)
if [ "${AICF_BENCH_NO_CNN:-0}" != 1 ]; then
  scripts/debian_torch.sh
  /usr/bin/python3 scripts/gen_cnn_models.py bench/models
  models+=(bench/models)
fi
# The widened corpus (issue 53): families the bench was not tuned on, exported with torch, and
# networks spelled the way other exporters spell them (onnx's helper API, the venv's onnx for its
# reference evaluator). AICF_BENCH_NO_WIDE=1 skips them.
if [ "${AICF_BENCH_NO_CNN:-0}" != 1 ] && [ "${AICF_BENCH_NO_WIDE:-0}" != 1 ]; then
  /usr/bin/python3 scripts/gen_wide_models.py bench/models_wide || echo "bench: some wide networks did not export (listed above)"
  "$vpy" scripts/gen_exporter_models.py bench/models_wide
  models+=(bench/models_wide)
fi

# --setup-only: everything above (venv, peers, models) and no timing (make bench-footprint).
if [ "${1:-}" = --setup-only ]; then
  exit 0
fi
exec "$vpy" bench/run_bench.py --models "${models[@]}" "$@"
