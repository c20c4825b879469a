#!/usr/bin/env bash
# Writes the packet fuzz target's seeds (fuzz/seeds/packet/, or DIR) from emits of the tiny oracle
# models, so they carry the packet ABI (version and hash) of the met that wrote them: a cpu emit
# on one thread and a hopper emit on 132 streams of each. scripts/fuzz.sh runs this with the met of
# build/ before fuzzing, so the target always starts from packets its reader accepts.
# Usage: fuzz/make_packet_seeds.sh MET [DIR]
set -euo pipefail
[[ $# -ge 1 && $# -le 2 ]] || { echo "usage: $0 MET [DIR]" >&2; exit 2; }
met=$1
root=$(cd "$(dirname "$0")/.." && pwd)
out=${2:-$root/fuzz/seeds/packet}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
rm -f "$out"/*.pkt
for m in tiny-qwen3 tiny-llama3; do
  "$met" model synth --config "$root/tests/oracle/configs/$m.json" --seed 1 --out "$work/$m" >/dev/null
  "$met" circuit emit --hardware host-cpu --checkpoint "$work/$m" --out "$work/$m-cpu" --threads 1 --max-ctx 64 \
    --decode-rungs 1 --prefill-buckets 16 >/dev/null
  "$met" circuit emit --hardware h200-sxm --checkpoint "$work/$m" --out "$work/$m-h200" --max-ctx 64 --decode-rungs 1 \
    --prefill-buckets 64 >/dev/null
  cp "$work/$m-cpu/model.pkt" "$out/${m//-/_}_cpu1.pkt"
  cp "$work/$m-h200/model.pkt" "$out/${m//-/_}_h200.pkt"
done
echo "packet seeds: $(ls "$out" | wc -l) files in $out"
