#!/usr/bin/env bash
set -u
export WORK=/tmp/metw LD_LIBRARY_PATH=/tmp/metw/lib
[[ -d $WORK/lib ]] || { mkdir -p $WORK && tar xJf .device/libs.tar.xz -C $WORK; }
m=tiny-gemma4-e
cd $WORK && [[ -f $m-bf16/config.json ]] || $OLDPWD/.device/met model synth --config $OLDPWD/tests/oracle/configs/$m.json --seed 1 --dtype bf16 --out $m-bf16 >/dev/null
P="--prompt-ids 1,17,42,99,7 --prompt-ids 14,51,88,125,162,199,236,273,310,347,384,421,458,495,532,569,606,643,680,717,754,791,828,865,902,939,976,13,50,87,124,161,198,235,272,309,346,383,420,457 --random-prompts 24 --keep 3 --min-prompt-len 24 --max-prompt-len 56 --attn-implementation eager --reference-logits float32 --seed 1 --steps 32"
cmd="python3 tests/oracle/transformers_logits.py --checkpoint $m-bf16 $P --out tests/oracle/fixtures/$m-bf16.json"
timeout 150 python3 $OLDPWD/tests/oracle/transformers_logits.py --checkpoint $m-bf16 $P --out $OUT/$m-bf16.json --command "$cmd" 2>&1 | grep -v Loading | tail -3
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print([(len(c['prompt']), c['min_margin'], c['bf16_vs_reference']) for c in j['cases']])" $OUT/$m-bf16.json
