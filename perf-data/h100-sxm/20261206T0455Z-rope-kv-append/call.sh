#!/usr/bin/env bash
# rope_kv_append (new met) against the unfused ops (old met, 4e77f33): optest and the tiny fixtures on
# cuda, exactness, prefill A/B; on an H200 the new campaigns are also the calibration's records
# (prefill 128,512,4096 of its six models, Gemma-3 27B decode C=16 at ctx 512 and 4096).
set -uo pipefail
W=/tmp/metw; mkdir -p "$W" "$OUT/res" "$W/perf"
exec > >(tee -a "$OUT/log.txt") 2>&1
tar xJf .device/libs.tar.xz -C "$W" && export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; xz -dkf .device/met-old.xz; chmod +x .device/met .device/met-old
NEW=$PWD/.device/met; OLD=$PWD/.device/met-old
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
HW=$($NEW circuit probe --identify | head -n1); echo "HW=$HW"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
df -h /tmp | tail -1
OUT=$OUT/bringup WORK=$W MET=$NEW HW=$HW TINY=tiny-qwen3,tiny-llama3,tiny-gemma3,tiny-gemma4 timeout 170 \
  bash scripts/h200_bringup.sh tiny,optest qwen3-0.6b,llama-3.2-1b > $W/bringup.txt 2>&1
grep -h "^=== .*: rc\|worst\|FAIL\|fail\|passed" $W/bringup.txt | tail -60 | cut -c1-250
cp $W/bringup.txt $OUT/res/ 2>/dev/null
echo "bringup done at $(el) s"
ids=$(python3 -c "import random; r=random.Random(7); print(','.join(str(r.randrange(32000)) for _ in range(4000)))")
for m in qwen3-0.6b llama-3.2-1b qwen3-8b llama-3.1-8b mistral-7b-v0.3 gemma-3-27b-it; do
  cal=0; [[ $HW == h200-sxm ]] && cal=1
  if [[ $cal == 0 && ( $m == mistral* || $m == gemma* ) ]]; then continue; fi
  (( $(el) > 500 )) && { echo "skip $m: out of time"; continue; }
  [[ $m == gemma-3-27b-it ]] && rm -rf $W/qwen3-8b* $W/llama-3.1-8b* $W/mistral-7b-v0.3*
  [[ -f $W/$m/config.json ]] || $NEW model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $W/$m >/dev/null
  rungs=1; [[ $m == gemma-3-27b-it ]] && rungs=1,16
  $OLD circuit emit --hardware $HW --checkpoint $W/$m --out $W/$m-old --max-ctx 4160 --decode-rungs $rungs --prefill-buckets 128,512,4096 >/dev/null || echo "emit old $m failed"
  $NEW circuit emit --hardware $HW --checkpoint $W/$m --out $W/$m-new --max-ctx 4160 --decode-rungs $rungs --prefill-buckets 128,512,4096 >/dev/null || echo "emit new $m failed"
  echo "synth+emit $m at $(el) s"
  if [[ $m == qwen3-0.6b || $m == llama-3.2-1b ]]; then
    for v in old new; do
      B=$OLD; [[ $v == new ]] && B=$NEW
      timeout 60 $B circuit run --assets $W/$m-$v --backend cuda --prompt-ids "$ids" --max-tokens 8 --logits-out $W/lg-$m-$v.json > $W/run-$m-$v.txt 2>&1 || echo "run $m $v failed"
    done
    cmp -s $W/lg-$m-old.json $W/lg-$m-new.json && echo "logits $m: new identical to old" || python3 - $W/lg-$m-old.json $W/lg-$m-new.json <<'PY'
import json, sys
a, b = (json.load(open(p))["sequences"] for p in sys.argv[1:3])
w = 0.0
for x, y in zip(a, b):
    print("tokens equal:", x["tokens"] == y["tokens"])
    for la, lb in zip(x["logits"], y["logits"]):
        m = max(abs(v) for v in la) or 1.0
        w = max(w, max(abs(p - q) for p, q in zip(la, lb)) / m)
print(f"logits DIFFER: worst relative difference {w:.4g}")
PY
  fi
  extra=(); [[ $m == gemma-3-27b-it && $cal == 1 ]] && extra=(--campaign decode:16@ctx=512 --campaign decode:16@ctx=4096)
  timeout 120 $OLD circuit run --assets $W/$m-old --backend cuda --campaign prefill:128,512,4096 --perf-dir $W/ab-old-$m >/dev/null 2>&1 || echo "campaign old $m failed"
  python3 bench/campaign_walls.py $W/ab-old-$m "$m old" | tee -a $OUT/res/walls.txt
  timeout 150 $NEW circuit run --assets $W/$m-new --backend cuda --campaign prefill:128,512,4096 "${extra[@]}" --perf-dir $W/perf >/dev/null 2>&1 || echo "campaign new $m failed"
  python3 bench/campaign_walls.py $W/perf/*/$m "$m new" | tee -a $OUT/res/walls.txt
  tar czf $OUT/res/perf.tgz -C $W perf
  echo "$m done at $(el) s"
done
if (( $(el) < 520 )); then
  $NEW model synth --config tests/oracle/configs/tiny-gemma4-g16.json --seed 1 --dtype bf16 --out tiny-gemma4-g16-bf16 | tail -1
  P="--prompt-ids 1,17,42,99,7 --prompt-ids 14,51,88,125,162,199,236,273,310,347,384,421,458,495,532,569,606,643,680,717,754,791,828,865,902,939,976,13,50,87,124,161,198,235,272,309,346,383,420,457 --random-prompts 24 --keep 3 --min-prompt-len 24 --max-prompt-len 56 --attn-implementation eager --seed 1 --steps 32"
  timeout 40 python3 tests/oracle/transformers_logits.py --checkpoint tiny-gemma4-g16-bf16 $P --out $OUT/res/tiny-gemma4-g16-bf16.json 2>&1 | tail -2
  echo "g16 fixture done at $(el) s"
fi
echo "all done at $(el) s"
