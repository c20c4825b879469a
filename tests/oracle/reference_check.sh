#!/usr/bin/env bash
# The tiny Qwen3-MoE against the in-repo Python reference (tests/oracle/reference_qwen3_moe.py)
# until its transformers fixture is committed: synth the checkpoint, let the reference write a
# fixture for it, and run check.sh (free-running and teacher-forced) on that fixture.
# Usage: reference_check.sh MET TOLERANCE
set -euo pipefail
met="$1"
tol="$2"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
name=tiny-qwen3-moe-bf16
"$met" model synth --config "$here/configs/tiny-qwen3-moe.json" --seed 1 --dtype bf16 --out "$work/$name" >/dev/null
python3 "$here/reference_qwen3_moe.py" --checkpoint "$work/$name" --prompt-ids 1,17,42,99,7 \
  --prompt-ids 5,300,12,900,44,2,8 --steps 12 --out "$work/$name.json"
bash "$here/check.sh" "$met" "$work/$name.json" "$tol"
