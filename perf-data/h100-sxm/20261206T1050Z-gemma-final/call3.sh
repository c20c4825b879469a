#!/usr/bin/env bash
# The final binary (.device/met: v_norm in the fused qkv op, rmsnorm_residual, the unstaged CUDA-core
# decode fold's warps sharing a split's keys evenly) against .device/met-old (37df916): optest of the
# tiny Gemmas (with their transformers fixtures), the 512-dim tiny shapes and Gemma-4 12B; the 12B
# campaign of both (decode C=1,16 at ctx 4096, prefill 128,512,4096); the 12B transformers oracle;
# then its transformers peers while time is left.
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R/res"
exec > >(tee -a "$R/log.txt") 2>&1
[[ -d $W/lib ]] || tar xJf .device/libs.tar.xz -C "$W"; export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; xz -dkf .device/met-old.xz; chmod +x .device/met .device/met-old
NEW=$PWD/.device/met; OLD=$PWD/.device/met-old
HW=$($NEW circuit probe --identify | head -n1); echo "HW=$HW"; nvidia-smi --query-gpu=name --format=csv,noheader
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
OUT=$R/b1 MET=$NEW WORK=$W TINY=tiny-gemma3,tiny-gemma4,tiny-gemma4-e,tiny-gemma4-g16 bash scripts/h200_bringup.sh tiny >/dev/null 2>&1; echo "tiny rc $? at $(el) s"
grep -E "optest:|worst relative|FAIL" $R/b1/log.txt | head -30
m=gemma-4-12b; ck=$W/$m
[[ -f $ck/config.json ]] || $NEW model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck >/dev/null
for t in tiny-gemma4-512 tiny-gemma4-512-g16; do
  $NEW model synth --config bench/configs/$t.json --seed 1 --dtype bf16 --out $W/$t >/dev/null
  $NEW circuit emit --hardware $HW --checkpoint $W/$t --out $W/$t-h --max-ctx 512 --decode-rungs 1,16 --prefill-buckets 128 >/dev/null
  timeout 60 $NEW circuit optest --assets $W/$t-h --backend cuda > $R/res/optest-$t.txt 2>&1; echo "optest $t rc $?: $(tail -1 $R/res/optest-$t.txt)"
done
$NEW circuit emit --hardware $HW --checkpoint $ck --out $ck-h --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128 >/dev/null
timeout 120 $NEW circuit optest --assets $ck-h --backend cuda > $R/res/optest-$m.txt 2>&1; echo "optest $m rc $?: $(tail -1 $R/res/optest-$m.txt)"
grep -E "attn_decode_split_merge" $R/res/optest-$m.txt | cut -c1-220 | head -8
rm -rf $ck-h
for v in old new; do B=$NEW; [[ $v == old ]] && B=$OLD
  $B circuit emit --hardware $HW --checkpoint $ck --out $ck-$v --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128,512,4096 >/dev/null
  rm -rf $W/ab-$v
  timeout 170 $B circuit run --assets $ck-$v --backend cuda --campaign decode:1,16@ctx=4096 --campaign prefill:128,512,4096 --perf-dir $W/ab-$v >/dev/null 2>&1 || echo "campaign $v failed"
  python3 bench/campaign_walls.py $W/ab-$v "$m $v" | grep -v "^ " | tee -a $R/res/walls.txt | cut -c1-250
  rm -rf $ck-$v
done
for f in $(find $W/ab-new -type f); do cp $f $R/res/; done
grep -hE "^\| (decode|prefill)" $R/res/*.md | cut -c1-200
echo "campaigns at $(el) s"
$NEW circuit emit --hardware $HW --checkpoint $ck --out $ck-o --max-ctx 512 --decode-rungs 4 --prefill-buckets 64 >/dev/null
timeout 200 python3 tests/oracle/transformers_logits.py --checkpoint $ck --prompt-ids 1,17,42,99,7 --random-prompts 4 --keep 2 \
  --seed 1 --steps 32 --attn-implementation eager --out $W/tf-$m.json 2>&1 | grep -v Loading | tail -2
P=$(python3 -c "import json,sys; print(' '.join('--prompt-ids ' + ','.join(map(str, c['prompt'])) for c in json.load(open(sys.argv[1]))['cases']))" $W/tf-$m.json)
$NEW circuit run --assets $ck-o --backend cuda $P --max-tokens 32 --logits-out $W/c-$m.json 2>&1 | grep "^run:"
python3 tests/oracle/compare.py $W/tf-$m.json $W/c-$m.json 2e-2 | tail -2
$NEW circuit run --assets $ck-o --backend cuda $P --max-tokens 32 --follow $W/tf-$m.json --logits-out $W/cf-$m.json > /dev/null 2>&1
python3 tests/oracle/compare.py --forced $W/tf-$m.json $W/cf-$m.json 2e-2 | tail -2
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); [c.pop('logits', None) for c in j['cases']]; json.dump(j, open(sys.argv[2], 'w'))" $W/tf-$m.json $R/res/oracle-tokens-$m.json
echo "oracle at $(el) s"
if (( $(el) < 420 )); then
  timeout $((585 - $(el))) python3 bench/peers/peers.py --checkpoint $ck --out $R/res/peers-$m.json 2>&1 | grep -v Loading | tail -14
  echo "peers at $(el) s"
fi
