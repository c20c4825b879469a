#!/usr/bin/env bash
# Every test on a fresh machine: install, build, run the fuzz targets briefly, then ctest (unit
# tests, CLI bad-input cases, the golden check, the nvcc and HIP avail cross-checks, the oracle fixtures).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
bash scripts/fuzz.sh 20
# The AMD stage first and verbose, so the log shows each AMD class's kernel list, the MFMA
# instructions per body and the cpu-oracle token comparison (docs/arch/kernels.md, AMD classes).
amd='^(hip_|amd_packets_)'
start=$SECONDS
ctest --test-dir build -R "$amd" -V -j "$(nproc)"
echo "AMD stage: $((SECONDS - start)) s"
ctest --test-dir build --output-on-failure -j "$(nproc)" -E "$amd"
