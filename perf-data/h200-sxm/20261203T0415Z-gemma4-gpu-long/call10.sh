#!/usr/bin/env bash
# call 10: Gemma-4 on the H200 (tiny fixtures: optest, cuda vs transformers, cuda vs cpu-oracle; the
# 512-dim heads config: optest), then Llama-3.1-8B at 32768 tokens (prefill in chunks of 4096, decode
# C=1 at ctx 32768) beside ctx 4096.
set -u
R=$OUT
export WORK=/tmp/metw
OUT=$R/tiny TINY=tiny-gemma4 bash scripts/h200_bringup.sh tiny > /dev/null 2>&1
grep -E "^=== .*rc |optest:|worst|sequences" $R/tiny/log.txt | cut -c1-220
export LD_LIBRARY_PATH=$WORK/lib
met=$PWD/.device/met
for n in tiny-gemma4-512 tiny-gemma4-512-g8; do
  c=$WORK/$n
  $met model synth --config bench/configs/$n.json --seed 1 --dtype bf16 --out $c >/dev/null
  $met circuit emit --hardware h200-sxm --checkpoint $c --out $c-a --max-ctx 512 --decode-rungs 1,16 --prefill-buckets 128 2>&1 | tail -1
  echo "=== optest $n"
  timeout 200 $met circuit optest --assets $c-a --backend cuda 2>&1 | tee $R/optest-$n.txt | grep -E "FAIL|optest:" | head -20
done
ck=$WORK/llama-3.1-8b
$met model synth --config bench/configs/llama-3.1-8b.json --seed 1 --dtype bf16 --out $ck >/dev/null
$met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-long --max-ctx 32800 --decode-rungs 1 --prefill-buckets 4096 2>&1 | tail -1
echo "=== long campaign"
timeout 300 $met circuit run --assets $ck-long --backend cuda --campaign decode:1@ctx=32768 --campaign decode:1@ctx=4096 \
  --campaign prefill:4096,32768 --perf-dir $R/perf 2>&1 | tail -3
find $R/perf -name "*.md" -exec sh -c 'grep -E "^\| (decode|prefill)|^Share" "$1"' _ {} \;
