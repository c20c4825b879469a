#!/usr/bin/env bash
# Call 3 of 2026-12-04: call 2's ring stage again with prefill buckets of 32 and 48 (call 2 asked
# for 16 and 32, and hopper has no prefill GEMM rule for 16 rows: the emit refused, nothing ran).
# Rings of 64 rows that the fixtures' prompts (up to 53 tokens, two launches) and 32 decode steps
# wrap: optest, transformers free-running and forced, cpu bodies.
set -uo pipefail
cd "$(dirname "$0")/../../.."
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
export OUT WORK=/tmp/metw DROP_CHECKPOINTS=1
bash scripts/h200_bringup.sh ring none
