#!/usr/bin/env bash
# make serve-demo: serves a bench CNN (resnet18 exported with a named batch dim) on Triton
# Inference Server (PyPI nvidia-pytriton, which bundles tritonserver) through the aicf Python
# package and through ONNX Runtime, and checks both under concurrent load (scripts/serve_demo.py;
# --model mlp serves the bundled MLP instead). Sets up what it needs: the build, an install tree in
# .tools/serve-prefix, a Python environment in .tools/tritonvenv (about 450 MB from PyPI), and
# Debian's torch to export the CNN into bench/models_dyn. Not part of the test command.
# Arguments go to serve_demo.py (--model, --requests, --clients, --engines, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh >/dev/null
prefix="$PWD/.tools/serve-prefix"
cmake --install build --prefix "$prefix" >/dev/null
venv="$PWD/.tools/tritonvenv"
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
if ! "$venv/bin/python" -c 'import pytriton, numpy, onnxruntime, scikit_build_core, pybind11' \
  2>/dev/null; then
  "$venv/bin/python" -m pip install -q nvidia-pytriton numpy onnxruntime "scikit-build-core>=0.8" \
    "pybind11>=2.10"
fi
if [[ " $* " != *" --model mlp "* && " $* " != *" --model=mlp "* ]]; then
  scripts/debian_torch.sh
  cnn=resnet18
  prev=""
  for a in "$@"; do
    if [ "$prev" = --cnn ]; then cnn=$a; fi
    case $a in --cnn=*) cnn=${a#--cnn=} ;; esac
    prev=$a
  done
  /usr/bin/python3 scripts/gen_cnn_models.py --batch-range bench/models_dyn "$cnn"
fi
CMAKE_PREFIX_PATH="$prefix" "$venv/bin/python" -m pip install -q --no-build-isolation \
  --force-reinstall --no-deps ./python
exec "$venv/bin/python" scripts/serve_demo.py "$@"
