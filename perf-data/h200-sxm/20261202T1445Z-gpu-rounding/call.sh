#!/usr/bin/env bash
# call 1: GPU bodies rounded as the cpu bodies (rmsnorm, rope, gated activations, decode P);
# gemv weight-layout microbenchmark
set -u
export WORK=/tmp/metw
mkdir -p "$OUT"
R=$OUT
met=$PWD/.device/met
( nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Ikernels -o /tmp/gs bench/gemv_stream.cu > $R/gs-build.txt 2>&1 ) &
OUT=$R/tiny bash scripts/h200_bringup.sh tiny > /dev/null 2>&1
wait
{ echo "== 8B"; /tmp/gs --hidden 4096 --inter 14336 --heads 32 --kv-heads 8 --head-dim 128 --layers 32 --vocab 128256
  echo "== 1B"; /tmp/gs --hidden 2048 --inter 8192 --heads 32 --kv-heads 8 --head-dim 64 --layers 16 --vocab 128256
} > $R/gemv-stream.txt 2>&1
OUT=$R/dense bash scripts/h200_bringup.sh optest,campaign,oracle llama-3.2-1b,llama-3.1-8b > /dev/null 2>&1
cd $R && for f in tiny/log.txt dense/log.txt; do echo "== $f"; grep -E "^=== .*rc [^0]|bringup: done|optest:|FAIL|error|worst|vs cpu|sequences" $f | cut -c1-250 | head -40; done
cat gemv-stream.txt gs-build.txt | head -60
for f in $(find dense -name "*.md" -path "*perf*"); do echo "-- $f"; grep -E "^\| (decode|prefill)" $f | cut -d'|' -f2,4,7 | head -16; done 2>/dev/null | head -40
tar czf $R/all.tar.gz tiny dense && rm -rf tiny dense
