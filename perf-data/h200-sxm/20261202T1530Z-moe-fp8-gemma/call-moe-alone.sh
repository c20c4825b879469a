#!/usr/bin/env bash
# call 4: the tiny Qwen3-MoE one case at a time on cuda (is the parting a batching effect?)
set -u
W=/tmp/m4; mkdir -p $W/lib; tar xJf .device/libs.tar.xz -C $W && export LD_LIBRARY_PATH=$W/lib
met=$PWD/.device/met
$met model synth --config tests/oracle/configs/tiny-qwen3-moe.json --seed 1 --dtype bf16 --out $W/tiny-qwen3-moe-bf16 >/dev/null
$met circuit emit --hardware h200-sxm --checkpoint $W/tiny-qwen3-moe-bf16 --out $W/a --max-ctx 256 --decode-rungs 1,2,4,8 --prefill-buckets 64,128 >/dev/null
fx=tests/oracle/fixtures/tiny-qwen3-moe-bf16.json
for k in 0 1 2; do
  python3 -c "import json,sys; j=json.load(open('$fx')); j['cases']=j['cases'][$k:$k+1]; json.dump(j, open('$W/f$k.json','w'))"
  ids=$(python3 -c "import json; print(','.join(map(str, json.load(open('$W/f$k.json'))['cases'][0]['prompt'])))")
  for b in cuda cpu-oracle; do
    $met circuit run --assets $W/a --backend $b --prompt-ids $ids --max-tokens 32 --follow $W/f$k.json --logits-out $W/o-$b-$k.json > /dev/null 2>&1
    echo "case $k alone, $b forced: $(python3 tests/oracle/compare.py --forced $W/f$k.json $W/o-$b-$k.json 2e-2 | tr '\n' ' ')"
  done
done
