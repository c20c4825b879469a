#!/usr/bin/env bash
# Self-test of the interpreter's build check (cmake/build_interp.cmake): an entry that uses local
# memory must fail the build with the check's message, and so must one whose wgmma ptxas
# serializes (the device probe's tensor-core kernel is held to that); a clean one must pass and
# produce a source carrying its cubin. Usage: selftest.sh NVCC
set -euo pipefail
nvcc="$1"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
run() {
  cmake -DNVCC="$nvcc" -DSRC="$here/$1" -DINC="$root/kernels" -DENTRY=metinterp_selftest -DCUBIN="$work/$1.cubin" \
    -DLOG="$work/$1.log" -DOUT="$work/$1.cpp" -DFUNC=selftest_image -P "$root/cmake/build_interp.cmake"
}
if run spills.cu >"$work/bad.txt" 2>&1; then
  echo "FAIL: the spilling entry passed the check"; cat "$work/bad.txt"; exit 1
fi
grep -q "metinterp_selftest uses local memory" "$work/bad.txt" || { echo "FAIL: wrong refusal:"; cat "$work/bad.txt"; exit 1; }
if run serialized.cu >"$work/serial.txt" 2>&1; then
  echo "FAIL: the serialized wgmma passed the check"; cat "$work/serial.txt"; exit 1
fi
grep -q "ptxas serializes wgmma" "$work/serial.txt" || { echo "FAIL: wrong refusal:"; cat "$work/serial.txt"; exit 1; }
run clean.cu >"$work/good.txt" 2>&1 || { echo "FAIL: the clean entry was refused:"; cat "$work/good.txt"; exit 1; }
grep -q "selftest_image" "$work/clean.cu.cpp" || { echo "FAIL: no image source written"; exit 1; }
echo "ok: spilling entry and serialized wgmma refused, clean entry accepted"
