# gpt-oss-20b (real config, synth MXFP4) emitted with --tp 2 for the lent GPU: optest of rank 0's
# packet alone on one GPU (its windows of the real shapes: 32 of 64 query heads, 4 of 8 KV heads and
# their biases and sinks, 1440 of each expert's 2880 intermediate columns in MXFP4 blocks and scales).
set -uo pipefail
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
W=/tmp/metw; mkdir -p $W && tar xJf .device/libs.tar.xz -C $W
export LD_LIBRARY_PATH=$W/lib
MET=$PWD/.device/met
t0=$SECONDS
HW=$($MET circuit probe --identify | head -n 1); echo "HW=$HW"
$MET model synth --config .device/gpt-oss-20b.json --seed 1 --dtype mxfp4 --out $W/g20 | tail -1; echo "synth at $((SECONDS-t0)) s"
for tp in 2 1; do
  $MET circuit emit --hardware $HW --checkpoint $W/g20 --out $W/g20-tp$tp --tp $tp --max-ctx 512 --decode-rungs 1,4 --prefill-buckets 128 | tail -1
  echo "=== optest gpt-oss-20b --tp $tp (rank 0)"
  timeout $((280 - SECONDS + t0)) $MET circuit optest --assets $W/g20-tp$tp --backend cuda > $OUT/optest-tp$tp.txt 2>&1; echo "rc $? at $((SECONDS-t0)) s"
  grep -E "optest:|FAIL|_f32 |error" $OUT/optest-tp$tp.txt | cut -c1-220 | head -30
done
echo "total $((SECONDS-t0)) s"
