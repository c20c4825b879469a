#!/usr/bin/env bash
# call 3: which part of the flash prefill change costs: overlap (OV) and last-warp refill (LR)
set -u
W=/tmp/metw; mkdir -p $W; tar xJf .device/libs.tar.xz -C $W; export LD_LIBRARY_PATH=$W/lib
met=$PWD/.device/met
vs="ov0lr1:kernels:-DMET_FW_OVERLAP=0 ov1lr0:kernels:-DMET_FW_LASTREFILL=0 ov0lr0:kernels:-DMET_FW_OVERLAP=0+-DMET_FW_LASTREFILL=0"
for v in $vs; do
  IFS=: read -r n d defs <<<"$v"; defs=${defs//+/ }
  nvcc -cubin -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -I$d -Xptxas -v $defs -o $W/$n.cubin $d/hopper/interp.cu > $W/$n.ptxas 2>&1 &
done
for m in llama-3.2-1b qwen3-0.6b; do
  [[ -f $W/$m/config.json ]] || $met model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $W/$m >/dev/null 2>&1
  [[ -f $W/$m-p/model.pkt ]] || $met circuit emit --hardware h200-sxm --checkpoint $W/$m --out $W/$m-p --max-ctx 4160 --decode-rungs 1 --prefill-buckets 512,4096 >/dev/null 2>&1
done
wait
for v in $vs; do n=${v%%:*}; echo "$n: $(grep -A1 'Function properties for metinterp_hopper' $W/$n.ptxas | tail -1) C7520=$(grep -c C7520 $W/$n.ptxas)"; done
for r in 1; do for v in $vs; do n=${v%%:*}; for m in llama-3.2-1b qwen3-0.6b; do
  d=$W/q-$m-$n-$r
  MET_INTERP_CUBIN=$W/$n.cubin timeout 120 $met circuit run --assets $W/$m-p --backend cuda --campaign prefill:4096 --perf-dir $d >/dev/null 2>&1
  python3 bench/campaign_walls.py $d "$m $n r$r" 2>&1 | grep -v "mean slice" | awk '{ f=""; for (i=1;i<=NF;i++) if ($i ~ /^flash/) f=f" "$i; print $1,$2,$3,$4,$5,f }'
done; done; done
