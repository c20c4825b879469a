#!/usr/bin/env bash
# `met circuit calibrate` over the H200 campaigns: two runs give the same bytes, and they are the
# committed kernels/hopper/EVIDENCE.toml (a plan change, a new campaign or a fit change that was not
# followed by `met circuit calibrate ... --update` fails here). Run from the repository root.
#   calibrate_check.sh MET
set -euo pipefail
met=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(circuit calibrate perf-data/h200-sxm --configs bench/configs --hardware h200-sxm)
"$met" "${args[@]}" --out "$work/first.toml"
"$met" "${args[@]}" --out "$work/second.toml"
cmp "$work/first.toml" "$work/second.toml" || { echo "FAIL: two runs of met circuit calibrate differ"; exit 1; }
echo "ok   two runs are byte-identical"
if ! diff -u kernels/hopper/EVIDENCE.toml "$work/first.toml"; then
  echo "FAIL: kernels/hopper/EVIDENCE.toml is not what met ${args[*]} --update writes now"
  exit 1
fi
echo "ok   kernels/hopper/EVIDENCE.toml is current"
