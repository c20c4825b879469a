#!/usr/bin/env bash
# One device call: (1) an A/B of the hopper interpreter's elementwise bodies (HEAD's embedded cubin
# against cubins built here from changed kernel trees, carried as .device/<name>.cubin.xz): optest of
# each on a small emit, prefill campaigns; (2) verification of the final binary: the tiny fixtures
# with prefill buckets 1,16,64 (cuda vs transformers and vs cpu-oracle), optest, oracle.
# Env: VARIANTS (names of carried cubins), MODELS, STAGES (ab,verify), BR_STAGES, BR_MODELS.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
W=/tmp/metab
mkdir -p "$W"
exec > >(tee -a "$OUT/log.txt") 2>&1
[[ -x .device/met ]] || xz -d -k -f .device/met.xz
[[ -f .device/met-new.xz && ! -x .device/met-new ]] && xz -d -k -f .device/met-new.xz; chmod +x .device/met*[a-z]
for f in .device/*.cubin.xz; do [[ -f $f ]] && xz -d -k -f "$f"; done
tar xJf .device/libs.tar.xz -C "$W" && export LD_LIBRARY_PATH="$W/lib"
met="$PWD/.device/met"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader
HW="$("$met" circuit probe --identify | head -n 1)"
echo "device $HW; met $("$met" --version | sed -n 2p)"
stages="${STAGES:-ab,verify}"
has() { [[ ",$stages," == *",$1,"* ]]; }
t0=$SECONDS
if has ab; then
  models="${MODELS:-qwen3-0.6b,llama-3.2-1b,llama-3.1-8b}"
  for m in ${models//,/ }; do
    "$met" model synth --config "bench/configs/$m.json" --seed 1 --dtype bf16 --out "$W/$m" >/dev/null
    "$met" circuit emit --hardware "$HW" --checkpoint "$W/$m" --out "$W/$m-p" --max-ctx 4160 --decode-rungs 1 \
      --prefill-buckets 128,512,4096 >/dev/null
  done
  small="${models%%,*}"
  # optest on buckets that are not multiples of 8 rows per slice: 200 and 1100 (max-ctx 1200)
  "$met" circuit emit --hardware "$HW" --checkpoint "$W/$small" --out "$W/$small-o" --max-ctx 1200 --decode-rungs 1,16 \
    --prefill-buckets 1,16,200,1100 >/dev/null
  # variants are binaries: .device/met (HEAD's) and .device/met-new (the changed kernels embedded)
  echo "=== optest met-new $small (buckets 1,16,200,1100)"
  timeout 200 .device/met-new circuit optest --assets "$W/$small-o" --backend cuda 2>&1 | \
    grep -E "rope|rmsnorm|kv_append|optest:|FAIL" | tail -n 20
  echo "=== ab setup $((SECONDS - t0)) s"
  for v in ${AB_BINS:-met met-new met met-new}; do
    for m in ${models//,/ }; do
      dir="$W/p-$m-$v-$SECONDS"
      timeout 120 ".device/$v" circuit run --assets "$W/$m-p" --backend cuda --campaign prefill:128,512,4096 --perf-dir "$dir" >/dev/null 2>&1
      python3 bench/campaign_walls.py "$dir" "$m $v"
    done
  done
  mkdir -p "$OUT/ab" && (cd "$W" && tar czf "$OUT/ab/campaigns.tar.gz" p-*)
  echo "=== ab done $((SECONDS - t0)) s"
fi
if has verify; then
  # the final binary's GPU bodies on prefill buckets of 1 and 16 rows (tiny fixtures), optest, oracle
  vmet="$PWD/.device/${MET_VERIFY:-met}"
  echo "verify with $("$vmet" --version | sed -n 2p)"
  MET="$vmet" OUT="$OUT/bringup" BUCKETS=1,16,64 TINY="${TINY:-tiny-llama3,tiny-qwen3,tiny-gemma4}" timeout 170 bash scripts/h200_bringup.sh "${BR_STAGES:-tiny,optest,oracle}" \
    "${BR_MODELS:-llama-3.2-1b}" >/dev/null 2>&1
  echo "=== verify rc $? $((SECONDS - t0)) s"
  grep -E "^=== .*rc [1-9]|passed|FAIL|worst|identical|sequences" "$OUT/bringup/log.txt" | tail -n 60
  (cd "$OUT" && tar czf bringup.tar.gz bringup && rm -rf bringup)
fi
