#!/usr/bin/env bash
# `met serve --backend cuda` on the H200 against the same packets on the cpu bodies, for one of two
# tiny checkpoints with real tokenizers and chat templates, emitted for h200-sxm and served twice
# (cuda and cpu-oracle); tests/serve/backends_agree.py then sends both the same concurrent chat
# requests over HTTP.
#   MODEL=qwen3 (default): bench/configs/serve-tiny-qwen3.json (head dim 32, Qwen3's real
#     151936-token vocabulary), the real Qwen3 tokenizer and chat template.
#   MODEL=gemma4: tests/serve/client/tiny-gemma4-vocab262144.json (the tiny Gemma-4 the cpu serve
#     tests chat with: sliding and full layers, 64- and 128-dim heads, k = v on full layers, the final
#     soft cap, Gemma's 262144-token vocabulary), the Gemma tokenizer and Google's Gemma-4 chat
#     template (tests/serve/serve_fixture.sh says where each comes from).
#
#   bash scripts/h200_serve_check.sh        (on the device machine, after scripts/device_pack.sh)
#   SERVE_A=cpu-oracle bash scripts/h200_serve_check.sh   (anywhere: checks the script itself)
#
# Inputs: MET (default .device/met, its libraries in .device/libs.tar.xz) and the tokenizer files
# (TOKENIZER_DIR; default .device/serve for qwen3, .device/serve/gemma for gemma4: device_pack.sh
# copies them from the npm oracle packages).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
if [[ -f .device/libs.tar.xz ]]; then
  tar xJf .device/libs.tar.xz -C "$work" && export LD_LIBRARY_PATH="$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
MET="${MET:-$root/.device/met}"
# The emit's device: any hopper one serves the same packets (this check compares answers, it files
# no timings), and the cpu-oracle form runs where there is no GPU to ask.
HW="${HW:-h200-sxm}"
# SERVE=1 or SOAK=1 packs carry the tokenizer files compressed.
[[ -d .device/serve || ! -f .device/serve.tar.xz ]] || tar xJf .device/serve.tar.xz -C .device
model="${MODEL:-qwen3}"
case "$model" in
  qwen3) tok="${TOKENIZER_DIR:-$root/.device/serve}" config=bench/configs/serve-tiny-qwen3.json name=serve-tiny-qwen3 ;;
  gemma4) tok="${TOKENIZER_DIR:-$root/.device/serve/gemma}" config=tests/serve/client/tiny-gemma4-vocab262144.json
    name=serve-tiny-gemma4 ;;
  *) echo "error: MODEL=$model: expected qwen3 or gemma4"; exit 2 ;;
esac
for need in "$MET" "$tok/tokenizer.json" "$tok/tokenizer_config.json"; do
  [[ -e "$need" ]] || { echo "error: $need is missing (run scripts/device_pack.sh)"; exit 1; }
done

ck="$work/$name"
"$MET" model synth --config "$config" --seed 1 --dtype bf16 --out "$ck" >/dev/null
cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$ck/"
if [[ $model == gemma4 ]]; then
  # chat_template.jinja wins over tokenizer_config.json's (Gemma-3's) chat_template, as in transformers.
  cp tests/serve/templates/google--gemma-4-31B-it/chat_template.jinja "$ck/"
else
  printf '{"bos_token_id": 151643, "eos_token_id": [151645, 151643]}\n' >"$ck/generation_config.json"
fi
"$MET" circuit emit --hardware "$HW" --checkpoint "$ck" --out "$work/assets" --max-ctx 512 \
  --decode-rungs 1,2,4,8 --prefill-buckets 64,256

# start BACKEND LOG VAR: starts a server on a free port and sets VAR to its URL. It runs in this
# shell (never inside $(...)), so the server's pid reaches `pids` and the cleanup stops it.
start() {
  "$MET" serve --assets "$work/assets" --backend "$1" --port 0 --queue 16 >"$2" 2>&1 &
  pids+=($!)
  local port=""
  for _ in $(seq 1 600); do
    # The background job opens the log after its fork: on a loaded machine the first reads can come first.
    [[ -e "$2" ]] && port="$(sed -n 's/^serve: listening on http:\/\/127\.0\.0\.1:\([0-9]*\)$/\1/p' "$2")"
    [[ -n "$port" ]] && break
    kill -0 "${pids[-1]}" 2>/dev/null || { echo "error: met serve --backend $1 exited:" >&2; cat "$2" >&2; return 1; }
    sleep 0.1
  done
  [[ -n "$port" ]] || { echo "error: met serve --backend $1 did not report its port" >&2; return 1; }
  printf -v "$3" '%s' "http://127.0.0.1:$port"
}
url_a="" url_b=""
start "${SERVE_A:-cuda}" "$work/a.log" url_a || exit 1
start cpu-oracle "$work/b.log" url_b || exit 1
echo "A: ${SERVE_A:-cuda} at $url_a; B: cpu-oracle at $url_b"
rc=0
python3 tests/serve/backends_agree.py "$url_a" "$url_b" "$name" || rc=1
echo "--- server A log"; cat "$work/a.log"
exit $rc
