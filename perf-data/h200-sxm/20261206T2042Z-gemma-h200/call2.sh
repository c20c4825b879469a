#!/usr/bin/env bash
# On the H200 (f0d683f's binary; its hopper cubin is the one ba77e9a measured): Gemma-3 27B's
# calibration campaigns (decode C=1..16 at ctx 512 and 4096, prefill 128, 512, 4096; decode C=1..8
# at ctx 16384 while time is left); Gemma-4 12B's optest, campaign (decode C=1,16 at ctx 4096,
# prefill 128, 512, 4096), transformers oracle, and its transformers peers while time is left.
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R/res" "$R/perf"
exec > >(tee -a "$R/log.txt") 2>&1
[[ -d $W/lib ]] || tar xJf .device/libs.tar.xz -C "$W"; export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; chmod +x .device/met; M=$PWD/.device/met
HW=$($M circuit probe --identify | head -n1); echo "HW=$HW"; nvidia-smi --query-gpu=name --format=csv,noheader
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
m=gemma-3-27b-it; ck=$W/$m
$M model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck >/dev/null
$M circuit emit --hardware $HW --checkpoint $ck --out $ck-c --max-ctx 4160 --decode-rungs 1,2,4,8,16 --prefill-buckets 128,512,4096 >/dev/null
timeout 200 $M circuit run --assets $ck-c --backend cuda --campaign decode:1,2,4,8,16@ctx=512 --campaign decode:1,2,4,8,16@ctx=4096 \
  --campaign prefill:128,512,4096 --perf-dir $R/perf >/dev/null 2>&1 || echo "27B campaign failed"
grep -hE "^\| (decode|prefill)" $(find $R/perf -name "*.md") | cut -c1-120
rm -rf $ck-c; echo "27B at $(el) s"
m=gemma-4-12b; ck=$W/$m
[[ -f $ck/config.json ]] || $M model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck >/dev/null
$M circuit emit --hardware $HW --checkpoint $ck --out $ck-h --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128 >/dev/null
timeout 120 $M circuit optest --assets $ck-h --backend cuda > $R/res/optest-$m.txt 2>&1; echo "optest $m rc $?: $(tail -1 $R/res/optest-$m.txt)"
rm -rf $ck-h
$M circuit emit --hardware $HW --checkpoint $ck --out $ck-c --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128,512,4096 >/dev/null
timeout 150 $M circuit run --assets $ck-c --backend cuda --campaign decode:1,16@ctx=4096 --campaign prefill:128,512,4096 --perf-dir $R/perf >/dev/null 2>&1 || echo "12B campaign failed"
grep -hE "^\| (decode|prefill)" $(find $R/perf/*/$m -name "*.md") | cut -c1-120
rm -rf $ck-c; echo "12B campaign at $(el) s"
$M circuit emit --hardware $HW --checkpoint $ck --out $ck-o --max-ctx 512 --decode-rungs 4 --prefill-buckets 64 >/dev/null
timeout 200 python3 tests/oracle/transformers_logits.py --checkpoint $ck --prompt-ids 1,17,42,99,7 --random-prompts 4 --keep 2 \
  --seed 1 --steps 32 --attn-implementation eager --out $W/tf-$m.json 2>&1 | grep -v Loading | tail -2
P=$(python3 -c "import json,sys; print(' '.join('--prompt-ids ' + ','.join(map(str, c['prompt'])) for c in json.load(open(sys.argv[1]))['cases']))" $W/tf-$m.json)
$M circuit run --assets $ck-o --backend cuda $P --max-tokens 32 --logits-out $W/c-$m.json 2>&1 | grep "^run:"
python3 tests/oracle/compare.py $W/tf-$m.json $W/c-$m.json 2e-2 | tail -2
$M circuit run --assets $ck-o --backend cuda $P --max-tokens 32 --follow $W/tf-$m.json --logits-out $W/cf-$m.json > /dev/null 2>&1
python3 tests/oracle/compare.py --forced $W/tf-$m.json $W/cf-$m.json 2e-2 | tail -2
rm -rf $ck-o; echo "oracle at $(el) s"
if (( $(el) < 430 )); then
  timeout $((560 - $(el))) python3 bench/peers/peers.py --checkpoint $ck --out $R/perf/peers-$m.json 2>&1 | grep -v Loading | tail -14
  echo "peers at $(el) s"
fi
tar czf $R/res.tar.gz -C $R res perf
