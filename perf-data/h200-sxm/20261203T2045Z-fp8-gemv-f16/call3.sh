#!/usr/bin/env bash
# fp8 gemv on the fp16 tensor cores: the final met (its image) against HEAD~'s bodies (cubin built here).
set -uo pipefail
exec > >(tee -a "$OUT/log.txt") 2>&1
cd "$(dirname "$0")/.."
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
W=/tmp/metw; mkdir -p $W
mkdir -p $W/lib && tar xJf .device/libs.tar.xz -C $W && export LD_LIBRARY_PATH=$W/lib
nvcc=/usr/local/cuda/bin/nvcc; command -v nvcc >/dev/null && nvcc=nvcc
$nvcc -cubin -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -I.device/kernels-head -Xptxas -v \
    -o $W/head.cubin .device/kernels-head/hopper/interp.cu > $W/head.ptxas 2>&1 &
pid=$!
OUT=$OUT/bringup WORK=$W timeout 300 bash scripts/h200_bringup.sh fp8,optest llama-3.2-1b > /dev/null 2>&1
echo "bringup rc $?"
grep -E "^=== .*rc [1-9]|optest:|worst|parts|sequences" $OUT/bringup/log.txt | tail -30
wait $pid; echo "head cubin rc $?"
ck=$W/qwen3-8b-fp8
for round in 1 2; do
  for v in head new; do
    if [[ $v == head ]]; then export MET_INTERP_CUBIN=$W/head.cubin; else unset MET_INTERP_CUBIN; fi
    echo "=== round $round $v"
    timeout 60 .device/met circuit run --assets $ck-a --backend cuda --campaign decode:1,16@ctx=4096 --perf-dir $W/ab-$v-$round > $W/ab-$v-$round.txt 2>&1
    echo "rc $?"; grep -E "^\| decode C=|^\| .decode_1. \| gemv" $W/ab-$v-$round.txt | cut -c1-200
  done
done
unset MET_INTERP_CUBIN
tar czf $OUT/ab.tar.gz -C $W ab-new-1.txt ab-head-1.txt ab-new-2.txt ab-head-2.txt 2>/dev/null
