#!/usr/bin/env bash
# Fails (listing the files) when any C++ source of ours differs from clang-format's output.
set -euo pipefail
cf=${1:-clang-format}
cd "$(dirname "$0")/.."
bad=()
while IFS= read -r f; do
  if ! "$cf" --dry-run -Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done < <(git ls-files --cached --others --exclude-standard -- '*.cpp' '*.h' '*.cc' '*.hpp' 2>/dev/null || find cmd frontend ir interp passes target kir lower plan backend driver runtime support tests -name '*.cpp' -o -name '*.h')
if [ ${#bad[@]} -gt 0 ]; then
  echo "not clang-formatted (run: make format):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "format: all sources clean"
