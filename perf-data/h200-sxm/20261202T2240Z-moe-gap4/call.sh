#!/usr/bin/env bash
# call 2: the tiny Qwen3-MoE fixture with every routing decision > 4 bf16 steps apart, the tiny stage
# against it; Gemma-3 1B with the split caps (window, merge balance): campaign, oracle (eager)
set -u
export WORK=/tmp/metw
mkdir -p "$OUT" /tmp/fx $WORK/lib
R=$OUT
met=$PWD/.device/met
tar xJf .device/libs.tar.xz -C $WORK && export LD_LIBRARY_PATH=$WORK/lib
cp tests/oracle/fixtures/*.json /tmp/fx/
{
  $met model synth --config tests/oracle/configs/tiny-qwen3-moe.json --seed 1 --dtype bf16 --out /tmp/moeck
  time python3 tests/oracle/transformers_logits.py --checkpoint /tmp/moeck --random-prompts 1500 --keep 3 \
    --min-router-gap 4 --max-prompt-len 8 --seed 1 --steps 32 --out /tmp/fx/tiny-qwen3-moe-bf16.json \
    --command "python3 tests/oracle/transformers_logits.py --checkpoint tiny-qwen3-moe-bf16 --random-prompts 1500 --keep 3 --min-router-gap 4 --max-prompt-len 8 --seed 1 --steps 32 --out tests/oracle/fixtures/tiny-qwen3-moe-bf16.json"
  cp /tmp/fx/tiny-qwen3-moe-bf16.json $R/
  python3 -c "
import json
b = json.load(open('/tmp/fx/tiny-qwen3-moe-bf16.json'))
for i, y in enumerate(b['cases']):
    print(i, len(y['prompt']), y['min_margin'], y.get('min_router_margin'), y.get('min_router_gap'), min(y.get('router_gaps') or [0]))
"
} > $R/fixture-log.txt 2>&1
FIXTURES=/tmp/fx OUT=$R/tiny bash scripts/h200_bringup.sh tiny > /dev/null 2>&1
OUT=$R/gemma DROP_CHECKPOINTS=1 bash scripts/h200_bringup.sh campaign,oracle gemma-3-1b-it > /dev/null 2>&1
cd $R && tail -6 fixture-log.txt
for f in tiny/log.txt gemma/log.txt; do [[ -f $f ]] || continue; echo "== $f"; grep -E "^=== .*rc [^0]|bringup: done|optest:|FAIL|error|worst|vs cpu|sequences|router|part|case" $f | cut -c1-250 | head -40; done
for d in gemma; do [[ -f $d/results.tar.gz ]] && mkdir -p $d/r && tar xzf $d/results.tar.gz -C $d/r; done
for f in $(find gemma -name "*.md" -path "*perf*" 2>/dev/null); do echo "-- $f"; grep -E "^\| (decode|prefill)" $f | cut -d'|' -f2,4,7,10 | head -16; grep -E "^\| .decode_1. ctx" $f | head -2; done
tar czf $R/all.tar.gz tiny gemma && rm -rf tiny gemma
