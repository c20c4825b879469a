#!/usr/bin/env bash
# call 3: transformers' gpt-oss and gemma4 internals on the tiny checkpoints (diag.py); the tiny
# gemma4-moe fixture with fewer prompts; tiny-gpt-oss mxfp4 on cuda vs the cpu bodies (the YaRN
# factor in the GPU rope) and optest.
set -u
export PYTHONUNBUFFERED=1 WORK=/tmp/metw
mkdir -p "$OUT" $WORK/lib /tmp/fx
R=$OUT
exec > >(tee -a $R/log.txt) 2>&1
[[ -f .device/met.xz ]] && xz -dc .device/met.xz > .device/met && chmod +x .device/met
met=$PWD/.device/met
tar xJf .device/libs.tar.xz -C $WORK && export LD_LIBRARY_PATH=$WORK/lib
T0=$SECONDS
cp tests/oracle/fixtures/*.json /tmp/fx/
mkdir -p $R/d
for spec in "tiny-gpt-oss bf16 1015,704,576,614,410,491,773,648" "tiny-gpt-oss mxfp4 529,510,952,499,380" "tiny-gemma4-moe bf16 1,17,42,99,7"; do
  set -- $spec
  $met model synth --config tests/oracle/configs/$1.json --seed 1 --dtype $2 --out $WORK/$1-$2 > /dev/null
  a=(); [[ $1 == tiny-gemma4-moe ]] && a=(eager)
  timeout 60 python3 .device/diag.py $WORK/$1-$2 $3 $R/d/$1-$2 "${a[@]}" 2>&1 | grep -v Loading
done
python3 -c "
import json; c=json.load(open('.device/fx/tiny-gpt-oss-bf16.json'))['cases'][2]; print('bf16 case 2 prompt', c['prompt'])"
echo "diag done at t=$((SECONDS - T0))"
n=tiny-gemma4-moe-bf16
timeout 220 python3 tests/oracle/transformers_logits.py --checkpoint $WORK/$n --prompt-ids 1,17,42,99,7 \
  --random-prompts 500 --keep 3 --min-router-gap 4 --min-prompt-len 4 --max-prompt-len 6 --attn-implementation eager --seed 1 --steps 32 \
  --out $R/$n.json --command "python3 tests/oracle/transformers_logits.py --checkpoint $n --prompt-ids 1,17,42,99,7 --random-prompts 500 --keep 3 --min-router-gap 4 --min-prompt-len 4 --max-prompt-len 6 --attn-implementation eager --seed 1 --steps 32 --out tests/oracle/fixtures/$n.json" 2>&1 | grep -v Loading
echo "g4 fixture rc $? at t=$((SECONDS - T0))"
cp .device/fx/tiny-gpt-oss-mxfp4.json /tmp/fx/
rm -rf $WORK/tiny-gpt-oss-mxfp4
FIXTURES=/tmp/fx OUT=$R/gpt timeout $((500 - (SECONDS - T0))) bash scripts/h200_bringup.sh gptoss > /dev/null 2>&1
grep -E "^=== .*rc|worst|sequences|cases|error" $R/gpt/log.txt | cut -c1-240
echo "done at t=$((SECONDS - T0))"
cd $R && tar czf d.tar.gz d gpt && rm -rf d gpt
