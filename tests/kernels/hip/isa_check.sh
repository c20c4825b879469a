#!/usr/bin/env bash
# ISA checks of a device's AMD class (isa_report.py says what is checked): compiles the class
# (compile_class.sh) and holds each kernel's MFMA instructions, registers, LDS and scratch against
# the families and formats the plan declares. Prints one line per kernel; exits non-zero on a failure.
# Usage: isa_check.sh MET DEVICE [KERNELS_DIR]   (env MET_HIP_ROOT as compile_class.sh)
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 MET DEVICE [KERNELS_DIR]" >&2
  exit 2
fi
met=$1
device=$2
here=$(cd "$(dirname "$0")" && pwd)
kernels=$(cd "${3:-$here/../../../kernels}" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/met-isa-$device.XXXXXX")
trap 'rm -rf "$work"' EXIT
met_args=()
[[ $# -eq 3 ]] && met_args=(--kernels "$kernels")
arch=$("$met" "${met_args[@]}" circuit kernels --hardware "$device" --build | awk '$1 == "arch" { print $2 }')
"$met" "${met_args[@]}" circuit kernels --hardware "$device" >"$work/table.tsv"
bash "$here/compile_class.sh" "$met" "$device" "$work" ${3:+"$kernels"} >/dev/null
python3 "$here/isa_report.py" "$work/$device.notes" "$work/$device.dis" "$work/table.tsv" "$kernels" "$device" "$arch"
