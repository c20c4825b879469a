#!/usr/bin/env bash
# The hopper interpreter image met carries is the class avail describes: kernels/hopper/interp.cu
# includes the class build's sources with its defines, the bodies the image defines (its met_entry_<op> markers, read from the cubin nvcc built) are exactly the kernels
# `met circuit kernels --hardware h200-sxm` reports available, and every opcode an emit for that
# device produces (tiny Llama-3, Qwen3 and Qwen3-MoE checkpoints, decode rungs and prefill buckets,
# at --tp 1 and 2) has one.
# Usage: image_entries.sh MET CUBIN CONFIG...
set -euo pipefail
if [[ $# -lt 3 ]]; then
  echo "usage: $0 MET CUBIN CONFIG..." >&2
  exit 2
fi
met=$1
cubin=$2
shift 2
work=$(mktemp -d "${TMPDIR:-/tmp}/met-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
status=0

readelf -sW "$cubin" | awk '$4 == "OBJECT" && $NF ~ /^met_entry_/ { sub(/^met_entry_/, "met_", $NF); print $NF }' |
  LC_ALL=C sort -u >"$work/image.txt"
"$met" circuit kernels --hardware h200-sxm | awk -F '\t' '$2 == "available" { print $1 }' | LC_ALL=C sort -u >"$work/avail.txt"
if [[ ! -s $work/image.txt ]]; then
  echo "FAIL: $cubin defines no met_entry_ markers"
  exit 1
fi
if cmp -s "$work/image.txt" "$work/avail.txt"; then
  echo "PASS image_bodies_equal_avail ($(wc -l <"$work/image.txt") bodies)"
else
  echo "FAIL image_bodies_equal_avail"
  LC_ALL=C comm -3 "$work/image.txt" "$work/avail.txt" | sed 's/^\t/  avail only: /; s/^met/  image only: met/'
  status=1
fi

# kernels/hopper/interp.cu is written by hand: its includes and MET_HAS_* defines must be the
# class build's sources and (true) defines, so the image is the class avail describes.
root=$(cd "$(dirname "$0")/../../.." && pwd)
"$met" circuit kernels --hardware h200-sxm --build >"$work/build.txt"
awk '$1 == "source" { print $2 }' "$work/build.txt" | LC_ALL=C sort >"$work/want_sources.txt"
sed -n 's/^#include "\(.*\)"$/\1/p' "$root/kernels/hopper/interp.cu" | grep -v '^common/interp/loop.cuh$' | LC_ALL=C sort \
  >"$work/have_sources.txt"
awk '$1 == "define" && $2 ~ /^MET_HAS_/ { split($2, kv, "="); if (kv[2] != "0") print kv[1] " " kv[2] }' "$work/build.txt" |
  LC_ALL=C sort >"$work/want_defines.txt"
sed -n 's/^#define \(MET_HAS_[A-Z0-9_]*\) \([0-9]*\)$/\1 \2/p' "$root/kernels/hopper/interp.cu" | LC_ALL=C sort \
  >"$work/have_defines.txt"
if cmp -s "$work/want_sources.txt" "$work/have_sources.txt" && cmp -s "$work/want_defines.txt" "$work/have_defines.txt"; then
  echo "PASS interp_cu_is_the_class_build ($(wc -l <"$work/have_sources.txt") sources, $(wc -l <"$work/have_defines.txt") defines)"
else
  echo "FAIL interp_cu_is_the_class_build"
  diff "$work/want_sources.txt" "$work/have_sources.txt" | sed 's/^/  sources: /'
  diff "$work/want_defines.txt" "$work/have_defines.txt" | sed 's/^/  defines: /'
  status=1
fi

# At --tp 1 and --tp 2 (the collectives and the fp32 projections; rank 0's packet, whose opcodes
# every rank shares).
for config in "$@"; do
  name=$(basename "$config" .json)
  "$met" model synth --config "$config" --seed 1 --out "$work/$name" >/dev/null
  for tp in 1 2; do
    case=${name}_tp$tp
    "$met" circuit emit --hardware h200-sxm --tp "$tp" --checkpoint "$work/$name" --out "$work/$case-assets" >/dev/null
    "$met" circuit disasm "$work/$case-assets" | awk '/^ +[0-9]+ +\[g/ { sub(/^.*\] /, ""); print "met_" $1 }' |
      LC_ALL=C sort -u >"$work/$case.ops"
    missing=$(LC_ALL=C comm -23 "$work/$case.ops" "$work/image.txt")
    if [[ -z $missing ]]; then
      echo "PASS emitted_opcodes_have_bodies_$case ($(wc -l <"$work/$case.ops") opcodes)"
    else
      echo "FAIL emitted_opcodes_have_bodies_$case: no body for $(echo $missing)"
      status=1
    fi
  done
done
exit $status
