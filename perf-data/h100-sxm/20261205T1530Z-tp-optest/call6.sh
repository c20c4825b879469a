# optest of tensor-parallel emits on one GPU: rank 0's packet alone (met circuit optest loads it
# without NCCL or a second GPU and skips the collectives), every distinct instruction on cuda
# against the cpu bodies: gemv_f32 / gemm_f32, moe_down_f32 / moe_down_mma_f32, gpt-oss's
# gemv_bias_f32 / gemm_bias_f32 / moe_down_bias_f32 with rank 0's biases, on a rank's windows.
set -uo pipefail
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
W=/tmp/metw; mkdir -p $W && tar xJf .device/libs.tar.xz -C $W
export LD_LIBRARY_PATH=$W/lib
MET=$PWD/.device/met
t0=$SECONDS
$MET --version | head -2
HW=$($MET circuit probe --identify | head -n 1); echo "HW=$HW"
for spec in ${SPECS:-tiny-gpt-oss:mxfp4:2 tiny-llama3:bf16:2 tiny-llama3:bf16:4 tiny-qwen3-moe:bf16:2 tiny-gemma4-moe:bf16:2 tiny-gemma4-e:bf16:2 tiny-gemma3:bf16:2}; do
  IFS=: read -r m dt tp <<<"$spec"; n=$m-$dt
  [[ -d $W/tp/$n ]] || $MET model synth --config tests/oracle/configs/$m.json --seed 1 --dtype $dt --out $W/tp/$n >/dev/null 2>&1
  $MET circuit emit --hardware $HW --checkpoint $W/tp/$n --out $W/tp/$n-e$tp --tp $tp --max-ctx 256 --decode-rungs 1,4 \
    --prefill-buckets 64,200 > $OUT/emit-$n-tp$tp.txt 2>&1 || { echo "$n tp$tp: emit rc $?"; tail -3 $OUT/emit-$n-tp$tp.txt; continue; }
  echo "=== optest $n --tp $tp (rank 0)"
  timeout 120 $MET circuit optest --assets $W/tp/$n-e$tp --backend cuda > $OUT/optest-$n-tp$tp.txt 2>&1; echo "rc $?"
  grep -E "optest:|FAIL|_f32 |error" $OUT/optest-$n-tp$tp.txt | cut -c1-220 | head -30; cat $OUT/optest-$n-tp$tp.txt >> $OUT/optest-all.txt; rm $OUT/optest-$n-tp$tp.txt $OUT/emit-$n-tp$tp.txt
done
echo "total $((SECONDS-t0)) s"
