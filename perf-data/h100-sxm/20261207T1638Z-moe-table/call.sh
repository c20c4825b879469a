# The grouped expert GEMMs with a per-block table of row starts (carry .device: met-bk = c518957 with
# MET_MOE_MMA_BK 128; met-tab = the same with the table, built here, stripped and xz'd, and libs.tar.xz):
# 1. optest of met-tab on Qwen3-30B-A3B's config cut to 1 layer (decode rung 1, prefill 128 and 4096);
# 2. the config cut to 4 layers, each binary on its own emit: prefill 128 and 4096, two rounds in
#    alternating order, per-kernel walls;
# 3. scripts/h200_bringup.sh tiny with TINY=tiny-qwen3-moe and met-tab.
set -uo pipefail
W=/tmp/metw; mkdir -p $W $OUT && tar xJf .device/libs.tar.xz -C $W
export LD_LIBRARY_PATH=$W/lib
for b in met-bk met-tab; do [[ -f .device/$b ]] || { xz -d -T8 .device/$b.xz && chmod +x .device/$b; }; done
t0=$SECONDS
HW=$(.device/met-tab circuit probe --identify | head -n 1); echo "HW=$HW"
for L in 1 4; do
  python3 -c "import json; c=json.load(open('bench/configs/qwen3-30b-a3b.json')); c['num_hidden_layers']=$L; json.dump(c, open('$W/q30-${L}l.json','w'))"
  [[ -d $W/q30-${L}l ]] || .device/met-tab model synth --config $W/q30-${L}l.json --seed 1 --dtype bf16 --out $W/q30-${L}l > /dev/null
done
.device/met-tab circuit emit --hardware $HW --checkpoint $W/q30-1l --out $W/o1 --max-ctx 4160 --decode-rungs 1 --prefill-buckets 128,4096 > /dev/null
timeout 100 .device/met-tab circuit optest --assets $W/o1 --backend cuda > $OUT/optest-1l.txt 2>&1; echo "optest rc $? at $((SECONDS-t0)) s"
grep "_mma\|FAIL" $OUT/optest-1l.txt | cut -c1-170; tail -1 $OUT/optest-1l.txt
for b in met-bk met-tab; do
  .device/$b circuit emit --hardware $HW --checkpoint $W/q30-4l --out $W/a-$b --max-ctx 4160 --decode-rungs 1 --prefill-buckets 128,4096 > /dev/null
done
for spec in "met-bk 1" "met-tab 1" "met-tab 2" "met-bk 2"; do
  b=${spec% *}; r=${spec#* }; d=$W/p-$b-$r
  .device/$b circuit run --assets $W/a-$b --backend cuda --campaign prefill:128,4096 --warmup 1 --repeats 5 --perf-dir $d > /dev/null 2>&1
  python3 bench/campaign_walls.py $d "$b r$r" > $d/walls.txt 2>&1; grep -v "^    " $d/walls.txt | cut -c1-300
done
echo "A/B at $((SECONDS-t0)) s"
tar czf $OUT/ab.tgz -C $W $(cd $W && ls -d p-*)
TINY=tiny-qwen3-moe MET=$PWD/.device/met-tab OUT=$W/bringup WORK=$W/b bash scripts/h200_bringup.sh tiny > /dev/null 2>&1
echo "bringup rc $? at $((SECONDS-t0)) s"
grep -E "rc [1-9]|worst|bringup: done|optest:" $W/bringup/log.txt | cut -c1-200 | tail -8
xz -T8 -9 $W/bringup/log.txt; cp $W/bringup/log.txt.xz $OUT/bringup-log.txt.xz
