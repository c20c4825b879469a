#!/usr/bin/env bash
# A/B of interpreter builds on one GPU in one call: the same emits (met model synth --seed 1 of
# bench/configs, emitted as scripts/h200_bringup.sh does) timed by each met binary in turn, two
# rounds, so a difference between builds can be told from the spread of one build.
#   bash bench/interp_ab.sh MET_A MET_B [...]   (env MODELS: default llama-3.2-1b,llama-3.1-8b)
# Run where scripts/h200_bringup.sh runs (.device/libs.tar.xz beside the binaries).
set -euo pipefail
(($# >= 2)) || { echo "usage: $0 MET_A MET_B [MET_C ...]" >&2; exit 2; }
W="${WORK:-/tmp/metab}"
mkdir -p "$W"
[[ -f .device/libs.tar.xz ]] && tar xJf .device/libs.tar.xz -C "$W" && export LD_LIBRARY_PATH="$W/lib"
models="${MODELS:-llama-3.2-1b,llama-3.1-8b}"
HW="${HW:-$("${@: -1}" circuit probe --identify | head -n 1)}"  # the registry device of this GPU (the last binary names it)
[[ -n $HW ]] || { echo "bench/interp_ab.sh: met names no registry device for this GPU"; exit 1; }
for m in ${models//,/ }; do
  [[ -d $W/$m ]] || "$1" model synth --config "bench/configs/$m.json" --seed 1 --out "$W/$m" >/dev/null
  "$1" circuit emit --hardware "$HW" --checkpoint "$W/$m" --out "$W/$m-a" --max-ctx 4160 --decode-rungs 1,2,4,8,16 \
    --prefill-buckets 128,512,4096 >/dev/null
done
for round in 1 2; do
  for met in "$@"; do
    name=$(basename "$met")
    for m in ${models//,/ }; do
      dir="$W/p-$m-$name-$round"
      "$met" circuit run --assets "$W/$m-a" --backend cuda --campaign decode:1,4,16@ctx=4096 --campaign prefill:128,4096 \
        --perf-dir "$dir" >/dev/null
      grep -E "^\| (decode|prefill)" "$(find "$dir" -name '*.md' | head -1)" |
        awk -F'|' -v v="$name" -v r="$round" -v m="$m" '{printf "%s %s r%s %-22s %8s  %s\n", m, v, r, $2, $4, $10}'
    done
  done
done
