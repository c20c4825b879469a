# Call 2 (carry .device: met = 0d34d21's binary, met-new = the router of MET_MOE_ROUTER_PART_EXPERTS
# experts a part with multi-row passes, both built here, stripped and xz'd, and libs.tar.xz):
# 1. the A/B of call.sh again on Qwen3-30B-A3B's config cut to 4 layers, through bench/decode_ab.sh:
#    optest of the new binary's emit, decode C=1, 4 and 16 at ctx 4096 and C=1 at ctx 512, two rounds,
#    per-kernel walls;
# 2. the whole Qwen3-30B-A3B (bench/configs/qwen3-30b-a3b.json, synth seed 1, bf16) with the new
#    binary: decode C=1 and C=16 at ctx 4096 and prefill 128 and 4096 campaigns, then transformers
#    eager peers on the same checkpoint (as ../20261205T1800Z-qwen3-30b-a3b/call.sh); LIMIT (s) bounds
#    the peers by the call's time limit.
set -uo pipefail
W=/tmp/metw; mkdir -p $W $OUT && tar xJf .device/libs.tar.xz -C $W
export LD_LIBRARY_PATH=$W/lib
for b in met met-new; do [[ -f .device/$b ]] || { xz -d -T8 .device/$b.xz && chmod +x .device/$b; }; done
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
NEW=$PWD/.device/met-new
HW=$($NEW circuit probe --identify | head -n 1); echo "HW=$HW"
mkdir -p $W/configs
python3 -c "import json; c=json.load(open('bench/configs/qwen3-30b-a3b.json')); c['num_hidden_layers']=4; json.dump(c, open('$W/configs/qwen3-30b-a3b-4l.json','w'))"
CONFIGS=$W/configs MODELS=qwen3-30b-a3b-4l LONG=none WALLS=1 WORK=$W/ab bash bench/decode_ab.sh .device/met $NEW 2>&1 | tee $OUT/ab2.txt | grep -v "^    "
echo "A/B done at $((SECONDS-t0)) s"
# AB_ONLY=1: stop here.
[[ -n ${AB_ONLY:-} ]] && exit 0
rm -rf $W/ab
$NEW model synth --config bench/configs/qwen3-30b-a3b.json --seed 1 --dtype bf16 --out $W/q30 | tail -1; echo "synth at $((SECONDS-t0)) s"
$NEW circuit emit --hardware $HW --checkpoint $W/q30 --out $W/q30-a --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128,4096 2>&1 | tail -1
mkdir -p $OUT/perf
timeout 200 $NEW circuit run --assets $W/q30-a --backend cuda --campaign decode:1,16@ctx=4096 --campaign prefill:128,4096 \
  --warmup 1 --repeats 5 --perf-dir $OUT/perf > $W/campaign-log.txt 2>&1; echo "campaign rc $? at $((SECONDS-t0)) s"
grep -h "^| decode\|^| prefill\|^| \`" $OUT/perf/*/*/*.md 2>/dev/null | head -12 | cut -c1-400
timeout $((${LIMIT:-520} - 15 - SECONDS + t0)) python3 bench/peers/peers.py --checkpoint $W/q30 --modes eager,prefill --batch 1,16 --prefill 4096 \
  --steps 16 --out $OUT/peers-qwen3-30b-a3b.json > $W/peers-log.txt 2>&1; echo "peers rc $? at $((SECONDS-t0)) s"
tail -6 $W/peers-log.txt | cut -c1-250
echo "total $((SECONDS-t0)) s"
tar czf $OUT/logs.tgz -C $W campaign-log.txt peers-log.txt
