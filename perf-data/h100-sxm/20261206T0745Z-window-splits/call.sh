#!/usr/bin/env bash
# Sliding layers' decode splits capped by the window (at least 32 keys a split): Gemma-3 1B (window
# 512, one KV head) on .device/met against .device/met-old (11c29ac: 130 splits of max-ctx 4160):
# optest, the token stream of a 600-token prompt on both, decode C=1 and 16 at ctx 4096 twice each.
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R"
exec > >(tee -a "$R/log.txt") 2>&1
tar xJf .device/libs.tar.xz -C "$W" && export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; xz -dkf .device/met-old.xz; chmod +x .device/met .device/met-old
NEW=$PWD/.device/met; OLD=$PWD/.device/met-old; HW=$($NEW circuit probe --identify | head -n1); echo "HW=$HW"
m=gemma-3-1b-it; ck=$W/$m
$NEW model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck | tail -1
$NEW circuit emit --hardware $HW --checkpoint $ck --out $ck-h --max-ctx 512 --decode-rungs 1,16 --prefill-buckets 128 >/dev/null
timeout 100 $NEW circuit optest --assets $ck-h --backend cuda > $R/optest-$m.txt 2>&1; echo "optest rc $?: $(tail -1 $R/optest-$m.txt)"
grep attn_decode $R/optest-$m.txt | cut -c1-200
for v in old new; do B=$NEW; [[ $v == old ]] && B=$OLD
  $B circuit emit --hardware $HW --checkpoint $ck --out $ck-$v --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128 >/dev/null
done
ids=$(python3 -c "import random; r=random.Random(3); print(','.join(str(r.randrange(262144)) for _ in range(600)))")
for v in old new; do B=$NEW; [[ $v == old ]] && B=$OLD
  timeout 60 $B circuit run --assets $ck-$v --backend cuda --prompt-ids "$ids" --max-tokens 32 --logits-out $W/lg-$v.json 2>&1 | tail -1
done
python3 -c "
import json,sys
a,b=(json.load(open(p))['sequences'] for p in sys.argv[1:3])
d=max(max(abs(x-y) for x,y in zip(r,q))/max(abs(v) for v in r) for s,t in zip(a,b) for r,q in zip(s['logits'],t['logits']))
print('tokens', 'identical' if [s['tokens'] for s in a]==[s['tokens'] for s in b] else 'DIFFER', 'worst relative logit difference', round(d,5))" $W/lg-old.json $W/lg-new.json
for r in 1 2; do for v in old new; do B=$NEW; [[ $v == old ]] && B=$OLD
  rm -rf $W/ab-$v; timeout 90 $B circuit run --assets $ck-$v --backend cuda --campaign decode:1,16@ctx=4096 --perf-dir $W/ab-$v >/dev/null 2>&1 || echo "campaign $v failed"
  python3 bench/campaign_walls.py $W/ab-$v "$m $v" | grep -v "^ " | tee -a $R/walls.txt | cut -c1-200
done; done
