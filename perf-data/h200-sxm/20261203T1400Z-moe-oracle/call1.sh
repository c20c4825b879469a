#!/usr/bin/env bash
# call 1 (2026-12-03 afternoon): transformers fixtures for tiny-gpt-oss (bf16, mxfp4) and
# tiny-gemma4-moe; the tiny stage (every committed fixture plus the new gpt-oss ones) and gptoss
# stage on cuda; optest on the default models.
set -u
export WORK=/tmp/metw PYTHONUNBUFFERED=1
mkdir -p "$OUT" /tmp/fx $WORK/lib
R=$OUT
exec > >(tee -a $R/log.txt) 2>&1
met=$PWD/.device/met
[[ -f .device/met.xz ]] && xz -dc .device/met.xz > .device/met && chmod +x .device/met
tar xJf .device/libs.tar.xz -C $WORK && export LD_LIBRARY_PATH=$WORK/lib
cp tests/oracle/fixtures/*.json /tmp/fx/
T0=$SECONDS
fixture() {  # fixture CONFIG DTYPE LIMIT ARGS...
  local cfg=$1 dt=$2 lim=$3; shift 3
  local n=$cfg-$dt
  $met model synth --config tests/oracle/configs/$cfg.json --seed 1 --dtype $dt --out $WORK/$n >/dev/null
  echo "=== fixture $n (t=$((SECONDS - T0)))"
  timeout $lim python3 tests/oracle/transformers_logits.py --checkpoint $WORK/$n "$@" --seed 1 --steps 32 \
    --out /tmp/fx/$n.json --command "python3 tests/oracle/transformers_logits.py --checkpoint $n $* --seed 1 --steps 32 --out tests/oracle/fixtures/$n.json"
  echo "=== fixture $n: rc $? (t=$((SECONDS - T0)))"
  [[ -f /tmp/fx/$n.json ]] && cp /tmp/fx/$n.json $R/ && python3 -c "
import json,sys
b = json.load(open(sys.argv[1]))
print('transformers', b.get('transformers'))
for i, y in enumerate(b['cases']):
    print(i, len(y['prompt']), y['min_margin'], y.get('min_router_margin'), y.get('min_router_gap'), min(y.get('router_gaps') or [0]))
" /tmp/fx/$n.json
}
python3 -c "import transformers, torch; print(transformers.__version__, torch.__version__)"
fixture tiny-gpt-oss bf16 130 --prompt-ids 1,17,42,99,7 --random-prompts 1500 --keep 3 --min-router-gap 4 --min-prompt-len 5 --max-prompt-len 8
fixture tiny-gpt-oss mxfp4 130 --prompt-ids 1,17,42,99,7 --random-prompts 1500 --keep 3 --min-router-gap 4 --min-prompt-len 5 --max-prompt-len 8
fixture tiny-gemma4-moe bf16 150 --prompt-ids 1,17,42,99,7 --prompt-ids 14,51,88,125,162,199,236,273,310,347,384,421,458,495,532,569,606,643,680,717,754,791,828,865,902,939,976,13,50,87,124,161,198,235,272,309,346,383,420,457 --random-prompts 1500 --keep 3 --min-router-gap 4 --min-prompt-len 4 --max-prompt-len 8 --attn-implementation eager
echo "fixtures done at t=$((SECONDS - T0))"
FIXTURES=/tmp/fx TINY=tiny-llama3,tiny-qwen3,tiny-gemma3,tiny-qwen3-moe,tiny-gemma4 OUT=$R/tiny timeout 200 bash scripts/h200_bringup.sh tiny,gptoss > /dev/null 2>&1
echo "tiny done at t=$((SECONDS - T0))"
OUT=$R/opt DROP_CHECKPOINTS=1 timeout $((560 - (SECONDS - T0))) bash scripts/h200_bringup.sh optest > /dev/null 2>&1
echo "optest done at t=$((SECONDS - T0))"
for f in $R/tiny/log.txt $R/opt/log.txt; do [[ -f $f ]] || continue; echo "== $f"; grep -E "^=== .*rc [^0]|bringup: done|optest:|FAIL|error|worst|vs cpu|sequences|cases" $f | cut -c1-250 | head -60; done
cd $R && tar czf logs.tar.gz tiny opt 2>/dev/null && rm -rf tiny opt
