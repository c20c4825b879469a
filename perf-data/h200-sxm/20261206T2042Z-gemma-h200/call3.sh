#!/usr/bin/env bash
# On the H200 (f0d683f's binary): Gemma-3 27B's calibration campaigns, decode C=1..16 at ctx 512 and
# 4096 and prefill 128, 512, 4096 from one emit; decode C=1..8 at ctx 16384 from a second. The disk
# is cleared first (the 27B's 54 GB and the 12B's 24 GB do not fit its 64 GB together).
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R/perf"
exec > >(tee -a "$R/log.txt") 2>&1
find $W -mindepth 1 -maxdepth 1 ! -name lib -exec rm -rf {} +
[[ -d $W/lib ]] || tar xJf .device/libs.tar.xz -C "$W"; export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; chmod +x .device/met; M=$PWD/.device/met
HW=$($M circuit probe --identify | head -n1); echo "HW=$HW"; nvidia-smi --query-gpu=name --format=csv,noheader; df -h /tmp | tail -1
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
m=gemma-3-27b-it; ck=$W/$m
$M model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck 2>&1 | tail -1
$M circuit emit --hardware $HW --checkpoint $ck --out $ck-c --max-ctx 4160 --decode-rungs 1,2,4,8,16 --prefill-buckets 128,512,4096 >/dev/null
timeout 240 $M circuit run --assets $ck-c --backend cuda --campaign decode:1,2,4,8,16@ctx=512 --campaign decode:1,2,4,8,16@ctx=4096 \
  --campaign prefill:128,512,4096 --perf-dir $R/perf >/dev/null 2>&1 || echo "27B campaign failed"
rm -rf $ck-c; echo "27B at $(el) s"
$M circuit emit --hardware $HW --checkpoint $ck --out $ck-l --max-ctx 16448 --decode-rungs 1,2,4,8 --prefill-buckets 4096 >/dev/null
timeout $((540 - $(el))) $M circuit run --assets $ck-l --backend cuda --campaign decode:1,2,4,8@ctx=16384 --perf-dir $R/perf >/dev/null 2>&1 \
  || echo "27B long campaign failed"
grep -hE "^\| (decode|prefill)" $(find $R/perf -name "*.md") | cut -c1-120
echo "done at $(el) s"
tar czf $R/res.tar.gz -C $R perf
