#!/usr/bin/env bash
# A tiny model against its in-repo Python reference until its transformers fixture is committed:
# synth the checkpoint, let the reference write a fixture for it, and run check.sh (free-running
# and teacher-forced) on that fixture, or CHECK (gpu_packets.sh: the h200-sxm emit on the cpu bodies;
# amd_packets.sh: the AMD emits), which gets MET, the fixture and ARGS (default: TOLERANCE).
# Usage: reference_check.sh MET TOLERANCE [MODEL DTYPE REFERENCE [CHECK [ARGS...]]]
#   (default: tiny-qwen3-moe bf16 reference_qwen3_moe.py check.sh; MODEL names
#   tests/oracle/configs/MODEL.json). REFERENCE_ARGS, when set, replaces the reference's prompts
#   (and may add its switches, such as --router-gaps); REFERENCE_STEPS the 12 greedy steps.
set -euo pipefail
met="$1"
tol="$2"
model="${3:-tiny-qwen3-moe}"
dtype="${4:-bf16}"
reference="${5:-reference_qwen3_moe.py}"
check="${6:-check.sh}"
check_args=("$tol")
if (($# > 6)); then check_args=("${@:7}"); fi
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
name="$model-$dtype"
"$met" model synth --config "$here/configs/$model.json" --seed 1 --dtype "$dtype" --out "$work/$name" >/dev/null
# shellcheck disable=SC2086
python3 "$here/$reference" --checkpoint "$work/$name" ${REFERENCE_ARGS:---prompt-ids 1,17,42,99,7 --prompt-ids 5,300,12,900,44,2,8} \
  --steps "${REFERENCE_STEPS:-12}" --out "$work/$name.json"
bash "$here/$check" "$met" "$work/$name.json" "${check_args[@]}"
