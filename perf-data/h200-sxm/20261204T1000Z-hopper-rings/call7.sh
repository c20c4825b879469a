#!/usr/bin/env bash
# Call 7 of 2026-12-04: gpt-oss's sliding layers (window 4, head dim 32, attention sinks) through a
# ring on hopper: the tiny MXFP4 gpt-oss emitted with prefill buckets of 32 and 48 (a ring of 64
# rows, which optest's random prefill offsets and decode positions wrap), optest on cuda, cuda
# against the in-repo reference and against the cpu bodies.
set -uo pipefail
cd "$(dirname "$0")/../../.."
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
export OUT WORK=/tmp/metw
BUCKETS=32,48 RING=64 bash scripts/h200_bringup.sh gptoss none
