#!/usr/bin/env bash
# call 6: tiny Gemma-4 fixtures against transformers fp32; ncu of one Llama-3.2-1B decode step
set -u
R=$OUT
export WORK=/tmp/metw
mkdir -p $WORK/lib && tar xJf .device/libs.tar.xz -C $WORK && export LD_LIBRARY_PATH=$WORK/lib
met=$PWD/.device/met
for m in tiny-gemma4 tiny-gemma4-e; do
  $met model synth --config tests/oracle/configs/$m.json --seed 1 --dtype bf16 --out $WORK/$m-bf16 >/dev/null
  echo "== $m"
  timeout 120 python3 .device/diag_g4.py $WORK/$m-bf16 tests/oracle/fixtures/$m-bf16.json .device/g4/$m-cpu.json 2>&1 | grep -v Loading
done | tee $R/g4-fp32.txt
ck=$WORK/llama-3.2-1b
$met model synth --config bench/configs/llama-3.2-1b.json --seed 1 --dtype bf16 --out $ck >/dev/null
$met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-a --max-ctx 512 --decode-rungs 1 --prefill-buckets 128 >/dev/null
which ncu; ncu --version | tail -1
cd $R
timeout 300 ncu --set full --import-source yes --clock-control none -k regex:metinterp --launch-skip 1 --launch-count 1 -o prof \
  $met circuit run --assets $ck-a --backend cuda --prompt-ids 1,2,3 --max-tokens 2 > ncu-run.txt 2>&1; echo "ncu rc $?"; tail -5 ncu-run.txt
ls -la
timeout 120 ncu -i prof.ncu-rep --page details > details.txt 2>&1; echo "details rc $?"
timeout 120 ncu -i prof.ncu-rep --page source --csv --print-source sass > src.csv 2>&1; echo "source rc $?"
head -c 600 src.csv; echo; wc -c src.csv
xz -T8 -6 src.csv; rm -f prof.ncu-rep; ls -la
grep -E "Warp Cycles|Stall|Throughput|Issued|Eligible|Active Warps|L2 Hit|DRAM" details.txt | head -60
