#!/usr/bin/env bash
# Decode A/B of interpreter builds on one GPU in one call, with the correctness check first: optest
# (every distinct instruction of a small emit, cuda vs the cpu bodies) with the last binary, then
# decode campaigns (C = 1, 4, 16 at ctx 4096; ctx 512 and 32768 at C = 1)
# for each binary in turn, ROUNDS rounds (default 2), with the per-family split of the timestamped
# run. The campaigns' JSON and Markdown stay under WORK (p-<model>-<emit>-<binary>-<round>).
#   bash bench/decode_ab.sh MET_A MET_B [...]   (env MODELS: default llama-3.2-1b,llama-3.1-8b; LONG: the
#   models also run at ctx 32768, default all; CONFIGS: the directory of MODELS' <name>.json, default
#   bench/configs; WALLS=1: each campaign's per-kernel walls as well, bench/campaign_walls.py)
# Run where scripts/h200_bringup.sh runs (.device/libs.tar.xz beside the binaries).
set -uo pipefail
(($# >= 2)) || { echo "usage: $0 MET_A MET_B [MET_C ...]" >&2; exit 2; }
W="${WORK:-/tmp/metab}"
mkdir -p "$W"
[[ -f .device/libs.tar.xz ]] && tar xJf .device/libs.tar.xz -C "$W" && export LD_LIBRARY_PATH="$W/lib"
models="${MODELS:-llama-3.2-1b,llama-3.1-8b}"
new="${*: -1}"
HW="${HW:-$("$new" circuit probe --identify | head -n 1)}"  # the registry device of this GPU (the last binary names it)
[[ -n $HW ]] || { echo "bench/decode_ab.sh: met names no registry device for this GPU"; exit 1; }
for m in ${models//,/ }; do
  [[ -d $W/$m ]] || "$new" model synth --config "${CONFIGS:-bench/configs}/$m.json" --seed 1 --dtype bf16 --out "$W/$m" >/dev/null
  "$new" circuit emit --hardware "$HW" --checkpoint "$W/$m" --out "$W/$m-h" --max-ctx 512 --decode-rungs 1,16 \
    --prefill-buckets 128 >/dev/null
  echo "=== $m optest ($new)"
  "$new" circuit optest --assets "$W/$m-h" --backend cuda | tail -n 40
  echo "=== $m optest rc ${PIPESTATUS[0]}"
done
# Each binary emits its own assets (binaries of different packet ABIs cannot share them): ctx 4096
# for every model and 32768 (C = 1) for each model in LONG (default: every model).
for met in "$@"; do
  name=$(basename "$met")
  for m in ${models//,/ }; do
    "$met" circuit emit --hardware "$HW" --checkpoint "$W/$m" --out "$W/$m-a-$name" --max-ctx 4160 \
      --decode-rungs 1,2,4,16 --prefill-buckets 128 >/dev/null
    [[ ",${LONG:-$models}," == *",$m,"* ]] && "$met" circuit emit --hardware "$HW" --checkpoint "$W/$m" \
      --out "$W/$m-l-$name" --max-ctx 32832 --decode-rungs 1 --prefill-buckets 128 >/dev/null
  done
done
for round in $(seq 1 "${ROUNDS:-2}"); do
  for met in "$@"; do
    name=$(basename "$met")
    for m in ${models//,/ }; do
      for v in a l; do
        [[ -d $W/$m-$v-$name ]] || continue
        camp="decode:1,4,16@ctx=4096 --campaign decode:1@ctx=512"
        [[ $v == l ]] && camp="decode:1@ctx=32768"
        dir="$W/p-$m-$v-$name-$round"
        # shellcheck disable=SC2086
        "$met" circuit run --assets "$W/$m-$v-$name" --backend cuda --campaign $camp --perf-dir "$dir" >/dev/null
        grep -E "^\| decode" "$(find "$dir" -name '*.md' | head -1)" |
          awk -F'|' -v v="$name" -v r="$round" -v m="$m" '{printf "%s %s r%s %-22s %8s  %s\n", m, v, r, $2, $4, $10}'
        [[ -n ${WALLS:-} ]] && python3 bench/campaign_walls.py "$dir" "$m $name r$round"
      done
    done
  done
done
