#!/usr/bin/env bash
# Time to first token of `met serve --backend cuda` under a burst, on the device machine: a real
# config synthesised (`met model synth --seed 1`, bf16) with the real Qwen3 tokenizer and chat
# template, emitted for h200-sxm with SLOTS decode slots, served on loopback, and
# bench/serve_ttft.py sends ROUNDS rounds of CLIENTS simultaneous streaming chats of TOKENS tokens
# each (the first round is the warm-up). Then /metrics must show the running and waiting gauges
# back at 0, and the server must drain and exit 0 on SIGTERM.
#
#   bash scripts/h200_serve_ttft.sh [CONFIG]   (CONFIG: a bench/configs name, default qwen3-1.7b)
#
# Needs what `SERVE=1 bash scripts/device_pack.sh` packs into .device (met, its libraries and the
# Qwen3 tokenizer files); run from the repository root, carrying .device. CLIENTS (32), TOKENS (64),
# ROUNDS (4), SLOTS (32), MAX_CTX (1024) and BUCKETS (64,256,1024) may be set. Output: the
# benchmark's lines, also in OUT/serve-ttft-CONFIG.txt when OUT is set; exit non-zero on any failure.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
config="${1:-qwen3-1.7b}"
[[ -f "bench/configs/$config.json" ]] || { echo "h200_serve_ttft: bench/configs/$config.json does not exist"; exit 2; }
clients="${CLIENTS:-32}" tokens="${TOKENS:-64}" rounds="${ROUNDS:-4}" slots="${SLOTS:-32}"
work="${WORK:-/tmp/metttft}"
mkdir -p "$work"
tar xJf .device/libs.tar.xz -C "$work"
export LD_LIBRARY_PATH="$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[[ -d .device/serve ]] || tar xJf .device/serve.tar.xz -C .device
met="$root/.device/met"
HW="${HW:-$("$met" circuit probe --identify | head -n 1)}"  # the registry device of this GPU (h200-sxm, h100-sxm, ...)
[[ -n $HW ]] || { echo "scripts/h200_serve_ttft.sh: met names no registry device for this GPU"; exit 1; }
out="${OUT:-$work}/serve-ttft-$config.txt"
exec > >(tee "$out") 2>&1

# Decode rungs: powers of two up to SLOTS, and SLOTS itself.
rungs="" r=1
while (( r < slots )); do rungs+="$r,"; r=$((r * 2)); done
rungs+="$slots"
ck="$work/$config"
if [[ ! -f "$ck/model.safetensors.index.json" && ! -f "$ck/model.safetensors" ]]; then
  "$met" model synth --config "bench/configs/$config.json" --seed 1 --dtype bf16 --out "$ck" >/dev/null
fi
cp .device/serve/tokenizer.json .device/serve/tokenizer_config.json "$ck/"
printf '{"bos_token_id": 151643, "eos_token_id": [151645, 151643]}\n' >"$ck/generation_config.json"
"$met" circuit emit --hardware "$HW" --checkpoint "$ck" --out "$work/assets" --max-ctx "${MAX_CTX:-1024}" \
  --decode-rungs "$rungs" --prefill-buckets "${BUCKETS:-64,256,1024}" >/dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "h200_serve_ttft: $config, $slots slots (decode rungs $rungs), prefill buckets ${BUCKETS:-64,256,1024}, max-ctx ${MAX_CTX:-1024}"

"$met" serve --assets "$work/assets" --backend cuda --host 127.0.0.1 --port 0 >"$work/serve.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
# shellcheck source=../tests/serve/serve_fixture.sh
source tests/serve/serve_fixture.sh  # await_port
await_port "$pid" "$work/serve.log" 60

rc=0
python3 bench/serve_ttft.py "http://127.0.0.1:$port" "$clients" "$tokens" "$rounds" || rc=1
# The gauges after the burst: every request finished, none running or waiting.
python3 - "$port" <<'EOF' || rc=1
import re, sys, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10).read().decode()
bad = 0
for name in ("vllm:num_requests_running", "vllm:num_requests_waiting"):
    vals = [float(v) for v in re.findall(rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)$", text, re.M)]
    print(f"{name}: {vals}")
    bad += not vals or any(v != 0 for v in vals)
sys.exit(1 if bad else 0)
EOF
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
trap - EXIT
if [[ $status -ne 0 ]]; then echo "FAIL: met serve exited $status on SIGTERM"; rc=1; fi
echo "server log: $(wc -l <"$work/serve.log") lines; lines naming an error or fault:"
grep -inE 'error|fault|abort|exception|terminate' "$work/serve.log" | head -n 20 || echo "  (none)"
echo "h200_serve_ttft: rc $rc"
exit "$rc"
