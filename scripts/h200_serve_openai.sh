#!/usr/bin/env bash
# The official OpenAI client against `met serve --backend cuda` on the device machine: the tiny
# Gemma-4 (Gemma's tokenizer, Google's Gemma-4 chat template) emitted for this GPU's device and
# served on cuda, then tests/serve/client/gemma4_chat.mjs (chat, streaming, the served prompts
# against jinja2's) through tests/serve/server_test.sh gemma4, as ctest runs it on the cpu.
# The device image has no node and no npm tree: `SOAK=1 bash scripts/device_pack.sh` packs met and
# its libraries, the tokenizer files (.device/serve.tar.xz), node (.device/node.xz) and the openai
# client (.device/client-node_modules.tar.xz). Run from the repository root, carrying those.
#   bash scripts/h200_serve_openai.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
work="${WORK:-/tmp/metopenai}"
mkdir -p "$work/bin"
tar xJf .device/libs.tar.xz -C "$work"
export LD_LIBRARY_PATH="$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -x .device/met ] || { xz -dkf .device/met.xz && chmod +x .device/met; }
xz -dc .device/node.xz >"$work/bin/node" && chmod +x "$work/bin/node"
export PATH="$work/bin:$PATH"
[ -d tests/serve/client/node_modules/openai ] || tar xJf .device/client-node_modules.tar.xz -C tests/serve/client
[ -d .device/serve ] || tar xJf .device/serve.tar.xz -C .device
export GEMMA_TOKENIZER_DIR="$root/.device/serve/gemma"
hw="$(.device/met circuit probe --identify | head -n 1)"
[ -n "$hw" ] || { echo "error: met names no registry device for this GPU"; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "node $(node --version); emit device $hw; met serve --backend cuda"
MET_SERVE_HARDWARE="$hw" MET_SERVE_BACKEND=cuda MET_TEST_TIME_SCALE="${MET_TEST_TIME_SCALE:-3}" \
  bash tests/serve/server_test.sh "$root/.device/met" gemma4
