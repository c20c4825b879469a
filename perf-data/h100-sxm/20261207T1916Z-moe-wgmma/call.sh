# Call 2 of 2026-12-07 evening (carry .device: met-tab = main 947089c's code, met-rows = branch
# next/router-prefill-rows 4197e78, met-grp = the grouped wgmma experts (moe_group, moe_*_wgmma,
# moe_combine), each built here, stripped and xz'd, and libs.tar.xz):
# 1. bench/prefill_ab.sh (the branch's) met-tab met-rows met-grp on Qwen3-30B-A3B cut to 4 layers,
#    optest of met-grp on 1 layer first (prefill 128 and 4096: the new ops on cuda against the cpu bodies);
# 2. TINY=tiny-qwen3-moe,tiny-qwen3 scripts/h200_bringup.sh tiny with met-grp;
# 3. the whole model with FINAL (met-grp unless its optest failed or it lost the A/B): decode C=1, 16
#    at ctx 4096, prefill 128, 4096, then transformers eager peers, bounded by LIMIT (s).
set -uo pipefail
W=/tmp/metw; mkdir -p $W $OUT && tar xJf .device/libs.tar.xz -C $W
export LD_LIBRARY_PATH=$W/lib
for b in met-tab met-rows met-grp; do [[ -f .device/$b ]] || { xz -d -T8 .device/$b.xz && chmod +x .device/$b; }; done
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
HW=$(.device/met-grp circuit probe --identify | head -n 1); echo "HW=$HW"
WORK=$W/ab timeout 240 bash .device/prefill_ab.sh $PWD/.device/met-tab $PWD/.device/met-rows $PWD/.device/met-grp > $W/ab.txt 2>&1
echo "ab rc $? at $((SECONDS-t0)) s"; cut -c1-400 $W/ab.txt
sum() { awk -v b=$1 '$1==b && $3=="T=4096"{s+=$4} END{print s+0}' $W/ab.txt; }
FINAL=met-grp
grep FAIL $W/ab.txt | grep -v "moe_router_topk" | grep -q . && FINAL=met-tab
awk -v a=$(sum met-tab) -v b=$(sum met-grp) 'BEGIN{exit !(b > 0 && b < a)}' || FINAL=met-tab
echo "prefill 4096 sums: met-tab $(sum met-tab) met-rows $(sum met-rows) met-grp $(sum met-grp): FINAL=$FINAL at $((SECONDS-t0)) s"
tar czf $OUT/ab.tgz -C $W ab.txt $(cd $W/ab && ls -d p-* | sed 's|^|ab/|')
rm -rf $W/ab
TINY=tiny-qwen3-moe,tiny-qwen3 MET=$PWD/.device/met-grp OUT=$W/bringup WORK=$W/b timeout 150 bash scripts/h200_bringup.sh tiny > /dev/null 2>&1
echo "bringup rc $? at $((SECONDS-t0)) s"
grep -E "rc [1-9]|worst|bringup: done|optest:|FAIL" $W/bringup/log.txt | cut -c1-200 | tail -20
xz -T8 -9 $W/bringup/log.txt; tar czf $OUT/bringup.tgz -C $W bringup; rm -rf $W/b
NEW=$PWD/.device/$FINAL
$NEW model synth --config bench/configs/qwen3-30b-a3b.json --seed 1 --dtype bf16 --out $W/q30 | tail -1; echo "synth at $((SECONDS-t0)) s"
$NEW circuit emit --hardware $HW --checkpoint $W/q30 --out $W/q30-a --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128,4096 2>&1 | tail -1
mkdir -p $OUT/perf
timeout 200 $NEW circuit run --assets $W/q30-a --backend cuda --campaign decode:1,16@ctx=4096 --campaign prefill:128,4096 \
  --warmup 1 --repeats 5 --perf-dir $OUT/perf > $W/campaign-log.txt 2>&1; echo "campaign rc $? at $((SECONDS-t0)) s"
python3 bench/campaign_walls.py $OUT/perf q30 > $OUT/walls.txt 2>&1; grep -v "^    " $OUT/walls.txt | cut -c1-400
rm -rf $W/q30-a
timeout $((${LIMIT:-585} - 15 - SECONDS + t0)) python3 bench/peers/peers.py --checkpoint $W/q30 --modes eager,prefill --batch 1,16 --prefill 4096 \
  --steps 16 --out $OUT/peers-qwen3-30b-a3b.json > $W/peers-log.txt 2>&1; echo "peers rc $? at $((SECONDS-t0)) s"
tail -6 $W/peers-log.txt | cut -c1-250
echo "total $((SECONDS-t0)) s"
tar czf $OUT/logs.tgz -C $W campaign-log.txt peers-log.txt
