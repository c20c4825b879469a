#!/usr/bin/env bash
# The plan digest names the program, not how the model was named: Llama-3.1-8B-Instruct planned by
# its registry id, from its checkpoint's config.json, and with --precision declared is one plan
# with one digest (the report's model line still says which). A different model, or the same model
# in another mode, has another digest, so the comparison can fail.
# Usage: plan_digest.sh MET
set -uo pipefail
met="$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
source "$(dirname "$0")/lib.sh"

digest() {  # ARGS...: the report's plan digest line
  "$met" circuit plan --hardware h200-sxm "$@" 2>&1 | sed -n 's/^| plan digest | \([0-9a-f]*\) |$/\1/p'
}
by_id=$(digest --model llama-3.1-8b-instruct)
by_checkpoint=$(digest --checkpoint "$root/kernels/circuits/configs/meta-llama--Llama-3.1-8B-Instruct")
declared=$(digest --model llama-3.1-8b-instruct --precision declared)
other=$(digest --model llama-3.2-1b-instruct)
prefill=$(digest --model llama-3.1-8b-instruct --mode prefill --rows 4096)

[[ ${#by_id} -eq 64 ]] && ok "the report prints a digest ($by_id)" || bad "the report prints a digest" "'$by_id'"
[[ $by_checkpoint == "$by_id" ]] && ok "--checkpoint plans the same program as --model" ||
  bad "--checkpoint plans the same program as --model" "$by_checkpoint != $by_id"
[[ $declared == "$by_id" ]] && ok "--precision declared plans the same program (bf16 as declared)" ||
  bad "--precision declared plans the same program" "$declared != $by_id"
[[ ${#other} -eq 64 && $other != "$by_id" ]] && ok "another model has another digest" || bad "another model has another digest" "$other"
[[ ${#prefill} -eq 64 && $prefill != "$by_id" ]] && ok "another mode has another digest" || bad "another mode has another digest" "$prefill"
finish plan_digest
