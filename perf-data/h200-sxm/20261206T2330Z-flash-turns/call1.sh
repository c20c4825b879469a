#!/usr/bin/env bash
# Flash prefill with warpgroup turns (MET_FW_PINGPONG=1, cubin pp1) against without (pp0) and
# without turns but with the refill two steps behind (lag2: -DMET_FW_PINGPONG=0 -DMET_FW_LAG2=1):
# the cubins built here from one kernel tree (nvcc 13.0), loaded through MET_INTERP_CUBIN.
# Per model (real configs, synth bf16): prefill 512 and 4096 campaigns, two rounds, the walls by
# kernel; the last-position logits of a 3000-token prompt under each cubin (must be identical:
# turns change the order of issue, not the arithmetic); optest of the new cubin on two small
# models emitted with ragged prefill buckets 200 and 1100.
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R/res"
exec > >(tee -a "$R/log.txt") 2>&1
[[ -d $W/lib ]] || tar xJf .device/libs.tar.xz -C "$W"; export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; chmod +x .device/met; M=$PWD/.device/met
for v in pp0 lag2 pp1; do xz -dkf .device/$v.cubin.xz; done
HW=$($M circuit probe --identify | head -n1); echo "HW=$HW"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
prompt=$(python3 -c "print(','.join(str((i*7919)%30000+10) for i in range(3000)))")
for m in qwen3-0.6b llama-3.2-1b; do
  $M model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $W/$m >/dev/null
  $M circuit emit --hardware $HW --checkpoint $W/$m --out $W/$m-o --max-ctx 4160 --decode-rungs 1,4 \
    --prefill-buckets 200,1100 >/dev/null
  MET_INTERP_CUBIN=$PWD/.device/pp1.cubin timeout 150 $M circuit optest --assets $W/$m-o --backend cuda \
    > $R/res/optest-$m.txt 2>&1
  echo "optest $m rc $?: $(tail -1 $R/res/optest-$m.txt)  ($(el) s)"
done
for m in qwen3-0.6b llama-3.2-1b llama-3.1-8b qwen3-8b; do
  [[ -d $W/$m ]] || $M model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $W/$m >/dev/null
  $M circuit emit --hardware $HW --checkpoint $W/$m --out $W/$m-a --max-ctx 4160 --decode-rungs 1 \
    --prefill-buckets 512,4096 >/dev/null
  for v in pp0 lag2 pp1; do
    MET_INTERP_CUBIN=$PWD/.device/$v.cubin timeout 60 $M circuit run --assets $W/$m-a --backend cuda \
      --prompt-ids $prompt --max-tokens 4 --logits-out $W/logits-$m-$v.json > $R/res/run-$m-$v.txt 2>&1
  done
  for v in lag2 pp1; do
    if cmp -s $W/logits-$m-pp0.json $W/logits-$m-$v.json; then echo "$m $v logits identical to pp0"; else echo "$m $v LOGITS DIFFER"; fi
  done
  for round in 1 2; do
    for v in pp0 lag2 pp1; do
      d=$W/c-$m-$v-$round; rm -rf $d
      MET_INTERP_CUBIN=$PWD/.device/$v.cubin timeout 100 $M circuit run --assets $W/$m-a --backend cuda \
        --campaign prefill:512,4096 --perf-dir $d >/dev/null 2>&1 || echo "campaign $m $v failed"
      python3 bench/campaign_walls.py $d "$m $v r$round" | grep -v "^ " | cut -c1-400 | tee -a $R/res/walls.txt
      [[ $round == 1 ]] && cp "$(find $d -name '*.md' | head -1)" $R/res/campaign-$m-$v.md
    done
  done
  echo "$m done at $(el) s"
done
tar czf $R/res.tar.gz -C $R res
