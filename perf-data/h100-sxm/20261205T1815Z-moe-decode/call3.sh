# Call 3: A/B of the decode expert bodies (kernels/common/moe.cuh switches) on Qwen3-30B-A3B's
# config cut to 4 layers (synth seed 1, bf16): cubins compiled on the CPU machine from this tree
# (-D choices below), loaded through MET_INTERP_CUBIN; optest of each, then decode campaigns C=1 and
# C=16 at ctx 4096, two rounds in alternating order, per-kernel walls (bench/campaign_walls.py).
#   base: defaults (batch 4); b8: MET_MOE_DOT_BATCH=8; h8: b8 + MET_MOE_ACT_HOIST=1;
#   h4p: MET_MOE_ACT_HOIST=1 MET_MOE_DOWN_PAIRS=1 (batch 4); h8p: all three.
set -uo pipefail
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
W=/tmp/metw; mkdir -p $W && tar xJf .device/libs.tar.xz -C $W
export LD_LIBRARY_PATH=$W/lib
MET=$PWD/.device/met
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
HW=$($MET circuit probe --identify | head -n 1); echo "HW=$HW"
V="base b8 h8 h4p h8p"
for n in $V; do xz -dc .device/$n.cubin.xz > $W/$n.cubin; done
$MET model synth --config .device/qwen3-30b-a3b-4l.json --seed 1 --dtype bf16 --out $W/q4 | tail -1
$MET circuit emit --hardware $HW --checkpoint $W/q4 --out $W/q4-a --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128 | tail -1
for n in $V; do
  echo "=== optest $n"
  MET_INTERP_CUBIN=$W/$n.cubin timeout 60 $MET circuit optest --assets $W/q4-a --backend cuda > $OUT/optest-$n.txt 2>&1; echo "rc $?"
  grep -E "optest:|FAIL|moe_" $OUT/optest-$n.txt | cut -c1-180 | head -8
done
echo "optest done at $((SECONDS-t0)) s"
for round in 1 2; do
  order="$V"; [[ $round == 2 ]] && order="h8p h4p h8 b8 base"
  for n in $order; do
    d=$W/p-$n-$round
    MET_INTERP_CUBIN=$W/$n.cubin timeout 90 $MET circuit run --assets $W/q4-a --backend cuda --campaign decode:1,16@ctx=4096 \
      --perf-dir $d > $OUT/run-$n-$round.txt 2>&1 || { echo "$n r$round rc $?"; tail -3 $OUT/run-$n-$round.txt; }
    python3 bench/campaign_walls.py $d "q30-4l $n r$round" 2>&1 | tee -a $OUT/walls.txt
  done
  echo "round $round done at $((SECONDS-t0)) s"
done
echo "total $((SECONDS-t0)) s"
tar czf /tmp/all.tgz -C $OUT . && rm -rf $OUT/* && mv /tmp/all.tgz $OUT/
