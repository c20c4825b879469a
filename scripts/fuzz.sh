#!/usr/bin/env bash
# Builds the libFuzzer targets in the clang build (scripts/build_san.sh, build-san/: ASan and UBSan,
# so undefined behaviour is a crash too) and runs each for N seconds (default 20), as many at once
# as there are cores, from its seeds (fuzz/seeds/<target>/, written by fuzz/make_seeds.py) and its
# own corpus. One input running past 10 s is a hang and fails the run, as a crash or a leak does.
# Usage: scripts/fuzz.sh [SECONDS [TARGET...]]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
shift || true
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  for src in fuzz/*_fuzz.cpp; do targets+=("$(basename "$src" .cpp)"); done
fi
bash scripts/build_san.sh "${targets[@]}"
# The packet seeds carry the packet ABI of the met that wrote them: refresh them from this build's
# met when there is one, so a changed registry or field list never leaves the target fuzzing only
# the header check.
if [ -x build/src/cli/met ]; then bash fuzz/make_packet_seeds.sh build/src/cli/met build-san/seeds-packet >/dev/null; fi
# fuzz_one NAME: runs one target; its verdict goes to build-san/NAME.verdict, its output to NAME.log.
fuzz_one() {
  local name="$1" target="build-san/fuzz/$1" corpus="build-san/corpus-$1" seeds="fuzz/seeds/${1%_fuzz}"
  [ "$name" = packet_fuzz ] && [ -d build-san/seeds-packet ] && seeds=build-san/seeds-packet
  mkdir -p "$corpus"
  if [ ! -d "$seeds" ]; then
    echo "FAIL: $name has no seeds ($seeds): run fuzz/make_seeds.py"
  elif ! "$target" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 "$corpus" "$seeds" >"build-san/$name.log" 2>&1; then
    echo "FAIL: $name (build-san/$name.log):"; tail -n 30 "build-san/$name.log"
  else
    echo "fuzzed $name for ${seconds}s"
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb|cov:" "build-san/$name.log" | tail -n 3
  fi
}
for name in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  fuzz_one "$name" >"build-san/$name.verdict" &
done
wait
failed=0
for name in "${targets[@]}"; do
  cat "build-san/$name.verdict"
  if grep -q '^FAIL' "build-san/$name.verdict"; then failed=1; fi
done
exit "$failed"
