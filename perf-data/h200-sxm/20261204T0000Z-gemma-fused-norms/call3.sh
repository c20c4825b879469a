#!/usr/bin/env bash
# Call 3 (the met of call 2): the decode campaign of gemma-3-27b-it (real config,
# synth, bf16) at context 4096, which call 2 ran out of time for.
set -uo pipefail
cd "$(dirname "$0")/../../.."
exec > >(tee -a "$OUT/log.txt") 2>&1
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
W=/tmp/metw3; mkdir -p $W/res
mkdir -p $W/lib && tar xJf .device/libs.tar.xz -C $W && export LD_LIBRARY_PATH=$W/lib
for m in gemma-3-27b-it:1,2,4,8,16; do
  name=${m%%:*} rungs=${m##*:}
  ck=$W/$name
  timeout 120 .device/met model synth --config bench/configs/$name.json --seed 1 --dtype bf16 --out $ck >/dev/null; echo "$name synth rc $?"
  timeout 60 .device/met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-a --max-ctx 4160 --decode-rungs $rungs \
    --prefill-buckets 128,512,4096 >/dev/null; echo "$name emit rc $?"
  timeout 150 .device/met circuit run --assets $ck-a --backend cuda --campaign decode:$rungs@ctx=4096 --perf-dir $W/res/perf
  echo "$name campaign rc $?"
  rm -rf $ck $ck-a
  tar czf $OUT/results.tar.gz -C $W/res .
done
