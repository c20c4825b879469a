# A/B in one call: the head (met-old) against the held-row rmsnorm and the loop's remembered waits
# (met), prefill campaigns of three shapes and a decode C=1 campaign; optest of the new binary.
for b in met met-old; do [[ -f .device/$b ]] || { xz -d -T4 .device/$b.xz && chmod +x .device/$b; }; done
M=llama-3.1-8b,llama-3.2-1b,qwen3-0.6b
t0=$SECONDS
MET=.device/met-old OUT=$OUT/old OPTEST_MODELS=" " BUCKETS=128,512,4096 bash bench/prefill_check.sh $M > $OUT/old-log.txt 2>&1
MET=.device/met OUT=$OUT/new OPTEST_MODELS="llama-3.2-1b llama-3.1-8b" BUCKETS=128,512,4096 bash bench/prefill_check.sh $M > $OUT/new-log.txt 2>&1
echo "prefill A/B done in $((SECONDS-t0)) s"
export LD_LIBRARY_PATH=/tmp/metw/lib
for m in llama-3.1-8b llama-3.2-1b; do for b in met-old met; do
  timeout 120 .device/$b circuit run --assets /tmp/metw/$m-p --backend cuda --campaign decode:1@ctx=4096 --perf-dir $OUT/dec-$b-$m > $OUT/dec-$b-$m.txt 2>&1
  echo "$b $m $(grep -rh --include=*.md "decode C=1" $OUT/dec-$b-$m 2>/dev/null | cut -c1-160)"
done; done
for b in old new; do echo "== $b"; grep -E "^\| prefill T=|optest:|FAIL|rc [1-9]" $OUT/$b-log.txt | cut -c1-200; grep -rh --include=*.md "rmsnorm" $OUT/$b 2>/dev/null | grep "prefill_4096\` | rmsnorm" | cut -c1-120; done
echo "total $((SECONDS-t0)) s"
