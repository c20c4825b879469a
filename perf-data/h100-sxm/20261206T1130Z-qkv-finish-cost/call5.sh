#!/usr/bin/env bash
# Timing only: the fused qkv op without its completion step (.device/met: MET_QKV_SKIP_FINISH 1,
# the completing slice skips each head's norm, rope and store; wrong outputs) against 90a5bda
# (.device/met-base). Decode campaigns at ctx 4096, C=1 and 16, on Gemma-4 12B's shape with 12
# sliding layers and on Qwen3-8B.
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R/res"
exec > >(tee -a "$R/log.txt") 2>&1
[[ -d $W/lib ]] || tar xJf .device/libs.tar.xz -C "$W"; export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; xz -dkf .device/met-base.xz; chmod +x .device/met .device/met-base
NEW=$PWD/.device/met; OLD=$PWD/.device/met-base
HW=$($NEW circuit probe --identify | head -n1); echo "HW=$HW"
python3 - <<'PY'
import json
c = json.load(open('bench/configs/gemma-4-12b.json'))
c['num_hidden_layers'] = 12
c['layer_types'] = ['sliding_attention'] * 12
json.dump(c, open('/tmp/metw/g12-sliding.json', 'w'), indent=1)
PY
for m in g12-sliding qwen3-8b; do
  ck=$W/$m; cfg=bench/configs/$m.json; [[ $m == g12-sliding ]] && cfg=$W/g12-sliding.json
  $NEW model synth --config $cfg --seed 1 --dtype bf16 --out $ck >/dev/null
  for v in old new old new; do B=$NEW; [[ $v == old ]] && B=$OLD
    [[ -f $ck-$v/model.pkt ]] || $B circuit emit --hardware $HW --checkpoint $ck --out $ck-$v --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128 >/dev/null
    rm -rf $W/ab-$v-$m
    timeout 100 $B circuit run --assets $ck-$v --backend cuda --campaign decode:1,16@ctx=4096 --perf-dir $W/ab-$v-$m >/dev/null 2>&1 || echo "campaign $v $m failed"
    python3 bench/campaign_walls.py $W/ab-$v-$m "$m $v" | grep -v "^ " | tee -a $R/res/walls.txt | cut -c1-330
  done
  rm -rf $ck $ck-old $ck-new
done
