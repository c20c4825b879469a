# Call 4: the committed binary (longest-first flash placement, the flash softmax without per-score
# masks): prefill campaigns of three shapes, then the bring-up of Llama-3.1-8B (tiny fixtures,
# optest, campaign, peers, transformers oracle).
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
mkdir -p $OUT; t0=$SECONDS
MET=.device/met OUT=$OUT/pc WORK=/tmp/metw BUCKETS=128,512,4096 OPTEST_MODELS=" " timeout 200 bash bench/prefill_check.sh qwen3-0.6b,llama-3.2-1b,qwen3-8b > $OUT/pc-log.txt 2>&1
echo "campaigns rc $? at $((SECONDS-t0)) s"; grep -E "T=(128|512|4096)" $OUT/pc-log.txt | cut -c1-200
OUT=$OUT/bring WORK=/tmp/metw timeout 420 bash scripts/h200_bringup.sh tiny,optest,campaign,peers,oracle llama-3.1-8b > /dev/null 2>&1; echo "bringup rc $? at $((SECONDS-t0)) s"
grep -E "rc [1-9]|worst|bringup: done|optest:|^\| (decode|prefill)" $OUT/bring/log.txt | cut -c1-230 | tail -40
cd $OUT && tar czf results.tar.gz pc-log.txt pc bring 2>/dev/null; ls -la
