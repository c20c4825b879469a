# The fused op with its loads in flight and k written back (met) against the head (met-old): optest
# of two emits with the new binary, prefill campaigns of three shapes with both.
for b in met met-old; do [[ -f .device/$b ]] || { xz -d -T4 .device/$b.xz && chmod +x .device/$b; }; done
M=qwen3-0.6b,llama-3.2-1b,llama-3.1-8b
t0=$SECONDS
MET=.device/met OUT=$OUT/new OPTEST_MODELS="qwen3-0.6b llama-3.2-1b" BUCKETS=128,512,4096 bash bench/prefill_check.sh $M > $OUT/new-log.txt 2>&1
MET=.device/met-old OUT=$OUT/old OPTEST_MODELS=" " BUCKETS=128,512,4096 bash bench/prefill_check.sh $M > $OUT/old-log.txt 2>&1
echo "done in $((SECONDS-t0)) s"
for b in old new; do echo "== $b"; grep -E "T=[0-9]+ +[0-9.]+ ms|optest:|FAIL|rc [1-9]" $OUT/$b-log.txt | cut -c1-90; done
grep -h "T=4096" $OUT/new-log.txt $OUT/old-log.txt | cut -c1-420
