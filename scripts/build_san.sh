#!/usr/bin/env bash
# Configures and builds the clang build in build-san/: AddressSanitizer and UndefinedBehaviorSanitizer
# in everything (MET_SANITIZE; undefined behaviour stops the program), the libFuzzer targets
# (MET_FUZZ; the layers they reach carry coverage instrumentation, which the test binaries link
# without libFuzzer) and the test binaries, at -O1 with line tables only. One build serves
# scripts/fuzz.sh and scripts/sanitize.sh. Arguments name targets (default: everything).
set -euo pipefail
cd "$(dirname "$0")/.."
CC=clang CXX=clang++ cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" \
  -DMET_SANITIZE=ON -DMET_FUZZ=ON -DMET_BUILD_BENCH=OFF -DMET_NVCC_CHECK=OFF -DMET_HIP_CHECK=OFF -DMET_CUDA_INTERP=OFF >/dev/null
if (($#)); then
  cmake --build build-san -j "$(nproc)" --target "$@"
else
  cmake --build build-san -j "$(nproc)"
fi
