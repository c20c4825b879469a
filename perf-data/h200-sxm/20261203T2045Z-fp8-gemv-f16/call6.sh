#!/usr/bin/env bash
# fp8 gemv: fp16 path limit by rows per slice, A/B of cubins built on the dev machine.
set -uo pipefail
exec > >(tee -a "$OUT/log.txt") 2>&1
cd "$(dirname "$0")/.."
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
W=/tmp/metw6; mkdir -p $W; for f in .device/cub/*.xz; do xz -d -k -f $f; done
mkdir -p $W/lib && tar xJf .device/libs.tar.xz -C $W && export LD_LIBRARY_PATH=$W/lib
ck=$W/qwen3-8b-fp8
timeout 90 .device/met model synth --config bench/configs/qwen3-8b.json --seed 1 --dtype fp8-block128 --out $ck > /dev/null; echo "synth rc $?"
timeout 30 .device/met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-a --max-ctx 4160 --decode-rungs 1,4,8,16 --prefill-buckets 128,512,4096 >/dev/null; echo "emit rc $?"
for v in head new4 new8 new16 head; do
  echo "=== $v"
  MET_INTERP_CUBIN=.device/cub/$v.cubin timeout 45 .device/met circuit run --assets $ck-a --backend cuda --campaign decode:1,4,8,16@ctx=4096 --warmup 2 --repeats 10 > $W/ab-$v.txt 2>&1
  echo "rc $?"; grep -E "^\| decode C=" $W/ab-$v.txt | cut -c1-160
done
tar czf $OUT/ab.tar.gz -C $W $(cd $W && ls ab-*.txt) 2>/dev/null
