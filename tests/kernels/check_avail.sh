#!/usr/bin/env bash
# The avail cross-check (docs/arch/overview.md, Availability): the kernels `met circuit kernels
# --hardware DEVICE` reports available are exactly the bodies a real compiler builds from the
# device's class build: nvcc for an NVIDIA class (nvcc/compile_class.sh: the interpreter's
# met_entry_ markers), clang's HIP for an AMD one (hip/compile_class.sh: the code object's .kd
# kernels). Prints both differences and exits non-zero on any.
# Usage: check_avail.sh MET DEVICE [KERNELS_DIR]   (env NVCC for nvcc; MET_HIP_ROOT for gfx950)
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
work=$(mktemp -d "${TMPDIR:-/tmp}/met-avail-$device.XXXXXX")
trap 'rm -rf "$work"' EXIT
arch=$("$met" "${met_args[@]}" circuit kernels --hardware "$device" --build | awk '$1 == "arch" { print $2 }')
case "$arch" in
  sm_*) compiler=nvcc ;;
  gfx*) compiler=hip ;;
  *) echo "error: device '$device' builds for '$arch', which no compiler here checks" >&2; exit 2 ;;
esac

"$met" "${met_args[@]}" circuit kernels --hardware "$device" >"$work/table.tsv"
awk -F '\t' '$2 == "available" { print $1 }' "$work/table.tsv" | LC_ALL=C sort -u >"$work/avail.txt"
start=$SECONDS
bash "$here/$compiler/compile_class.sh" "$met" "$device" "$work" ${3:+"$3"} >"$work/built.txt" 2>"$work/build.log" || {
  echo "error: compiling the class of '$device' ($compiler, $arch) failed:" >&2
  grep -v '^ptxas info' "$work/build.log" | tail -n 40 >&2
  exit 1
}
echo "$device: $(wc -l <"$work/avail.txt") available per met, $(wc -l <"$work/built.txt") built by $compiler for $arch ($((SECONDS - start)) s)"
sed 's/^/  /' "$work/built.txt"

only_avail=$(LC_ALL=C comm -23 "$work/avail.txt" "$work/built.txt")
only_built=$(LC_ALL=C comm -13 "$work/avail.txt" "$work/built.txt")
if [[ -z $only_avail && -z $only_built ]]; then
  echo "$device: avail and $compiler agree"
  exit 0
fi
if [[ -n $only_avail ]]; then
  echo "$device: met says available, $compiler does not build:"
  sed 's/^/  /' <<<"$only_avail"
fi
if [[ -n $only_built ]]; then
  echo "$device: $compiler builds, met does not say available:"
  while IFS= read -r k; do
    why=$(awk -F '\t' -v k="$k" '$1 == k { print " (" $2 " at " $3 ": " $4 ")" }' "$work/table.tsv")
    echo "  $k${why}"
  done <<<"$only_built"
fi
exit 1
