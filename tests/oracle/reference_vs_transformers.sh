#!/usr/bin/env bash
# An in-repo Python reference held to a transformers fixture: synth the fixture's checkpoint, run the
# reference teacher-forced along the fixture's tokens (--follow; FLAGS are the reference's own, such
# as gpt-oss's --eager-scores) and judge it as met is judged (compare.py --forced). What this checks is
# the reference itself: met is then checked against the reference (reference_check.sh).
# Usage: reference_vs_transformers.sh MET TOLERANCE MODEL DTYPE REFERENCE FIXTURE [FLAGS...]
#   (MODEL names tests/oracle/configs/MODEL.json)
set -euo pipefail
met="$1" tol="$2" model="$3" dtype="$4" reference="$5" fixture="$6"
shift 6
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$met" model synth --config "$here/configs/$model.json" --seed 1 --dtype "$dtype" --out "$work/ck" >/dev/null
python3 "$here/$reference" --checkpoint "$work/ck" --follow "$fixture" "$@" --out "$work/forced.json"
python3 "$here/compare.py" --forced "$fixture" "$work/forced.json" "$tol"
