#!/usr/bin/env bash
# .device/met (the wide decode folds' keys dealt in 16-key chunks; the split merge's last block reads
# 4 values a load) against .device/met-old (8c93fe8): tiny fixtures, optest of the 512-dim tiny
# shapes and Gemma-4 12B, decode A/B campaigns (ctx 4096, C=1 and 16) on Gemma-4 12B and Gemma-3 1B.
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R/res"
exec > >(tee -a "$R/log.txt") 2>&1
[[ -d $W/lib ]] || tar xJf .device/libs.tar.xz -C "$W"; export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; xz -dkf .device/met-old.xz; chmod +x .device/met .device/met-old
NEW=$PWD/.device/met; OLD=$PWD/.device/met-old
HW=$($NEW circuit probe --identify | head -n1); echo "HW=$HW"; nvidia-smi --query-gpu=name --format=csv,noheader
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
OUT=$R/b1 MET=$NEW WORK=$W TINY=tiny-qwen3,tiny-gemma3,tiny-gemma4,tiny-gemma4-e bash scripts/h200_bringup.sh tiny >/dev/null 2>&1; echo "tiny rc $? at $(el) s"
grep -E "optest:|worst relative|FAIL|differ" $R/b1/log.txt | head -30
for t in tiny-gemma4-512 tiny-gemma4-512-g16 tiny-gemma4-512-g8; do
  $NEW model synth --config bench/configs/$t.json --seed 1 --dtype bf16 --out $W/$t >/dev/null
  $NEW circuit emit --hardware $HW --checkpoint $W/$t --out $W/$t-h --max-ctx 512 --decode-rungs 1,16 --prefill-buckets 128 >/dev/null
  timeout 60 $NEW circuit optest --assets $W/$t-h --backend cuda > $R/res/optest-$t.txt 2>&1; echo "optest $t rc $?: $(tail -1 $R/res/optest-$t.txt)"
done
for m in gemma-4-12b gemma-3-1b-it; do
  ck=$W/$m
  [[ -f $ck/config.json ]] || $NEW model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck >/dev/null
  $NEW circuit emit --hardware $HW --checkpoint $ck --out $ck-h --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128 >/dev/null
  timeout 120 $NEW circuit optest --assets $ck-h --backend cuda > $R/res/optest-$m.txt 2>&1; echo "optest $m rc $?: $(tail -1 $R/res/optest-$m.txt)"
  grep -E "attn_decode_split_merge" $R/res/optest-$m.txt | cut -c1-200 | head -6
  rm -rf $ck-h
  for v in old new old new; do B=$NEW; [[ $v == old ]] && B=$OLD
    [[ -f $ck-$v/model.pkt ]] || $B circuit emit --hardware $HW --checkpoint $ck --out $ck-$v --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128 >/dev/null
    rm -rf $W/ab-$v-$m
    timeout 100 $B circuit run --assets $ck-$v --backend cuda --campaign decode:1,16@ctx=4096 --perf-dir $W/ab-$v-$m >/dev/null 2>&1 || echo "campaign $v $m failed"
    python3 bench/campaign_walls.py $W/ab-$v-$m "$m $v" | grep -v "^ " | cut -c1-330
  done
  for f in $(find $W/ab-new-$m -name "*.md"); do cp $f $R/res/campaign-$m.md; done
  rm -rf $ck-old $ck-new $ck
  echo "$m at $(el) s"
done
