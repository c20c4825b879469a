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
model="${name%-bf16}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$met" model synth --config "$here/configs/$model.json" --seed 1 --dtype bf16 --out "$work/$name" >/dev/null
"$met" circuit emit --hardware h200-sxm --checkpoint "$work/$name" --out "$work/assets" --max-ctx 256 \
  --decode-rungs 1,2,4 --prefill-buckets 64,128 >/dev/null 2>&1
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
# Sampling on the backend (the sample op): the cpu bodies give bit-identical logits whatever the
# slicing, so the GPU emit on the cpu bodies and a host-cpu emit draw the same tokens from the
# same seed.
"$met" circuit emit --hardware host-cpu --checkpoint "$work/$name" --out "$work/cpu-assets" --max-ctx 256 --threads 2 \
  --decode-rungs 1,2,4 --prefill-buckets 64,128 >/dev/null 2>&1
sampling=(--temperature 0.8 --top-p 0.9 --top-k 20 --seed 5 --max-tokens 12)
# shellcheck disable=SC2086
"$met" circuit run --assets "$work/assets" --backend cpu-oracle $prompts "${sampling[@]}" >"$work/gpu-sampled.txt" 2>/dev/null
# shellcheck disable=SC2086
"$met" circuit run --assets "$work/cpu-assets" --backend cpu --threads 2 $prompts "${sampling[@]}" >"$work/cpu-sampled.txt" 2>/dev/null
if ! cmp -s "$work/gpu-sampled.txt" "$work/cpu-sampled.txt"; then
  echo "sampled tokens differ between the h200-sxm packets and the host-cpu packets:"
  diff "$work/gpu-sampled.txt" "$work/cpu-sampled.txt"
  exit 1
fi
echo "sampled: $(wc -l <"$work/gpu-sampled.txt") sequences identical across the two emits"
