#!/usr/bin/env bash
# 256-dim heads on the wgmma flash prefill (two output parts of 128 dims): .device/met-new against
# .device/met (3f29ae4). SASS of the new interpreter's spills; optest of the new binary on the
# 256-dim shapes (prefill bucket 128); A/B campaigns old, new, old, new on Gemma-3 1B and Gemma-4
# 12B (prefill 512 and 4096, decode C=1 and 16 at ctx 4096) and Qwen3-8B (the other head dims and
# decode, for the spill); the 1B against transformers.
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R/res"
exec > >(tee -a "$R/log.txt") 2>&1
[[ -d $W/lib ]] || tar xJf .device/libs.tar.xz -C "$W"; export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; xz -dkf .device/met-new.xz; xz -dkf .device/new.cubin.xz; chmod +x .device/met .device/met-new
OLD=$PWD/.device/met; NEW=$PWD/.device/met-new
HW=$($NEW circuit probe --identify | head -n1); echo "HW=$HW"; nvidia-smi --query-gpu=name --format=csv,noheader
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
if [[ -n $CUOBJ ]]; then
  $CUOBJ -sass .device/new.cubin > $W/sass.txt 2>&1; grep -n "STL\|LDL" $W/sass.txt | head -60 > $R/res/spills.txt
  for n in $(grep -n "STL\|LDL" $W/sass.txt | cut -d: -f1 | head -12); do echo "== $n"; sed -n "$((n-25)),$((n+3))p" $W/sass.txt; done > $R/res/spill-context.txt
  gzip -f $R/res/spill-context.txt; echo "spills: $(wc -l < $R/res/spills.txt) lines"
else echo "no cuobjdump"; fi
for m in gemma-3-1b-it gemma-4-12b qwen3-8b; do
  ck=$W/$m
  $NEW model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck >/dev/null
  if [[ $m != qwen3-8b ]]; then
    $NEW circuit emit --hardware $HW --checkpoint $ck --out $ck-h --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128 >/dev/null
    timeout 90 $NEW circuit optest --assets $ck-h --backend cuda > $R/res/optest-$m.txt 2>&1; echo "optest $m rc $?: $(tail -1 $R/res/optest-$m.txt)"
    grep -E "flash" $R/res/optest-$m.txt | cut -c1-200 | head -4
    rm -rf $ck-h
  fi
  for v in old new; do B=$NEW; [[ $v == old ]] && B=$OLD
    $B circuit emit --hardware $HW --checkpoint $ck --out $ck-$v --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 512,4096 >/dev/null; done
  for v in old new old new; do B=$NEW; [[ $v == old ]] && B=$OLD
    rm -rf $W/ab-$v-$m
    timeout 100 $B circuit run --assets $ck-$v --backend cuda --campaign decode:1,16@ctx=4096 --campaign prefill:512,4096 --perf-dir $W/ab-$v-$m >/dev/null 2>&1 || echo "campaign $v failed"
    python3 bench/campaign_walls.py $W/ab-$v-$m "$m $v" | grep -v "^ " | tee -a $R/res/walls.txt | cut -c1-220
  done
  for f in $(find $W/ab-new-$m -name "*.md"); do cp $f $R/res/campaign-$m.md; done
  rm -rf $ck-old $ck-new
  [[ $m == qwen3-8b ]] || echo "$m at $(el) s"
done
m=gemma-3-1b-it; ck=$W/$m
$NEW circuit emit --hardware $HW --checkpoint $ck --out $ck-o --max-ctx 512 --decode-rungs 4 --prefill-buckets 64 >/dev/null
timeout 150 python3 tests/oracle/transformers_logits.py --checkpoint $ck --prompt-ids 1,17,42,99,7 --random-prompts 4 --keep 2 \
  --seed 1 --steps 32 --attn-implementation eager --out $W/tf-$m.json 2>&1 | grep -v Loading | tail -2
P=$(python3 -c "import json,sys; print(' '.join('--prompt-ids ' + ','.join(map(str, c['prompt'])) for c in json.load(open(sys.argv[1]))['cases']))" $W/tf-$m.json)
$NEW circuit run --assets $ck-o --backend cuda $P --max-tokens 32 --logits-out $W/c-$m.json 2>&1 | grep "^run:"
python3 tests/oracle/compare.py $W/tf-$m.json $W/c-$m.json 2e-2 | tail -2
$NEW circuit run --assets $ck-o --backend cuda $P --max-tokens 32 --follow $W/tf-$m.json --logits-out $W/cf-$m.json > /dev/null 2>&1
python3 tests/oracle/compare.py --forced $W/tf-$m.json $W/cf-$m.json 2e-2 | tail -2
echo "oracle at $(el) s"
tar czf $R/res.tar.gz -C $R res
