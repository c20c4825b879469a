#!/usr/bin/env bash
# `--model ORG/NAME` through all three paths, against a Hub-shaped server on loopback
# (tests/cli/hub_server.py): a golden instance's id and a stored config never touch the network;
# any other id is read from the Hub (revision API, config.json, the index, each shard's header by
# range request) into the cache and plans like the same files on disk. Only header bytes leave the
# server; a second plan reads the cache; HF_TOKEN is sent and never printed; 401, 404, a server
# that ignores Range and a closed port are clear errors. Usage: hub.sh MET
set -uo pipefail
met="$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
server_pid=""
cleanup() { [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
source "$(dirname "$0")/lib.sh"

log="$work/server.log"
: >"$log"
python3 "$root/tests/cli/hub_server.py" "$root/kernels/circuits/configs" "$work/port" "$log" &
server_pid=$!
for _ in $(seq 100); do [[ -f $work/port ]] && break; sleep 0.1; done
[[ -f $work/port ]] || { echo "FAIL the test server did not start"; exit 1; }
hub="http://127.0.0.1:$(cat "$work/port")"
export XDG_CACHE_HOME="$work/cache"
unset HF_ENDPOINT HF_TOKEN
token=hf_test_secret_token_123
requests() { wc -l <"$log"; }

# (a) a golden instance's checkpoint id: the instance, no request.
out=$("$met" circuit plan --hardware h200 --model Qwen/Qwen3-8B --hub "$hub" --format plan 2>&1)
if [[ $? -eq 0 && $(requests) -eq 0 && $out == "$("$met" circuit plan --hardware h200-sxm --model qwen3-8b --format plan)" ]]; then
  ok "(a) golden instance id: same plan, no request"; else bad "(a) golden instance id" "requests $(requests)" "$(head -3 <<<"$out")"; fi
# (b) a stored config: no request.
out=$("$met" circuit plan --hardware h200 --model mistralai/Mistral-7B-Instruct-v0.3 --hub "$hub" 2>&1)
if [[ $? -eq 0 && $(requests) -eq 0 ]]; then ok "(b) stored config: plans, no request"; else bad "(b) stored config" "$(head -3 <<<"$out")"; fi

# (c) the Hub: through --hub, then through HF_ENDPOINT from the cache.
out=$("$met" circuit plan --hardware h200 --model hub-test/Qwen3-8B --hub "$hub" --format plan 2>&1)
if [[ $? -eq 0 ]]; then ok "(c) hub model plans"; else bad "(c) hub model" "$(head -5 <<<"$out")"; fi
python3 - "$log" <<'PY' && ok "(c) shards: range requests of exactly the 8 + N header bytes, nothing else" || bad "(c) bytes read"
import json, struct, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
shards = [r for r in rows if r["path"].endswith(".safetensors")]
assert len(shards) == 4, shards                      # 2 shards x (length, header)
assert all(r["status"] == 206 for r in shards), shards
by_file = {}
for r in shards:
    by_file.setdefault(r["path"], []).append(r)
for path, rs in by_file.items():
    # by range start: the threaded server may log a shard's second request before its first
    rs.sort(key=lambda r: int(r["range"].split(" ")[1].split("-")[0]))
    assert rs[0]["range"].startswith("bytes 0-7/"), rs
    first, last = rs[1]["range"].split(" ")[1].split("/")[0].split("-")
    assert int(first) == 8 and sum(r["sent"] for r in rs) == int(last) + 1, rs
    total = int(rs[0]["range"].split("/")[1])
    assert int(last) + 1 < total / 1000, (last, total)  # the header is a sliver of the file
PY
before=$(requests)
out2=$(HF_ENDPOINT="$hub" "$met" circuit plan --hardware h200 --model hub-test/Qwen3-8B --format plan 2>&1)
after=$(requests)
if [[ $out2 == "$out" && $((after - before)) -eq 1 ]]; then ok "HF_ENDPOINT: same plan, one revision lookup, files from the cache"
else bad "HF_ENDPOINT / cache" "requests $((after - before))"; fi
ls "$XDG_CACHE_HOME/met/hub/hub-test--Qwen3-8B/1111111111111111111111111111111111111111/config.json" >/dev/null 2>&1 &&
  ok "cache keyed by commit under XDG_CACHE_HOME/met/hub" || bad "cache layout" "$(find "$XDG_CACHE_HOME" | head)"
out3=$("$met" circuit plan --hardware h200 --model hub-test/Qwen3-8B --revision 1111111111111111111111111111111111111111 \
  --hub http://127.0.0.1:1 --format plan 2>&1)
if [[ $? -eq 0 && $out3 == *"--revision 1111111111111111111111111111111111111111"* ]]; then
  ok "a cached commit plans with the Hub unreachable, and the provenance names the revision"
else bad "cached commit offline" "$(head -3 <<<"$out3")"; fi
# The same files as a local checkpoint (sparse shards) plan to the same digest.
python3 - "$hub" "$work/hub-test--Qwen3-8B" <<'PY'
import json, os, sys, urllib.request
hub, out = sys.argv[1], sys.argv[2]
os.makedirs(out)
sha = "1" * 40
base = "%s/hub-test/Qwen3-8B/resolve/%s/" % (hub, sha)
for f in ["config.json", "model.safetensors.index.json"]:
    open(os.path.join(out, f), "wb").write(urllib.request.urlopen(base + f).read())
for k in (1, 2):
    name = "model-%05d-of-00002.safetensors" % k
    req = urllib.request.Request(base + name, headers={"Range": "bytes=0-7"})
    r = urllib.request.urlopen(req)
    total = int(r.headers["Content-Range"].split("/")[1])
    n = int.from_bytes(r.read(), "little")
    req = urllib.request.Request(base + name, headers={"Range": "bytes=0-%d" % (7 + n)})
    with open(os.path.join(out, name), "wb") as f:
        f.write(urllib.request.urlopen(req).read())
        f.truncate(total)
PY
digest() { grep -i -m1 'digest' <<<"$1"; }
local_plan=$("$met" circuit plan --hardware h200 --checkpoint "$work/hub-test--Qwen3-8B" --format plan 2>&1)
if [[ -n $(digest "$out") && $(digest "$out") == "$(digest "$local_plan")" ]]; then ok "hub plan digest equals the local checkpoint's"
else bad "digest vs local" "$(digest "$out")" "$(digest "$local_plan")"; fi

# hf_quant_config.json comes along: the modelopt sidecar is the only place that says the KV cache is fp8.
out=$("$met" circuit plan --hardware h200 --model hub-test/Llama-FP8 --hub "$hub" 2>&1)
if [[ $? -eq 0 && $out == *"| KV cache per token | 163840 bytes (fp8-e4m3) |"* ]] &&
  cmp -s "$root/kernels/circuits/configs/nvidia--Llama-3.1-70B-Instruct-FP8/hf_quant_config.json" \
    "$XDG_CACHE_HOME/met/hub/hub-test--Llama-FP8/4444444444444444444444444444444444444444/hf_quant_config.json"; then
  ok "hf_quant_config.json is fetched and read (fp8 KV cache from its kv_cache_quant_algo)"
else bad "hf_quant_config.json" "$(grep -i 'kv cache' <<<"$out" | head -2)"; fi

# Errors.
expect_error() {
  local name=$1 needle=$2
  shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  if [[ $rc -ne 0 && $err == error:* && $err == *"$needle"* && $err != *"$token"* ]]; then ok "$name"; else bad "$name" "rc=$rc" "$err"; fi
}
expect_error "401 without a token says to set HF_TOKEN" "401 unauthorized: the model is gated or private; set HF_TOKEN" \
  "$met" circuit plan --hardware h200 --model hub-test/Gated --hub "$hub"
expect_error "401 with a wrong token says it was refused (and does not print it)" "was sent and refused" \
  env HF_TOKEN=wrong-token "$met" circuit plan --hardware h200 --model hub-test/Gated --hub "$hub"
out=$(HF_TOKEN=$token "$met" circuit plan --hardware h200 --model hub-test/Gated --hub "$hub" 2>&1)
if [[ $? -eq 0 && $out != *"$token"* ]]; then ok "HF_TOKEN opens a gated model and is not printed"; else bad "gated with token" "$(head -3 <<<"$out")"; fi
expect_error "404 names the model" "404 not found: no model 'hub-test/Nope'" "$met" circuit plan --hardware h200 --model hub-test/Nope --hub "$hub"
expect_error "a server ignoring Range is stopped" "ignored the range request" \
  "$met" circuit plan --hardware h200 --model hub-test/NoRange --hub "$hub"
expect_error "a closed port is a network failure" "network failure" \
  "$met" circuit plan --hardware h200 --model hub-test/Other --hub http://127.0.0.1:1
expect_error "a malformed id is refused" "is not a model id" "$met" circuit plan --hardware h200 --model a/b/c --hub "$hub"

finish hub
