# Qwen3-30B-A3B with the grouped expert GEMMs' slots grouped by expert (carry .device: met-new = the
# head, cd847d5 + c518957: the grouping and the router split at one decode row; met-bk = the same with
# MET_MOE_MMA_BK 128 instead of 64; both built here, stripped and xz'd, and libs.tar.xz):
# 1. optest of met-bk on the config cut to 1 layer (decode rungs 1, 2, 16, prefill 128 and 4096);
# 2. the config cut to 4 layers, each binary on its own emit: prefill 128 and 4096, two rounds in
#    alternating order, per-kernel walls; FINAL = the binary of the lower prefill-4096 sum;
# 3. scripts/h200_bringup.sh tiny,gptoss with FINAL (the tiny fixtures on cuda against transformers
#    and the cpu bodies, tiny gpt-oss MXFP4);
# 4. the whole model (synth seed 1, bf16) with FINAL: decode C=1 and C=16 at ctx 4096 and prefill 128
#    and 4096, then transformers eager peers on the same checkpoint, bounded by LIMIT (s).
set -uo pipefail
W=/tmp/metw; mkdir -p $W $OUT && tar xJf .device/libs.tar.xz -C $W
export LD_LIBRARY_PATH=$W/lib
for b in met-new met-bk; do [[ -f .device/$b ]] || { xz -d -T8 .device/$b.xz && chmod +x .device/$b; }; done
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
HW=$(.device/met-bk circuit probe --identify | head -n 1); echo "HW=$HW"
mkdir -p $W/configs
for L in 1 4; do
  python3 -c "import json; c=json.load(open('bench/configs/qwen3-30b-a3b.json')); c['num_hidden_layers']=$L; json.dump(c, open('$W/configs/q30-${L}l.json','w'))"
  .device/met-bk model synth --config $W/configs/q30-${L}l.json --seed 1 --dtype bf16 --out $W/q30-${L}l > /dev/null
done
.device/met-bk circuit emit --hardware $HW --checkpoint $W/q30-1l --out $W/o1 --max-ctx 4160 --decode-rungs 1,2,16 --prefill-buckets 128,4096 > /dev/null
timeout 100 .device/met-bk circuit optest --assets $W/o1 --backend cuda > $OUT/optest-1l.txt 2>&1; echo "optest rc $? at $((SECONDS-t0)) s"
grep "moe\|FAIL" $OUT/optest-1l.txt | cut -c1-170; tail -1 $OUT/optest-1l.txt
for b in met-new met-bk; do
  .device/$b circuit emit --hardware $HW --checkpoint $W/q30-4l --out $W/a-$b --max-ctx 4160 --decode-rungs 1 --prefill-buckets 128,4096 > /dev/null
done
for spec in "met-new 1" "met-bk 1" "met-bk 2" "met-new 2"; do
  b=${spec% *}; r=${spec#* }; d=$W/p-$b-$r
  .device/$b circuit run --assets $W/a-$b --backend cuda --campaign prefill:128,4096 --warmup 1 --repeats 5 --perf-dir $d > /dev/null 2>&1
  python3 bench/campaign_walls.py $d "$b r$r" > $d/walls.txt 2>&1; grep -v "^    " $d/walls.txt | cut -c1-300
done
sum() { cat $W/p-$1-*/walls.txt | awk '$3=="T=4096"{s+=$4} END{print s+0}'; }
FINAL=met-bk; awk -v a=$(sum met-new) -v b=$(sum met-bk) 'BEGIN{exit !(b > 0 && b < a)}' || FINAL=met-new
echo "prefill 4096 sums: met-new $(sum met-new) met-bk $(sum met-bk): FINAL=$FINAL at $((SECONDS-t0)) s"
tar czf $OUT/ab.tgz -C $W $(cd $W && ls -d p-*)
rm -rf $W/q30-1l $W/q30-4l $W/o1 $W/a-* $W/p-*
MET=$PWD/.device/$FINAL OUT=$W/bringup WORK=$W/b bash scripts/h200_bringup.sh tiny,gptoss > /dev/null 2>&1
echo "bringup rc $? at $((SECONDS-t0)) s"
grep -E "rc [1-9]|worst|bringup: done|optest:" $W/bringup/log.txt | cut -c1-200 | tail -30
xz -T8 -9 $W/bringup/log.txt; tar czf $OUT/bringup.tgz -C $W bringup; rm -rf $W/b
NEW=$PWD/.device/$FINAL
$NEW model synth --config bench/configs/qwen3-30b-a3b.json --seed 1 --dtype bf16 --out $W/q30 | tail -1; echo "synth at $((SECONDS-t0)) s"
$NEW circuit emit --hardware $HW --checkpoint $W/q30 --out $W/q30-a --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128,4096 2>&1 | tail -1
mkdir -p $OUT/perf
timeout 200 $NEW circuit run --assets $W/q30-a --backend cuda --campaign decode:1,16@ctx=4096 --campaign prefill:128,4096 \
  --warmup 1 --repeats 5 --perf-dir $OUT/perf > $W/campaign-log.txt 2>&1; echo "campaign rc $? at $((SECONDS-t0)) s"
python3 bench/campaign_walls.py $OUT/perf q30 > $OUT/walls.txt 2>&1; grep -v "^    " $OUT/walls.txt | cut -c1-400
rm -rf $W/q30-a
timeout $((${LIMIT:-520} - 15 - SECONDS + t0)) python3 bench/peers/peers.py --checkpoint $W/q30 --modes eager,prefill --batch 1,16 --prefill 4096 \
  --steps 16 --out $OUT/peers-qwen3-30b-a3b.json > $W/peers-log.txt 2>&1; echo "peers rc $? at $((SECONDS-t0)) s"
tail -6 $W/peers-log.txt | cut -c1-250
echo "total $((SECONDS-t0)) s"
tar czf $OUT/logs.tgz -C $W campaign-log.txt peers-log.txt
