#!/usr/bin/env bash
# Call 2 of 2026-12-04: sliding-window caches as rings on hopper (the fused split-KV decode and
# both flash prefill bodies read them; HARDWARE.toml kv_ring). The tiny Gemma fixtures as the tiny
# stage emits them (max-ctx 256, buckets 64 and 128: rings of 192 rows) and with buckets 16 and 32
# (rings of 64 rows that prompts and decode wrap), each: optest, transformers free-running and
# forced, cpu bodies; optest prefills at random offsets, so launches wrap a ring. Then gemma-3-1b-it
# (head dim 256: the mma.sync flash and the CUDA-core decode fold) with prompts of 1500-2500 tokens
# through a ring of 1024 rows and through linear caches, against transformers and each other.
set -uo pipefail
cd "$(dirname "$0")/../../.."
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
export OUT WORK=/tmp/metw DROP_CHECKPOINTS=1
TINY=tiny-gemma3,tiny-gemma4,tiny-gemma4-e bash scripts/h200_bringup.sh tiny,ring,ringlong gemma-3-1b-it
