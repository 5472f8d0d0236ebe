#!/usr/bin/env bash
# make wheel-check: builds the wheel at the repository root (pip wheel .: the compiler, runtime and
# binding, with the shared libraries they need bundled) and checks it the way a user gets it: a
# fresh virtual environment with nothing but the wheel installed, outside the checkout, compiles
# and runs a bundled model through the Python package and through the aicfc / aicf-run entry
# points, and every bundled binary resolves its libraries inside the wheel or from the C/C++
# runtimes. Not part of the test command (the wheel build compiles the project again: minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scripts/setup.sh
work=$(mktemp -d /tmp/aicf-wheel-check.XXXXXX)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -m venv "$work/build-venv"
"$work/build-venv/bin/python" -m pip install -q --upgrade pip
"$work/build-venv/bin/python" -m pip wheel -q . -w "$work/dist" --no-deps
wheel=$(ls "$work"/dist/aicf-*.whl)
echo "wheel-check: built $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"

/usr/bin/python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "$wheel"
site=$("$work/venv/bin/python" -c 'import aicf, os; print(os.path.dirname(aicf.__file__))')
case $site in "$root"/*) echo "wheel-check: aicf imported from the checkout ($site)"; exit 1 ;; esac
# What a user loads (the tools, the binding, the runtime) resolves every library (nothing "not
# found") from the wheel or the system's C/C++ runtimes only (the bundled libraries are found
# through the loader's RPATH, which also applies to their own dependencies).
for f in "$site"/bin/* "$site"/lib/libaicf_runtime.so* "$site"/_runtime*.so; do
  deps=$(env -u LD_LIBRARY_PATH ldd "$f")
  if grep -q "not found" <<<"$deps"; then
    echo "wheel-check: $f: $(grep 'not found' <<<"$deps" | tr -s ' \t' ' ')"
    exit 1
  fi
  outside=$(awk '/=>/ {print $3}' <<<"$deps" | grep -v "^$site/" |
            grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libdl|librt|libpthread)\.so' || true)
  if [ -n "$outside" ]; then
    echo "wheel-check: $f loads from outside the wheel: $outside"
    exit 1
  fi
done
echo "wheel-check: the tools, the binding and the runtime resolve their libraries inside the wheel"

cd "$work"
model="$root/testdata/models/mlp_dyn_op13"
"$work/venv/bin/aicfc" "$model/model.onnx" --dim batch=1..64@8 -o "$work/cli_out" --bundle
"$work/venv/bin/aicf-run" "$work/cli_out" --input "x=$model/inputs/x.npy" \
  --reference "$model/outputs"
"$work/venv/bin/python" - "$model" "$work/py_out" <<'PY'
import sys, numpy as np, aicf
model, out = sys.argv[1], sys.argv[2]
aicf.compile(f"{model}/model.onnx", out, dims={"batch": (1, 64, 8)})
x = np.load(f"{model}/inputs/x.npy")
want = np.load(f"{model}/outputs/logits.npy")
got = aicf.load(out, threads=1).run(x=x)["logits"]
err = float(np.max(np.abs(got - want)))
assert np.all(np.abs(got - want) <= 1e-4 + 1e-4 * np.abs(want)), err
print(f"wheel-check: aicf.compile + aicf.load in a fresh venv: max abs error {err:.3g}")
PY
echo "wheel-check: ok"
