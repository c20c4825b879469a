# Call 2: Qwen3-30B-A3B (bench/configs/qwen3-30b-a3b.json: Qwen/Qwen3-30B-A3B's config.json, bf16,
# `met model synth --seed 1`) on the lent GPU: decode C=1 and C=16 at ctx 4096 and prefill 128 and
# 4096 campaigns (met's MoE bodies: router top-8 of 128 with norm_topk_prob, the decode expert ops
# and the grouped mma.sync ones at prefill), then transformers eager peers on the same checkpoint
# (decode C=1 and 16 at ctx 4096, prefill 4096; no CUDA-graph peer: the MoE block's routing is data-
# dependent control flow).
set -uo pipefail
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
W=/tmp/metw; mkdir -p $W && tar xJf .device/libs.tar.xz -C $W
export LD_LIBRARY_PATH=$W/lib
MET=$PWD/.device/met
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
df -h /tmp | tail -1
HW=$($MET circuit probe --identify | head -n 1); echo "HW=$HW"
$MET model synth --config bench/configs/qwen3-30b-a3b.json --seed 1 --dtype bf16 --out $W/q30 | tail -1; echo "synth at $((SECONDS-t0)) s"
$MET circuit emit --hardware $HW --checkpoint $W/q30 --out $W/q30-a --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128,4096 2>&1 | tail -2
mkdir -p $OUT/perf
timeout 240 $MET circuit run --assets $W/q30-a --backend cuda --campaign decode:1,16@ctx=4096 --campaign prefill:128,4096 \
  --warmup 1 --repeats 5 --perf-dir $OUT/perf > $OUT/campaign-log.txt 2>&1; echo "campaign rc $? at $((SECONDS-t0)) s"
tail -5 $OUT/campaign-log.txt | cut -c1-300
grep -h "^| decode\|^| prefill" $OUT/perf/*/*/*.md 2>/dev/null | head -8 | cut -c1-250
timeout $((575 - SECONDS + t0)) python3 bench/peers/peers.py --checkpoint $W/q30 --modes eager,prefill --batch 1,16 --prefill 4096 \
  --steps 16 --out $OUT/peers-qwen3-30b-a3b.json > $OUT/peers-log.txt 2>&1; echo "peers rc $? at $((SECONDS-t0)) s"
tail -12 $OUT/peers-log.txt | cut -c1-250
echo "total $((SECONDS-t0)) s"
tar czf /tmp/all.tgz -C $OUT . && rm -rf $OUT/* && mv /tmp/all.tgz $OUT/
