#!/usr/bin/env bash
# The final binary (b90fa4b's GPU code and emitter; c4d4949 changed tests only) on Gemma-3 1B in one
# call: optest, transformers oracle (free and forced), campaign and transformers peers.
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R"
exec > >(tee -a "$R/log.txt") 2>&1
tar xJf .device/libs.tar.xz -C "$W" && export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; chmod +x .device/met; NEW=$PWD/.device/met
HW=$($NEW circuit probe --identify | head -n1); echo "HW=$HW"; t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
m=gemma-3-1b-it; ck=$W/$m
$NEW model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck | tail -1
$NEW circuit emit --hardware $HW --checkpoint $ck --out $ck-h --max-ctx 512 --decode-rungs 1,16 --prefill-buckets 128 >/dev/null
timeout 60 $NEW circuit optest --assets $ck-h --backend cuda > $R/optest-$m.txt 2>&1; echo "optest rc $?: $(tail -1 $R/optest-$m.txt)"
$NEW circuit emit --hardware $HW --checkpoint $ck --out $ck-a --max-ctx 4160 --decode-rungs 1,4,16 --prefill-buckets 128,512,4096 >/dev/null
timeout 60 $NEW circuit run --assets $ck-a --backend cuda --campaign decode:1,16@ctx=4096 --campaign prefill:128,512,4096 --perf-dir $W/camp 2>&1 | tail -1
for f in $(find $W/camp -type f); do cp $f $R/; done; grep -E "^\| (decode|prefill)" $R/*.md | cut -c1-200; echo "campaign at $(el) s"
timeout 90 python3 tests/oracle/transformers_logits.py --checkpoint $ck --prompt-ids 1,17,42,99,7 --random-prompts 4 --keep 2 \
  --seed 1 --steps 32 --attn-implementation eager --out $W/tf.json 2>&1 | grep -v Loading | tail -1
P=$(python3 -c "import json,sys; print(' '.join('--prompt-ids ' + ','.join(map(str, c['prompt'])) for c in json.load(open(sys.argv[1]))['cases']))" $W/tf.json)
$NEW circuit run --assets $ck-a --backend cuda $P --max-tokens 32 --logits-out $W/c.json >/dev/null 2>&1
python3 tests/oracle/compare.py $W/tf.json $W/c.json 2e-2 | tail -1
$NEW circuit run --assets $ck-a --backend cuda $P --max-tokens 32 --follow $W/tf.json --logits-out $W/cf.json >/dev/null 2>&1
python3 tests/oracle/compare.py --forced $W/tf.json $W/cf.json 2e-2 | tail -1; echo "oracle at $(el) s"
timeout $((250 - $(el))) python3 bench/peers/peers.py --checkpoint $ck --modes eager,prefill --out $R/peers-$m.json 2>&1 | grep -v Loading | tail -9
echo "peers at $(el) s"
