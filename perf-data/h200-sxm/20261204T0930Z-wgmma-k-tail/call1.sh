#!/usr/bin/env bash
# Call 1 of 2026-12-04 09:30: the met of this stop (hopper wgmma GEMMs take K % 64 != 0 through the
# tensor maps' zero fill; io_check bounds each slots field by its writers' caches), checked and
# timed with its peers in the same call: the tiny oracles on cuda (tiny-gemma4-e now emitted for
# h200-sxm, its 32-long per-layer projection on the wgmma GEMM), the tiny Gemma-4 MoE and gpt-oss
# against their in-repo references, then Llama-3.1-8B optest, campaign, transformers peers,
# compiled peer and the transformers oracle.
set -uo pipefail
cd "$(dirname "$0")/../../.."
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
export OUT WORK=/tmp/metw DROP_CHECKPOINTS=1
TINY=tiny-gemma4-e,tiny-gemma3,tiny-gemma4,tiny-llama3,tiny-qwen3,tiny-qwen3-moe bash scripts/h200_bringup.sh tiny,gemma4moe,gptoss,optest,campaign,peers,oracle llama-3.1-8b
