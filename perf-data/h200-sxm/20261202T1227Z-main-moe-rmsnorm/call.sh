#!/usr/bin/env bash
# call 4: the merged main (MoE and fp8 GPU bodies, split rmsnorm) on the H200
set -u
export WORK=/tmp/metw
mkdir -p "$OUT"
R=$OUT
OUT=$R/tiny bash scripts/h200_bringup.sh tiny > /dev/null 2>&1
F=$R/x; mkdir -p $F; met=$PWD/.device/met; export LD_LIBRARY_PATH=$WORK/lib
OUT=$R/dense bash scripts/h200_bringup.sh optest,campaign llama-3.1-8b,mistral-7b-v0.3 > /dev/null 2>&1
{
  set -x
  for m in llama-3.1-8b mistral-7b-v0.3; do
    $met circuit emit --hardware h200-sxm --checkpoint $WORK/$m --out $WORK/$m-x --max-ctx 16448 --decode-rungs 1,2,4,8,16 --prefill-buckets 128
    timeout 120 $met circuit run --assets $WORK/$m-x --backend cuda --campaign decode:1,2,4,8,16@ctx=512 --campaign decode:1,2,4,8,16@ctx=16384 --perf-dir $F/ctx
    rm -rf $WORK/$m
  done
  $met model synth --config bench/configs/gemma-3-27b-it.json --seed 1 --dtype bf16 --out $WORK/gemma-3-27b-it >/dev/null
  $met circuit emit --hardware h200-sxm --checkpoint $WORK/gemma-3-27b-it --out $WORK/gemma-3-27b-it-a --max-ctx 4160 --decode-rungs 1,2,4,8,16 --prefill-buckets 128
  timeout 120 $met circuit run --assets $WORK/gemma-3-27b-it-a --backend cuda --campaign decode:1,2,4,8,16@ctx=4096 --perf-dir $F/perf
} > $F/more-log.txt 2>&1
cd $R && for f in tiny/log.txt dense/log.txt x/more-log.txt; do echo "== $f"; grep -E "^=== .*rc [^0]|bringup: done|optest:|FAIL|error" $f | cut -c1-300 | head -20; done
for f in $(find x dense -name "*.md" -path "*perf*"); do echo "-- $f"; grep -E "^\| (decode|prefill)" $f | cut -d'|' -f2,4,7 | head -16; done 2>/dev/null | head -80
tar czf $R/all.tar.gz tiny dense x && rm -rf tiny dense x
