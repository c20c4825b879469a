#!/usr/bin/env bash
# Every subcommand's --help ends with examples (src/cli/examples.cpp), and the ones a clean
# machine can run (no checkpoint, assets, Hub token or server) do run: an example that went stale
# when a flag, device alias or model id changed fails here. Usage: help_examples.sh MET
set -uo pipefail
met="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/lib.sh"
commands=("" "circuit" "circuit devices" "circuit kernels" "circuit plan" "circuit emit" "circuit run" "circuit optest" "circuit probe" "circuit calibrate"
  "circuit disasm" "circuit verify" "circuit abi" "model" "model synth" "serve" "completion")
for c in "${commands[@]}"; do
  # shellcheck disable=SC2086
  help=$("$met" $c --help 2>&1)
  examples=$(sed -n '/^Examples:$/,$p' <<<"$help" | sed -n 's/^  \(met .*\)$/\1/p')
  if [[ -z $examples ]]; then bad "met $c --help has no examples"; continue; fi
  ok "met $c --help ends with $(wc -l <<<"$examples") example(s)"
  while IFS= read -r line; do
    case "$line" in
      "met circuit plan"* | "met circuit devices"* | "met circuit kernels"* | "met --version" | "met circuit abi" | "met completion "*) ;;
      *) continue ;;  # needs a checkpoint, assets or network
    esac
    [[ $line == *"--hub"* || $line == *[\|\<\>]* ]] && continue  # the Hub, or a shell pipe or redirection
    # shellcheck disable=SC2086
    if out=$(cd "$work" && "$met" ${line#met } 2>&1 >/dev/null); then ok "runs: $line"; else bad "runs: $line" "$out"; fi
  done <<<"$examples"
done
finish help_examples
