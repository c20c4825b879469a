#!/usr/bin/env bash
# Measured beside predicted: `met circuit plan --measured` joins the cases of campaign records to
# the report's cases by device, plan digest and (decode) context. The campaign here is the record
# `met circuit run --campaign` writes, for a tiny Llama-3 emitted for the h200-sxm; its digests are
# the ones the emit wrote into build.json (the campaign copies them per case), so the test also
# checks that an emit's program digests are the plan's. Mutations it catches: matching without
# the digest, the context or the device; the older of two campaigns winning; a wrong path or a
# file that is no campaign accepted.
# Usage: measured.sh MET
set -uo pipefail
met="$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
source "$(dirname "$0")/lib.sh"
w="$(mktemp -d)"
trap 'rm -rf "$w"' EXIT

"$met" model synth --config "$root/tests/oracle/configs/tiny-llama3.json" --seed 1 --dtype bf16 --out "$w/ck" >/dev/null 2>"$w/synth.err" ||
  { bad "synth tiny-llama3" "$(cat "$w/synth.err")"; finish measured; exit 1; }
"$met" circuit emit --hardware h200-sxm --checkpoint "$w/ck" --out "$w/a" --max-ctx 600 --decode-rungs 1,4 --prefill-buckets 128 \
  >/dev/null 2>"$w/emit.err" || { bad "emit" "$(cat "$w/emit.err")"; finish measured; exit 1; }

# campaign FILE STAMP HARDWARE CTX SCALE: a met-campaign/1 record of decode C=1,4 at CTX and prefill
# T=128, medians SCALE x (1.5, 2.5, 4.0) ms, digests from the emit's build.json.
campaign() {
  python3 - "$w/a/build.json" "$@" <<'PY'
import json, sys
build, out, stamp, hardware, ctx, scale = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), float(sys.argv[6])
digest = {p["name"]: p["digest"] for p in json.load(open(build))["programs"]}
cases = [{"kind": "decode", "rows": 1, "ctx": ctx, "program": "decode_1", "ms": {"median": 1.5 * scale}},
         {"kind": "decode", "rows": 4, "ctx": ctx, "program": "decode_4", "ms": {"median": 2.5 * scale}},
         {"kind": "prefill", "rows": 128, "program": "prefill_128", "ms": {"median": 4.0 * scale}}]
for c in cases:
    c["plan_digest"] = digest[c["program"]]
json.dump({"schema": "met-campaign/1", "hardware": hardware, "stamp": stamp, "model": "tiny", "cases": cases}, open(out, "w"))
PY
}
mkdir -p "$w/perf/old" "$w/perf/new"
campaign "$w/perf/old/c.json" 20261101T000000Z h200-sxm 512 2
campaign "$w/perf/new/c.json" 20261201T000000Z h200-sxm 512 1
campaign "$w/other-ctx.json" 20261201T000000Z h200-sxm 256 1
campaign "$w/other-device.json" 20261201T000000Z b200 512 1
echo '{"schema": "met-peers/1"}' >"$w/perf/new/c-peers.json"  # not a campaign: skipped inside a directory

plan() { "$met" circuit plan --hardware h200-sxm --checkpoint "$w/ck" --context 512 "$@" 2>&1; }

out=$(plan --measured "$w/perf")
grep -q '^| measured | 1.500 ms per step, 666.7 tokens/s; predicted / measured x' <<<"$out" &&
  grep -q "($w/perf/new/c.json, 20261201T000000Z) |" <<<"$out" && ok "the newest campaign's C=1 median beside the prediction" ||
  bad "the newest campaign's C=1 median beside the prediction" "$(grep -n 'measured' <<<"$out")"
grep -q "^| 4 | .* | 2.500 ms ($w/perf/new/c.json" <<<"$out" && ok "the decode ladder gains a measured column (C=4)" ||
  bad "the decode ladder gains a measured column" "$(grep -n '^| 4 |' <<<"$out")"
grep -q -- "--measured $w/perf" <<<"$out" && ok "the report's command names --measured" || bad "the report's command names --measured" "$(head -3 <<<"$out")"

out=$(plan --mode prefill --rows 128 --measured "$w/perf/new/c.json" --format json)
python3 -c "import json,sys; j=json.loads(sys.argv[1]); assert abs(j['decode'][0]['measured_s']-0.0015)<1e-12; assert j['decode'][0]['plan_digest']" "$out" 2>/dev/null &&
  ok "json: measured_s on the decode ladder" || bad "json: measured_s on the decode ladder" "$(head -c 300 <<<"$out")"
grep -q '^| measured | ' <<<"$(plan --mode prefill --rows 128 --measured "$w/perf/new/c.json")" &&
  grep -q '4.000 ms per step' <<<"$(plan --mode prefill --rows 128 --measured "$w/perf/new/c.json")" && ok "prefill T=128 matched by its digest" ||
  bad "prefill T=128 matched by its digest" "$(plan --mode prefill --rows 128 --measured "$w/perf/new/c.json" | grep measured)"

out=$(plan --measured "$w/other-ctx.json")
grep -q '^| measured | no campaign under --measured ran this program (plan digest [0-9a-f]*) on h200-sxm at context 512 |' <<<"$out" &&
  ok "another context does not match, and the report says so" || bad "another context does not match" "$(grep measured <<<"$out")"
grep -q '^| measured | no campaign' <<<"$(plan --measured "$w/other-device.json")" && ok "another device does not match" ||
  bad "another device does not match" "$(plan --measured "$w/other-device.json" | grep measured)"
grep -q '^| measured | no campaign' <<<"$("$met" circuit plan --hardware h200-sxm --model llama-3.2-1b-instruct --context 512 --measured "$w/perf" 2>&1)" &&
  ok "another model (another digest) does not match" || bad "another model does not match" ""
[[ -z $(plan | grep '^| measured |') ]] && ok "without --measured the report is unchanged" || bad "without --measured the report is unchanged" ""

err=$(plan --measured "$w/nope" 2>&1) && bad "a missing path is an error" "exit 0" ||
  { grep -q "error: --measured $w/nope: no such file or directory" <<<"$err" && ok "a missing path is an error" || bad "a missing path is an error" "$err"; }
err=$(plan --measured "$w/perf/new/c-peers.json" 2>&1) && bad "a file that is no campaign is an error" "exit 0" ||
  { grep -q "not a campaign record" <<<"$err" && ok "a file that is no campaign is an error" || bad "a file that is no campaign is an error" "$err"; }
echo '{"schema": "met-campaign/1", "hardware": "h200-sxm", "cases": [{"kind": "decode", "plan_digest": "x"}]}' >"$w/broken.json"
err=$(plan --measured "$w/broken.json" 2>&1) && bad "a campaign case without rows is an error" "exit 0" ||
  { grep -q "error: --measured $w/broken.json: not a usable campaign record" <<<"$err" && ok "a campaign case without rows is an error" ||
    bad "a campaign case without rows is an error" "$err"; }
finish measured
