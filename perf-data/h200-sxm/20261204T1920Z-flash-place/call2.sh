# Call 2: the flash body with its masks and soft cap out of the per-element path, the O rescale
# skipped where no max moved, and the last warp done with a stage refilling it (flash and GEMM):
# tiny fixtures and optest on the new met (its own image); prefill campaigns of the image before
# (head: c1a80da's kernels) and the new one, then of the new one without each change, on one met
# (the same emit: the longest-first placement of call 1); ncu of the new image as in call 1.
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
for c in .device/*.cubin.xz; do xz -d -f $c; done
mkdir -p $OUT; t0=$SECONDS
OUT=$OUT/bring WORK=/tmp/metw timeout 300 bash scripts/h200_bringup.sh tiny,ring,gptoss > /dev/null 2>&1; echo "bringup rc $? at $((SECONDS-t0)) s"
grep -E "rc [1-9]|worst|FAIL|optest:|bringup: done" $OUT/bring/log.txt | cut -c1-200 | tail -30
run() {  # NAME CUBIN MODELS BUCKETS OPTEST
  MET_INTERP_CUBIN=$2 MET=.device/met OUT=$OUT/$1 WORK=/tmp/metw BUCKETS=$4 OPTEST_MODELS="$5" timeout 400 bash bench/prefill_check.sh $3 > $OUT/$1-log.txt 2>&1
  echo "$1 rc $? at $((SECONDS-t0)) s"; grep -E "T=(128|512|4096)|optest:|FAIL" $OUT/$1-log.txt | cut -c1-250
}
run head .device/head.cubin qwen3-0.6b,llama-3.2-1b,llama-3.1-8b,qwen3-8b 128,512,4096 " "
run new "" qwen3-0.6b,llama-3.2-1b,llama-3.1-8b,qwen3-8b 128,512,4096 "qwen3-0.6b llama-3.2-1b"
run norefill .device/norefill.cubin qwen3-0.6b,llama-3.1-8b 128,4096 " "
run noskip .device/noskip.cubin qwen3-0.6b,llama-3.1-8b 4096 " "
export LD_LIBRARY_PATH=/tmp/metw/lib
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
timeout 200 $ncu --clock-control none -k regex:metinterp -c 1 --section WarpStateStats --section SourceCounters \
  -o $OUT/prof .device/met circuit run --assets /tmp/metw/qwen3-0.6b-p --backend cuda --campaign prefill:4096 --warmup 0 --repeats 1 > $OUT/ncu-log.txt 2>&1
echo "ncu rc $? at $((SECONDS-t0)) s"
$ncu --import $OUT/prof.ncu-rep --page source --csv --print-source sass > $OUT/source.csv 2>/dev/null; xz -T8 -6 $OUT/source.csv; rm -f $OUT/prof.ncu-rep
cd $OUT && tar czf results.tar.gz *-log.txt head new norefill noskip bring/log.txt 2>/dev/null; ls -la
