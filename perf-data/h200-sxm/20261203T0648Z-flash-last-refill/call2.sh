#!/usr/bin/env bash
# call 2: (B) flash prefill A/B: the carried met's own image (head) against lr.cubin (the same tree
# with -DMET_FW_LAST_REFILL=1), optest of lr on the flash buckets, prefill campaigns on Llama-3.2-1B
# (head dim 64) and Qwen3-0.6B (128). (A) Qwen3-30B-A3B (bench/configs/qwen3-30b-a3b.json, synth seed 1,
# bf16): decode and prefill campaigns, transformers oracle free-running and teacher-forced.
set -u
R=$OUT
exec > >(tee -a $R/log.txt) 2>&1
export WORK=/tmp/metw
mkdir -p $WORK && tar xJf .device/libs.tar.xz -C $WORK && export LD_LIBRARY_PATH=$WORK/lib
xz -dc .device/lr.cubin.xz > $WORK/lr.cubin
met=$PWD/.device/met
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv,noheader
t() { local t0=$SECONDS; "$@"; echo "  [rc $? in $((SECONDS - t0)) s, at $SECONDS s]"; }
flat() { find $1 -type f -exec cp {} $R/$2 \; ; rm -rf $1; }
echo "=== B: flash A/B"
for m in llama-3.2-1b qwen3-0.6b; do
  ck=$WORK/$m
  t $met model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck 2>&1 | tail -1
  t $met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-h --max-ctx 1280 --decode-rungs 1 --prefill-buckets 200,1100 2>&1 | tail -1
  MET_INTERP_CUBIN=$WORK/lr.cubin t timeout 60 $met circuit optest --assets $ck-h --backend cuda > $R/optest-lr-$m.txt 2>&1; tail -1 $R/optest-lr-$m.txt
  t $met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-a --max-ctx 4160 --decode-rungs 1 --prefill-buckets 4096 2>&1 | tail -1
  for round in 1; do
    for v in head lr; do
      mkdir -p $WORK/pf-$v-$m-$round
      if [[ $v == lr ]]; then export MET_INTERP_CUBIN=$WORK/lr.cubin; else unset MET_INTERP_CUBIN; fi
      t timeout 60 $met circuit run --assets $ck-a --backend cuda --campaign prefill:4096 --warmup 2 --repeats 10 --perf-dir $WORK/pf-$v-$m-$round 2>&1 | tail -1
      find $WORK/pf-$v-$m-$round -name '*.md' -exec grep -E '^\| prefill|flash' {} \; | cut -c1-300
      mkdir -p $R/$v-$m-$round && flat $WORK/pf-$v-$m-$round $v-$m-$round/
    done
  done
  unset MET_INTERP_CUBIN
  rm -rf $ck $ck-h $ck-a
done
echo "=== A: Qwen3-30B-A3B"
ck=$WORK/q30
t $met model synth --config bench/configs/qwen3-30b-a3b.json --seed 1 --dtype bf16 --out $ck 2>&1 | tail -1
t $met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-a --max-ctx 4160 --decode-rungs 1,4,16 --prefill-buckets 128,4096 2>&1 | tail -1
mkdir -p $R/q30-decode $R/q30-prefill
t timeout 90 $met circuit run --assets $ck-a --backend cuda --campaign decode:1,4,16@ctx=4096 --perf-dir $WORK/p1 2>&1 | tail -1
flat $WORK/p1 q30-decode/; grep -hE '^\| decode|^Share|moe|gemv|attn' $R/q30-decode/*.md | cut -c1-300
t timeout 90 $met circuit run --assets $ck-a --backend cuda --campaign prefill:128,4096 --warmup 1 --repeats 3 --perf-dir $WORK/p2 2>&1 | tail -1
flat $WORK/p2 q30-prefill/; grep -hE '^\| prefill|^Share|moe|gemm|flash' $R/q30-prefill/*.md | cut -c1-300
echo "=== oracle"
t timeout 150 python3 tests/oracle/transformers_logits.py --checkpoint $ck --prompt-ids 1,17,42,99,7 --random-prompts 2 --keep 2 \
  --seed 1 --steps 24 --out $WORK/tf.json 2>&1 | grep -v Loading | tail -3
P=$(python3 -c "import json,sys; print(' '.join('--prompt-ids ' + ','.join(map(str, c['prompt'])) for c in json.load(open(sys.argv[1]))['cases']))" $WORK/tf.json)
t timeout 60 $met circuit run --assets $ck-a --backend cuda $P --max-tokens 24 --logits-out $WORK/c.json > $R/run-free.txt 2>&1
python3 tests/oracle/compare.py $WORK/tf.json $WORK/c.json 2e-2 2>&1 | tail -4
t timeout 60 $met circuit run --assets $ck-a --backend cuda $P --max-tokens 24 --follow $WORK/tf.json --logits-out $WORK/cf.json > $R/run-forced.txt 2>&1
python3 tests/oracle/compare.py --forced $WORK/tf.json $WORK/cf.json 2e-2 2>&1 | tail -4
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); [c.pop('logits', None) for c in j['cases']]; json.dump(j, open(sys.argv[2], 'w'))" $WORK/tf.json $R/oracle-tokens.json
left=$((575 - SECONDS))
echo "=== peers (prefill 4096, eager decode C=1; $left s left)"
((left > 60)) && t timeout $left python3 bench/peers/peers.py --checkpoint $ck --out $R/peers.json --batch 1 --ctx 4096 --prefill 4096 --modes eager,prefill 2>&1 | grep -v Loading | tail -4
echo "=== end at $SECONDS s"
