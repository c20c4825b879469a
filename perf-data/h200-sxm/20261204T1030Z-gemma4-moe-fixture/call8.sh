#!/usr/bin/env bash
# Call 8 of 2026-12-04: call 5 again, now that transformers_logits.py records each case's
# prompt_router_gap (the smallest router gap over every prompt token) and compare.py sets a case
# with a tie inside its prompt aside. A transformers fixture for tiny-gemma4-moe with fewer routing decisions per
# case (12 steps instead of 32: at 32, 2 of 600 random prompts routed every decision more than 4
# bf16 steps apart; tests/oracle/README.md), then met's cuda backend against it as the tiny stage
# runs every fixture (optest, free-running and forced, cpu bodies).
set -u
export PYTHONUNBUFFERED=1 WORK=/tmp/metw
mkdir -p "$OUT" $WORK/lib /tmp/fx /tmp/fxck
exec > >(tee -a $OUT/log.txt) 2>&1
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
met=$PWD/.device/met
tar xJf .device/libs.tar.xz -C $WORK && export LD_LIBRARY_PATH=$WORK/lib
n=tiny-gemma4-moe-bf16
args=(--prompt-ids 1,17,42,99,7 --random-prompts 600 --keep 3 --min-router-gap 4 --min-prompt-len 4 --max-prompt-len 6
  --attn-implementation eager --seed 1 --steps 12)
$met model synth --config tests/oracle/configs/tiny-gemma4-moe.json --seed 1 --dtype bf16 --out /tmp/fxck/$n >/dev/null
T0=$SECONDS
timeout 300 python3 tests/oracle/transformers_logits.py --checkpoint /tmp/fxck/$n "${args[@]}" --out /tmp/fx/$n.json \
  --command "python3 tests/oracle/transformers_logits.py --checkpoint $n ${args[*]} --out tests/oracle/fixtures/$n.json" 2>&1 | grep -v Loading
echo "=== fixture $n: rc $? in $((SECONDS - T0)) s"
if [[ -f /tmp/fx/$n.json ]]; then
  cp /tmp/fx/$n.json $OUT/
  python3 -c "
import json,sys
b = json.load(open(sys.argv[1]))
print('transformers', b.get('transformers'), b.get('dtype'), b.get('attn_implementation'))
for i, y in enumerate(b['cases']):
    print(i, len(y['prompt']), y['min_margin'], y.get('min_router_margin'), y.get('min_router_gap'), min(y.get('router_gaps') or [0]), y.get('prompt_router_gap'))
" /tmp/fx/$n.json
  FIXTURES=/tmp/fx TINY=tiny-gemma4-moe OUT=$OUT/tiny timeout 200 bash scripts/h200_bringup.sh tiny none > /dev/null 2>&1
  grep -E "^=== .*rc [^0]|worst|sequences|cases|error" $OUT/tiny/log.txt | cut -c1-240
fi
