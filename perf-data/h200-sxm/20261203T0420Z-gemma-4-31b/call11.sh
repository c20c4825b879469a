#!/usr/bin/env bash
# call 11: the real-size Gemma-4 31B-it text model (bench/configs/gemma-4-31b-it.json, synth seed 1,
# bf16, 61.6 GB) on the H200: decode campaign, transformers oracle (eager), prefill campaign.
set -u
R=$OUT
export WORK=/tmp/metw
mkdir -p $WORK && tar xJf .device/libs.tar.xz -C $WORK && export LD_LIBRARY_PATH=$WORK/lib
met=$PWD/.device/met
ck=$WORK/gemma-4-31b-it
df -h /tmp | tail -1
time $met model synth --config bench/configs/gemma-4-31b-it.json --seed 1 --dtype bf16 --out $ck 2>&1 | tail -1
$met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-a --max-ctx 4160 --decode-rungs 1 --prefill-buckets 128,4096 2>&1 | tail -1
echo "=== decode campaign"
timeout 200 $met circuit run --assets $ck-a --backend cuda --campaign decode:1@ctx=4096 --perf-dir $R/p1 2>&1 | tail -2
find $R/p1 -name "*.md" -exec grep -E "^\| decode|^Share|attn|gemv" {} \; | cut -c1-400
echo "=== oracle"
timeout 240 python3 tests/oracle/transformers_logits.py --checkpoint $ck --prompt-ids 1,17,42,99,7 --random-prompts 4 --keep 2 \
  --seed 1 --steps 32 --attn-implementation eager --out $WORK/tf.json 2>&1 | grep -v Loading | tail -2
P=$(python3 -c "import json,sys; print(' '.join('--prompt-ids ' + ','.join(map(str, c['prompt'])) for c in json.load(open(sys.argv[1]))['cases']))" $WORK/tf.json)
$met circuit run --assets $ck-a --backend cuda $P --max-tokens 32 --logits-out $WORK/c.json > /dev/null 2>&1
python3 tests/oracle/compare.py $WORK/tf.json $WORK/c.json 2e-2 | tail -2
$met circuit run --assets $ck-a --backend cuda $P --max-tokens 32 --follow $WORK/tf.json --logits-out $WORK/cf.json > /dev/null 2>&1
python3 tests/oracle/compare.py --forced $WORK/tf.json $WORK/cf.json 2e-2 | tail -2
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); [c.pop('logits', None) for c in j['cases']]; json.dump(j, open(sys.argv[2], 'w'))" $WORK/tf.json $R/oracle-tokens.json
echo "=== prefill campaign"
timeout 120 $met circuit run --assets $ck-a --backend cuda --campaign prefill:128,4096 --warmup 1 --repeats 5 --perf-dir $R/p2 2>&1 | tail -1
find $R/p2 -name "*.md" -exec grep -E "^\| prefill|^Share" {} \; | cut -c1-400
for d in p1 p2; do find $R/$d -type f -exec cp {} $R/ \; ; rm -rf $R/$d; done; ls $R
