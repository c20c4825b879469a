#!/usr/bin/env bash
# Installs what met needs to build and test on a fresh Debian 12 machine (as root or via sudo).
# Idempotent: packages already present are left as they are.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config python3
  libtomlplusplus-dev libcli11-dev libfmt-dev librange-v3-dev nlohmann-json3-dev doctest-dev libssl-dev
  clang libclang-rt-14-dev binutils
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
