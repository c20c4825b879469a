#!/usr/bin/env bash
# Prefill A/B of interpreter builds on one GPU in one call, with the correctness check first: optest
# (every distinct instruction, cuda vs the cpu bodies) of the last binary on MODEL's config cut to 1
# layer, then prefill campaigns (BUCKETS, default 128,4096) of MODEL's config cut to LAYERS layers
# (default 4) for each binary in turn, ROUNDS rounds (default 2) in alternating order, with the
# per-kernel walls (bench/campaign_walls.py). The campaigns' files stay under WORK.
#   bash bench/prefill_ab.sh MET_A MET_B [...]   (env MODEL: a bench/configs name, default qwen3-30b-a3b;
#   CONFIGS: the directory of MODEL's json, default bench/configs; LAYERS, BUCKETS, ROUNDS, WORK)
# Run where scripts/h200_bringup.sh runs (.device/libs.tar.xz beside the binaries).
set -uo pipefail
(($# >= 2)) || { echo "usage: $0 MET_A MET_B [MET_C ...]" >&2; exit 2; }
W="${WORK:-/tmp/metpab}"
mkdir -p "$W"
[[ -f .device/libs.tar.xz ]] && tar xJf .device/libs.tar.xz -C "$W" && export LD_LIBRARY_PATH="$W/lib"
model="${MODEL:-qwen3-30b-a3b}" layers="${LAYERS:-4}" buckets="${BUCKETS:-128,4096}"
new="${*: -1}"
HW="${HW:-$("$new" circuit probe --identify | head -n 1)}"
[[ -n $HW ]] || { echo "bench/prefill_ab.sh: met names no registry device for this GPU"; exit 1; }
max=$(tr ',' '\n' <<<"$buckets" | sort -n | tail -1)
for l in 1 "$layers"; do
  python3 -c "import json, sys; c = json.load(open(sys.argv[1])); c['num_hidden_layers'] = int(sys.argv[2])
json.dump(c, open(sys.argv[3], 'w'))" \
    "${CONFIGS:-bench/configs}/$model.json" "$l" "$W/$model-${l}l.json"
  [[ -d $W/$model-${l}l ]] ||
    "$new" model synth --config "$W/$model-${l}l.json" --seed 1 --dtype bf16 --out "$W/$model-${l}l" >/dev/null
done
"$new" circuit emit --hardware "$HW" --checkpoint "$W/$model-1l" --out "$W/o1" --max-ctx $((max + 64)) --decode-rungs 1 \
  --prefill-buckets "$buckets" >/dev/null
echo "=== $model 1 layer optest ($new)"
"$new" circuit optest --assets "$W/o1" --backend cuda | grep -E "FAIL|optest:"
for met in "$@"; do
  "$met" circuit emit --hardware "$HW" --checkpoint "$W/$model-${layers}l" --out "$W/a-$(basename "$met")" \
    --max-ctx $((max + 64)) --decode-rungs 1 --prefill-buckets "$buckets" >/dev/null
done
for round in $(seq 1 "${ROUNDS:-2}"); do
  order=("$@")
  ((round % 2 == 0)) && mapfile -t order < <(printf "%s\n" "$@" | tac)
  for met in "${order[@]}"; do
    name=$(basename "$met") dir="$W/p-$(basename "$met")-$round"
    "$met" circuit run --assets "$W/a-$name" --backend cuda --campaign "prefill:$buckets" --warmup 1 --repeats 5 \
      --perf-dir "$dir" >/dev/null
    python3 bench/campaign_walls.py "$dir" "$name r$round" | grep -v "^    "
  done
done
