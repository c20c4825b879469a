#!/usr/bin/env bash
# call 4: the tiny gpt-oss fixtures in fp32 (transformers' gpt-oss runs eager attention only, which
# rounds its scores to bf16), the tiny gemma4-moe fixture on the new synth (router projection
# ~U(-1,1)) with gaps counted on the router's bf16 probabilities; tiny-gpt-oss mxfp4 on cuda
# against its fp32 fixture; gpt-oss-20b (real config, MXFP4) optest and oracle as time allows.
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
fixture() {  # fixture CONFIG DTYPE LIMIT ARGS...
  local cfg=$1 dt=$2 lim=$3; shift 3
  local n=$cfg-$dt
  rm -rf $WORK/$n
  $met model synth --config tests/oracle/configs/$cfg.json --seed 1 --dtype $dt --out $WORK/$n >/dev/null
  echo "=== fixture $n (t=$((SECONDS - T0)))"
  timeout $lim python3 tests/oracle/transformers_logits.py --checkpoint $WORK/$n "$@" --seed 1 --steps 32 \
    --out /tmp/fx/$n.json --command "python3 tests/oracle/transformers_logits.py --checkpoint $n $* --seed 1 --steps 32 --out tests/oracle/fixtures/$n.json" 2>&1 | grep -v Loading
  echo "=== fixture $n: rc $? (t=$((SECONDS - T0)))"
  [[ -f /tmp/fx/$n.json ]] && cp /tmp/fx/$n.json $R/ && python3 -c "
import json,sys
b = json.load(open(sys.argv[1]))
print('transformers', b.get('transformers'), b.get('dtype'), b.get('attn_implementation'))
for i, y in enumerate(b['cases']):
    print(i, len(y['prompt']), y['min_margin'], y.get('min_router_margin'), y.get('min_router_gap'), min(y.get('router_gaps') or [0]))
" /tmp/fx/$n.json
}
fixture tiny-gpt-oss mxfp4 100 --prompt-ids 1,17,42,99,7 --random-prompts 1500 --keep 3 --min-router-gap 4 --min-prompt-len 5 --max-prompt-len 8 --dtype float32
fixture tiny-gpt-oss bf16 100 --prompt-ids 1,17,42,99,7 --random-prompts 1500 --keep 3 --min-router-gap 4 --min-prompt-len 5 --max-prompt-len 8 --dtype float32
fixture tiny-gemma4-moe bf16 130 --prompt-ids 1,17,42,99,7 --random-prompts 600 --keep 3 --min-router-gap 4 --min-prompt-len 4 --max-prompt-len 6 --attn-implementation eager
echo "fixtures done at t=$((SECONDS - T0))"
rm -rf $WORK/tiny-gpt-oss-mxfp4
FIXTURES=/tmp/fx OUT=$R/gpt timeout 90 bash scripts/h200_bringup.sh gptoss > /dev/null 2>&1
grep -E "^=== .*rc [^0]|worst|sequences|cases|error" $R/gpt/log.txt | cut -c1-240
echo "gptoss done at t=$((SECONDS - T0))"
m=gpt-oss-20b ck=$WORK/gpt-oss-20b
prompts_of() { python3 -c "import json,sys; print(' '.join('--prompt-ids ' + ','.join(map(str, c['prompt'])) for c in json.load(open(sys.argv[1]))['cases']))" "$1"; }
step() { local n=$1 l=$2; shift 2; [[ $l -gt 5 ]] || { echo "=== $n: no time"; return 1; }; echo "=== $n (t=$((SECONDS - T0)))"; timeout $l "$@"; local rc=$?; echo "=== $n: rc $rc"; return $rc; }
left() { echo $((400 - (SECONDS - T0))); }
step "$m synth" $(left) $met model synth --config kernels/circuits/configs/openai--gpt-oss-20b/config.json --seed 1 --dtype mxfp4 --out $ck > /dev/null
step "$m emit small" 60 $met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-h --max-ctx 512 --decode-rungs 1,16 --prefill-buckets 128
step "$m optest cuda" $(left) $met circuit optest --assets $ck-h --backend cuda 2>&1 | tail -12
step "$m emit" 60 $met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-a --max-ctx 1024 --decode-rungs 1 --prefill-buckets 128
step "$m transformers" $(left) python3 tests/oracle/transformers_logits.py --checkpoint $ck --prompt-ids 1,17,42,99,7 --steps 32 --dtype float32 --out $WORK/$m-tf.json 2>&1 | grep -v Loading
if [[ -f $WORK/$m-tf.json ]]; then
  step "$m run cuda" $(left) $met circuit run --assets $ck-a --backend cuda $(prompts_of $WORK/$m-tf.json) --max-tokens 32 --logits-out $WORK/$m-cuda.json > /dev/null
  step "$m cuda vs transformers" 30 python3 tests/oracle/compare.py $WORK/$m-tf.json $WORK/$m-cuda.json 2e-2
  step "$m run cuda forced" $(left) $met circuit run --assets $ck-a --backend cuda $(prompts_of $WORK/$m-tf.json) --max-tokens 32 --follow $WORK/$m-tf.json --logits-out $WORK/$m-cuda-forced.json > /dev/null
  step "$m cuda vs transformers forced" 30 python3 tests/oracle/compare.py --forced $WORK/$m-tf.json $WORK/$m-cuda-forced.json 2e-2
fi
echo "done at t=$((SECONDS - T0))"
cd $R && tar czf gpt.tar.gz gpt && rm -rf gpt
