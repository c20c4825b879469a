#!/usr/bin/env bash
# The unit tests and the serve tests under AddressSanitizer and UndefinedBehaviorSanitizer (CI runs
# this, scripts/test.sh): met and the test binaries of the clang build (scripts/build_san.sh,
# build-san/, which also holds the fuzz targets), then ctest on them. Any sanitizer report fails its
# test: UBSan does not recover, LeakSanitizer checks every exit. ASan's quarantine is kept small so
# the serve tests' RSS bounds measure the server, not it; their time limits are scaled there
# (MET_TEST_TIME_SCALE, tests/CMakeLists.txt). The scheduler's ThreadSanitizer test is ctest
# scheduler_tsan of the gcc build.
# Usage: scripts/sanitize.sh
set -euo pipefail
cd "$(dirname "$0")/.."
unit=(core device model avail planner estimate report kernels emit interp text serve)
serve=(serve_hostile serve_openai_client serve_metrics_promtool)
targets=(met)
for t in "${unit[@]}"; do targets+=("met_${t}_tests"); done
bash scripts/build_san.sh "${targets[@]}"
export ASAN_OPTIONS="quarantine_size_mb=16:detect_leaks=1:abort_on_error=1:halt_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
pattern="^($(IFS='|'; echo "${unit[*]}|${serve[*]}"))\$"
# A renamed test would drop out of the pattern without a word: the count must match.
found="$(ctest --test-dir build-san -N -R "$pattern" | sed -n 's/^Total Tests: //p')"
want=$(( ${#unit[@]} + ${#serve[@]} ))
[ "$found" = "$want" ] || { echo "FAIL: ctest in build-san lists $found of the $want sanitizer tests ($pattern)"; exit 1; }
ctest --test-dir build-san --output-on-failure -j "$(nproc)" -R "$pattern"
