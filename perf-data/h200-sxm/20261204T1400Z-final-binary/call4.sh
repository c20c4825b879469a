#!/usr/bin/env bash
# Call 4 of 2026-12-04 afternoon: the final binary of this stop (the overlapped flash prefill,
# 7966454, and the bring-up's `lengths` stage) in one call: the tiny fixtures on cuda and
# Llama-3.2-1B's prompts of 1, 37, 700 and 4000 tokens against transformers (a); then
# Llama-3.1-8B (real config, synth): optest, campaign, transformers peers, compiled peer, the
# transformers oracle and the same prompt lengths (b).
set -uo pipefail
cd "$(dirname "$0")/../../.."
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
export WORK=/tmp/metw DROP_CHECKPOINTS=1
top=$OUT
OUT=$top/a bash scripts/h200_bringup.sh tiny,lengths llama-3.2-1b
OUT=$top/b bash scripts/h200_bringup.sh optest,campaign,peers,oracle,lengths llama-3.1-8b
