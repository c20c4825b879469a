# Shared by the tests/cli scripts: a named check passes or fails with its details, and `finish`
# prints the tally and exits non-zero on any failure. Source it after setting `set -uo pipefail`.
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() {
  failed=$((failed + 1))
  echo "FAIL $1"
  shift
  printf '     %s\n' "$@"
}
# finish NAME: "NAME: P passed, F failed" and the exit status.
finish() {
  echo "$1: $passed passed, $failed failed"
  [[ $failed -eq 0 ]]
}
