# The head (met-old) against the fused q/k norms + rope + KV append and the held-row rmsnorm (met):
# prefill campaigns of four shapes, optest of the new binary, then its tiny fixtures and the 8B oracle.
for b in met met-old; do [[ -f .device/$b ]] || { xz -d -T4 .device/$b.xz && chmod +x .device/$b; }; done
M=qwen3-0.6b,llama-3.2-1b,llama-3.1-8b,qwen3-8b
t0=$SECONDS
MET=.device/met-old OUT=$OUT/old OPTEST_MODELS=" " BUCKETS=128,512,4096 bash bench/prefill_check.sh $M > $OUT/old-log.txt 2>&1
MET=.device/met OUT=$OUT/new OPTEST_MODELS="qwen3-0.6b llama-3.1-8b" BUCKETS=128,512,4096 bash bench/prefill_check.sh $M > $OUT/new-log.txt 2>&1
echo "prefill A/B done in $((SECONDS-t0)) s"
for b in old new; do echo "== $b"; grep -E "T=[0-9]+ +[0-9.]+ ms|optest:|FAIL|rc [1-9]" $OUT/$b-log.txt | cut -c1-60; done
grep -h "T=4096" $OUT/new-log.txt | cut -c1-420
rm -rf /tmp/metw/qwen3-8b /tmp/metw/*-o
OUT=$OUT/bringup WORK=/tmp/metw bash scripts/h200_bringup.sh tiny,oracle llama-3.1-8b > /dev/null 2>&1; echo "bringup rc $? at $((SECONDS-t0)) s"
grep -E "rc [1-9]|worst|bringup: done|optest:|FAIL" $OUT/bringup/log.txt | cut -c1-200 | tail -40
