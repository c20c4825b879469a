#!/usr/bin/env bash
# Decode attention's split count: Gemma-3 1B and Gemma-4 12B (synth, real configs) emitted with
# `--split-keys` 32 (the default), 64, 128 and 256, decode C=1 and 16 at ctx 4096, two rounds in
# one call; the campaigns' walls by scope kind (sliding and full layers). optest of the 1B at 64
# and 256; the 12B's prefill 512 and 4096 once, for the flash walls by scope kind.
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R/res"
exec > >(tee -a "$R/log.txt") 2>&1
[[ -d $W/lib ]] || tar xJf .device/libs.tar.xz -C "$W"; export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; chmod +x .device/met; M=$PWD/.device/met
HW=$($M circuit probe --identify | head -n1); echo "HW=$HW"; nvidia-smi --query-gpu=name --format=csv,noheader
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
scoped() { grep -h "^| \`decode\|^| \`prefill" "$1" | grep -i "attn\|flash\|by scope" ; }
for m in gemma-3-1b-it gemma-4-12b; do
  ck=$W/$m
  $M model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck >/dev/null
  for sk in 32 64 128 256; do
    $M circuit emit --hardware $HW --checkpoint $ck --out $ck-$sk --max-ctx 4160 --decode-rungs 1,16 \
      --prefill-buckets 128 --split-keys $sk >/dev/null || echo "emit $m $sk failed"
  done
  if [[ $m == gemma-3-1b-it ]]; then
    for sk in 64 256; do
      timeout 90 $M circuit optest --assets $ck-$sk --backend cuda > $R/res/optest-$m-$sk.txt 2>&1
      echo "optest $m split-keys $sk rc $?: $(tail -1 $R/res/optest-$m-$sk.txt)"
    done
  fi
  echo "$m emitted at $(el) s"
  for round in 1 2; do
    for sk in 32 64 128 256; do
      d=$W/c-$m-$sk-$round; rm -rf $d
      timeout 100 $M circuit run --assets $ck-$sk --backend cuda --campaign decode:1,16@ctx=4096 --perf-dir $d >/dev/null 2>&1 \
        || echo "campaign $m $sk failed"
      python3 bench/campaign_walls.py $d "$m sk=$sk r$round" | grep -v "^ " | cut -c1-400 | tee -a $R/res/walls.txt
      if [[ $round == 1 ]]; then f=$(find $d -name "*.md" | head -1); cp "$f" $R/res/campaign-$m-sk$sk.md; fi
    done
  done
  for sk in 32 256; do echo "== $m sk=$sk by scope"; grep -h "by scope\|^| \`decode_1\` | attn\|^| \`decode_16\` | attn" $R/res/campaign-$m-sk$sk.md; done
  rm -rf $ck-64 $ck-128 $ck-256
  echo "$m at $(el) s"
done
m=gemma-4-12b; ck=$W/$m
$M circuit emit --hardware $HW --checkpoint $ck --out $ck-p --max-ctx 4160 --decode-rungs 1 --prefill-buckets 512,4096 >/dev/null
timeout 120 $M circuit run --assets $ck-p --backend cuda --campaign prefill:512,4096 --perf-dir $W/p-$m >/dev/null 2>&1 || echo "prefill failed"
f=$(find $W/p-$m -name "*.md" | head -1); cp "$f" $R/res/campaign-$m-prefill.md; grep -h "flash" $R/res/campaign-$m-prefill.md | tail -3
echo "done at $(el) s"
tar czf $R/res.tar.gz -C $R res
