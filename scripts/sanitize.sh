#!/usr/bin/env bash
# The unit tests and the serve tests under AddressSanitizer and UndefinedBehaviorSanitizer: builds
# met and the test binaries in build-san/ (clang, -O1, MET_SANITIZE) and runs them. Not yet in CI:
# the full build takes about 30 minutes on two cores, and serve_openai_client needs a longer
# timeout under ASan.
# Any sanitizer report fails its test (UBSan does not recover; LeakSanitizer checks every exit).
# ASan's quarantine is kept small so the serve tests' RSS bounds measure the server, not it.
# Usage: scripts/sanitize.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CC=clang CXX=clang++ cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" \
  -DMET_SANITIZE=ON -DMET_BUILD_BENCH=OFF -DMET_NVCC_CHECK=OFF -DMET_CUDA_INTERP=OFF >/dev/null
unit=(core tree device model avail planner estimate report kernels emit interp text serve)
targets=(met)
for t in "${unit[@]}"; do targets+=("met_${t}_tests"); done
cmake --build build-san -j "$(nproc)" --target "${targets[@]}"
export ASAN_OPTIONS="quarantine_size_mb=16:detect_leaks=1:abort_on_error=1:halt_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
pattern="^($(IFS='|'; echo "${unit[*]}"))\$|^serve_(hostile|openai_client|metrics_promtool)\$"
ctest --test-dir build-san --output-on-failure -j "$(nproc)" -R "$pattern"
