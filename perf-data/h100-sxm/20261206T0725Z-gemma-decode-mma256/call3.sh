#!/usr/bin/env bash
# Gemma-4 12B (bench/configs/gemma-4-12b.json, synth seed 1, bf16): the campaign on .device/met (the
# 256-dim tensor-core decode fold) and the transformers peers (bench/peers/peers.py) in one call.
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R/res"
exec > >(tee -a "$R/log.txt") 2>&1
[[ -d $W/lib ]] || tar xJf .device/libs.tar.xz -C "$W"; export LD_LIBRARY_PATH="$W/lib"
[[ -x .device/met ]] || { xz -dkf .device/met.xz; chmod +x .device/met; }
NEW=$PWD/.device/met; HW=$($NEW circuit probe --identify | head -n1); echo "HW=$HW"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
m=gemma-4-12b; ck=$W/$m
[[ -f $ck/config.json ]] || $NEW model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck | tail -1
[[ -f $ck-c/model.pkt ]] || $NEW circuit emit --hardware $HW --checkpoint $ck --out $ck-c --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128,512,4096 | tail -1
echo "ready at $(el) s"
rm -rf $W/camp; timeout 150 $NEW circuit run --assets $ck-c --backend cuda --campaign decode:1,16@ctx=4096 --campaign prefill:128,512,4096 --perf-dir $W/camp 2>&1 | tail -1
for f in $(find $W/camp -type f); do cp $f $R/res/; done
grep -E "^\| (decode|prefill)" $R/res/*.md | cut -c1-220
echo "campaign at $(el) s"
timeout $((500 - $(el))) python3 bench/peers/peers.py --checkpoint $ck --out $R/res/peers-$m.json 2>&1 | grep -v Loading | tail -14
echo "peers at $(el) s"
