#!/usr/bin/env bash
# Installs the Debian packages aicf needs to build and test, and nothing else.
# Idempotent: a package already present is not touched, and `apt-get update` runs
# only when something is missing. Used by both README commands (make demo, make test).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libcli11-dev libyaml-cpp-dev
  libprotobuf-dev protobuf-compiler
  libonnx-dev doctest-dev
  libonnx-testdata
  clang-format
  libomp-dev
  python3-dev python3-venv
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} Debian packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "error: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
