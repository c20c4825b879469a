# MoE grouping A/B (carry .device: met = 0d34d21's binary, met-new = the head with the slots grouped by
# expert in shared memory, both built here, stripped and xz'd, and libs.tar.xz):
# 1. optest of the new binary on Qwen3-30B-A3B's config cut to 1 layer (synth seed 1, bf16), prefill
#    buckets 128, 4096 and 8192 (10922 slots a slice at 8192 rows: two chunks) and decode rungs 1, 16;
# 2. the config cut to 4 layers, each binary on its own emit: prefill 128 and 4096 and decode C=1 and
#    C=16 at ctx 4096, two rounds in alternating order, per-kernel walls.
set -uo pipefail
W=/tmp/metw; mkdir -p $W $OUT && tar xJf .device/libs.tar.xz -C $W
export LD_LIBRARY_PATH=$W/lib
for b in met met-new; do [[ -f .device/$b ]] || { xz -d -T8 .device/$b.xz && chmod +x .device/$b; }; done
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
OLD=$PWD/.device/met; NEW=$PWD/.device/met-new
HW=$($NEW circuit probe --identify | head -n 1); echo "HW=$HW"
mkdir -p $W/configs
for L in 1 4; do
  python3 -c "import json; c=json.load(open('bench/configs/qwen3-30b-a3b.json')); c['num_hidden_layers']=$L; json.dump(c, open('$W/configs/q30-${L}l.json','w'))"
  $NEW model synth --config $W/configs/q30-${L}l.json --seed 1 --dtype bf16 --out $W/q30-${L}l > /dev/null
done
echo "synth at $((SECONDS-t0)) s"
$NEW circuit emit --hardware $HW --checkpoint $W/q30-1l --out $W/o1 --max-ctx 8320 --decode-rungs 1,16 --prefill-buckets 128,4096,8192 > /dev/null
timeout 200 $NEW circuit optest --assets $W/o1 --backend cuda > $W/optest.txt 2>&1; echo "optest rc $? at $((SECONDS-t0)) s"
grep -i "fail\|moe" $W/optest.txt | head -20; tail -3 $W/optest.txt
for b in met met-new; do
  .device/$b circuit emit --hardware $HW --checkpoint $W/q30-4l --out $W/a-$b --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128,4096 > /dev/null
done
for spec in "met 1" "met-new 1" "met-new 2" "met 2"; do
  b=${spec% *}; r=${spec#* }; d=$W/p-$b-$r
  .device/$b circuit run --assets $W/a-$b --backend cuda --campaign decode:1,16@ctx=4096 --campaign prefill:128,4096 \
    --warmup 1 --repeats 5 --perf-dir $d > /dev/null 2>&1
  grep -h "^| decode\|^| prefill" $(find $d -name '*.md' | head -1) | awk -F'|' -v b=$b -v r=$r '{printf "%s r%s %-24s %9s %9s\n", b, r, $2, $4, $5}'
  python3 bench/campaign_walls.py $d "$b r$r" > $d/walls.txt 2>&1; grep -v "^    " $d/walls.txt | cut -c1-330
done
echo "total $((SECONDS-t0)) s"
tar czf $OUT/ab.tgz -C $W $(cd $W && ls -d p-*) optest.txt
