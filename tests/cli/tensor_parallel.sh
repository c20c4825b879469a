#!/usr/bin/env bash
# `met circuit emit --tp N` and `met circuit run --backend cpu` through the real binary: the TP
# assets say their degree (model.rank<r>.pkt beside model.pkt, build.json "tp"), run without any
# flag on the cpu backend and print TP=1's greedy ids; bad degrees, and the cuda backend on the cpu
# class's TP assets, are refused with one located `error:` line. Usage: tensor_parallel.sh MET_BINARY
set -uo pipefail

met=${1:?usage: tensor_parallel.sh MET_BINARY}
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/tests/cli/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/met-tp.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$met" model synth --config "$root/tests/oracle/configs/tiny-llama3-kv8.json" --seed 5 --out "$work/kv8" >/dev/null 2>&1 ||
  { echo "setup: synth failed"; exit 1; }
"$met" model synth --config "$root/tests/oracle/configs/tiny-llama3.json" --seed 5 --out "$work/kv2" >/dev/null 2>&1 ||
  { echo "setup: synth failed"; exit 1; }
# 12 heads over 3 KV heads: 4 ranks split the heads but cannot share 3 KV heads equally.
python3 - "$root/tests/oracle/configs/tiny-llama3.json" "$work/kv3.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(num_attention_heads=12, num_key_value_heads=3, head_dim=32)
json.dump(c, open(sys.argv[2], "w"), indent=2)
PY
"$met" model synth --config "$work/kv3.json" --seed 5 --out "$work/kv3" >/dev/null 2>&1 || { echo "setup: synth failed"; exit 1; }

emit() {  # emit DIR TP CKPT
  "$met" circuit emit --hardware host-cpu --checkpoint "$3" --out "$1" --tp "$2" --max-ctx 64 --decode-rungs 1 \
    --prefill-buckets 8 2>"$work/emit.err"
}
run() {  # run ASSETS [--backend B]: the generated ids
  "$met" circuit run --assets "$1" --prompt-ids 11,200,3,47,5 --max-tokens 24 "${@:2}" 2>"$work/run.err" | tail -1
}

emit "$work/tp1" 1 "$work/kv8" || { echo "setup: emit --tp 1 failed: $(cat "$work/emit.err")"; exit 1; }
want=$(run "$work/tp1")
for tp in 2 8; do
  name="emit --tp $tp writes $((tp - 1)) rank file(s) and run --backend cpu prints TP=1's ids"
  if ! emit "$work/tp$tp" "$tp" "$work/kv8"; then
    bad "$name" "$(cat "$work/emit.err")"
    continue
  fi
  files=$(ls "$work/tp$tp" | grep -c '^model\.rank[0-9]*\.pkt$')
  got=$(run "$work/tp$tp" --backend cpu)
  if [[ $files -eq $((tp - 1)) && -n $want && $got == "$want" ]] &&
    grep -q "\"tp\": $tp" "$work/tp$tp/build.json"; then
    ok "$name"
  else
    bad "$name" "rank files: $files" "want: $want" "got:  $got" "$(cat "$work/run.err")"
  fi
done

# optest on TP assets: every instruction of rank 0 alone, except the collectives, which meet their
# peers' slices and are listed as not run (a harness that runs one alone would compare garbage).
name="optest on TP assets lists the collectives as not run and passes the rest"
out=$("$met" circuit optest --assets "$work/tp2" --backend cpu 2>&1)
rc=$?
if [[ $rc -eq 0 ]] && grep -q '^SKIP  allreduce_residual ' <<<"$out" && grep -q '^SKIP  allgather_cols ' <<<"$out" &&
  grep -q '^PASS .* gemv_f32 ' <<<"$out" && grep -q '^optest: [0-9]* cases, 0 failed, [0-9]* not run ' <<<"$out"; then
  ok "$name"
else
  bad "$name" "exit $rc" "$out"
fi

refused() {  # refused NAME PATTERN CMD...: non-zero exit, one `error:` line matching PATTERN, no --out left
  local name=$1 pattern=$2
  shift 2
  local out
  out=$("$@" 2>&1 >/dev/null)
  local rc=$?
  if [[ $rc -ne 0 && $(grep -c '^error: ' <<<"$out") -eq 1 ]] && grep -q -- "$pattern" <<<"$out"; then
    ok "$name"
  else
    bad "$name" "exit $rc" "$out"
  fi
}

# 2 KV heads at TP 4: each rank holds the one its query heads read, and the ids stay TP=1's.
name="emit --tp 4 with 2 KV heads shares each KV head between 2 ranks and run prints TP=1's ids"
if emit "$work/kv2-tp1" 1 "$work/kv2" && emit "$work/kv2-tp4" 4 "$work/kv2"; then
  want2=$(run "$work/kv2-tp1")
  got2=$(run "$work/kv2-tp4" --backend cpu)
  if [[ -n $want2 && $got2 == "$want2" ]]; then ok "$name"; else bad "$name" "want: $want2" "got:  $got2" "$(cat "$work/run.err")"; fi
else
  bad "$name" "$(cat "$work/emit.err")"
fi
refused "--tp 4 with 3 KV heads names the config key" \
  "kv3/config.json: --tp 4: num_key_value_heads = 3 is fewer than the 4 ranks and does not divide them" \
  "$met" circuit emit --hardware host-cpu --checkpoint "$work/kv3" --out "$work/bad4" --tp 4
[[ -e $work/bad4 ]] && bad "--tp 4 leaves no --out" "$work/bad4 exists"
refused "--tp 3 is not a degree" "--tp 3 is not one of 1, 2, 4, 8" \
  "$met" circuit emit --hardware host-cpu --checkpoint "$work/kv8" --out "$work/bad3" --tp 3
refused "--tp 2 on a class without the collective bodies is refused" \
  "every tensor-parallel program runs 'allreduce_residual', which class 'ampere' has no body for" \
  "$met" circuit emit --hardware a100-sxm-80g --checkpoint "$work/kv8" --out "$work/badgpu" --tp 2
refused "--backend cuda refuses cpu-class TP assets by their class" "were emitted for class 'cpu'; the cuda backend runs the hopper interpreter" \
  "$met" circuit run --assets "$work/tp2" --backend cuda --prompt-ids 1,2 --max-tokens 1
finish tensor_parallel
