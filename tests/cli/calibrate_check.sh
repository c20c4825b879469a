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
# Refusals: each a located error and a non-zero exit.
refuse() {  # refuse WANT ARGS...: met fails and says WANT
  local want=$1
  shift
  local err
  if err=$("$met" circuit calibrate "$@" 2>&1 >/dev/null); then echo "FAIL: met circuit calibrate $* succeeded"; exit 1; fi
  grep -qF -- "$want" <<<"$err" || { echo "FAIL: met circuit calibrate $*: wanted '$want', got: $err"; exit 1; }
  echo "ok   refused: $want"
}
refuse "--update writes the class's EVIDENCE.toml" perf-data/h200-sxm --configs bench/configs --update --out "$work/x.toml"
refuse "needs its config.json at $work/nothing/" perf-data/h200-sxm --configs "$work/nothing" --hardware h200-sxm
refuse "calibrate $work/none: no such file or directory" "$work/none" --configs bench/configs
echo '{"schema": "met-campaign/1", "hardware": "b200", "model": "m", "stamp": "20261202T000000Z", "cases": [
  {"kind": "decode", "rows": 1, "ctx": 4096, "ms": {"median": 1.0}, "plan_digest": "0000", "family_ms": {"gemv": 0.5}}]}' >"$work/b200.json"
cp bench/configs/qwen3-0.6b.json "$work/m.json"
refuse "the campaigns ran on 2 devices (b200, h200-sxm): name one with --hardware" perf-data/h200-sxm "$work/b200.json" --configs bench/configs
refuse "no campaign of b200 measured today's plan" "$work/b200.json" --configs "$work" --hardware b200
echo '{"schema": "met-campaign/1", "hardware": "h200-sxm", "cases": [{"kind": "decode", "rows": 1, "ctx": 4096, "ms": {"median": 1.0}}]}' \
  >"$work/nomodel.json"
refuse "the record names no model" "$work/nomodel.json" --configs bench/configs
# --write-doc: the table goes between the markers of a copy of docs/arch/planner.md, which must then
# be the committed file byte for byte (the doc is regenerated, never pasted).
refuse "--write-doc FILE puts the held-out table into FILE: give it with --held-out" perf-data/h200-sxm --configs bench/configs \
  --write-doc "$work/p.md"
printf '# no markers\n' >"$work/plain.md"
refuse "--write-doc $work/plain.md: the file needs the lines" perf-data/h200-sxm --configs bench/configs --hardware h200-sxm \
  --held-out --write-doc "$work/plain.md"
cp docs/arch/planner.md "$work/planner.md"
"$met" "${args[@]}" --held-out --write-doc "$work/planner.md" >/dev/null 2>&1
if ! diff -u docs/arch/planner.md "$work/planner.md"; then
  echo "FAIL: docs/arch/planner.md's held-out table is not what met ${args[*]} --held-out --write-doc docs/arch/planner.md writes now"
  exit 1
fi
echo "ok   docs/arch/planner.md holds the held-out table met writes now"
