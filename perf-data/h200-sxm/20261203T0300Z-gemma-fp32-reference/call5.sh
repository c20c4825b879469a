#!/usr/bin/env bash
# call 5: the transformers fixtures of tiny-gemma4 and tiny-gemma4-e; the Gemma-3 1B step-0 diagnosis
set -u
R=$OUT
bash .device/call4.sh > $R/fixtures.log 2>&1
tail -20 $R/fixtures.log
export WORK=/tmp/metw
export LD_LIBRARY_PATH=$WORK/lib
met=$PWD/.device/met
ck=$WORK/gemma-3-1b-it
( $met model synth --config bench/configs/gemma-3-1b-it.json --seed 1 --dtype bf16 --out $ck >/dev/null &&
  $met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-a --max-ctx 512 --decode-rungs 1 --prefill-buckets 128 >/dev/null ) || echo "synth/emit failed"
timeout 200 python3 tests/oracle/transformers_logits.py --checkpoint $ck --prompt-ids 1,17,42,99,7 --steps 8 \
  --attn-implementation eager --out $WORK/g1-tf.json 2>&1 | tail -2
timeout 100 $met circuit run --assets $ck-a --backend cuda --prompt-ids 1,17,42,99,7 --max-tokens 8 --follow $WORK/g1-tf.json --logits-out $WORK/g1-cuda.json 2>&1 | tail -2
timeout 300 $met circuit run --assets $ck-a --backend cpu-oracle --prompt-ids 1,17,42,99,7 --max-tokens 8 --follow $WORK/g1-tf.json --logits-out $WORK/g1-cpu.json 2>&1 | tail -2
timeout 200 python3 .device/diag_gemma.py $ck $WORK/g1-tf.json $WORK/g1-cuda.json $WORK/g1-cpu.json 2>&1 | tail -14 | tee $R/gemma1b-diag.txt
