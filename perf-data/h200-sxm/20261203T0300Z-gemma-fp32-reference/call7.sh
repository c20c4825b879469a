#!/usr/bin/env bash
set -u
export WORK=/tmp/metw LD_LIBRARY_PATH=/tmp/metw/lib
[[ -d $WORK/lib ]] || { mkdir -p $WORK && tar xJf .device/libs.tar.xz -C $WORK; }
m=tiny-gemma4-e
[[ -f $WORK/$m-bf16/config.json ]] || .device/met model synth --config tests/oracle/configs/$m.json --seed 1 --dtype bf16 --out $WORK/$m-bf16 >/dev/null
timeout 120 python3 .device/diag_g4.py $WORK/$m-bf16 .device/g4/$m-bf16.json .device/g4/$m-cpu.json 2>&1 | grep -v Loading | tee $OUT/g4e-fp32.txt
