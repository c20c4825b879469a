#!/usr/bin/env bash
# call 3: the calibration sweep (scripts/h200_sweep.sh run) on the shapes without ctx 512 and 16384 campaigns
set -u
OUT=$OUT bash scripts/h200_sweep.sh run llama-3.2-1b,qwen3-0.6b,qwen3-8b,gemma-3-27b-it > /dev/null 2>&1
grep -E "^=== .*rc|sweep: done" $OUT/sweep-log.txt | cut -c1-200
