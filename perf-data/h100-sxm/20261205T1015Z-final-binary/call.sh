# The final binary of the 2026-12-05 08:03 stop (5d03c22, packet ABI 23) on the lent GPU (an H100 came for a call that named nvidia-h200): optest and the
# transformers oracle on the tiny fixtures, then Llama-3.1-8B (real config, synth): optest, the
# transformers oracle, a campaign (decode C=1 and 16 at ctx 4096, prefill 4096) and transformers peers.
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
t0=$SECONDS
./.device/met --version | head -3
OUT=$OUT WORK=/tmp/metw TINY=tiny-llama3,tiny-qwen3,tiny-gemma3,tiny-gemma4,tiny-qwen3-moe timeout 560 bash scripts/h200_bringup.sh tiny,optest,campaign,peers,oracle llama-3.1-8b > /dev/null 2>&1; echo "bringup rc $? in $((SECONDS-t0)) s"
grep -E "rc [1-9]|worst relative|optest:|ms|bringup: done" $OUT/log.txt | cut -c1-200 | tail -60
