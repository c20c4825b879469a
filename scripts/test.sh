#!/usr/bin/env bash
# Every test on a fresh machine: install, build, run the fuzz targets briefly, then ctest (unit
# tests, CLI bad-input cases, the golden check, the nvcc avail cross-check, the oracle fixtures).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
bash scripts/fuzz.sh 20
ctest --test-dir build --output-on-failure -j "$(nproc)"
