# The final binary of this session's gpt-oss TP change (packet ABI 24) on the lent GPU: the tiny
# fixtures and gpt-oss (MXFP4) through scripts/h200_bringup.sh (optest, transformers or reference
# oracle, cpu-oracle), then optest of TP 2 emits on one GPU: rank 0's packet, every distinct
# instruction on cuda against the cpu bodies, collectives skipped (gemv_f32 / gemm_f32,
# moe_down_f32 / moe_down_mma_f32, gpt-oss's gemv_bias_f32 / gemm_bias_f32 / moe_down_bias_f32 with
# rank 0's biases, and the windowed weights of a rank).
set -uo pipefail
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
W=/tmp/metw; mkdir -p $W && tar xJf .device/libs.tar.xz -C $W
export LD_LIBRARY_PATH=$W/lib
MET=$PWD/.device/met
t0=$SECONDS
$MET --version | head -2
HW=$($MET circuit probe --identify | head -n 1); echo "HW=$HW"
OUT=$OUT/bringup WORK=$W timeout 300 bash scripts/h200_bringup.sh tiny,gptoss > /dev/null 2>&1; echo "bringup rc $? at $((SECONDS-t0)) s"
grep -E "rc [1-9]|worst relative|optest:|bringup: done" $OUT/bringup/log.txt | cut -c1-160
for spec in tiny-gpt-oss:mxfp4 tiny-llama3:bf16 tiny-qwen3-moe:bf16 tiny-gemma4-moe:bf16; do
  m=${spec%%:*}; dt=${spec##*:}; n=$m-$dt
  $MET model synth --config tests/oracle/configs/$m.json --seed 1 --dtype $dt --out $W/tp/$n >/dev/null 2>&1
  $MET circuit emit --hardware $HW --checkpoint $W/tp/$n --out $W/tp/$n-e2 --tp 2 --max-ctx 256 --decode-rungs 1,4 \
    --prefill-buckets 64,200 > $OUT/emit-$n.txt 2>&1 || { echo "$n: emit rc $?"; tail -3 $OUT/emit-$n.txt; continue; }
  echo "=== optest $n --tp 2 (rank 0)"
  timeout 120 $MET circuit optest --assets $W/tp/$n-e2 --backend cuda > $OUT/optest-tp2-$n.txt 2>&1; echo "rc $?"
  grep -E "optest:|FAIL|bias_f32|_f32 |error" $OUT/optest-tp2-$n.txt | cut -c1-200 | head -24
done
echo "total $((SECONDS-t0)) s"
tar czf /tmp/all.tgz -C $OUT . && rm -rf $OUT/* && mv /tmp/all.tgz $OUT/
