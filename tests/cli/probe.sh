#!/usr/bin/env bash
# `met circuit probe` where there is no GPU: measuring is refused with one `error: cuda:` line and
# a non-zero exit (no record written); a record measured elsewhere (--from-json) is printed and
# written into a copy of the kernel tree's DEVICES.toml, changing only the device's measured table
# and the probe's source, after which the measured basis plans at the probed read bandwidth.
# Records of another GPU and malformed records are refused, leaving the file as it was.
# Usage: probe.sh MET
set -uo pipefail
met="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/lib.sh"

# A probe record (schema met-probe/1) of an H200: SMS MEMORY_BYTES READ COPY BF16.
record() {
  python3 - "$@" <<'PY'
import json, sys
sms, mem, read, copy, bf16 = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
def test(name, kernel, key, work, rate, unit):
    return {"test": name, "kernel": kernel, "launch": "264 x 512", key: work, "samples_ms": [2.0, 2.0],
            "ms": {"median": 2.0, "p10": 2.0, "p90": 2.0, "min": 2.0}, "rate": rate, "unit": unit, "check": "sum"}
print(json.dumps({
    "schema": "met-probe/1",
    "device": {"name": "NVIDIA H200", "sm_count": sms, "compute": "9.0", "memory_bytes": mem, "driver_version": 12080},
    "stamp": "20261201T101500Z",
    "command": "met circuit probe --gib 8 --warmup 3 --repeats 20 --mma-iters 8192",
    "options": {"read_bytes": 8589934592, "warmup": 3, "repeats": 20, "mma_iters": 8192},
    "tests": [test("read", "metprobe_read_u8", "bytes", 8589934592, read, "GB/s"),
              test("copy", "metprobe_copy", "bytes", 8589934592, copy, "GB/s"),
              test("bf16", "metprobe_wgmma, 2 warpgroups", "flops", 1.6e15, bf16, "TFLOP/s")],
    "figures": {"read_gbs": read, "copy_gbs": copy, "bf16_tflops": bf16}}, indent=1))
PY
}

# 1. Measuring without a GPU: one located error line, non-zero, no record.
out=$("$met" circuit probe --json "$work/none.json" 2>&1)
rc=$?
if [[ $rc -ne 0 && $out == "error: cuda: "* && $(wc -l <<<"$out") -eq 1 && ! -e $work/none.json ]]; then
  ok "no GPU: refused with one 'error: cuda:' line ($out)"
else
  bad "no GPU: refused with one 'error: cuda:' line, nothing written" "rc $rc" "$out"
fi

# 1b. --identify without a GPU: the same one-line driver error; with other flags: refused.
out=$("$met" circuit probe --identify 2>&1)
rc=$?
[[ $rc -ne 0 && $out == "error: cuda: "* && $(wc -l <<<"$out") -eq 1 ]] && ok "--identify without a GPU: one 'error: cuda:' line" ||
  bad "--identify without a GPU: one 'error: cuda:' line" "rc $rc" "$out"
out=$("$met" circuit probe --identify --hardware h200 2>&1)
[[ $? -ne 0 && $out == "error: --identify measures nothing: give it alone" ]] && ok "--identify with --hardware is refused" ||
  bad "--identify with --hardware is refused" "$out"

# 2. Flags that cannot work together are refused before anything runs.
out=$("$met" circuit probe --update-devices "$work/x.toml" --json "$work/r.json" 2>&1)
[[ $? -ne 0 && $out == "error: --update-devices needs --hardware"* ]] && ok "--update-devices without --hardware is refused" ||
  bad "--update-devices without --hardware is refused" "$out"
out=$("$met" circuit probe --hardware h200 --update-devices "$work/x.toml" 2>&1)
[[ $? -ne 0 && $out == "error: --update-devices needs --json FILE or --from-json FILE"* ]] && ok "--update-devices without a record is refused" ||
  bad "--update-devices without a record is refused" "$out"

# 3. A record from the device machine, applied to a copy of the tree.
cp -r "$root/kernels" "$work/kernels"
mkdir -p "$work/perf"
record 132 150109880320 4311.96 4105.04 821.349 >"$work/perf/20261201T101500Z.json"
if out=$(cd "$work" && "$met" circuit probe --from-json perf/20261201T101500Z.json --hardware h200 \
  --update-devices kernels/DEVICES.toml 2>"$work/err.txt"); then
  ok "a record is applied ($(cat "$work/err.txt"))"
else
  bad "a record is applied" "$out" "$(cat "$work/err.txt")"
fi
grep -q "figures (best of each test): read 4312 GB/s, copy 4105 GB/s (read + written), bf16 821.3 TFLOP/s" <<<"$out" &&
  ok "the record's table is printed" || bad "the record's table is printed" "$out"
grep -q "against the datasheet of h200-sxm: read 89.8% of 4800 GB/s" <<<"$out" &&
  ok "--hardware compares with the datasheet" || bad "--hardware compares with the datasheet" "$out"
# Only the measured table's lines and the probe's source differ: the table's four lines and four
# new source lines, or where the tree already carries a probe of the H200, three figures and the
# source's title and url.
delta=$(diff "$root/kernels/DEVICES.toml" "$work/kernels/DEVICES.toml")
changed=$(grep -c '^[<>]' <<<"$delta")
removed=$(grep -c '^< \(read_gbs\|copy_gbs\|bf16\|cite\) = ' <<<"$delta")
added=$(grep -c '^> \(read_gbs = 4312.0 \|copy_gbs = 4105.0 \|bf16 = 821.3 \|cite = "met-h200-sxm-probe"\|\[source.met-h200-sxm-probe\]\|title = "`met circuit probe\|url = "perf/20261201T101500Z.json"\)' <<<"$delta")
# A tree that carries a probe already keeps the cite line and the source's header.
if grep -q '^\[source.met-h200-sxm-probe\]$' "$root/kernels/DEVICES.toml"; then want=(10 3 5); else want=(12 4 7); fi
if [[ $changed -eq ${want[0]} && $removed -eq ${want[1]} && $added -eq ${want[2]} ]]; then
  ok "only h200-sxm's measured figures and the probe's source changed"
else
  bad "only h200-sxm's measured figures and the probe's source changed" "$(diff "$root/kernels/DEVICES.toml" "$work/kernels/DEVICES.toml")"
fi
plan=$("$met" --kernels "$work/kernels" circuit plan --hardware h200-sxm --model llama-3.1-8b-instruct --basis measured 2>&1)
grep -q "bandwidth 4312 GB/s (measured, met-h200-sxm-probe)" <<<"$plan" &&
  ok "the measured basis plans at the probed read bandwidth" || bad "the measured basis plans at the probed read bandwidth" "$(grep -m1 bandwidth <<<"$plan")"

# 4. Records that must not be applied leave the file as it was.
cp "$work/kernels/DEVICES.toml" "$work/before.toml"
refused() {  # NAME EXPECTED_PREFIX RECORD_FILE [HARDWARE]
  local out
  out=$(cd "$work" && "$met" circuit probe --from-json "$3" --hardware "${4:-h200}" --update-devices kernels/DEVICES.toml 2>&1 >/dev/null)
  if [[ $? -ne 0 && $out == "$2"* ]] && cmp -s "$work/before.toml" "$work/kernels/DEVICES.toml"; then ok "$1"; else bad "$1" "$out"; fi
}
record 114 150109880320 4000 3900 700 >"$work/other-sms.json"
refused "a record of a GPU with 114 SMs is refused for h200-sxm" "error: kernels/DEVICES.toml:" other-sms.json
refused "an H200's record is refused for h100-sxm (memory)" "error: kernels/DEVICES.toml:" perf/20261201T101500Z.json h100-sxm
echo '{"schema": "met-probe/1", "device": {}}' >"$work/broken.json"
refused "a record with missing fields is refused, naming its file" "error: broken.json: missing or mistyped field" broken.json
echo 'not json' >"$work/text.json"
refused "a file that is not JSON is refused" "error: text.json: not JSON" text.json

finish probe
