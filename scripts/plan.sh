#!/usr/bin/env bash
# The main job on a fresh machine: install, build, and plan the default model on an H200.
# Extra arguments go to `met circuit plan` (e.g. --model qwen3-30b-a3b --format html --out r.html).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh met
exec ./build/src/cli/met circuit plan --hardware h200-sxm "$@"
