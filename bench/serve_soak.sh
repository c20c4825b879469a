#!/usr/bin/env bash
# The soak of issue 19: `met serve` on the tiny Qwen3 of the serve tests (tests/serve/serve_fixture.sh:
# real Qwen3 tokenizer and chat template, max context 256, 8 slots, queue 256), loopback only, under
# bench/serve_soak.mjs for SECONDS: 64 concurrent client loops of mixed streaming and non-streaming
# chat and completions, clients that abort, and the hostile cases fetch can send. Then SIGTERM: the
# server must drain and exit 0 within 45 s.
# Usage: bench/serve_soak.sh MET [SECONDS] [BACKEND]
#   SECONDS  load duration (default 600); the first minute (a third of shorter runs) warms up
#   BACKEND  cpu (default; assets emitted for host-cpu), cuda or cpu-oracle (assets for h200-sxm)
# CLIENTS, SOAK_SEED, SOAK_KINDS, WARMUP_S and REQUEST_TIMEOUT_S pass through to serve_soak.mjs.
# Exits non-zero when a check failed. Last line: "N passed, M failed".
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bench/serve_soak.sh MET [SECONDS] [BACKEND]"; exit 2; }
root="$(cd "$(dirname "$0")/.." && pwd)"
met="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
seconds="${2:-600}"
backend="${3:-cpu}"
case "$backend" in
  cpu) hardware=host-cpu ;;
  cuda | cpu-oracle) hardware=h200-sxm ;;
  *) echo "serve_soak: backend must be cpu, cuda or cpu-oracle, got '$backend'"; exit 2 ;;
esac
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "serve_soak: SECONDS must be a positive integer, got '$seconds'"; exit 2; }
[ -x "$met" ] || { echo "serve_soak: $met is not an executable"; exit 2; }
command -v node >/dev/null || { echo "serve_soak: node is not installed: run scripts/setup.sh"; exit 1; }
[ -e "$root/tests/serve/client/node_modules/openai" ] || { echo "serve_soak: the openai client is missing: run scripts/setup.sh"; exit 1; }

work="$(mktemp -d)"
# shellcheck source=../tests/serve/serve_fixture.sh
source "$root/tests/serve/serve_fixture.sh"
trap stop_server EXIT
echo "serve_soak: $(date -u +%FT%TZ), checkout $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown), backend $backend, emit $hardware, load $seconds s"
start_server --hardware "$hardware" --backend "$backend" --queue 256
echo "serve_soak: met serve pid $server_pid on http://127.0.0.1:$port"

rc=0
MET_BASE_URL="http://127.0.0.1:$port" MET_SERVER_PID="$server_pid" MET_MODEL="tiny-qwen3" SOAK_S="$seconds" \
  timeout --kill-after=10 $((seconds + ${REQUEST_TIMEOUT_S:-300} + 120)) node "$root/bench/serve_soak.mjs" | tee "$work/soak.out" || rc=$?
last="$(tail -n 1 "$work/soak.out")"
passed=0 failed=0
if [[ "$last" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
  passed="${BASH_REMATCH[1]}" failed="${BASH_REMATCH[2]}"
else
  echo "FAIL: serve_soak.mjs ended without its summary (exit $rc)"; failed=1
fi
[ "$rc" -eq 0 ] || [ "$failed" -gt 0 ] || { echo "FAIL: serve_soak.mjs exited $rc"; failed=$((failed + 1)); }

# The server's own account: errors it logged, then a clean stop on SIGTERM.
echo "server log: $(wc -l <"$work/serve.log") lines; lines naming an error or fault:"
grep -inE 'error|fault|abort|exception|terminate' "$work/serve.log" | head -n 20 || echo "  (none)"
if kill -0 "$server_pid" 2>/dev/null; then
  kill -TERM "$server_pid"
  for _ in $(seq 1 450); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$server_pid" 2>/dev/null; then
    echo "FAIL: met serve still running 45 s after SIGTERM"; kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true; failed=$((failed + 1))
  else
    status=0
    wait "$server_pid" || status=$?
    if [ "$status" -eq 0 ] && grep -q '^serve: stopped$' "$work/serve.log"; then
      echo "ok: met serve drained and exited 0 on SIGTERM"; passed=$((passed + 1))
    else
      echo "FAIL: met serve exited $status on SIGTERM"; failed=$((failed + 1))
    fi
  fi
else
  echo "FAIL: met serve was no longer running after the load"; failed=$((failed + 1))
fi
server_pid=""
if [ "$failed" -gt 0 ]; then echo "server log (last 30 lines):"; tail -n 30 "$work/serve.log"; fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
