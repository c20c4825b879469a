#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (build-fuzz/) and runs each for N seconds (default 20).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMET_FUZZ=ON \
  -DMET_BUILD_TESTS=OFF -DMET_BUILD_BENCH=OFF -DMET_NVCC_CHECK=OFF >/dev/null
targets=()
for src in fuzz/*_fuzz.cpp; do targets+=("$(basename "$src" .cpp)"); done
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]}"
for name in "${targets[@]}"; do
  target="build-fuzz/fuzz/$name"
  corpus="build-fuzz/corpus-$name"
  mkdir -p "$corpus"
  seeds="fuzz/seeds/${name%_fuzz}"
  echo "fuzzing $name for ${seconds}s"
  if [ -d "$seeds" ]; then
    "$target" -max_total_time="$seconds" -print_final_stats=1 "$corpus" "$seeds" 2>&1 | tail -n 3
  else
    "$target" -max_total_time="$seconds" -print_final_stats=1 "$corpus" 2>&1 | tail -n 3
  fi
done
