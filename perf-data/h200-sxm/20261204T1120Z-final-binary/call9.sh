#!/usr/bin/env bash
# Call 9 of 2026-12-04: the final binary of this stop (rings on hopper, the wgmma K tail, slot
# bounds at load) in one call, sized to the device time left (about 240 s): the tiny Gemma-4 E and
# MoE fixtures on cuda; the tiny Gemma fixtures through 64-row rings; Llama-3.2-1B (real config,
# synth) optest, campaign, transformers peers, compiled peer and the transformers oracle.
set -uo pipefail
cd "$(dirname "$0")/../../.."
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
export OUT WORK=/tmp/metw DROP_CHECKPOINTS=1
TINY=tiny-gemma4-e,tiny-gemma4-moe bash scripts/h200_bringup.sh tiny,ring,optest,campaign,peers,oracle llama-3.2-1b
