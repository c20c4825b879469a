#!/usr/bin/env bash
# Self-test of check_avail.sh on two doctored copies of the kernel tree, so a green cross-check
# means something: (1) a body deleted from common/embed.cuh is lost by both met and the compiled
# class, the check still agrees, the plan turns its groups into gaps and emit refuses them by
# name; (2) a kernel the compiler builds but met cannot name (a C++-mangled __global__) makes the
# check fail and name it. The same cases hold for nvcc (an NVIDIA device) and HIP (an AMD one).
# Usage: selftest.sh MET [DEVICE]   (default h100-sxm; env NVCC, MET_HIP_ROOT as check_avail.sh)
set -u

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 MET [DEVICE]" >&2
  exit 2
fi
met=$1
device=${2:-h100-sxm}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/met-avail-selftest.XXXXXX")
trap 'rm -rf "$work"' EXIT
source_file=common/embed.cuh
victim=embed  # a body every plan runs, with no other rule to fall back on
passed=0
failed=0

report() {  # report NAME [REASON...]: pass when no reason is given
  local name=$1
  shift
  if [[ $# -eq 0 ]]; then
    passed=$((passed + 1))
    echo "PASS $name"
  else
    failed=$((failed + 1))
    echo "FAIL $name"
    local r
    for r in "$@"; do echo "    $r"; done
  fi
}

# (1) Delete the victim's body: its `MET_ENTRY(op)` line through the brace that closes it.
cp -r "$root/kernels" "$work/removed"
removed=$(python3 -c '
import re, sys
path = sys.argv[1]
lines = open(path).read().split("\n")
start = next(i for i, l in enumerate(lines) if l.startswith("MET_ENTRY(" + sys.argv[2] + ")"))
name = "met_" + sys.argv[2]
depth, seen, end = 0, False, None
for i in range(start, len(lines)):
    depth += lines[i].count("{") - lines[i].count("}")
    seen = seen or "{" in lines[i]
    if seen and depth == 0:
        end = i
        break
del lines[start:end + 1]
open(path, "w").write("\n".join(lines))
print(name)' "$work/removed/$source_file" "$victim")
why=()
if [[ -z $removed ]]; then
  why+=("found no entry point to remove in $source_file")
else
  echo "removed $removed from $source_file"
  bash "$here/check_avail.sh" "$met" "$device" "$work/removed" >"$work/removed.log" 2>&1 ||
    why+=("check_avail.sh disagrees after removing $removed: $(tr '\n' ' ' <"$work/removed.log")")
  if "$met" --kernels "$work/removed" circuit kernels --hardware "$device" | cut -f1 | grep -qx "$removed"; then
    why+=("met still lists $removed after it was removed from the source")
  fi
  # The plan shows the groups the body ran as gaps, and emit refuses the plan naming the kernel.
  "$met" --kernels "$work/removed" circuit plan --hardware "$device" --model llama-3.1-8b-instruct >"$work/plan.md" 2>&1 ||
    why+=("plan failed on the doctored tree: $(tail -n 3 "$work/plan.md" | tr '\n' ' ')")
  grep -q "$removed" "$work/plan.md" || why+=("the plan's report does not name $removed")
  "$met" model synth --config "$root/tests/oracle/configs/tiny-llama3.json" --seed 1 --out "$work/ckpt" >/dev/null
  if "$met" --kernels "$work/removed" circuit emit --hardware "$device" --checkpoint "$work/ckpt" --out "$work/assets" \
    >"$work/emit.log" 2>&1; then
    why+=("emit accepted a plan whose $removed body is gone")
  elif ! grep -q "${removed#met_}" "$work/emit.log"; then
    why+=("emit refused without naming $removed: $(tr '\n' ' ' <"$work/emit.log")")
  fi
fi
report body_removed_both_lose_it_plan_gaps_emit_refuses "${why[@]}"

# (2) A mangled kernel: the compiler emits _Z..., which is no entry point name met can report.
cp -r "$root/kernels" "$work/mangled"
printf '\n__global__ void met_selftest_mangled(int* p) { *p = 1; }\n' >>"$work/mangled/$source_file"
why=()
if bash "$here/check_avail.sh" "$met" "$device" "$work/mangled" >"$work/mangled.log" 2>&1; then
  why+=("check_avail.sh agreed although the compiler builds a kernel met does not report")
elif ! grep -A3 "builds, met does not say available" "$work/mangled.log" | grep -q "met_selftest_mangled"; then
  why+=("check_avail.sh failed without listing met_selftest_mangled as built by the compiler only: $(tr '\n' ' ' <"$work/mangled.log")")
fi
report mangled_kernel_is_a_difference "${why[@]}"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
