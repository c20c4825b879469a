# Call 1 of 2026-12-05 evening: (1) the L1 sweep of bench/gemv_stream.cu (register-load gemv chain
# with the launch's shared memory raised step by step), Llama-3.1-8B and Llama-3.2-1B shapes;
# (2) met serve --backend cuda against cpu-oracle for the tiny Gemma-4 and the tiny Qwen3
# (scripts/h200_serve_check.sh); (3) the final binary's bringup on Llama-3.1-8B.
set -uo pipefail
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
W=/tmp/metw; mkdir -p $W && tar xJf .device/libs.tar.xz -C $W
export LD_LIBRARY_PATH=$W/lib
MET=$PWD/.device/met
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
$MET --version | head -2
HW=$($MET circuit probe --identify | head -n 1); echo "HW=$HW"
echo "=== L1 sweep, Llama-3.1-8B shape"
timeout 120 .device/gemv_stream --l1-sweep 1 --repeats 10 2>&1 | tee $OUT/l1-sweep-8b.txt
echo "=== L1 sweep, Llama-3.2-1B shape"
timeout 60 .device/gemv_stream --l1-sweep 1 --repeats 20 --hidden 2048 --inter 8192 --heads 32 --kv-heads 8 --head-dim 64 --layers 16 --vocab 128256 2>&1 | tee $OUT/l1-sweep-1b.txt
echo "sweeps done at $((SECONDS-t0)) s"
for m in gemma4 qwen3; do
  echo "=== serve check $m"
  MODEL=$m HW=$HW MET=$MET timeout 150 bash scripts/h200_serve_check.sh > $OUT/serve-$m.txt 2>&1; echo "rc $? at $((SECONDS-t0)) s"
  grep -E "^(ok|FAIL|note)|error" $OUT/serve-$m.txt | cut -c1-200
done
echo "=== bringup tiny,optest,campaign,oracle llama-3.1-8b"
OUT=$OUT/bringup WORK=$W timeout $((560 - SECONDS + t0)) bash scripts/h200_bringup.sh tiny,optest,campaign,oracle llama-3.1-8b > /dev/null 2>&1; echo "bringup rc $? at $((SECONDS-t0)) s"
grep -E "rc [1-9]|worst relative|optest:|bringup: done|decode C=1 ctx=4096|decode C=16 ctx=4096|prefill T=4096" $OUT/bringup/log.txt | cut -c1-200 | head -40
echo "total $((SECONDS-t0)) s"
tar czf /tmp/all.tgz -C $OUT . && rm -rf $OUT/* && mv /tmp/all.tgz $OUT/
