#!/usr/bin/env bash
# The final binary (.device/met, 9629740's tree) on Gemma-4 12B: its campaign (decode C=1 and 16 at
# ctx 4096, prefill 128, 512, 4096), then transformers 5.17 against it (3 prompts x 32 steps,
# free-running and teacher-forced).
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R/res"
exec > >(tee -a "$R/log.txt") 2>&1
[[ -d $W/lib ]] || tar xJf .device/libs.tar.xz -C "$W"; export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; chmod +x .device/met; NEW=$PWD/.device/met
HW=$($NEW circuit probe --identify | head -n1); echo "HW=$HW"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
m=gemma-4-12b; ck=$W/$m
$NEW model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck >/dev/null
$NEW circuit emit --hardware $HW --checkpoint $ck --out $ck-c --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128,512,4096 >/dev/null
timeout 120 $NEW circuit run --assets $ck-c --backend cuda --campaign decode:1,16@ctx=4096 --campaign prefill:128,512,4096 --perf-dir $W/camp >/dev/null 2>&1 || echo "campaign failed"
for f in $(find $W/camp -type f); do cp $f $R/res/; done
grep -hE "^\| (decode|prefill)" $R/res/*.md | cut -c1-200
echo "campaign at $(el) s"
rm -rf $ck-c
$NEW circuit emit --hardware $HW --checkpoint $ck --out $ck-o --max-ctx 512 --decode-rungs 4 --prefill-buckets 64 >/dev/null
timeout 200 python3 tests/oracle/transformers_logits.py --checkpoint $ck --prompt-ids 1,17,42,99,7 --random-prompts 4 --keep 2 \
  --seed 1 --steps 32 --attn-implementation eager --out $W/tf-$m.json 2>&1 | grep -v Loading | tail -2
P=$(python3 -c "import json,sys; print(' '.join('--prompt-ids ' + ','.join(map(str, c['prompt'])) for c in json.load(open(sys.argv[1]))['cases']))" $W/tf-$m.json)
$NEW circuit run --assets $ck-o --backend cuda $P --max-tokens 32 --logits-out $W/c-$m.json 2>&1 | grep "^run:"
python3 tests/oracle/compare.py $W/tf-$m.json $W/c-$m.json 2e-2 | tail -2
$NEW circuit run --assets $ck-o --backend cuda $P --max-tokens 32 --follow $W/tf-$m.json --logits-out $W/cf-$m.json > /dev/null 2>&1
python3 tests/oracle/compare.py --forced $W/tf-$m.json $W/cf-$m.json 2e-2 | tail -2
echo "oracle at $(el) s"
