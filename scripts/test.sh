#!/usr/bin/env bash
# Every test on a fresh machine: install, build, run ctest (unit tests, CLI bad-input cases, the
# golden check, the nvcc avail cross-check), then the fuzz targets briefly.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
bash scripts/fuzz.sh 20
