#!/usr/bin/env bash
# The cuda soak of met serve on the device machine: bench/serve_soak.sh with --backend cuda (the
# tiny Qwen3 emitted for h200-sxm), for SECONDS (default 300). The device image has no node and no
# npm tree, so they travel in .device: `SOAK=1 bash scripts/device_pack.sh` packs met and its
# libraries, the Qwen3 tokenizer files (.device/serve), node (.device/node.xz) and the openai
# client (.device/client-node_modules.tar.xz). Run from the repository root, carrying .device.
# Output: the soak's own, also written to OUT/serve-soak-cuda.txt when OUT is set.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
seconds="${1:-300}"
work="${WORK:-/tmp/metsoak}"
mkdir -p "$work/bin" "$work/lib"
tar xJf .device/libs.tar.xz -C "$work"
export LD_LIBRARY_PATH="$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
xz -dc .device/node.xz >"$work/bin/node" && chmod +x "$work/bin/node"
export PATH="$work/bin:$PATH"
[ -d tests/serve/client/node_modules/openai ] || tar xJf .device/client-node_modules.tar.xz -C tests/serve/client
[ -d .device/serve ] || tar xJf .device/serve.tar.xz -C .device
export QWEN_TOKENIZER_DIR="$root/.device/serve"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "node $(node --version)"
out="${OUT:-$work}/serve-soak-cuda.txt"
set +e
bash bench/serve_soak.sh .device/met "$seconds" cuda 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
exit "$rc"
