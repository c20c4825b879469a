#!/usr/bin/env bash
# call 1: Qwen3-30B-A3B (bench/configs/qwen3-30b-a3b.json = the public config.json, synth seed 1, bf16)
# on the H200: optest, decode and prefill campaigns, transformers oracle (free-running and forced),
# transformers eager peers. (Its output went to a pipe the call's time limit cut; see README.md.)
set -u
R=$OUT
export WORK=/tmp/metw
mkdir -p $WORK && tar xJf .device/libs.tar.xz -C $WORK && export LD_LIBRARY_PATH=$WORK/lib
met=$PWD/.device/met
ck=$WORK/q30
t() { local t0=$SECONDS; "$@"; echo "  [rc $? in $((SECONDS - t0)) s]"; }
echo "=== synth"; t $met model synth --config bench/configs/qwen3-30b-a3b.json --seed 1 --dtype bf16 --out $ck 2>&1 | tail -1
echo "=== optest"
t $met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-h --max-ctx 512 --decode-rungs 1,16 --prefill-buckets 128 2>&1 | tail -1
t timeout 150 $met circuit optest --assets $ck-h --backend cuda > $R/optest.txt 2>&1; tail -3 $R/optest.txt
echo "=== emit"
t $met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-a --max-ctx 4160 --decode-rungs 1,2,4,8,16 --prefill-buckets 128,512,4096 2>&1 | tail -1
echo "=== decode campaign"
t timeout 150 $met circuit run --assets $ck-a --backend cuda --campaign decode:1,2,4,8,16@ctx=4096 --perf-dir $R/p1 2>&1 | tail -2
echo "=== prefill campaign"
t timeout 120 $met circuit run --assets $ck-a --backend cuda --campaign prefill:128,512,4096 --warmup 1 --repeats 5 --perf-dir $R/p2 2>&1 | tail -2
echo "=== oracle"
t timeout 200 python3 tests/oracle/transformers_logits.py --checkpoint $ck --prompt-ids 1,17,42,99,7 --random-prompts 8 --keep 2 \
  --seed 1 --steps 32 --out $WORK/tf.json 2>&1 | grep -v Loading | tail -3
P=$(python3 -c "import json,sys; print(' '.join('--prompt-ids ' + ','.join(map(str, c['prompt'])) for c in json.load(open(sys.argv[1]))['cases']))" $WORK/tf.json)
t $met circuit run --assets $ck-a --backend cuda $P --max-tokens 32 --logits-out $WORK/c.json > /dev/null 2>&1
python3 tests/oracle/compare.py $WORK/tf.json $WORK/c.json 2e-2 2>&1 | tail -4
t $met circuit run --assets $ck-a --backend cuda $P --max-tokens 32 --follow $WORK/tf.json --logits-out $WORK/cf.json > /dev/null 2>&1
python3 tests/oracle/compare.py --forced $WORK/tf.json $WORK/cf.json 2e-2 2>&1 | tail -4
echo "=== peers"
t timeout 170 python3 bench/peers/peers.py --checkpoint $ck --out $R/peers.json --batch 1,16 --ctx 4096 --prefill 128,512,4096 2>&1 | grep -v Loading | tail -5
