#!/bin/sh
# A golden check for a user's CI: compiles MODEL with the given aicfc flags and compares the
# folder with a stored golden folder through aicf-diff (steps, knobs, launch shapes, predicted
# bytes and times, Kernel IR, weights by checksum). Exit 0 when they agree, 1 when they differ
# (the report says what changed), 2 on an error. --update replaces the golden with the new
# compile (review the diff first).
#
#   examples/ci/golden_check.sh [--update] [--ignore PATTERN]... MODEL GOLDEN_DIR [AICFC FLAGS...]
#
# The tools are taken from PATH, or from $AICF_BIN (an install tree's bin/). Plans depend on
# the hardware description they are made for: pin it (aicfc --hardware FILE, or
# AICF_HOST_HARDWARE=FILE for host plans) so a CI runner's CPU does not change the golden.
set -u
bin=${AICF_BIN:+$AICF_BIN/}
update=0
ignores=""
while [ $# -gt 0 ]; do
  case $1 in
  --update) update=1; shift ;;
  --ignore) ignores="$ignores --ignore $2"; shift 2 ;;
  *) break ;;
  esac
done
if [ $# -lt 2 ]; then
  echo "usage: $0 [--update] [--ignore PATTERN]... MODEL GOLDEN_DIR [AICFC FLAGS...]" >&2
  exit 2
fi
model=$1 golden=$2
shift 2
work=$(mktemp -d) || exit 2
trap 'rm -rf "$work"' EXIT
"${bin}aicfc" "$model" -o "$work/new" --quiet "$@" || { echo "golden_check: aicfc failed" >&2; exit 2; }
if [ $update = 1 ]; then
  # aicfc's output folders are replaced whole (the .aicf-output marker says the folder is ours).
  "${bin}aicfc" "$model" -o "$golden" --quiet "$@" || exit 2
  echo "golden_check: $golden updated"
  exit 0
fi
# shellcheck disable=SC2086 # $ignores is a list of --ignore PATTERN pairs
"${bin}aicf-diff" "$golden" "$work/new" $ignores
