#!/usr/bin/env bash
# Measures the device machine's GPU with `met circuit probe` (streaming read, copy and bf16
# tensor-core rates, every result checked) and, as a cross-check in the same call, the same three
# figures through torch (a sum, a copy, an 8192^3 matmul). The one command for the device machine:
#
#   OUT=DIR bash scripts/h200_probe.sh [PROBE FLAGS]     # e.g. --repeats 50
#
# Inputs: MET (default .device/met) and its shared libraries in .device/libs.tar.xz (made by
# scripts/device_pack.sh). Writes into OUT (default ./out-h200): probe.json (the record),
# probe.txt (the table), torch-peer.json and log.txt. Then, on this side:
#
#   cp OUT/probe.json perf-data/HW/probe/STAMP.json      # STAMP: the record's "stamp"; HW: the device log.txt names
#   met circuit probe --from-json perf-data/HW/probe/STAMP.json --hardware HW \
#     --update-devices kernels/DEVICES.toml
#   bash scripts/golden.sh                                      # the reports print the measured figures
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
OUT="${OUT:-$root/out-h200}"
WORK="${WORK:-/tmp/metw}"
mkdir -p "$OUT" "$WORK"
exec > >(tee -a "$OUT/log.txt") 2>&1

if [[ -f .device/libs.tar.xz ]]; then
  mkdir -p "$WORK/lib" && tar xJf .device/libs.tar.xz -C "$WORK" && export LD_LIBRARY_PATH="$WORK/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
MET="${MET:-$root/.device/met}"
[[ -x "$MET" ]] || { echo "error: $MET is not an executable met"; exit 1; }
HW="${HW:-$("$MET" circuit probe --identify | head -n 1)}"  # the registry device of this GPU (h200-sxm, h100-sxm, ...)
[[ -n $HW ]] || { echo "scripts/h200_probe.sh: met names no registry device for this GPU"; exit 1; }
echo "this GPU is registry device $HW"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit,driver_version --format=csv
"$MET" --version

echo "=== met circuit probe"
"$MET" circuit probe --hardware "$HW" --json "$OUT/probe.json" "$@" | tee "$OUT/probe.txt"
status=${PIPESTATUS[0]}
echo "=== met circuit probe: rc $status"

echo "=== torch cross-check"
timeout 300 python3 - "$OUT/torch-peer.json" <<'PY' || echo "torch cross-check failed (not part of the probe's status)"
import json, sys, torch
def median_ms(f, warmup=3, repeats=20):
    for _ in range(warmup):
        f()
    ms = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); f(); b.record(); b.synchronize()
        ms.append(a.elapsed_time(b))
    return sorted(ms)[len(ms) // 2]
n = 8 << 30
x = torch.ones(n // 4, dtype=torch.float32, device="cuda")
half = x[: n // 8]
y = torch.empty_like(half)
a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
out = {
    "torch": torch.__version__,
    "read_gbs (x.sum() over 8 GiB)": n / (median_ms(lambda: x.sum()) * 1e-3) / 1e9,
    "copy_gbs (y.copy_(4 GiB), read + written)": 2 * (n // 2) / (median_ms(lambda: y.copy_(half)) * 1e-3) / 1e9,
    "bf16_tflops (8192^3 matmul)": 2 * 8192**3 / (median_ms(lambda: a @ b) * 1e-3) / 1e12,
}
print(json.dumps(out, indent=1))
json.dump(out, open(sys.argv[1], "w"), indent=1)
PY
echo "probe: done, status $status"
exit "$status"
