#!/usr/bin/env bash
# Gemma decode fusions (v_norm folded into the fused qkv op, rmsnorm_residual): optest of the tiny
# Gemmas against their transformers fixtures and of Gemma-4 12B / Gemma-3 1B at real size; decode and
# prefill campaigns of .device/met against .device/met-old (37df916), each on its own emit.
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R/res"
exec > >(tee -a "$R/log.txt") 2>&1
[[ -d $W/lib ]] || tar xJf .device/libs.tar.xz -C "$W"; export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; xz -dkf .device/met-old.xz; chmod +x .device/met .device/met-old
NEW=$PWD/.device/met; OLD=$PWD/.device/met-old
HW=$($NEW circuit probe --identify | head -n1); echo "HW=$HW"; nvidia-smi --query-gpu=name --format=csv,noheader
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
OUT=$R/b1 MET=$NEW WORK=$W TINY=tiny-gemma3,tiny-gemma4,tiny-gemma4-e,tiny-gemma4-g16 bash scripts/h200_bringup.sh tiny >/dev/null 2>&1; echo "tiny rc $? at $(el) s"
grep -E "optest:|worst relative|sequences|FAIL" $R/b1/log.txt | head -30
for m in gemma-4-12b gemma-3-1b-it; do
  ck=$W/$m
  [[ -f $ck/config.json ]] || $NEW model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck >/dev/null
  $NEW circuit emit --hardware $HW --checkpoint $ck --out $ck-h --max-ctx 512 --decode-rungs 1,16 --prefill-buckets 128 >/dev/null
  timeout 120 $NEW circuit optest --assets $ck-h --backend cuda > $R/res/optest-$m.txt 2>&1; echo "optest $m rc $?: $(tail -1 $R/res/optest-$m.txt)"
  grep -E "rmsnorm_residual|qkv_qknorm" $R/res/optest-$m.txt | cut -c1-200 | head -6
  P="--campaign decode:1,16@ctx=4096"; [[ $m == gemma-4-12b ]] && P="$P --campaign prefill:128,512,4096"
  for v in old new; do B=$NEW; [[ $v == old ]] && B=$OLD
    $B circuit emit --hardware $HW --checkpoint $ck --out $ck-$v --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128,512,4096 >/dev/null
    rm -rf $W/ab-$v-$m
    timeout 170 $B circuit run --assets $ck-$v --backend cuda $P --perf-dir $W/ab-$v-$m >/dev/null 2>&1 || echo "campaign $v $m failed"
    python3 bench/campaign_walls.py $W/ab-$v-$m "$m $v" | grep -v "^ " | tee -a $R/res/walls.txt | cut -c1-250
    grep -hE "^\| (decode|prefill)" $W/ab-$v-$m/*.md | cut -c1-200
    rm -rf $ck-$v
  done
  mkdir -p $R/res/campaign-new-$m; for f in $(find $W/ab-new-$m -type f); do cp $f $R/res/campaign-new-$m/; done
  echo "$m at $(el) s"
done
