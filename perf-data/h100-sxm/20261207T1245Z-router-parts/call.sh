# One device call (carry .device: met = 0d34d21's binary, met-new = this folder's, both built here,
# stripped and xz'd, and libs.tar.xz):
# 1. the router split by experts (7a9b36a) against the router of a slice per row (0d34d21), on
#    Qwen3-30B-A3B's config cut to 4 layers (synth seed 1, bf16): optest of the new emit, then decode
#    campaigns C=1 and C=16 at ctx 4096, each binary on its own emit (the packet ABI changed), two
#    rounds in alternating order, per-kernel walls (bench/campaign_walls.py);
# 2. the new binary's checks: scripts/h200_bringup.sh tiny,gptoss (the tiny fixtures on
#    cuda against transformers and the cpu bodies), then optest, campaign, peers and oracle of
#    Llama-3.1-8B (the final binary's check).
set -uo pipefail
W=/tmp/metw; mkdir -p $W $OUT && tar xJf .device/libs.tar.xz -C $W
export LD_LIBRARY_PATH=$W/lib
for b in met met-new; do [[ -f .device/$b ]] || { xz -d -T8 .device/$b.xz && chmod +x .device/$b; }; done
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
NEW=$PWD/.device/met-new
HW=$($NEW circuit probe --identify | head -n 1); echo "HW=$HW"
python3 -c "import json; c=json.load(open('bench/configs/qwen3-30b-a3b.json')); c['num_hidden_layers']=4; json.dump(c, open('$W/q4.json','w'))"
$NEW model synth --config $W/q4.json --seed 1 --dtype bf16 --out $W/q4 | tail -1
for b in met met-new; do
  .device/$b circuit emit --hardware $HW --checkpoint $W/q4 --out $W/q4-$b --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128 | tail -1
done
timeout 90 $NEW circuit optest --assets $W/q4-met-new --backend cuda > $OUT/optest-q4.txt 2>&1; echo "optest rc $?"
grep -E "optest:|FAIL|router" $OUT/optest-q4.txt | cut -c1-200 | head -8
for round in 1 2; do
  order="met met-new"; [[ $round == 2 ]] && order="met-new met"
  for b in $order; do
    d=$W/p-$b-$round
    timeout 90 .device/$b circuit run --assets $W/q4-$b --backend cuda --campaign decode:1,16@ctx=4096 --perf-dir $d > $OUT/run-$b-$round.txt 2>&1 \
      || { echo "$b r$round rc $?"; tail -3 $OUT/run-$b-$round.txt; }
    python3 bench/campaign_walls.py $d "q30-4l $b r$round" 2>&1 | tee -a $OUT/walls.txt | grep -v "^ "
  done
done
echo "A/B done at $((SECONDS-t0)) s"
MET=$NEW OUT=$OUT/bringup WORK=$W/b bash scripts/h200_bringup.sh tiny,gptoss,optest,campaign,peers,oracle llama-3.1-8b > /dev/null 2>&1
echo "bringup rc $? at $((SECONDS-t0)) s"
grep -E "rc [1-9]|worst|bringup: done|optest:|^\| (decode|prefill)" $OUT/bringup/log.txt | cut -c1-200 | tail -45
xz -T8 -9 $OUT/bringup/log.txt
(cd $OUT && tar czf ab-runs.tgz run-*.txt optest-q4.txt && rm -f run-*.txt optest-q4.txt); ls -R $OUT | head -20
