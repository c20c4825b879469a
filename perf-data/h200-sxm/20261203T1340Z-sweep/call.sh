#!/usr/bin/env bash
# call 2: the calibration sweep (scripts/h200_sweep.sh run, six shapes) and transformers' eager
# prefill beside it for the two 8B shapes of the prefill targets.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT" /tmp/pw/lib
R=$OUT
exec > >(tee -a $R/log.txt) 2>&1
[[ -f .device/met.xz ]] && xz -dc .device/met.xz > .device/met && chmod +x .device/met
T0=$SECONDS
OUT=$R timeout 440 bash scripts/h200_sweep.sh run > /dev/null 2>&1
echo "sweep rc $? at t=$((SECONDS - T0))"
grep -E "^=== .*rc|sweep: done" $R/sweep-log.txt | cut -c1-200
tar xJf .device/libs.tar.xz -C /tmp/pw && export LD_LIBRARY_PATH=/tmp/pw/lib
for m in llama-3.1-8b qwen3-8b; do
  [[ $((SECONDS - T0)) -lt 500 ]] || break
  .device/met model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out /tmp/pw/$m > /dev/null
  timeout $((570 - (SECONDS - T0))) python3 bench/peers/peers.py --checkpoint /tmp/pw/$m --modes prefill --out $R/peers-prefill-$m.json
  echo "peers $m rc $? at t=$((SECONDS - T0))"
  rm -rf /tmp/pw/$m
done
