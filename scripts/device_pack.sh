#!/usr/bin/env bash
# Packs what scripts/h200_bringup.sh needs on the device machine (which has none of our Debian
# -dev packages) into .device/ (ignored by git; name it in the device call's carry): the met
# binary built here, with the nvcc-built hopper interpreter inside, and its shared libraries.
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
du -sh "$root/.device"/*
