#!/usr/bin/env bash
# CI side of the transformers oracle: rebuilds the checkpoint a fixture was made from with
# `met model synth` (same config, seed and dtype), emits it for host-cpu, runs the fixture's prompts
# on the CPU backend and compares tokens and logits with tests/oracle/compare.py.
# Usage: check.sh MET FIXTURE.json TOLERANCE [EMIT FLAGS ...]  (e.g. --kv-dtype fp8)
set -euo pipefail
met="$1"
fixture="$2"
tol="$3"
shift 3
emit_flags=("$@")
here="$(cd "$(dirname "$0")" && pwd)"
name="$(basename "$fixture" .json)"           # tiny-llama3-bf16, tiny-qwen3-fp8-e4m3
model="${name%-bf16}"; model="${model%-fp8-e4m3}"; model="${model%-mxfp4}"
dtype="${name#"$model"-}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$met" model synth --config "$here/configs/$model.json" --seed 1 --dtype "$dtype" --out "$work/$name" >/dev/null
"$met" circuit emit --hardware host-cpu --checkpoint "$work/$name" --out "$work/assets" --max-ctx 256 --threads 2 \
  ${emit_flags[@]+"${emit_flags[@]}"} >/dev/null
# MET_EXPECT_KV_RING=R: the emit made the sliding-window layers' caches rings of R rows (build.json).
if [[ -n "${MET_EXPECT_KV_RING:-}" ]]; then
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])).get('kv_ring', 0); sys.exit(0 if r == int(sys.argv[2]) else f'kv_ring {r}, expected {sys.argv[2]}')" \
    "$work/assets/build.json" "$MET_EXPECT_KV_RING"
fi
prompts=$(python3 -c "import json,sys; print(' '.join('--prompt-ids ' + ','.join(map(str, c['prompt'])) for c in json.load(open(sys.argv[1]))['cases']))" "$fixture")
steps=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['steps'])" "$fixture")
# shellcheck disable=SC2086
"$met" circuit run --assets "$work/assets" --backend cpu $prompts --max-tokens "$steps" --threads 2 --logits-out "$work/met.json" >/dev/null
python3 "$here/compare.py" "$fixture" "$work/met.json" "$tol"
# The same with teacher forcing (met fed transformers' tokens): every step's logits and, at the
# steps that are not near-ties, the argmax.
# shellcheck disable=SC2086
"$met" circuit run --assets "$work/assets" --backend cpu $prompts --max-tokens "$steps" --threads 2 --follow "$fixture" \
  --logits-out "$work/forced.json" >/dev/null
python3 "$here/compare.py" --forced "$fixture" "$work/forced.json" "$tol"
