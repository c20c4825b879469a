#!/usr/bin/env bash
# The hopper calibration sweep and its refit (docs/arch/planner.md, "Calibration"): run it again
# whenever the hopper bodies change. Two halves, one per machine:
#
#   bash scripts/h200_sweep.sh run [MODELS]   on the H200 (met carried in .device/, as for
#                                             scripts/h200_bringup.sh): for each model, decode
#                                             C = 1, 2, 4, 8, 16 at ctx 512, 4096 and 16384 and
#                                             prefill 128, 512, 4096; writes $OUT/sweep.tar.gz
#                                             (the campaigns, perf/h200-sxm/<model>/) and
#                                             $OUT/sweep-log.txt
#   bash scripts/h200_sweep.sh file TARBALL   here, with met built: files the campaigns under
#                                             perf-data/h200-sxm/<model>/, refits
#                                             kernels/hopper/EVIDENCE.toml (met circuit calibrate
#                                             --update), rewrites the held-out table of
#                                             docs/arch/planner.md (--held-out --write-doc) and
#                                             regenerates the goldens (scripts/golden.sh)
#
# MODELS: comma list of bench/configs names (default: the six calibration shapes). Each checkpoint
# is `met model synth --seed 1`, bf16, removed after its campaigns (the device disk holds one
# 27B checkpoint at a time). A model whose KV cache for 16 sequences of 16384 tokens does not fit
# takes ctx 16384 at the largest rung that does (the emit is retried at half the rungs).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 1
mode="${1:-}"
default_models=llama-3.2-1b,qwen3-0.6b,llama-3.1-8b,qwen3-8b,mistral-7b-v0.3,gemma-3-27b-it

case "$mode" in
run)
  models="${2:-$default_models}"
  OUT="${OUT:-$root/out-h200}"
  WORK="${WORK:-/tmp/metsweep}"
  mkdir -p "$OUT" "$WORK/perf"
  exec > >(tee -a "$OUT/sweep-log.txt") 2>&1
  if [[ -f .device/libs.tar.xz ]]; then
    mkdir -p "$WORK/lib" && tar xJf .device/libs.tar.xz -C "$WORK" && export LD_LIBRARY_PATH="$WORK/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  MET="${MET:-$root/.device/met}"
  [[ -x "$MET" ]] || { echo "error: $MET is not an executable met"; exit 1; }
  # The sweep refits the H200's calibration: on another GPU its campaigns would be refused after
  # the synths and emits, so it stops first, naming the GPU.
  gpu="$("$MET" circuit probe --identify | head -n 1)"
  [[ $gpu == h200-sxm ]] || { echo "error: the sweep calibrates h200-sxm; this GPU is '${gpu:-unknown}' (met circuit probe --identify)"; exit 1; }
  status=0
  step() {  # step NAME SECONDS CMD...: runs with a time limit and logs the outcome
    local name="$1" limit="$2"
    shift 2
    local t0=$SECONDS
    echo "=== $name"
    timeout "$limit" "$@"
    local rc=$?
    echo "=== $name: rc $rc in $((SECONDS - t0)) s"
    return $rc
  }
  for m in ${models//,/ }; do
    [[ -f bench/configs/$m.json ]] || { echo "error: bench/configs/$m.json: no such calibration shape"; status=1; continue; }
    ck="$WORK/$m"
    step "$m synth" 300 "$MET" model synth --config "bench/configs/$m.json" --seed 1 --dtype bf16 --out "$ck" || { status=1; continue; }
    step "$m emit" 120 "$MET" circuit emit --hardware h200-sxm --checkpoint "$ck" --out "$ck-a" --max-ctx 4160 \
      --decode-rungs 1,2,4,8,16 --prefill-buckets 128,512,4096 || status=1
    step "$m campaign ctx 512 and 4096, prefill" 400 "$MET" circuit run --assets "$ck-a" --backend cuda \
      --campaign decode:1,2,4,8,16@ctx=512 --campaign decode:1,2,4,8,16@ctx=4096 --campaign prefill:128,512,4096 \
      --perf-dir "$WORK/perf" || status=1
    rm -rf "$ck-a"
    # ctx 16384: every rung whose cache fits, the largest first
    long=0
    for rungs in 1,2,4,8,16 1,2,4,8 1,2,4 1,2 1; do
      step "$m emit ctx 16384 rungs $rungs" 120 "$MET" circuit emit --hardware h200-sxm --checkpoint "$ck" --out "$ck-l" \
        --max-ctx 16448 --decode-rungs "$rungs" --prefill-buckets 4096 || { status=1; break; }
      if step "$m campaign ctx 16384 C=$rungs" 200 "$MET" circuit run --assets "$ck-l" --backend cuda \
        --campaign "decode:$rungs@ctx=16384" --perf-dir "$WORK/perf"; then
        long=1
        break
      fi
      echo "(retrying with fewer rungs)"
    done
    [[ $long == 1 ]] || status=1
    rm -rf "$ck" "$ck-l"
    tar czf "$OUT/sweep.tar.gz" -C "$WORK" perf  # after each model: a cut-short sweep still returns what it measured
  done
  echo "sweep: done, status $status"
  exit $status
  ;;
file)
  tarball="${2:?usage: $0 file SWEEP.tar.gz}"
  met="${MET:-$root/build/src/cli/met}"
  [[ -x "$met" ]] || { echo "error: $met: build met first (scripts/build.sh)"; exit 1; }
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  tar xzf "$tarball" -C "$tmp" || exit 1
  [[ -d $tmp/perf/h200-sxm ]] || { echo "error: $tarball holds no perf/h200-sxm/ campaigns"; exit 1; }
  filed=0
  for d in "$tmp"/perf/h200-sxm/*/; do
    m="$(basename "$d")"
    [[ -f bench/configs/$m.json ]] || { echo "error: campaigns of $m, which bench/configs does not hold"; exit 1; }
    mkdir -p "perf-data/h200-sxm/$m"
    for f in "$d"*.json "$d"*.md; do
      [[ -f $f ]] || continue
      [[ -e perf-data/h200-sxm/$m/$(basename "$f") ]] && { echo "error: perf-data/h200-sxm/$m/$(basename "$f") exists"; exit 1; }
      cp "$f" "perf-data/h200-sxm/$m/" && filed=$((filed + 1))
    done
  done
  echo "filed $filed campaign files"
  "$met" circuit calibrate perf-data/h200-sxm --configs bench/configs --hardware h200-sxm --update || exit 1
  "$met" circuit calibrate perf-data/h200-sxm --configs bench/configs --hardware h200-sxm --held-out \
    --write-doc docs/arch/planner.md || echo "warning: the held-out check fails the bar (see above)"
  bash scripts/golden.sh || exit 1
  echo "refit: review git diff (kernels/hopper/EVIDENCE.toml, docs/arch/planner.md, golden/) and the prose above the held-out table"
  ;;
*)
  echo "usage: $0 run [MODELS] | file SWEEP.tar.gz" >&2
  exit 2
  ;;
esac
