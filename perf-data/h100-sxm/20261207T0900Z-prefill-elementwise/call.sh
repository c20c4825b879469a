#!/usr/bin/env bash
# One device call: (ab) the prefill of c11b2fb's met (.device/met) against the patched build
# (.device/met-new) with bench/prefill_check.sh, interleaved, the patched one optested on ragged
# buckets once; (verify) scripts/h200_bringup.sh with the patched build, prefill buckets 1,16,64.
# Env: STAGES (ab,verify), AB_BINS, MODELS, BR_STAGES, BR_MODELS, MET_VERIFY, VERIFY_S.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
for b in met met-new; do [[ -f .device/$b.xz && ! -f .device/$b ]] && xz -d -k -f ".device/$b.xz"; chmod +x ".device/$b"; done
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader
t0=$SECONDS
stage() { [[ ",${STAGES:-ab,verify}," == *",$1,"* ]]; }
if stage ab; then
  first=1
  for b in ${AB_BINS:-met met-new met met-new}; do
    o=" "
    [[ $b == met-new && $first == 1 ]] && { o=qwen3-0.6b; first=0; }
    echo "=== pass $b" >>"$OUT/ab.txt"
    MET=".device/$b" OUT="/tmp/ab/$b-$SECONDS" BUCKETS=128,512,4096 OPTEST_MODELS="$o" timeout 300 \
      bash bench/prefill_check.sh "${MODELS:-qwen3-0.6b,llama-3.2-1b,llama-3.1-8b}" >>"$OUT/ab.txt" 2>&1
    echo "=== $b pass rc $? at $((SECONDS - t0)) s"
  done
  grep -E "optest:|FAIL|^rc " "$OUT/ab.txt" | tail -n 12
  grep -E " T=[0-9]+ " "$OUT/ab.txt" | sed -E 's/ idle.*(kv_append=[0-9.]+).*(rmsnorm=[0-9.]+) (rope=[0-9.]+).*/ \1 \2 \3/'
  (cd /tmp/ab && tar czf "$OUT/ab-campaigns.tar.gz" --exclude='*.tar.gz' .)
fi
if stage verify; then
  MET="$PWD/.device/${MET_VERIFY:-met-new}" OUT=/tmp/br BUCKETS=1,16,64 timeout "${VERIFY_S:-300}" \
    bash scripts/h200_bringup.sh "${BR_STAGES:-tiny,optest,oracle}" "${BR_MODELS:-llama-3.2-1b}" >/dev/null 2>&1
  echo "=== verify rc $? at $((SECONDS - t0)) s"
  grep -E "^=== .*rc [1-9]|passed|FAIL|worst|identical|sequences" /tmp/br/log.txt | tail -n 50
  cp /tmp/br/log.txt "$OUT/bringup-log.txt"
  cp /tmp/br/results.tar.gz "$OUT/" 2>/dev/null
fi
