#!/usr/bin/env bash
# The packets emitted for the AMD classes, checked where no AMD GPU is: a tiny fixture's checkpoint
# is emitted for host-cpu and for each AMD device (their CU count of streams, GPU slicing: head-unit
# qkv, split-KV decode, GEMM tiles, flash slices; the plan without gaps, on the bodies of
# kernels/cdna3), the opcode harness runs every distinct instruction of each AMD emit on the cpu
# bodies twice, and the whole programs run on the cpu bodies (cpu-oracle). The greedy tokens of
# every AMD emit must equal the host-cpu emit's, prompt for prompt: this checks the AMD slicing,
# shapes and ordering, never the AMD bodies themselves (no machine here runs them).
# With MET_NEAR_TIE_TOL set (a fixture whose prompts run into near ties: the tiny Qwen3-MoE), tokens
# that part from the host-cpu emit's pass only where the AMD emit's logits match the transformers
# fixture within that tolerance and the tokens part at a near tie of transformers' logits
# (compare.py's judgement, as gpu_packets.sh): another split of a reduction may flip a near tie.
# Usage: amd_packets.sh MET FIXTURE.json DEVICE...
set -euo pipefail
met="$1"
fixture="$2"
shift 2
here="$(cd "$(dirname "$0")" && pwd)"
name="$(basename "$fixture" .json)"
model="${name%-bf16}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$met" model synth --config "$here/configs/$model.json" --seed 1 --dtype bf16 --out "$work/ckpt" >/dev/null
prompts=$(python3 -c "import json,sys; print(' '.join('--prompt-ids ' + ','.join(map(str, c['prompt'])) for c in json.load(open(sys.argv[1]))['cases']))" "$fixture")
steps=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['steps'])" "$fixture")
emit_flags=(--max-ctx 256 --decode-rungs 1,2,4,8 --prefill-buckets 16,64,128)
"$met" circuit emit --hardware host-cpu --checkpoint "$work/ckpt" --out "$work/host-cpu" "${emit_flags[@]}" >/dev/null 2>&1
# shellcheck disable=SC2086
"$met" circuit run --assets "$work/host-cpu" --backend cpu $prompts --max-tokens "$steps" >"$work/host-cpu.txt" 2>/dev/null
cases=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['cases']))" "$fixture")
if [[ $(wc -l <"$work/host-cpu.txt") -ne $cases ]]; then
  echo "FAIL $name: the host-cpu emit printed $(wc -l <"$work/host-cpu.txt") sequences for $cases prompts"
  exit 1
fi
failed=0
for device in "$@"; do
  if ! "$met" circuit emit --hardware "$device" --checkpoint "$work/ckpt" --out "$work/$device" "${emit_flags[@]}" \
    >"$work/$device.emit.log" 2>&1; then
    echo "FAIL $name on $device: emit refused"
    sed 's/^/    /' "$work/$device.emit.log"
    failed=1
    continue
  fi
  echo "$device: $("$met" circuit optest --assets "$work/$device" --backend cpu-oracle | tail -1)"
  # shellcheck disable=SC2086
  "$met" circuit run --assets "$work/$device" --backend cpu-oracle $prompts --max-tokens "$steps" >"$work/$device.txt" 2>/dev/null
  if cmp -s "$work/host-cpu.txt" "$work/$device.txt"; then
    echo "PASS $name on $device: $(wc -l <"$work/$device.txt") sequences x $steps greedy tokens equal the host-cpu emit's"
  elif [[ -n "${MET_NEAR_TIE_TOL:-}" ]]; then
    # shellcheck disable=SC2086
    "$met" circuit run --assets "$work/$device" --backend cpu-oracle $prompts --max-tokens "$steps" \
      --logits-out "$work/$device.json" >/dev/null 2>&1
    if python3 "$here/compare.py" "$fixture" "$work/$device.json" "$MET_NEAR_TIE_TOL"; then
      echo "PASS $name on $device: greedy tokens part from the host-cpu emit's at a near tie; the logits match the fixture"
    else
      echo "FAIL $name on $device: greedy tokens differ from the host-cpu emit's and the logits miss the fixture"
      diff "$work/host-cpu.txt" "$work/$device.txt" | head -n 20
      failed=1
    fi
  else
    echo "FAIL $name on $device: greedy tokens differ from the host-cpu emit's"
    diff "$work/host-cpu.txt" "$work/$device.txt" | head -n 20
    failed=1
  fi
done
exit "$failed"
