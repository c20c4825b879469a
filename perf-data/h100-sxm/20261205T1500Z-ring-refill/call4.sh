# The ring-refill A/B in one call with main's met (d5c177b, the same opcode table as the images):
# `met circuit probe --identify` on the lent GPU first (the device scripts file their results under
# the id it prints); then prefill campaigns at 512 and 4096 of the 8B and 1B shapes with the head's
# image (base), the GEMM's stages refilled by the last warp done with them (gemm), the flash stages
# too (new), and base again (base2: the drift of the machine); optest of new on the 1B (ragged
# buckets 200, 1100); the new image against transformers on the tiny fixtures.
set -uo pipefail
D=$PWD/perf-data/h200-sxm/20261205T0530Z-ring-refill
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
mkdir -p /tmp/metw && tar xJf .device/libs.tar.xz -C /tmp/metw
LD_LIBRARY_PATH=/tmp/metw/lib ./.device/met circuit probe --identify; echo "identify rc $?"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv
for v in base gemm new; do xz -d -k -f $D/$v.cubin.xz; done
M=llama-3.1-8b,llama-3.2-1b
t0=$SECONDS
run() {  # name cubin optest-models
  export MET_INTERP_CUBIN=$2
  MET=.device/met OUT=$OUT/$1 OPTEST_MODELS="$3" BUCKETS=512,4096 timeout 200 bash bench/prefill_check.sh $M > $OUT/$1-log.txt 2>&1
  unset MET_INTERP_CUBIN
  echo "$1 done at $((SECONDS-t0)) s"
}
run base $D/base.cubin " "
run gemm $D/gemm.cubin " "
run new $D/new.cubin "llama-3.2-1b"
run base2 $D/base.cubin " "
for b in base gemm new base2; do echo "== $b"; grep -E "T=[0-9]+ |optest:|FAIL|rc [1-9]|^error" $OUT/$b-log.txt | cut -c1-300; done
left=$((540 - SECONDS))
if (( left > 40 )); then
  MET_INTERP_CUBIN=$D/new.cubin OUT=$OUT/bringup WORK=/tmp/metw TINY=tiny-llama3,tiny-qwen3,tiny-gemma3,tiny-gemma4,tiny-qwen3-moe timeout $left bash scripts/h200_bringup.sh tiny > /dev/null 2>&1; echo "bringup rc $? at $((SECONDS-t0)) s"
  grep -E "rc [1-9]|worst relative|optest:|bringup: done" $OUT/bringup/log.txt | cut -c1-150
fi
echo "total $((SECONDS-t0)) s"
tar czf /tmp/all.tgz -C $OUT . && rm -rf $OUT/* && mv /tmp/all.tgz $OUT/
