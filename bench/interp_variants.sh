#!/usr/bin/env bash
# A/B of hopper interpreter bodies on one GPU in one call, without rebuilding met: each variant is
# kernels/hopper/interp.cu compiled here by nvcc from a kernel tree with its own -D choices, loaded
# by met through MET_INTERP_CUBIN (src/interp/cuda_backend.cpp). For each variant: ptxas's spill
# and stack lines, optest on the small model (every distinct instruction, cuda against the cpu
# bodies; only the variants named in OPTEST when it is set, e.g. those that change arithmetic),
# then decode campaigns (C = 1 and 16 at ctx 4096) on each model, ROUNDS rounds (default 1), with
# the per-kernel walls of the timestamped run.
#   bash bench/interp_variants.sh MET 'NAME|KERNELS_DIR|DEFINES' ...
#   e.g. bench/interp_variants.sh .device/met 'head|.device/kernels-head|' 'pipe4|kernels|-DMET_GEMV_PIPE=4'
# Env: MODELS (default llama-3.2-1b,llama-3.1-8b), WORK (default /tmp/metvar), NVCC (default nvcc),
# CAMPAIGN (default decode:1,16@ctx=4096; e.g. prefill:4096 with BUCKETS=4096), BUCKETS (the emit's
# prefill buckets, default 128).
# The variants must keep this met's shared-memory layout (kernels/common/interp/smem.h); the bodies'
# own switches are what a variant may set (e.g. -DMET_ATTN_STAGED=0: decode attention reads the
# cache directly instead of staging chunks in shared memory).
set -uo pipefail
(($# >= 2)) || { echo "usage: $0 MET 'NAME|KERNELS_DIR|DEFINES' ..." >&2; exit 2; }
met="$(realpath "$1")"
shift
W="${WORK:-/tmp/metvar}"
mkdir -p "$W"
[[ -f .device/libs.tar.xz ]] && tar xJf .device/libs.tar.xz -C "$W" && export LD_LIBRARY_PATH="$W/lib"
HW="${HW:-$("$met" circuit probe --identify | head -n 1)}"  # the registry device of this GPU (h200-sxm, h100-sxm, ...)
[[ -n $HW ]] || { echo "bench/interp_variants.sh: met names no registry device for this GPU"; exit 1; }
nvcc="${NVCC:-nvcc}"
command -v "$nvcc" >/dev/null || nvcc=/usr/local/cuda/bin/nvcc
models="${MODELS:-llama-3.2-1b,llama-3.1-8b}"
small="${models%%,*}"

names=()
for spec in "$@"; do
  IFS='|' read -r name dir defs <<<"$spec"
  names+=("$name")
  # shellcheck disable=SC2086
  "$nvcc" -cubin -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -I"$dir" -Xptxas -v $defs \
    -o "$W/$name.cubin" "$dir/hopper/interp.cu" >"$W/$name.ptxas" 2>&1 &
done
wait
for name in "${names[@]}"; do
  echo "=== $name ptxas"
  [[ -s $W/$name.cubin ]] || { echo "compile failed:"; tail -n 20 "$W/$name.ptxas"; continue; }
  grep -A1 "Function properties for \(metinterp_hopper\|_ZN10met_interp10gemv\)" "$W/$name.ptxas" | grep -v "^--"
done

for m in ${models//,/ }; do
  [[ -d $W/$m ]] || "$met" model synth --config "bench/configs/$m.json" --seed 1 --dtype bf16 --out "$W/$m" >/dev/null
  "$met" circuit emit --hardware "$HW" --checkpoint "$W/$m" --out "$W/$m-a" --max-ctx 4160 --decode-rungs 1,16 \
    --prefill-buckets "${BUCKETS:-128}" >/dev/null
done
for name in "${names[@]}"; do
  [[ -s $W/$name.cubin ]] || continue
  [[ -n ${OPTEST:-} && ",$OPTEST," != *",$name,"* ]] && continue
  echo "=== $name optest $small"
  MET_INTERP_CUBIN="$W/$name.cubin" "$met" circuit optest --assets "$W/$small-a" --backend cuda 2>&1 | tail -n 3
done
for round in $(seq 1 "${ROUNDS:-1}"); do
  for name in "${names[@]}"; do
    [[ -s $W/$name.cubin ]] || continue
    for m in ${models//,/ }; do
      dir="$W/p-$m-$name-$round"
      MET_INTERP_CUBIN="$W/$name.cubin" "$met" circuit run --assets "$W/$m-a" --backend cuda \
        --campaign "${CAMPAIGN:-decode:1,16@ctx=4096}" --perf-dir "$dir" >/dev/null 2>&1
      python3 bench/campaign_walls.py "$dir" "$m $name r$round"
    done
  done
done
