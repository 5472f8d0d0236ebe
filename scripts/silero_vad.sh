#!/usr/bin/env bash
# `make silero-vad` (issue 20): Silero VAD, a model as published (an If on the sample rate, an
# LSTM decoder), compiled with its rate bound by --const and checked chunk by chunk against
# ONNX Runtime (bench/silero_vad.py). Needs the bench's virtual environment (scripts/bench.sh
# sets it up) and PyPI access once: the silero-vad wheel is downloaded without its
# dependencies into bench/work and the model read from it. Not part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
if [ ! -x build/aicfc ] || [ ! -x build/aicf-run ]; then
  scripts/build.sh --target aicfc aicf-run aicf_runtime
fi
venv=bench/.venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
fi
vpy="$venv/bin/python"
if ! "$vpy" -c 'import numpy, onnx, onnxruntime, yaml, matplotlib' >/dev/null 2>&1; then
  "$vpy" -m pip install -q numpy onnx onnxruntime pyyaml matplotlib
fi
work=bench/work
mkdir -p "$work"
model="$work/silero_vad.onnx"
if [ ! -f "$model" ]; then
  rm -rf "$work/silero_wheel"
  "$vpy" -m pip download -q --no-deps -d "$work/silero_wheel" silero-vad
  "$vpy" - "$work/silero_wheel" "$model" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/silero_vad-*.whl")[0]
with zipfile.ZipFile(wheel) as z, open(sys.argv[2], "wb") as f:
    f.write(z.read("silero_vad/data/silero_vad.onnx"))
PY
fi
exec "$vpy" bench/silero_vad.py "$model" build "$work"
