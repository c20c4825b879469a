#!/usr/bin/env bash
# The avail cross-check (docs/arch/overview.md, Availability): the kernels `met circuit kernels
# --hardware DEVICE` reports available are exactly the bodies of the interpreter nvcc compiles from
# the device's class build (compile_class.sh). Prints both differences and exits non-zero on any.
# Usage: check_avail.sh MET DEVICE [KERNELS_DIR]   (env NVCC: the compiler to use)
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 MET DEVICE [KERNELS_DIR]" >&2
  exit 2
fi
met=$1
device=$2
here=$(cd "$(dirname "$0")" && pwd)
met_args=()
[[ $# -eq 3 ]] && met_args=(--kernels "$3")
work=$(mktemp -d "${TMPDIR:-/tmp}/met-nvcc-$device.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$met" "${met_args[@]}" circuit kernels --hardware "$device" >"$work/table.tsv"
awk -F '\t' '$2 == "available" { print $1 }' "$work/table.tsv" | LC_ALL=C sort -u >"$work/avail.txt"
start=$SECONDS
bash "$here/compile_class.sh" "$met" "$device" "$work" ${3:+"$3"} >"$work/nvcc.txt" 2>"$work/nvcc.log" || {
  echo "error: compiling the class of '$device' failed:" >&2
  grep -v '^ptxas info' "$work/nvcc.log" | tail -n 40 >&2
  exit 1
}
echo "$device: $(wc -l <"$work/avail.txt") available per met, $(wc -l <"$work/nvcc.txt") emitted by nvcc ($((SECONDS - start)) s)"

only_avail=$(LC_ALL=C comm -23 "$work/avail.txt" "$work/nvcc.txt")
only_nvcc=$(LC_ALL=C comm -13 "$work/avail.txt" "$work/nvcc.txt")
if [[ -z $only_avail && -z $only_nvcc ]]; then
  echo "$device: avail and nvcc agree"
  exit 0
fi
if [[ -n $only_avail ]]; then
  echo "$device: met says available, nvcc does not emit:"
  sed 's/^/  /' <<<"$only_avail"
fi
if [[ -n $only_nvcc ]]; then
  echo "$device: nvcc emits, met does not say available:"
  while IFS= read -r k; do
    why=$(awk -F '\t' -v k="$k" '$1 == k { print " (" $2 " at " $3 ": " $4 ")" }' "$work/table.tsv")
    echo "  $k${why}"
  done <<<"$only_nvcc"
fi
exit 1
