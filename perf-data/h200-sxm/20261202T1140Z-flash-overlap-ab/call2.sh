#!/usr/bin/env bash
# call 2: flash prefill A/B (head = 65854f2's body; new = overlapped S/PV, last warp refills)
set -u
W=/tmp/metw; mkdir -p $W; tar xJf .device/libs.tar.xz -C $W; export LD_LIBRARY_PATH=$W/lib
met=$PWD/.device/met
for v in head:.device/kernels-head new:kernels; do
  n=${v%%:*}; d=${v#*:}
  nvcc -cubin -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -I$d -Xptxas -v -o $W/$n.cubin $d/hopper/interp.cu > $W/$n.ptxas 2>&1 &
done
for m in llama-3.2-1b qwen3-0.6b llama-3.1-8b qwen3-8b; do
  $met model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $W/$m >/dev/null
  $met circuit emit --hardware h200-sxm --checkpoint $W/$m --out $W/$m-p --max-ctx 4160 --decode-rungs 1 --prefill-buckets 512,4096 >/dev/null
done
for m in llama-3.2-1b qwen3-0.6b; do
  $met circuit emit --hardware h200-sxm --checkpoint $W/$m --out $W/$m-o --max-ctx 1200 --decode-rungs 1 --prefill-buckets 200,1100 >/dev/null
done
wait
for n in head new; do echo "== $n ptxas"; grep -A1 "Function properties for metinterp_hopper" $W/$n.ptxas | tail -1; grep -c C7520 $W/$n.ptxas; done
for m in llama-3.2-1b qwen3-0.6b; do
  echo "=== optest new $m"; MET_INTERP_CUBIN=$W/new.cubin timeout 200 $met circuit optest --assets $W/$m-o --backend cuda 2>&1 | grep -E "flash|optest:|FAIL" | tail -n 8
done
for r in 1 2; do for n in head new; do for m in llama-3.1-8b qwen3-8b llama-3.2-1b qwen3-0.6b; do
  d=$W/p-$m-$n-$r
  MET_INTERP_CUBIN=$W/$n.cubin timeout 120 $met circuit run --assets $W/$m-p --backend cuda --campaign prefill:512,4096 --perf-dir $d >/dev/null 2>&1
  python3 bench/campaign_walls.py $d "$m $n r$r" > $d.txt 2>&1; cat $d.txt >> $OUT/walls.txt
  grep -v "mean slice" $d.txt | awk '{ f=""; for (i=1;i<=NF;i++) if ($i ~ /^flash/) f=f" "$i; print $1,$2,$3,$4,$5,f }' 
done; done; done
