#!/usr/bin/env bash
# Call 7 of 2026-12-04 afternoon: the bring-up's oracle and lengths stages after their free-running
# and teacher-forced runs became one function (against_tf), on the binary of calls 4-6 (its hopper
# image byte-identical to the tree's after the review's mend): Llama-3.2-1B (real config, synth).
set -uo pipefail
cd "$(dirname "$0")/../../.."
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
export WORK=/tmp/metw DROP_CHECKPOINTS=1
bash scripts/h200_bringup.sh oracle,lengths llama-3.2-1b
