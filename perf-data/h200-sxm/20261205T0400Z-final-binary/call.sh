[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
t0=$SECONDS
OUT=$OUT WORK=/tmp/metw TINY=tiny-llama3,tiny-qwen3,tiny-gemma3,tiny-gemma4,tiny-qwen3-moe timeout 230 bash scripts/h200_bringup.sh tiny llama-3.1-8b > /dev/null 2>&1; echo "bringup rc $? in $((SECONDS-t0)) s"
grep -E "rc [1-9]|worst relative|optest:|bringup: done" $OUT/log.txt | cut -c1-150
