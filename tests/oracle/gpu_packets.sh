#!/usr/bin/env bash
# The packets emitted for a GPU class, checked where no GPU is: a tiny fixture's checkpoint is
# emitted for h200-sxm (132 streams, GPU slicing: head-unit qkv, split-KV decode, GEMM tiles), the
# opcode harness runs every distinct instruction on the cpu bodies twice (the harness checking
# itself), and the whole program runs on the cpu bodies with one worker per stream (cpu-oracle)
# against the transformers fixture, free-running and teacher-forced.
# Usage: gpu_packets.sh MET FIXTURE.json TOLERANCE
set -euo pipefail
met="$1"
fixture="$2"
tol="$3"
here="$(cd "$(dirname "$0")" && pwd)"
name="$(basename "$fixture" .json)"
# The fixture's name gives the checkpoint: <model>-bf16, or <model>-fp8-e4m3 (block-scaled fp8,
# which the h200-sxm emit runs W8A16: the gemv family and the mma.sync GEMM dequantising).
case "$name" in
  *-fp8-e4m3) model="${name%-fp8-e4m3}"; dtype=fp8-e4m3 ;;
  *) model="${name%-bf16}"; dtype=bf16 ;;
esac
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$met" model synth --config "$here/configs/$model.json" --seed 1 --dtype "$dtype" --out "$work/$name" >/dev/null
"$met" circuit emit --hardware h200-sxm --checkpoint "$work/$name" --out "$work/assets" --max-ctx 256 \
  --decode-rungs 1,2,4,8 --prefill-buckets 16,64,128 >/dev/null 2>&1
"$met" circuit optest --assets "$work/assets" --backend cpu-oracle | tail -1
prompts=$(python3 -c "import json,sys; print(' '.join('--prompt-ids ' + ','.join(map(str, c['prompt'])) for c in json.load(open(sys.argv[1]))['cases']))" "$fixture")
steps=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['steps'])" "$fixture")
# shellcheck disable=SC2086
"$met" circuit run --assets "$work/assets" --backend cpu-oracle $prompts --max-tokens "$steps" --logits-out "$work/met.json" >/dev/null
python3 "$here/compare.py" "$fixture" "$work/met.json" "$tol"
# shellcheck disable=SC2086
"$met" circuit run --assets "$work/assets" --backend cpu-oracle $prompts --max-tokens "$steps" --follow "$fixture" \
  --logits-out "$work/forced.json" >/dev/null
python3 "$here/compare.py" --forced "$fixture" "$work/forced.json" "$tol"
# Sampling on the backend (the sample op), on these packets: a draw restricted to one candidate
# (top-k 1, or a top-p mass below any single token's) must be the greedy token, whatever the
# temperature and seed; and a free draw must differ from greedy somewhere (a sample op that ignored
# its params would pass the first check alone). Exact, since each pair runs the same packets on the
# same bodies. (The h200-sxm and host-cpu emits are not compared here: their split-KV attention
# reduces in another order, so their logits differ by rounding and a draw near a boundary may
# legitimately differ.)
# shellcheck disable=SC2086
"$met" circuit run --assets "$work/assets" --backend cpu-oracle $prompts --max-tokens 12 >"$work/greedy.txt" 2>/dev/null
for restrict in "--top-k 1" "--top-p 0.000001"; do
  # shellcheck disable=SC2086
  "$met" circuit run --assets "$work/assets" --backend cpu-oracle $prompts --temperature 0.8 --seed 5 $restrict \
    --max-tokens 12 >"$work/restricted.txt" 2>/dev/null
  if ! cmp -s "$work/greedy.txt" "$work/restricted.txt"; then
    echo "a draw restricted by $restrict is not the greedy token:"
    diff "$work/greedy.txt" "$work/restricted.txt"
    exit 1
  fi
done
# shellcheck disable=SC2086
"$met" circuit run --assets "$work/assets" --backend cpu-oracle $prompts --temperature 1.5 --seed 5 --max-tokens 12 \
  >"$work/free.txt" 2>/dev/null
if cmp -s "$work/greedy.txt" "$work/free.txt"; then
  echo "a free draw at temperature 1.5 gave the greedy tokens for every sequence: the sample op ignores its params"
  exit 1
fi
[[ $(wc -l <"$work/greedy.txt") -eq $(wc -l <"$work/free.txt") ]] || { echo "sampled and greedy runs print different sequence counts"; exit 1; }
echo "sampled: $(wc -l <"$work/greedy.txt") sequences; top-k 1 and top-p 1e-6 draws are greedy, free draws are not"
