#!/usr/bin/env bash
# The fused qkv ops' bf16 slices out of line (.device/met) against inlined into run_body
# (.device/met-base, 90a5bda): optest of the tiny Gemmas and Qwen3 against their fixtures, then
# decode campaigns C=1 and C=16 at ctx 4096 of both on Gemma-4 12B, Gemma-3 1B, Qwen3-8B and
# Llama-3.1-8B (synth seed 1), each binary on its own emit, alternating.
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R/res"
exec > >(tee -a "$R/log.txt") 2>&1
[[ -d $W/lib ]] || tar xJf .device/libs.tar.xz -C "$W"; export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; xz -dkf .device/met-base.xz; chmod +x .device/met .device/met-base
NEW=$PWD/.device/met; OLD=$PWD/.device/met-base
HW=$($NEW circuit probe --identify | head -n1); echo "HW=$HW"; nvidia-smi --query-gpu=name --format=csv,noheader
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
OUT=$R/b1 MET=$NEW WORK=$W TINY=tiny-qwen3,tiny-gemma4,tiny-llama3 bash scripts/h200_bringup.sh tiny >/dev/null 2>&1; echo "tiny rc $? at $(el) s"
grep -E "optest:|worst relative|FAIL" $R/b1/log.txt | head -20
for m in gemma-4-12b gemma-3-1b-it qwen3-8b llama-3.1-8b; do
  ck=$W/$m
  [[ -f $ck/config.json ]] || $NEW model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck >/dev/null
  for v in old new old new; do B=$NEW; [[ $v == old ]] && B=$OLD
    [[ -f $ck-$v/model.pkt ]] || $B circuit emit --hardware $HW --checkpoint $ck --out $ck-$v --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128 >/dev/null
    rm -rf $W/ab-$v-$m
    timeout 100 $B circuit run --assets $ck-$v --backend cuda --campaign decode:1,16@ctx=4096 --perf-dir $W/ab-$v-$m >/dev/null 2>&1 || echo "campaign $v $m failed"
    python3 bench/campaign_walls.py $W/ab-$v-$m "$m $v" | grep -v "^ " | tee -a $R/res/walls.txt | cut -c1-330
  done
  rm -rf $ck $ck-old $ck-new
  echo "$m at $(el) s"
done
