[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
mkdir -p $OUT; t0=$SECONDS
OUT=$OUT WORK=/tmp/metw bash scripts/h200_bringup.sh tiny,optest,campaign,peers,oracle llama-3.1-8b > /dev/null 2>&1; echo "bringup rc $? in $((SECONDS-t0)) s"
grep -E "rc [1-9]|worst|bringup: done|optest:|^\| (decode|prefill)" $OUT/log.txt | cut -c1-230 | tail -40
