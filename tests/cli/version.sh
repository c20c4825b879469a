#!/usr/bin/env bash
# `met --version` and the build.json of an emit name the same build: version, git commit, packet
# ABI version and hash, GPU interpreters. Catches a field printed but not recorded (or recorded
# differently), and `--version` falling through to "a subcommand is required". Usage: version.sh MET
set -euo pipefail
met="$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$met" --version >"$work/version.txt"
"$met" model synth --config "$root/tests/serve/client/tiny-qwen3-vocab151936.json" --seed 1 --out "$work/ckpt" >/dev/null 2>&1
"$met" circuit emit --hardware host-cpu --checkpoint "$work/ckpt" --out "$work/assets" --threads 2 --max-ctx 256 >/dev/null 2>&1
python3 - "$work/version.txt" "$work/assets/build.json" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
build = json.load(open(sys.argv[2]))
lines = text.splitlines()
failed = 0
def check(name, ok, detail):
    global failed
    if ok:
        print("ok  ", name)
    else:
        print("FAIL", name, detail)
        failed += 1
m = re.fullmatch(r"met (\d+\.\d+\.\d+)", lines[0])
check("first line is 'met X.Y.Z'", m is not None, lines[0])
fields = dict(l.split(": ", 1) for l in lines[1:])
check("version equals build.json met_version", m and m.group(1) == build["met_version"], (lines[0], build["met_version"]))
check("commit equals build.json git_commit", fields.get("commit") == build["git_commit"], (fields.get("commit"), build["git_commit"]))
check("commit is a sha (or unknown without git)", re.fullmatch(r"([0-9a-f]{40}(-dirty)?|unknown)", fields.get("commit", "")) is not None, fields.get("commit"))
abi = re.fullmatch(r"version (\d+), hash (\d+)", fields.get("packet abi", ""))
check("packet abi equals build.json abi", abi is not None and int(abi.group(1)) == build["abi"]["version"] and int(abi.group(2)) == build["abi"]["hash"],
      (fields.get("packet abi"), build["abi"]))
gpus = fields.get("gpu interpreters")
check("gpu interpreters equal build.json", gpus == (", ".join(build["gpu_interpreters"]) or "none"), (gpus, build["gpu_interpreters"]))
print("version: %d failed" % failed)
sys.exit(1 if failed else 0)
PY
