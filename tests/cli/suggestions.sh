#!/usr/bin/env bash
# A newcomer's guesses: device aliases and Hugging Face ids of golden instances plan exactly like
# the canonical names (same report bytes, same digest); typos of a device, a model, a mode, a
# format and a flag get "did you mean" with the intended name and a non-zero exit; a stored config
# plans by its Hugging Face id; an id nothing knows says how to reach the Hub. Usage: suggestions.sh MET
set -uo pipefail
met="$1"
source "$(dirname "$0")/lib.sh"
# No Hub: an id the tree does not know must be refused, never looked up.
unset HF_ENDPOINT HF_TOKEN

# expect_error NAME NEEDLE ARGS...: exits non-zero, stderr has one `error:` line holding NEEDLE.
expect_error() {
  local name=$1 needle=$2
  shift 2
  local err rc
  err=$("$met" "$@" 2>&1 >/dev/null)
  rc=$?
  if [[ $rc -ne 0 && $err == error:* && $err == *"$needle"* ]]; then ok "$name"; else bad "$name" "rc=$rc" "$err"; fi
}

canonical=$("$met" circuit plan --hardware h200-sxm --model qwen3-8b)
guessed=$("$met" circuit plan --hardware h200 --model Qwen/Qwen3-8B)
if [[ -n $canonical && $canonical == "$guessed" ]]; then ok "h200 + Qwen/Qwen3-8B gives the h200-sxm + qwen3-8b report byte for byte"
else bad "alias + hf id report differs" "$(diff <(echo "$canonical") <(echo "$guessed") | head -5)"; fi
if [[ $(grep -i 'digest' <<<"$guessed" | head -1) == $(grep -i 'digest' <<<"$canonical" | head -1) && -n $(grep -i 'digest' <<<"$canonical" | head -1) ]]; then
  ok "same digest line"; else bad "digest line differs or is missing"; fi
upper=$("$met" circuit plan --hardware H200 --model QWEN3-8B --format plan)
lower=$("$met" circuit plan --hardware h200-sxm --model qwen3-8b --format plan)
if [[ -n $lower && $upper == "$lower" ]]; then ok "device and instance names are case-insensitive"; else bad "case-insensitive names"; fi
if "$met" circuit devices | grep 'h200, h200-141gb' >/dev/null; then ok "circuit devices shows aliases"; else bad "circuit devices lacks the h200 aliases"; fi
if "$met" circuit kernels --hardware mi355 >/dev/null; then ok "kernels takes an alias"; else bad "kernels --hardware mi355"; fi

expect_error "device typo" "did you mean 'h200-sxm'" circuit plan --hardware h200-sx --model qwen3-8b
expect_error "device with an extra suffix" "did you mean 'mi355x'" circuit plan --hardware mi355x-oam --model qwen3-8b
expect_error "unknown device still lists every device" "mi355x" circuit plan --hardware tpu-v5 --model qwen3-8b
expect_error "model typo" "did you mean 'qwen3-8b'" circuit plan --hardware h200 --model qwen3-8c
expect_error "hf id typo" "did you mean 'Qwen/Qwen3-8B'" circuit plan --hardware h200 --model Qwen/Qwen3-8C
expect_error "mode typo" "did you mean 'prefill'" circuit plan --hardware h200 --mode prefil --rows 8
expect_error "format typo" "did you mean 'json'" circuit plan --hardware h200 --format jsno
expect_error "dtype typo" "did you mean 'fp8-block128', 'fp8-e4m3' or 'fp8-modelopt'" model synth --config /dev/null --seed 1 --dtype fp8 --out /nonexistent
expect_error "kv-dtype typo" "--kv-dtype: unknown KV cache format 'fp9': did you mean 'fp8'" circuit plan --hardware h200 --kv-dtype fp9
expect_error "flag typo" "flag '--hardwre' is not known to \`met circuit plan\`: did you mean '--hardware'" circuit plan --hardwre h200-sxm
expect_error "flag typo with =" "'--model'" circuit plan --hardware h200 --modle=qwen3-8b
expect_error "subcommand typo" "did you mean 'plan'" circuit plna --hardware h200
expect_error "an id nothing stores names the Hub options" "pass --hub https://huggingface.co or set HF_ENDPOINT" \
  circuit plan --hardware h200 --model some-org/some-model
expect_error "--revision on a golden instance is refused" "has no revisions" circuit plan --hardware h200 --model Qwen/Qwen3-8B --revision v1

stored=$("$met" circuit plan --hardware h100 --model mistralai/Mistral-7B-Instruct-v0.3 2>&1)
if [[ $? -eq 0 && $stored == *"--model mistralai/Mistral-7B-Instruct-v0.3"* ]]; then ok "a stored config plans by its hf id, no network"
else bad "stored config" "$(head -3 <<<"$stored")"; fi

finish suggestions
