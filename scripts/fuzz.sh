#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (build-fuzz/) and runs each for N seconds (default 20),
# from its seeds (fuzz/seeds/<target>/, written by fuzz/make_seeds.py) and its own corpus. One
# input running past 10 s is a hang and fails the run, as a crash or a leak does.
# Usage: scripts/fuzz.sh [SECONDS [TARGET...]]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
shift || true
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMET_FUZZ=ON \
  -DMET_BUILD_TESTS=OFF -DMET_BUILD_BENCH=OFF -DMET_NVCC_CHECK=OFF -DMET_CUDA_INTERP=OFF >/dev/null
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  for src in fuzz/*_fuzz.cpp; do targets+=("$(basename "$src" .cpp)"); done
fi
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]}"
# The packet seeds carry the packet ABI of the met that wrote them: refresh them from this build's
# met when there is one, so a changed registry or field list never leaves the target fuzzing only
# the header check.
if [ -x build/src/cli/met ]; then bash fuzz/make_packet_seeds.sh build/src/cli/met build-fuzz/seeds-packet >/dev/null; fi
failed=0
for name in "${targets[@]}"; do
  target="build-fuzz/fuzz/$name"
  corpus="build-fuzz/corpus-$name"
  seeds="fuzz/seeds/${name%_fuzz}"
  [ "$name" = packet_fuzz ] && [ -d build-fuzz/seeds-packet ] && seeds=build-fuzz/seeds-packet
  mkdir -p "$corpus"
  [ -d "$seeds" ] || { echo "FAIL: $name has no seeds ($seeds): run fuzz/make_seeds.py"; failed=1; continue; }
  echo "fuzzing $name for ${seconds}s"
  if ! "$target" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 "$corpus" "$seeds" >"build-fuzz/$name.log" 2>&1; then
    echo "FAIL: $name (build-fuzz/$name.log):"; tail -n 30 "build-fuzz/$name.log"; failed=1; continue
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb|cov:" "build-fuzz/$name.log" | tail -n 3
done
exit "$failed"
