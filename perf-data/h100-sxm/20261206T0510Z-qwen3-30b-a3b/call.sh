#!/usr/bin/env bash
# (1) rope_kv_append with the norm weights loaded once per slice (hoist.cubin, through MET_INTERP_CUBIN
# on the branch's met) beside the branch's image and the unfused ops (met-old, 4e77f33), prefill;
# (2) Qwen3-30B-A3B's whole-model campaign on met-old (4e77f33: the decode expert bodies of 1815Z).
set -uo pipefail
W=/tmp/metw; mkdir -p "$W" "$OUT/res"
exec > >(tee -a "$OUT/log.txt") 2>&1
tar xJf .device/libs.tar.xz -C "$W" && export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; xz -dkf .device/met-old.xz; chmod +x .device/met .device/met-old
xz -dkf .device/hoist.cubin.xz
NEW=$PWD/.device/met; OLD=$PWD/.device/met-old; HOIST=$PWD/.device/hoist.cubin
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
HW=$($NEW circuit probe --identify | head -n1); echo "HW=$HW"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
ids=$(python3 -c "import random; r=random.Random(7); print(','.join(str(r.randrange(32000)) for _ in range(4000)))")
for m in qwen3-0.6b qwen3-8b llama-3.1-8b; do
  $NEW model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $W/$m >/dev/null
  $OLD circuit emit --hardware $HW --checkpoint $W/$m --out $W/$m-old --max-ctx 4160 --decode-rungs 1 --prefill-buckets 128,512,4096 >/dev/null || echo "emit old $m failed"
  $NEW circuit emit --hardware $HW --checkpoint $W/$m --out $W/$m-new --max-ctx 4160 --decode-rungs 1 --prefill-buckets 128,512,4096 >/dev/null || echo "emit new $m failed"
  if [[ $m == qwen3-0.6b ]]; then
    timeout 60 $NEW circuit run --assets $W/$m-new --backend cuda --prompt-ids "$ids" --max-tokens 8 --logits-out $W/lg-new.json >/dev/null 2>&1
    MET_INTERP_CUBIN=$HOIST timeout 60 $NEW circuit run --assets $W/$m-new --backend cuda --prompt-ids "$ids" --max-tokens 8 --logits-out $W/lg-hoist.json >/dev/null 2>&1
    timeout 60 $OLD circuit run --assets $W/$m-old --backend cuda --prompt-ids "$ids" --max-tokens 8 --logits-out $W/lg-old.json >/dev/null 2>&1
    cmp -s $W/lg-new.json $W/lg-hoist.json && echo "logits $m: hoist identical to new" || echo "logits $m: hoist DIFFERS from new"
    cmp -s $W/lg-old.json $W/lg-hoist.json && echo "logits $m: hoist identical to old" || echo "logits $m: hoist DIFFERS from old"
  fi
  for v in old new hoist; do
    B=$NEW; a=$W/$m-new; env=(); [[ $v == old ]] && B=$OLD && a=$W/$m-old; [[ $v == hoist ]] && env=(MET_INTERP_CUBIN=$HOIST)
    env "${env[@]}" timeout 120 $B circuit run --assets $a --backend cuda --campaign prefill:128,512,4096 --perf-dir $W/ab-$v-$m >/dev/null 2>&1 || echo "campaign $v $m failed"
    python3 bench/campaign_walls.py $W/ab-$v-$m "$m $v" | tee -a $OUT/res/walls.txt
  done
  rm -rf $W/$m $W/$m-old $W/$m-new
  echo "$m done at $(el) s"
done
if (( $(el) < 200 )); then
  $OLD model synth --config bench/configs/qwen3-30b-a3b.json --seed 1 --dtype bf16 --out $W/q30 | tail -1; echo "synth at $(el) s"
  $OLD circuit emit --hardware $HW --checkpoint $W/q30 --out $W/q30-a --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128,4096 2>&1 | tail -1
  timeout $((540 - $(el))) $OLD circuit run --assets $W/q30-a --backend cuda --campaign decode:1,16@ctx=4096 --campaign prefill:128,4096 \
    --warmup 1 --repeats 5 --perf-dir $W/q30perf > $OUT/res/q30-campaign-log.txt 2>&1; echo "q30 campaign rc $? at $(el) s"
  python3 bench/campaign_walls.py $W/q30perf "qwen3-30b-a3b" | tee -a $OUT/res/walls.txt
  tar czf $OUT/res/q30perf.tgz -C $W q30perf
fi
echo "all done at $(el) s"
