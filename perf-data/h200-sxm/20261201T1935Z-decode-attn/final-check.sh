#!/usr/bin/env bash
# Final check of the attn-decode branch's met (embedded image): optests (head dims 64 and 128),
# then Llama-3.1-8B decode campaigns at ctx 512, 4096 and 32768, the branch's met and main's.
set -uo pipefail
W=/tmp/m3
mkdir -p $W/new $W/old
tar xJf .ab/met-attn/libs.tar.xz -C $W/new
cp -r $W/new/lib $W/old/
NEW=$PWD/.ab/met-attn/met OLD=$PWD/.ab/met-main/met
export LD_LIBRARY_PATH=$W/new/lib
for m in llama-3.2-1b qwen3-0.6b llama-3.1-8b; do
  $NEW model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $W/$m >/dev/null || echo "synth $m failed"
done
for m in llama-3.2-1b qwen3-0.6b; do
  $NEW circuit emit --hardware h200-sxm --checkpoint $W/$m --out $W/$m-a --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128 >/dev/null
  echo "=== optest $m (branch met)"
  $NEW circuit optest --assets $W/$m-a --backend cuda 2>&1 | grep -E "attn_decode|optest:|FAIL"
done
$NEW circuit emit --hardware h200-sxm --checkpoint $W/llama-3.1-8b --out $W/8b-a --max-ctx 32832 --decode-rungs 1,16 --prefill-buckets 128 >/dev/null
camp() {  # label met libdir campaign
  local dir=$W/p-$1-${4//[^a-z0-9]/_}
  LD_LIBRARY_PATH=$3 timeout 100 $2 circuit run --assets $W/8b-a --backend cuda --campaign "$4" --perf-dir $dir >$dir.log 2>&1 || { echo "$1 $4 failed"; tail -3 $dir.log; }
  python3 bench/campaign_walls.py $dir "llama-3.1-8b $1 $4"
}
camp branch $NEW $W/new/lib decode:1,16@ctx=4096
camp branch $NEW $W/new/lib decode:1,16@ctx=512
camp main $OLD $W/old/lib decode:1,16@ctx=512
camp branch $NEW $W/new/lib decode:1@ctx=32768
camp main $OLD $W/old/lib decode:1@ctx=32768
tar czf $OUT/campaigns.tar.gz -C $W $(cd $W && ls -d p-*)
