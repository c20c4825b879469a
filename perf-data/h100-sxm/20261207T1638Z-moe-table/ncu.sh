# ncu of one prefill launch of 4096 rows of Qwen3-30B-A3B's config cut to 1 layer (synth seed 1, bf16),
# where the grouped expert GEMMs are most of the launch: `bash ncu.sh B` with .device/B.xz (met-bk:
# dd434c6, ncu-bk128.txt; met-tab: the block table, ncu-table.txt) and libs.tar.xz (carry .device).
set -uo pipefail
B=${1:?binary name under .device}
W=/tmp/metw; mkdir -p $W $OUT && tar xJf .device/libs.tar.xz -C $W
export LD_LIBRARY_PATH=$W/lib
[[ -f .device/$B ]] || { xz -d -T8 .device/$B.xz && chmod +x .device/$B; }
t0=$SECONDS
M=$PWD/.device/$B; HW=$($M circuit probe --identify | head -n 1); echo "HW=$HW"
python3 -c "import json; c=json.load(open('bench/configs/qwen3-30b-a3b.json')); c['num_hidden_layers']=1; json.dump(c, open('$W/q30-1l.json','w'))"
$M model synth --config $W/q30-1l.json --seed 1 --dtype bf16 --out $W/q30-1l > /dev/null
$M circuit emit --hardware $HW --checkpoint $W/q30-1l --out $W/o2 --max-ctx 4160 --decode-rungs 1 --prefill-buckets 4096 > /dev/null
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
timeout 300 $NCU --section WarpStateStats --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,lts__t_bytes.sum,l1tex__t_bytes.sum" \
  -k metinterp_hopper -c 1 $M circuit run --assets $W/o2 --backend cuda --campaign prefill:4096 --warmup 0 --repeats 1 \
  --perf-dir $W/ncu > $OUT/ncu-$B.txt 2>&1
echo "ncu rc $? at $((SECONDS-t0)) s"
grep -E "stalled|Throughput|Duration|hit_rate|bytes|Busy|Bandwidth|Warp Cycles|Eligible|Issued" $OUT/ncu-$B.txt | head -60 | cut -c1-160
