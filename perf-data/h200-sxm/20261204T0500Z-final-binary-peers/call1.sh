#!/usr/bin/env bash
# Call 1 of 2026-12-04: the met of a39310d (hopper image md5 1abffa0b, the final binary of the
# fused-norm stop) checked and timed with its peers from the same call: the tiny oracles of
# Gemma-3/4, Llama-3 and Qwen3; Llama-3.1-8B optest, campaign, transformers peers, compiled peer
# and the transformers oracle; gemma-3-1b-it campaign and transformers peers (graph mode now
# takes Gemma's sliding caches once the prompt fills them).
set -uo pipefail
cd "$(dirname "$0")/../../.."
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
export OUT WORK=/tmp/metw DROP_CHECKPOINTS=1
TINY=tiny-gemma3,tiny-gemma4,tiny-llama3,tiny-qwen3 bash scripts/h200_bringup.sh tiny,optest,campaign,peers,oracle llama-3.1-8b
bash scripts/h200_bringup.sh campaign,peers gemma-3-1b-it
