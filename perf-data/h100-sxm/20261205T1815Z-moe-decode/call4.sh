# Call 4: the committed expert bodies (activations hoisted per batch, moe_down two columns a pass,
# the router two experts a pass 8 loads deep) against the previous ones (base.cubin: the tree before,
# through MET_INTERP_CUBIN) on Qwen3-30B-A3B cut to 4 layers: optest, decode C=1 and 16 at ctx 4096;
# then the whole 48-layer model's decode campaign with this binary.
set -uo pipefail
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
W=/tmp/metw; mkdir -p $W && tar xJf .device/libs.tar.xz -C $W
export LD_LIBRARY_PATH=$W/lib
MET=$PWD/.device/met
t0=$SECONDS
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
HW=$($MET circuit probe --identify | head -n 1); echo "HW=$HW"
xz -dc .device/base.cubin.xz > $W/base.cubin
$MET model synth --config .device/qwen3-30b-a3b-4l.json --seed 1 --dtype bf16 --out $W/q4 | tail -1
$MET circuit emit --hardware $HW --checkpoint $W/q4 --out $W/q4-a --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128 | tail -1
timeout 60 $MET circuit optest --assets $W/q4-a --backend cuda > $OUT/optest-new.txt 2>&1; echo "optest rc $?"
grep -E "optest:|FAIL|moe_" $OUT/optest-new.txt | cut -c1-180 | head -12
for round in 1 2; do
  for n in new base; do
    d=$W/p-$n-$round; env=(); [[ $n == base ]] && env=(MET_INTERP_CUBIN=$W/base.cubin)
    env "${env[@]}" timeout 60 $MET circuit run --assets $W/q4-a --backend cuda --campaign decode:1,16@ctx=4096 --perf-dir $d > /dev/null 2>&1 || echo "$n rc $?"
    python3 bench/campaign_walls.py $d "q30-4l $n r$round" | grep -v "mean slice"
  done
done
echo "A/B done at $((SECONDS-t0)) s"
(( SECONDS - t0 < 90 )) || { echo "no time left for the 48-layer model"; exit 0; }
$MET model synth --config bench/configs/qwen3-30b-a3b.json --seed 1 --dtype bf16 --out $W/q30 > /dev/null 2>&1; echo "synth at $((SECONDS-t0)) s"
$MET circuit emit --hardware $HW --checkpoint $W/q30 --out $W/q30-a --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 128 | tail -1
mkdir -p $OUT/perf
timeout 100 $MET circuit run --assets $W/q30-a --backend cuda --campaign decode:1,16@ctx=4096 --perf-dir $OUT/perf > /dev/null 2>&1; echo "campaign rc $? at $((SECONDS-t0)) s"
cp $OUT/perf/*/*/*.md $OUT/q30-decode.md; cp $OUT/perf/*/*/*.json $OUT/q30-decode.json; rm -rf $OUT/perf
grep "^| decode" $OUT/q30-decode.md | cut -c1-250
echo "total $((SECONDS-t0)) s"
