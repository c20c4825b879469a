#!/usr/bin/env bash
# One device call: the official OpenAI client against met serve --backend cuda (tiny Gemma-4), then
# ncu's warp-state and speed-of-light sections (and the stall reasons) of one decode launch (C=1, ctx
# 4096: the launches before it are the context's one 4096-row prefill and the warm-up) of Llama-3.1-8B and
# Qwen3-0.6B, met's own image.
set -uo pipefail
R=$OUT; mkdir -p "$R"
exec > >(tee -a "$R/log.txt") 2>&1
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
bash scripts/h200_serve_openai.sh > "$R/serve-openai-gemma4.txt" 2>&1
echo "openai check rc $? at $(el) s"; tail -n 22 "$R/serve-openai-gemma4.txt"
W=/tmp/metw; mkdir -p "$W"; tar xJf .device/libs.tar.xz -C "$W"; export LD_LIBRARY_PATH="$W/lib"
M=$PWD/.device/met; HW=$($M circuit probe --identify | head -n1)
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1); echo "ncu: $NCU"
for m in qwen3-0.6b llama-3.1-8b; do
  $M model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $W/$m >/dev/null
  $M circuit emit --hardware $HW --checkpoint $W/$m --out $W/$m-a --max-ctx 4160 --decode-rungs 1 --prefill-buckets 4096 >/dev/null
  timeout 200 $NCU --section WarpStateStats --section SpeedOfLight \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" -k metinterp_hopper --launch-skip 2 -c 1 \
    $M circuit run --assets $W/$m-a --backend cuda --campaign decode:1@ctx=4096 --warmup 1 --repeats 1 \
    --perf-dir $W/ncu-$m > "$R/ncu-$m.txt" 2>&1
  echo "ncu $m rc $? at $(el) s"; grep -E "stalled|Warp Cycles|Issued|Eligible|Throughput|Duration|Active Warps" "$R/ncu-$m.txt" | head -60
done
