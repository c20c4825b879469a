#!/usr/bin/env bash
# Gemma's norms in the fused gemv ops (norm_once, norm_offset), on the H200 in one call, with the
# interpreter image of these bodies: the tiny Gemma-3, Gemma-4, Llama-3 and Qwen3 fixtures (optest on
# cuda, vs transformers free-running and teacher-forced, vs the cpu bodies), Llama-3.1-8B's campaign
# (its norms take the other branch), gemma-3-1b-it (optest, campaign, transformers oracle) and
# gemma-3-27b-it (optest, campaign).
set -uo pipefail
cd "$(dirname "$0")/../../.."
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
export OUT WORK=/tmp/metw
t0=$SECONDS
TINY=tiny-gemma3,tiny-gemma4,tiny-llama3,tiny-qwen3 bash scripts/h200_bringup.sh tiny
echo "### tiny done at $((SECONDS - t0)) s"
mv "$OUT/results.tar.gz" "$OUT/results-tiny.tar.gz" 2>/dev/null
DROP_CHECKPOINTS=1 bash scripts/h200_bringup.sh campaign llama-3.1-8b
mv "$OUT/results.tar.gz" "$OUT/results-llama.tar.gz" 2>/dev/null
echo "### llama done at $((SECONDS - t0)) s"
DROP_CHECKPOINTS=1 bash scripts/h200_bringup.sh optest,campaign,oracle gemma-3-1b-it
mv "$OUT/results.tar.gz" "$OUT/results-gemma1b.tar.gz" 2>/dev/null
echo "### gemma-3-1b done at $((SECONDS - t0)) s"
DROP_CHECKPOINTS=1 bash scripts/h200_bringup.sh optest,campaign gemma-3-27b-it
mv "$OUT/results.tar.gz" "$OUT/results-gemma27b.tar.gz" 2>/dev/null
echo "### gemma-3-27b done at $((SECONDS - t0)) s"
