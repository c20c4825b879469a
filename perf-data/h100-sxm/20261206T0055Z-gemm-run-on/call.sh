#!/usr/bin/env bash
# GEMM tiles in a row (the wgmma ring running on into the block's next tile): base vs cont cubins.
set -uo pipefail
W=/tmp/metw; mkdir -p "$W" "$OUT/res"
exec > >(tee -a "$OUT/log.txt") 2>&1
tar xJf .device/libs.tar.xz -C "$W" && export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; chmod +x .device/met; MET=$PWD/.device/met
mkdir -p "$W/cub"; for c in .device/cubins/*.xz; do xz -dc "$c" > "$W/cub/$(basename "${c%.xz}")"; done
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
HW=$($MET circuit probe --identify | head -n1); echo "HW=$HW"
VARS="${VARS:-base cont}"
MODELS="${MODELS:-qwen3-0.6b llama-3.2-1b llama-3.1-8b qwen3-8b}"
t0=$(date +%s)
for m in $MODELS; do
  [[ -f $W/$m/config.json ]] || $MET model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $W/$m >/dev/null
  $MET circuit emit --hardware $HW --checkpoint $W/$m --out $W/$m-a --max-ctx 4160 --decode-rungs 1 --prefill-buckets 128,512,4096 >/dev/null || echo "emit $m failed"
  echo "synth+emit $m done at $(( $(date +%s) - t0 )) s"
done
# exactness: the same 4000-token prompt through each variant, logits compared byte for byte
ids=$(python3 -c "import random; r=random.Random(7); print(','.join(str(r.randrange(32000)) for _ in range(4000)))")
for m in llama-3.2-1b qwen3-0.6b; do
  for v in $VARS; do
    MET_INTERP_CUBIN=$W/cub/$v.cubin timeout 120 $MET circuit run --assets $W/$m-a --backend cuda --prompt-ids "$ids" --max-tokens 4 --logits-out $W/lg-$m-$v.json > $W/run-$m-$v.txt 2>&1 || echo "run $m $v failed"
  done
  for v in $VARS; do cmp -s $W/lg-$m-base.json $W/lg-$m-$v.json && echo "logits $m $v: identical to base" || echo "logits $m $v: DIFFER from base"; done
done
echo "exactness done at $(( $(date +%s) - t0 )) s"
for round in 1 2; do
  vs="$VARS"; [[ $round == 2 ]] && vs="${VARS2:-$VARS}"
  for v in $vs; do
    for m in $MODELS; do
      d=$W/perf-$v-$m-$round
      MET_INTERP_CUBIN=$W/cub/$v.cubin timeout 300 $MET circuit run --assets $W/$m-a --backend cuda --campaign prefill:128,512,4096 --perf-dir $d >/dev/null 2>&1 || echo "campaign $v $m failed"
      python3 bench/campaign_walls.py $d "$m $v r$round" | tee -a $OUT/res/walls.txt
      mkdir -p $OUT/res/perf && cp -r $d $OUT/res/perf/ 2>/dev/null
    done
  done
  echo "round $round done at $(( $(date +%s) - t0 )) s"
done
if [[ -n ${LENGTHS:-} && $(( $(date +%s) - t0 )) -lt ${LENGTHS_BEFORE:-380} ]]; then
  MET_INTERP_CUBIN=$W/cub/cont.cubin OUT=$OUT/bringup WORK=$W MET=$MET timeout 400 bash scripts/h200_bringup.sh optest,lengths llama-3.2-1b > $W/bringup.txt 2>&1; tail -n 30 $W/bringup.txt
fi
echo "all done at $(( $(date +%s) - t0 )) s"
