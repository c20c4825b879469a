#!/usr/bin/env bash
# Every test on a fresh machine: install; build met with gcc (build/) and with clang under ASan and
# UBSan (build-san/, which also holds the fuzz targets); run the fuzz targets briefly; ctest on the
# gcc build (unit tests, the scheduler under TSan, CLI bad-input cases, the golden check, the nvcc
# and HIP avail cross-checks, the oracle fixtures, the serve tests); then the unit and serve tests
# again under ASan and UBSan (scripts/sanitize.sh). Each stage prints its time.
set -euo pipefail
cd "$(dirname "$0")/.."
stage() {
  local start=$SECONDS
  "$@"
  echo "stage '$*': $((SECONDS - start)) s"
}
stage bash scripts/setup.sh
stage bash scripts/build.sh
stage bash scripts/build_san.sh
stage bash scripts/fuzz.sh 20
# The AMD stage first and verbose, so the log shows each AMD class's kernel list, the MFMA
# instructions per body and the cpu-oracle token comparison (docs/arch/kernels.md, AMD classes).
amd='^(hip_|amd_packets_)'
start=$SECONDS
ctest --test-dir build -R "$amd" -V -j "$(nproc)"
echo "AMD stage: $((SECONDS - start)) s"
stage ctest --test-dir build --output-on-failure -j "$(nproc)" -E "$amd"
stage bash scripts/sanitize.sh
