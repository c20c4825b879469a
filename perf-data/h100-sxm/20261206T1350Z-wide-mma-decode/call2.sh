#!/usr/bin/env bash
# The 12B transformers oracle of .device/met (free-running and teacher-forced, 32 steps).
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R/res"
exec > >(tee -a "$R/log.txt") 2>&1
[[ -d $W/lib ]] || tar xJf .device/libs.tar.xz -C "$W"; export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; chmod +x .device/met; NEW=$PWD/.device/met
HW=$($NEW circuit probe --identify | head -n1); echo "HW=$HW"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
m=gemma-4-12b; ck=$W/$m
[[ -f $ck/config.json ]] || $NEW model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck >/dev/null
$NEW circuit emit --hardware $HW --checkpoint $ck --out $ck-o --max-ctx 512 --decode-rungs 4 --prefill-buckets 64 >/dev/null
timeout 300 python3 tests/oracle/transformers_logits.py --checkpoint $ck --prompt-ids 1,17,42,99,7 --random-prompts 4 --keep 2 \
  --seed 1 --steps 32 --attn-implementation eager --out $W/tf-$m.json 2>&1 | grep -v Loading | tail -2
P=$(python3 -c "import json,sys; print(' '.join('--prompt-ids ' + ','.join(map(str, c['prompt'])) for c in json.load(open(sys.argv[1]))['cases']))" $W/tf-$m.json)
$NEW circuit run --assets $ck-o --backend cuda $P --max-tokens 32 --logits-out $W/c-$m.json 2>&1 | grep "^run:"
python3 tests/oracle/compare.py $W/tf-$m.json $W/c-$m.json 2e-2 | tail -2
$NEW circuit run --assets $ck-o --backend cuda $P --max-tokens 32 --follow $W/tf-$m.json --logits-out $W/cf-$m.json > /dev/null 2>&1
python3 tests/oracle/compare.py --forced $W/tf-$m.json $W/cf-$m.json 2e-2 | tail -2
echo "oracle at $(el) s"
