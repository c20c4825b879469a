#!/usr/bin/env bash
# Tensor-parallel packets emitted for a GPU class, checked where no GPU is: a tiny fixture's
# checkpoint is emitted for h200-sxm at --tp 1 and at each given degree (132 streams a rank, the
# collectives cut into many slices, row-parallel o and down as gemv_f32 / gemm_f32), and every
# emit runs on the cpu bodies (cpu-oracle: N simulated ranks, slice s of a collective meeting slice
# s of the other ranks). The greedy tokens of each --tp N emit must equal the --tp 1 emit's, prompt
# for prompt: this checks the GPU emit's TP slicing, placement and pairing on the cpu bodies, never
# the hopper collective bodies themselves (no machine here runs them).
# Usage: gpu_tp_packets.sh MET FIXTURE.json VOCAB TP...   (VOCAB: the config's vocab_size, or "-"
# to keep it; a larger vocabulary gives the decode rows' gather column parts)
set -euo pipefail
met="$1"
fixture="$2"
vocab="$3"
shift 3
here="$(cd "$(dirname "$0")" && pwd)"
name="$(basename "$fixture" .json)"
dtype="${name##*-}"  # the checkpoint's format: the fixture name's last word (bf16, mxfp4)
model="${name%-"$dtype"}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -c "
import json, sys
c = json.load(open(sys.argv[1]))
if sys.argv[2] != '-': c['vocab_size'] = int(sys.argv[2])
json.dump(c, open(sys.argv[3], 'w'), indent=2)" "$here/configs/$model.json" "$vocab" "$work/config.json"
"$met" model synth --config "$work/config.json" --seed 1 --dtype "$dtype" --out "$work/ckpt" >/dev/null 2>&1
prompts=$(python3 -c "import json,sys; print(' '.join('--prompt-ids ' + ','.join(map(str, c['prompt'])) for c in json.load(open(sys.argv[1]))['cases']))" "$fixture")
steps=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['steps'])" "$fixture")
cases=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['cases']))" "$fixture")
emit_flags=(--hardware h200-sxm --max-ctx 256 --decode-rungs 1,2,4,8 --prefill-buckets 64,128)
failed=0
for tp in 1 "$@"; do
  if ! "$met" circuit emit --checkpoint "$work/ckpt" --out "$work/tp$tp" --tp "$tp" "${emit_flags[@]}" >"$work/tp$tp.emit.log" 2>&1; then
    echo "FAIL $name: the h200-sxm emit at --tp $tp was refused"
    sed 's/^/    /' "$work/tp$tp.emit.log"
    exit 1
  fi
  # shellcheck disable=SC2086
  "$met" circuit run --assets "$work/tp$tp" --backend cpu-oracle $prompts --max-tokens "$steps" >"$work/tp$tp.txt" 2>"$work/tp$tp.run.log" || {
    echo "FAIL $name: the h200-sxm --tp $tp emit did not run on cpu-oracle"
    sed 's/^/    /' "$work/tp$tp.run.log"
    exit 1
  }
  if [[ $tp == 1 ]]; then
    if [[ $(wc -l <"$work/tp1.txt") -ne $cases ]]; then
      echo "FAIL $name: the --tp 1 emit printed $(wc -l <"$work/tp1.txt") sequences for $cases prompts"
      exit 1
    fi
    continue
  fi
  if cmp -s "$work/tp1.txt" "$work/tp$tp.txt"; then
    echo "PASS $name (vocab $vocab) at --tp $tp: $cases sequences x $steps greedy tokens equal the --tp 1 emit's"
  else
    echo "FAIL $name (vocab $vocab) at --tp $tp: greedy tokens differ from the --tp 1 emit's"
    diff "$work/tp1.txt" "$work/tp$tp.txt" | head -20
    failed=1
  fi
done
exit "$failed"
