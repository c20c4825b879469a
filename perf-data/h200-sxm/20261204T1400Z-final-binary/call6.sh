#!/usr/bin/env bash
# Call 6 of 2026-12-04 afternoon: where the 1-token prompt's 0.0217 (call 5, Llama-3.1-8B) comes
# from. The 1- and 37-token prompts of the lengths stage (seeded as there), 8 steps: transformers
# bf16 (tf.json) and its fp32 reference along the same greedy path (tf32.json: every step's logits
# from the checkpoint loaded in fp32, and how far the bf16 run was from them); met cuda and met's cpu
# bodies on the same packets (cpu-oracle), both teacher-forced, each compared with both references.
set -u
cd "$(dirname "$0")/../../.."
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
R=$OUT W=/tmp/metw
exec > >(tee -a $R/log.txt) 2>&1
mkdir -p $W && tar xJf .device/libs.tar.xz -C $W && export LD_LIBRARY_PATH=$W/lib
met=$PWD/.device/met
t() { local t0=$SECONDS; "$@"; echo "  [rc $? in $((SECONDS - t0)) s, at $SECONDS s]"; }
ck=$W/llama-3.1-8b
t $met model synth --config bench/configs/llama-3.1-8b.json --seed 1 --dtype bf16 --out $ck 2>&1 | tail -1
t $met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-a --max-ctx 4160 --decode-rungs 1,2 --prefill-buckets 128,512,4096 2>&1 | tail -1
ids=()
for n in 1 37; do
  ids+=(--prompt-ids "$(python3 -c "import json,random,sys; v=json.load(open(sys.argv[1]))['vocab_size']; n=int(sys.argv[2]); r=random.Random(n); print(','.join(str(r.randrange(v)) for _ in range(n)))" "$ck/config.json" "$n")")
done
t python3 tests/oracle/transformers_logits.py --checkpoint $ck "${ids[@]}" --seed 1 --steps 8 --out $W/tf.json 2>&1 | grep -v Loading | tail -2
t python3 tests/oracle/transformers_logits.py --checkpoint $ck "${ids[@]}" --seed 1 --steps 8 --reference-logits float32 --out $W/tf32.json 2>&1 | grep -v Loading | tail -2
python3 -c "import json,sys; print('bf16 transformers vs its fp32 reference, per case:', [c.get('bf16_vs_reference') for c in json.load(open(sys.argv[1]))['cases']])" $W/tf32.json
for b in cuda cpu-oracle; do
  t timeout 300 $met circuit run --assets $ck-a --backend $b "${ids[@]}" --max-tokens 8 --follow $W/tf.json --logits-out $W/$b.json > $R/run-$b.txt 2>&1
  for ref in tf tf32; do
    echo "--- $b against $ref"
    python3 tests/oracle/compare.py --forced $W/$ref.json $W/$b.json 2e-2 2>&1 | tail -3
  done
done
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); [c.pop('logits', None) for c in j['cases']]; json.dump(j, open(sys.argv[2], 'w'))" $W/tf32.json $R/tf32-tokens.json
echo "=== end at $SECONDS s"
