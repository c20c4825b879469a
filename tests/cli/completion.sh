#!/usr/bin/env bash
# `met completion bash` is a script bash can source whose function completes subcommands, flags
# and values from the kernel tree: `met circuit plan --hardware h2` offers h200-sxm and its
# aliases and nothing else; zsh and fish scripts are generated and parse. Usage: completion.sh MET
set -uo pipefail
met="$1"
source "$(dirname "$0")/lib.sh"
script=$("$met" completion bash) || { echo "FAIL met completion bash"; exit 1; }
# shellcheck disable=SC1090
source <(printf '%s\n' "$script")
complete_words() {
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _met
  printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' '
}
got=$(complete_words met circuit plan --hardware h2)
[[ $got == "h200 h200-141gb h200-sxm " ]] && ok "--hardware h2 -> h200 h200-141gb h200-sxm" || bad "--hardware h2" "got: $got"
got=$(complete_words met circuit pl)
[[ $got == "plan " ]] && ok "circuit pl -> plan" || bad "circuit pl" "got: $got"
got=$(complete_words met circuit plan --har)
[[ $got == "--hardware " ]] && ok "plan --har -> --hardware" || bad "plan --har" "got: $got"
got=$(complete_words met circuit plan --model qwen3-8)
[[ $got == "qwen3-8b qwen3-8b-fp8 " ]] && ok "--model qwen3-8 -> the instances" || bad "--model qwen3-8" "got: $got"
got=$(complete_words met circuit plan --model Qwen/Qwen3-8)
[[ $got == "Qwen/Qwen3-8B Qwen/Qwen3-8B-FP8 " ]] && ok "--model Qwen/Qwen3-8 -> stored hf ids" || bad "--model Qwen/Qwen3-8" "got: $got"
got=$(complete_words met circuit plan --mode p)
[[ $got == "prefill " ]] && ok "--mode p -> prefill" || bad "--mode p" "got: $got"
got=$(complete_words met co)
[[ $got == "completion " ]] && ok "co -> completion" || bad "co" "got: $got"
if command -v zsh >/dev/null; then
  "$met" completion zsh | zsh -n && ok "zsh script parses" || bad "zsh script"
else
  "$met" completion zsh | grep '^autoload -U +X bashcompinit' >/dev/null && ok "zsh script generated (no zsh here to parse it)" || bad "zsh script"
fi
if command -v fish >/dev/null; then
  "$met" completion fish | fish -n && ok "fish script parses" || bad "fish script"
else
  "$met" completion fish | grep "complete -c met -n \"test (__met_path) = 'circuit plan'\" -l hardware -x -a '.*h200-sxm" >/dev/null &&
    ok "fish script lists --hardware values (no fish here to parse it)" || bad "fish script"
fi
if "$met" completion tcsh >/dev/null 2>&1; then bad "an unknown shell is accepted"; else ok "an unknown shell is refused"; fi
finish completion
