#!/usr/bin/env bash
# Call 4 of 2026-12-04: what rings buy on the H200. gemma-3-27b-it (real config, synth, bf16;
# window 1024, 52 of 62 layers sliding) emitted for 16 sequences of 16448 tokens: its sliding
# caches are rings of 5120 rows (largest bucket 4096), and the plan fits 23 such sequences (with
# full-length caches, about 9: 16 would not fit). Decode campaign at C=1 and C=16, ctx 16384.
set -uo pipefail
cd "$(dirname "$0")/../../.."
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
WORK=/tmp/metw
mkdir -p "$WORK/res" && tar xJf .device/libs.tar.xz -C "$WORK" && export LD_LIBRARY_PATH="$WORK/lib"
exec > >(tee -a "$OUT/log.txt") 2>&1
MET=.device/met m=gemma-3-27b-it ck=$WORK/gemma-3-27b-it
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv
t0=$SECONDS; $MET model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck >/dev/null; echo "synth rc $? in $((SECONDS - t0)) s"
$MET circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-a --max-ctx 16448 --decode-rungs 1,16 \
  --prefill-buckets 128,512,4096; echo "emit rc $?"
python3 -c "import json; print('kv_ring', json.load(open('$ck-a/build.json')).get('kv_ring'))"
$MET circuit plan --hardware h200-sxm --model $m --context 16384 | grep -i "fit"
t0=$SECONDS; timeout 420 $MET circuit run --assets $ck-a --backend cuda --campaign decode:1,16@ctx=16384 --perf-dir $WORK/res/perf
echo "campaign rc $? in $((SECONDS - t0)) s"
tar czf "$OUT/results.tar.gz" -C "$WORK/res" .
