#!/usr/bin/env bash
# (1) The transformers oracle of Gemma-4 12B against met cuda (the fused v_norm qkv op and
# rmsnorm_residual at real size): eager, the fixed prompt and the 2 most decisive of 4 random,
# 32 steps, free-running and teacher-forced. (2) Where Gemma-4 12B's decode attention goes: its
# shape with 12 layers all sliding and 12 all full, decode C=1 and C=16 at ctx 4096.
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R/res"
exec > >(tee -a "$R/log.txt") 2>&1
[[ -d $W/lib ]] || tar xJf .device/libs.tar.xz -C "$W"; export LD_LIBRARY_PATH="$W/lib"
[[ -x .device/met ]] || { xz -dkf .device/met.xz; chmod +x .device/met; }
NEW=$PWD/.device/met; HW=$($NEW circuit probe --identify | head -n1); echo "HW=$HW"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
for kind in sliding full; do
  python3 - "$kind" <<'PY'
import json, sys
k = sys.argv[1]
c = json.load(open('bench/configs/gemma-4-12b.json'))
c['num_hidden_layers'] = 12
c['layer_types'] = [k + '_attention'] * 12
json.dump(c, open('/tmp/metw/g12-%s.json' % k, 'w'), indent=1)
PY
  ck=$W/g12-$kind
  $NEW model synth --config $W/g12-$kind.json --seed 1 --dtype bf16 --out $ck >/dev/null
  $NEW circuit emit --hardware $HW --checkpoint $ck --out $ck-a --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128 >/dev/null
  timeout 100 $NEW circuit run --assets $ck-a --backend cuda --campaign decode:1,16@ctx=4096 --perf-dir $W/prof-$kind >/dev/null 2>&1 || echo "campaign $kind failed"
  python3 bench/campaign_walls.py $W/prof-$kind "12 x $kind" | grep -v "^ " | tee -a $R/res/walls.txt | cut -c1-400
  rm -rf $ck $ck-a
done
echo "profile at $(el) s"
m=gemma-4-12b; ck=$W/$m
[[ -f $ck/config.json ]] || $NEW model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck >/dev/null
$NEW circuit emit --hardware $HW --checkpoint $ck --out $ck-o --max-ctx 512 --decode-rungs 4 --prefill-buckets 64 >/dev/null
timeout 300 python3 tests/oracle/transformers_logits.py --checkpoint $ck --prompt-ids 1,17,42,99,7 --random-prompts 4 --keep 2 \
  --seed 1 --steps 32 --attn-implementation eager --out $W/tf-$m.json 2>&1 | grep -v Loading | tail -2
echo "transformers $m at $(el) s"
P=$(python3 -c "import json,sys; print(' '.join('--prompt-ids ' + ','.join(map(str, c['prompt'])) for c in json.load(open(sys.argv[1]))['cases']))" $W/tf-$m.json)
$NEW circuit run --assets $ck-o --backend cuda $P --max-tokens 32 --logits-out $W/c-$m.json 2>&1 | grep "^run:"
python3 tests/oracle/compare.py $W/tf-$m.json $W/c-$m.json 2e-2 | tail -2
$NEW circuit run --assets $ck-o --backend cuda $P --max-tokens 32 --follow $W/tf-$m.json --logits-out $W/cf-$m.json > /dev/null 2>&1
python3 tests/oracle/compare.py --forced $W/tf-$m.json $W/cf-$m.json 2e-2 | tail -2
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); [c.pop('logits', None) for c in j['cases']]; json.dump(j, open(sys.argv[2], 'w'))" $W/tf-$m.json $R/res/oracle-tokens-$m.json
echo "oracle at $(el) s"
