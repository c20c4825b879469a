#!/usr/bin/env bash
# call 1: the tiny Qwen3-MoE fixture with every routing decision > 2 bf16 steps apart; the tiny stage
# against it; Gemma-3 1B (256-dim heads: decode fold in two parts, flash prefill in two passes):
# optest, campaign, peers, oracle; Llama-3.1-8B optest + campaign (main's interpreter on the H200)
set -u
export WORK=/tmp/metw
mkdir -p "$OUT" /tmp/fx $WORK/lib
R=$OUT
met=$PWD/.device/met
tar xJf .device/libs.tar.xz -C $WORK && export LD_LIBRARY_PATH=$WORK/lib
cp tests/oracle/fixtures/*.json /tmp/fx/
{
  $met model synth --config tests/oracle/configs/tiny-qwen3-moe.json --seed 1 --dtype bf16 --out $WORK/tiny-qwen3-moe-bf16
  time python3 tests/oracle/transformers_logits.py --checkpoint $WORK/tiny-qwen3-moe-bf16 --random-prompts 400 --keep 3 \
    --min-router-gap 2 --max-prompt-len 12 --seed 1 --steps 32 --out /tmp/fx/tiny-qwen3-moe-bf16.json \
    --command "python3 tests/oracle/transformers_logits.py --checkpoint tiny-qwen3-moe-bf16 --random-prompts 400 --keep 3 --min-router-gap 2 --max-prompt-len 12 --seed 1 --steps 32 --out tests/oracle/fixtures/tiny-qwen3-moe-bf16.json"
  cp /tmp/fx/tiny-qwen3-moe-bf16.json $R/
  python3 -c "
import json
b = json.load(open('/tmp/fx/tiny-qwen3-moe-bf16.json'))
for i, y in enumerate(b['cases']):
    print(i, len(y['prompt']), y['min_margin'], y.get('min_router_margin'), y.get('min_router_gap'), min(y.get('router_gaps') or [0]))
"
} > $R/fixture-log.txt 2>&1
FIXTURES=/tmp/fx OUT=$R/tiny bash scripts/h200_bringup.sh tiny > /dev/null 2>&1
OUT=$R/gemma DROP_CHECKPOINTS=1 bash scripts/h200_bringup.sh optest,campaign,peers,oracle gemma-3-1b-it > /dev/null 2>&1
OUT=$R/l8 DROP_CHECKPOINTS=1 bash scripts/h200_bringup.sh optest,campaign llama-3.1-8b > /dev/null 2>&1
cd $R && tail -6 fixture-log.txt
for f in tiny/log.txt gemma/log.txt l8/log.txt; do [[ -f $f ]] || continue; echo "== $f"; grep -E "^=== .*rc [^0]|bringup: done|optest:|FAIL|error|worst|vs cpu|sequences|router|part" $f | cut -c1-250 | head -40; done
for d in gemma l8; do [[ -f $d/results.tar.gz ]] && mkdir -p $d/r && tar xzf $d/results.tar.gz -C $d/r; done
for f in $(find gemma l8 -name "*.md" -path "*perf*" 2>/dev/null); do echo "-- $f"; grep -E "^\| (decode|prefill)" $f | cut -d'|' -f2,4,7 | head -16; done
tar czf $R/all.tar.gz tiny gemma l8 && rm -rf tiny gemma l8
