#!/usr/bin/env bash
# (1) 256-dim decode attention on the tensor cores (attend_mma_t<256, 16>, .device/met) against
#     a9e030c's CUDA-core fold in parts of 128 (.device/met-old): optest of the tiny Gemmas (and their
#     transformers fixtures), of Gemma-3 1B and Gemma-4 12B, decode campaigns C=1 and 16 at ctx 4096 of both;
# (2) the transformers oracle of Gemma-3 1B and Gemma-4 12B (eager; the fixed prompt and the 2 most
#     decisive of 4 random, 32 steps), free-running and teacher-forced; (3) its transformers peers if time is left.
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R/res"
exec > >(tee -a "$R/log.txt") 2>&1
tar xJf .device/libs.tar.xz -C "$W" && export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; xz -dkf .device/met-old.xz; chmod +x .device/met .device/met-old
NEW=$PWD/.device/met; OLD=$PWD/.device/met-old
HW=$($NEW circuit probe --identify | head -n1); echo "HW=$HW"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
OUT=$R/b1 MET=$NEW WORK=$W TINY=tiny-gemma3,tiny-gemma4 bash scripts/h200_bringup.sh tiny >/dev/null 2>&1; echo "tiny rc $? at $(el) s"
grep -E "optest:|worst relative|sequences" $R/b1/log.txt
for m in gemma-3-1b-it gemma-4-12b; do
  $NEW model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $W/$m >/dev/null
  $NEW circuit emit --hardware $HW --checkpoint $W/$m --out $W/$m-h --max-ctx 512 --decode-rungs 1,16 --prefill-buckets 128 >/dev/null
  timeout 120 $NEW circuit optest --assets $W/$m-h --backend cuda > $R/res/optest-$m.txt 2>&1; echo "optest $m rc $?: $(tail -1 $R/res/optest-$m.txt)"
  grep attn_decode $R/res/optest-$m.txt | cut -c1-200
  $NEW circuit emit --hardware $HW --checkpoint $W/$m --out $W/$m-a --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128 >/dev/null
  for v in old new; do B=$NEW; [[ $v == old ]] && B=$OLD
    rm -rf $W/ab-$v-$m
    timeout 120 $B circuit run --assets $W/$m-a --backend cuda --campaign decode:1,16@ctx=4096 --perf-dir $W/ab-$v-$m >/dev/null 2>&1 || echo "campaign $v $m failed"
    python3 bench/campaign_walls.py $W/ab-$v-$m "$m $v" | grep -v "^ " | tee -a $R/res/walls.txt | cut -c1-250
  done
  cp -r $W/ab-new-$m $R/res/campaign-new-$m
  echo "$m at $(el) s"
done
oracle() {  # $1: model; transformers (eager) on 3 prompts x 32 steps against met cuda, free and forced
  local m=$1 ck=$W/$1
  $NEW circuit emit --hardware $HW --checkpoint $ck --out $ck-o --max-ctx 512 --decode-rungs 4 --prefill-buckets 64 >/dev/null
  timeout 240 python3 tests/oracle/transformers_logits.py --checkpoint $ck --prompt-ids 1,17,42,99,7 --random-prompts 4 --keep 2 \
    --seed 1 --steps 32 --attn-implementation eager --out $W/tf-$m.json 2>&1 | grep -v Loading | tail -2
  echo "transformers $m at $(el) s"
  P=$(python3 -c "import json,sys; print(' '.join('--prompt-ids ' + ','.join(map(str, c['prompt'])) for c in json.load(open(sys.argv[1]))['cases']))" $W/tf-$m.json)
  $NEW circuit run --assets $ck-o --backend cuda $P --max-tokens 32 --logits-out $W/c-$m.json 2>&1 | grep "^run:"
  python3 tests/oracle/compare.py $W/tf-$m.json $W/c-$m.json 2e-2 | tail -2
  $NEW circuit run --assets $ck-o --backend cuda $P --max-tokens 32 --follow $W/tf-$m.json --logits-out $W/cf-$m.json > /dev/null 2>&1
  python3 tests/oracle/compare.py --forced $W/tf-$m.json $W/cf-$m.json 2e-2 | tail -2
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); [c.pop('logits', None) for c in j['cases']]; json.dump(j, open(sys.argv[2], 'w'))" $W/tf-$m.json $R/res/oracle-tokens-$m.json
  rm -f $W/tf-$m.json $W/c-$m.json $W/cf-$m.json
}
oracle gemma-3-1b-it
if (( $(el) < 330 )); then oracle gemma-4-12b; fi
ck=$W/gemma-4-12b
echo "oracle at $(el) s"
if (( $(el) < 400 )); then
  timeout $((575 - $(el))) python3 bench/peers/peers.py --checkpoint $ck --out $R/res/peers-gemma-4-12b.json 2>&1 | grep -v Loading | tail -12
  echo "peers at $(el) s"
fi
