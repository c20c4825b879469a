# Call 3: the committed flash body (softmax trees) against the same body with chains (notree, the
# body of call 2's "new" without the refill by the last warp), prefill campaigns of four shapes on
# one met, notree first; optest of the small shapes; then transformers against met on prompts of
# 1, 37, 700 and 4000 tokens (the lengths stage) on Llama-3.2-1B and Qwen3-0.6B.
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
for c in .device/*.cubin.xz; do xz -d -f $c; done
mkdir -p $OUT; t0=$SECONDS
run() {  # NAME CUBIN MODELS BUCKETS OPTEST
  MET_INTERP_CUBIN=$2 MET=.device/met OUT=$OUT/$1 WORK=/tmp/metw BUCKETS=$4 OPTEST_MODELS="$5" timeout 400 bash bench/prefill_check.sh $3 > $OUT/$1-log.txt 2>&1
  echo "$1 rc $? at $((SECONDS-t0)) s"; grep -E "T=(128|512|4096)|optest:|FAIL" $OUT/$1-log.txt | cut -c1-250
}
run notree .device/notree.cubin qwen3-0.6b,llama-3.2-1b,llama-3.1-8b,qwen3-8b 128,512,4096 " "
run tree "" qwen3-0.6b,llama-3.2-1b,llama-3.1-8b,qwen3-8b 128,512,4096 "qwen3-0.6b llama-3.2-1b"
for m in llama-3.2-1b qwen3-0.6b; do
  OUT=$OUT/len-$m WORK=/tmp/metw timeout 300 bash scripts/h200_bringup.sh lengths $m > /dev/null 2>&1; echo "lengths $m rc $? at $((SECONDS-t0)) s"
  grep -E "rc [1-9]|worst|FAIL|bringup: done" $OUT/len-$m/log.txt | cut -c1-250 | tail -8
done
cd $OUT && tar czf results.tar.gz *-log.txt notree tree len-*/log.txt len-*/res 2>/dev/null; ls -la
