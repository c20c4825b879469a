#!/usr/bin/env bash
# Configures and builds met into build/ (Release, warnings as errors). Arguments name targets
# (default: everything).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMET_WERROR=ON >/dev/null
if (($#)); then
  cmake --build build -j "$(nproc)" --target "$@"
else
  cmake --build build -j "$(nproc)"
fi
