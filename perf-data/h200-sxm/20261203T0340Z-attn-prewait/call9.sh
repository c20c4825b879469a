#!/usr/bin/env bash
# call 9: decode attention's first chunks staged before the waits (MET_ATTN_PREWAIT), A/B in one call:
# cubins built here (nvcc 13.0, -DMET_ATTN_PREWAIT=0 / 1), loaded through MET_INTERP_CUBIN.
set -u
R=$OUT
export WORK=/tmp/metw
xz -dk .device/pw0.cubin.xz .device/pw1.cubin.xz; mkdir -p $WORK && tar xJf .device/libs.tar.xz -C $WORK && export LD_LIBRARY_PATH=$WORK/lib
met=$PWD/.device/met
for m in llama-3.2-1b llama-3.1-8b; do
  $met model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $WORK/$m >/dev/null
  $met circuit emit --hardware h200-sxm --checkpoint $WORK/$m --out $WORK/$m-a --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128 >/dev/null
done
echo "=== optest prewait llama-3.2-1b"
MET_INTERP_CUBIN=.device/pw1.cubin $met circuit optest --assets $WORK/llama-3.2-1b-a --backend cuda 2>&1 | tail -n 2
echo "=== oracle prewait llama-3.2-1b"
ck=$WORK/llama-3.2-1b
timeout 200 python3 tests/oracle/transformers_logits.py --checkpoint $ck --prompt-ids 1,17,42,99,7 --random-prompts 16 --keep 2 --seed 1 --steps 64 --out $WORK/tf.json 2>&1 | grep -v Loading | tail -2
P=$(python3 -c "import json,sys; print(' '.join('--prompt-ids ' + ','.join(map(str, c['prompt'])) for c in json.load(open(sys.argv[1]))['cases']))" $WORK/tf.json)
MET_INTERP_CUBIN=.device/pw1.cubin $met circuit run --assets $ck-a --backend cuda $P --max-tokens 64 --logits-out $WORK/c.json >/dev/null 2>&1
python3 tests/oracle/compare.py $WORK/tf.json $WORK/c.json 2e-2 | tail -1
MET_INTERP_CUBIN=.device/pw1.cubin $met circuit run --assets $ck-a --backend cuda $P --max-tokens 64 --follow $WORK/tf.json --logits-out $WORK/cf.json >/dev/null 2>&1
python3 tests/oracle/compare.py --forced $WORK/tf.json $WORK/cf.json 2e-2 | tail -1
for round in 1 2; do
  for v in pw0 pw1; do
    for m in llama-3.2-1b llama-3.1-8b; do
      dir=$WORK/p-$m-$v-$round
      MET_INTERP_CUBIN=.device/$v.cubin $met circuit run --assets $WORK/$m-a --backend cuda --campaign "decode:1,16@ctx=4096" --perf-dir $dir >/dev/null 2>&1
      python3 bench/campaign_walls.py $dir "$m $v r$round"
    done
  done
done 2>&1 | tee $R/ab.txt
mkdir -p $R/perf && cp -r $WORK/p-* $R/perf/ 2>/dev/null; du -sh $R
