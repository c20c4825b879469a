#!/usr/bin/env bash
# Prefill bodies on one H200 in one call: optest of a small emit whose prefill buckets are not
# multiples of the GEMM tile (every distinct instruction, cuda against the cpu bodies), then
# `met circuit run --campaign prefill:...` on each model with the per-kernel walls of the timed run.
#   bash bench/prefill_check.sh [MODELS]   (default llama-3.2-1b,llama-3.1-8b; the first is optested)
# Env: MET (default .device/met, its libraries in .device/libs.tar.xz), WORK (default /tmp/metw),
# OUT (default ./out-prefill), BUCKETS (default 128,200,512,4096), OPTEST_MODELS (space list of the
# models optested, default the first of MODELS).
set -uo pipefail
models="${1:-llama-3.2-1b,llama-3.1-8b}"
W="${WORK:-/tmp/metw}"
OUT="${OUT:-./out-prefill}"
buckets="${BUCKETS:-128,200,512,4096}"
mkdir -p "$W" "$OUT"
[[ -f .device/libs.tar.xz ]] && tar xJf .device/libs.tar.xz -C "$W" && export LD_LIBRARY_PATH="$W/lib"
met="$(realpath "${MET:-.device/met}")"
HW="${HW:-$("$met" circuit probe --identify | head -n 1)}"  # the registry device of this GPU (h200-sxm, h100-sxm, ...)
[[ -n $HW ]] || { echo "bench/prefill_check.sh: met names no registry device for this GPU"; exit 1; }
small="${models%%,*}"
for m in ${models//,/ }; do
  [[ -f $W/$m/config.json ]] || "$met" model synth --config "bench/configs/$m.json" --seed 1 --dtype bf16 --out "$W/$m" >/dev/null
done
for m in ${OPTEST_MODELS:-$small}; do
  [[ -f $W/$m/config.json ]] || "$met" model synth --config "bench/configs/$m.json" --seed 1 --dtype bf16 --out "$W/$m" >/dev/null
  # 200: row tiles of 128 and 72 (TMA's zero fill); 1100: enough tiles for the GEMM's 256-column ones
  "$met" circuit emit --hardware "$HW" --checkpoint "$W/$m" --out "$W/$m-o" --max-ctx 1200 --decode-rungs 1 \
    --prefill-buckets 200,1100 >/dev/null
  echo "=== optest $m (prefill buckets 200, 1100)"
  timeout 300 "$met" circuit optest --assets "$W/$m-o" --backend cuda 2>&1 | grep -E "prefill|optest:|FAIL" | tail -n 28
done
for m in ${models//,/ }; do
  "$met" circuit emit --hardware "$HW" --checkpoint "$W/$m" --out "$W/$m-p" --max-ctx 4160 --decode-rungs 1 \
    --prefill-buckets "$buckets" >/dev/null
  echo "=== campaign $m prefill:$buckets"
  timeout 300 "$met" circuit run --assets "$W/$m-p" --backend cuda --campaign "prefill:$buckets" --perf-dir "$OUT/perf-$m" \
    >"$OUT/run-$m.txt" 2>&1 || { echo "rc $?"; tail -n 20 "$OUT/run-$m.txt"; }
  tar czf "$OUT/perf-$m.tar.gz" -C "$OUT/perf-$m" .  # the device call returns files at most two folders deep
  python3 bench/campaign_walls.py "$OUT/perf-$m" "$m"
done
