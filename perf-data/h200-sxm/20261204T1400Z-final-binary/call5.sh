#!/usr/bin/env bash
# Call 5 of 2026-12-04 afternoon: the `lengths` stage of call 4 again (its prompt lengths were not
# split at the commas there, so no prompt ran): Llama-3.2-1B and Llama-3.1-8B (real configs, synth)
# against transformers on prompts of 1, 37, 700 and 4000 tokens, on the binary of call 4.
set -uo pipefail
cd "$(dirname "$0")/../../.."
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
export WORK=/tmp/metw DROP_CHECKPOINTS=1
bash scripts/h200_bringup.sh lengths llama-3.2-1b,llama-3.1-8b
