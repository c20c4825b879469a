#!/usr/bin/env bash
# Gemma-3 1B (synth, seed 1) against transformers 5.17 with fp32 reference logits (bf16 greedy
# tokens), .device/met (3f29ae4) and .device/met-new (256-dim heads on the wgmma flash), same
# prompts, free-running and teacher-forced; then both against the bf16 reference.
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R/res"
exec > >(tee -a "$R/log.txt") 2>&1
[[ -d $W/lib ]] || tar xJf .device/libs.tar.xz -C "$W"; export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; xz -dkf .device/met-new.xz; chmod +x .device/met .device/met-new
OLD=$PWD/.device/met; NEW=$PWD/.device/met-new
HW=$($NEW circuit probe --identify | head -n1); echo "HW=$HW"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
m=gemma-3-1b-it; ck=$W/$m
[[ -f $ck/config.json ]] || $NEW model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck >/dev/null
for v in old new; do B=$NEW; [[ $v == old ]] && B=$OLD
  $B circuit emit --hardware $HW --checkpoint $ck --out $ck-$v --max-ctx 512 --decode-rungs 4 --prefill-buckets 64 >/dev/null; done
for ref in float32 bfloat16; do
  timeout 120 python3 tests/oracle/transformers_logits.py --checkpoint $ck --prompt-ids 1,17,42,99,7 --random-prompts 4 --keep 2 \
    --seed 1 --steps 32 --attn-implementation eager --reference-logits $ref --out $W/tf-$ref.json 2>&1 | grep -v Loading | tail -1
  P=$(python3 -c "import json,sys; print(' '.join('--prompt-ids ' + ','.join(map(str, c['prompt'])) for c in json.load(open(sys.argv[1]))['cases']))" $W/tf-$ref.json)
  for v in old new; do B=$NEW; [[ $v == old ]] && B=$OLD
    $B circuit run --assets $ck-$v --backend cuda $P --max-tokens 32 --logits-out $W/c-$v.json > /dev/null 2>&1
    echo "$v vs transformers ($ref logits): $(python3 tests/oracle/compare.py $W/tf-$ref.json $W/c-$v.json 2e-2 | tail -1)"
    $B circuit run --assets $ck-$v --backend cuda $P --max-tokens 32 --follow $W/tf-$ref.json --logits-out $W/cf-$v.json > /dev/null 2>&1
    echo "$v forced: $(python3 tests/oracle/compare.py --forced $W/tf-$ref.json $W/cf-$v.json 2e-2 | tail -1)"
  done
done
echo "done at $(el) s"
