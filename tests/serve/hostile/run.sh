#!/usr/bin/env bash
# The hostile suite (hostile_test.py) against `met serve` on the tiny Qwen3 of serve_fixture.sh,
# cpu backend, loopback, no API key (the default an attacker meets), --max-body 65536,
# --max-connections 200 and --read-timeout 5 (what the connection cases count on). The server
# must answer /health 200 after every case and still be running at the end of them; then a SIGTERM
# with clients trickling their headers must stop it (exit 0) well inside its 30 s drain. The outer
# time limits scale with MET_TEST_TIME_SCALE (serve_fixture.sh); the cases' own bounds do not.
# Usage: run.sh MET [CASE-SUBSTRING]
set -euo pipefail
met="$1"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
# shellcheck source=../serve_fixture.sh
source "$here/../serve_fixture.sh"
trap stop_server EXIT
start_server --max-body 65536 --queue 4 --max-connections 200 --read-timeout 5
rc=0
timeout "$((240 * time_scale))" python3 "$here/hostile_test.py" "$port" "$server_pid" "$work" "${2:-}" || rc=$?
if ! kill -0 "$server_pid" 2>/dev/null; then
  echo "FAIL: met serve is no longer running:"; tail -n 20 "$work/serve.log"; exit 1
fi
[ "$rc" -eq 0 ] || { echo "server log (last 20 lines):"; tail -n 20 "$work/serve.log"; exit "$rc"; }
# Last, as it stops the server: SIGTERM while clients trickle their headers.
[ -z "${2:-}" ] || exit 0
timeout "$((60 * time_scale))" python3 "$here/hostile_test.py" "$port" "$server_pid" "$work" --shutdown || rc=$?
set +e
wait "$server_pid"
status=$?
set -e
server_pid=""
if [ "$rc" -eq 0 ] && { [ "$status" -ne 0 ] || ! grep -q '^serve: stopped$' "$work/serve.log"; }; then
  echo "FAIL: met serve exited $status after SIGTERM:"; tail -n 20 "$work/serve.log"; rc=1
fi
exit "$rc"
