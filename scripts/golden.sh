#!/usr/bin/env bash
# Regenerates every golden report (golden/*.md, golden/*.json, golden/MATRIX.md and MATRIX.html) from the
# kernel tree. Review the diff; never edit golden files by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh met >/dev/null
./build/src/cli/met circuit plan --matrix golden
