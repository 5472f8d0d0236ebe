#!/usr/bin/env bash
# Renders a folder's report.html with headless Chromium (Debian's chromium, installed here when
# missing) into a PNG, to look at the page the way a person sees it.
#   scripts/report_screenshot.sh OUT [PNG] [WIDTHxHEIGHT]   (default OUT/report.png, 1400x2600)
set -euo pipefail
out=${1:?usage: report_screenshot.sh OUT [PNG] [WIDTHxHEIGHT]}
png=${2:-$out/report.png}
size=${3:-1400x2600}
[ -f "$out/report.html" ] || { echo "error: $out/report.html not found (compile with --explain)" >&2; exit 1; }
if ! command -v chromium >/dev/null; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core
fi
html=$(cd "$(dirname "$out/report.html")" && pwd)/report.html
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="${size/x/,}" \
  --screenshot="$png" "file://$html" 2>/dev/null
echo "wrote $png"
