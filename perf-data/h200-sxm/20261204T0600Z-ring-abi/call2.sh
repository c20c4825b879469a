#!/usr/bin/env bash
# Call 2 of 2026-12-04: the met of this session's ring change (packet ABI 19: the attention ops
# carry `ring`; the hopper bodies read linear caches and the cuda backend refuses a ring) checked
# on the H200, and the re-times owed from the fused-norm stop:
#   tiny Gemma-3/4, Llama-3, Qwen3: optest, transformers oracle (free-running, forced), cpu-oracle;
#   llama-3.1-8b: optest and campaign (beside call 1's, same shape);
#   fp8: the block-scaled tiny fixtures and Qwen3-8B fp8-block128 (optest, campaign);
#   gemma-4-31b-it: campaign (decode C=1..16 at ctx 4096, prefill).
set -uo pipefail
cd "$(dirname "$0")/../../.."
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
export OUT WORK=/tmp/metw DROP_CHECKPOINTS=1
TINY=tiny-gemma3,tiny-gemma4,tiny-llama3,tiny-qwen3 bash scripts/h200_bringup.sh tiny,fp8,optest,campaign llama-3.1-8b
bash scripts/h200_bringup.sh campaign gemma-4-31b-it
