#!/usr/bin/env bash
# call 2: the tiny Qwen3-MoE transformers fixture again, with per-step router gaps; the tiny stage
# against it (and the other committed fixtures); the fp8 stage; Gemma-3 1B (256-dim heads)
set -u
export WORK=/tmp/metw
mkdir -p "$OUT" /tmp/fx
R=$OUT
met=$PWD/.device/met
mkdir -p $WORK/lib && tar xJf .device/libs.tar.xz -C $WORK && export LD_LIBRARY_PATH=$WORK/lib
cp tests/oracle/fixtures/*.json /tmp/fx/
{
  $met model synth --config tests/oracle/configs/tiny-qwen3-moe.json --seed 1 --dtype bf16 --out $WORK/tiny-qwen3-moe-bf16
  time python3 tests/oracle/transformers_logits.py --checkpoint $WORK/tiny-qwen3-moe-bf16 --random-prompts 24 --keep 3 \
    --seed 1 --steps 32 --out /tmp/fx/tiny-qwen3-moe-bf16.json \
    --command "python3 tests/oracle/transformers_logits.py --checkpoint tiny-qwen3-moe-bf16 --random-prompts 24 --keep 3 --seed 1 --steps 32 --out tests/oracle/fixtures/tiny-qwen3-moe-bf16.json"
  cp /tmp/fx/tiny-qwen3-moe-bf16.json $R/
  python3 - <<'PY'
import json
a = json.load(open("tests/oracle/fixtures/tiny-qwen3-moe-bf16.json")); b = json.load(open("/tmp/fx/tiny-qwen3-moe-bf16.json"))
for i, (x, y) in enumerate(zip(a["cases"], b["cases"])):
    d = max(abs(p - q) for r, s in zip(x["logits"], y["logits"]) for p, q in zip(r, s))
    print(f"case {i}: same prompt {x['prompt'] == y['prompt']}, same tokens {x['tokens'] == y['tokens']}, max logit change {d:.3g}, "
          f"margins {x['min_margin']} {y['min_margin']} {x.get('min_router_margin')} {y.get('min_router_margin')}, router gaps {y.get('router_gaps')}")
PY
} > $R/fixture-log.txt 2>&1
FIXTURES=/tmp/fx OUT=$R/tiny bash scripts/h200_bringup.sh tiny > /dev/null 2>&1
OUT=$R/fp8 DROP_CHECKPOINTS=1 bash scripts/h200_bringup.sh fp8 > /dev/null 2>&1
OUT=$R/gemma DROP_CHECKPOINTS=1 bash scripts/h200_bringup.sh optest,campaign,oracle gemma-3-1b-it > /dev/null 2>&1
cd $R && cat fixture-log.txt | tail -8
for f in tiny/log.txt fp8/log.txt gemma/log.txt; do [[ -f $f ]] || continue; echo "== $f"; grep -E "^=== .*rc [^0]|bringup: done|optest:|FAIL|error|worst|vs cpu|sequences|router|part" $f | cut -c1-250 | head -40; done
for d in fp8 gemma; do [[ -f $d/results.tar.gz ]] && mkdir -p $d/r && tar xzf $d/results.tar.gz -C $d/r; done
for f in $(find fp8 gemma -name "*.md" -path "*perf*" 2>/dev/null); do echo "-- $f"; grep -E "^\| (decode|prefill)" $f | cut -d'|' -f2,4,7 | head -16; done
tar czf $R/all.tar.gz tiny fp8 gemma && rm -rf tiny fp8 gemma
