#!/usr/bin/env bash
# The one script that builds nothing, checks and times met on an H200 in one go (the device
# machine has no Debian -dev packages: `met` is built here and carried).
#
#   bash scripts/h200_bringup.sh [STAGES] [MODELS]
#     STAGES: comma list of tiny,ring,fp8,gptoss,gemma4moe,tptiny,optest,campaign,peers,oracle,lengths,ringlong,long,tp
#             (default: all but tptiny, lengths, ringlong, long and tp; run in that order per model)
#     MODELS: comma list of bench/configs names (default: llama-3.2-1b,qwen3-0.6b,llama-3.1-8b)
#
# Inputs: MET (default .device/met) and its shared libraries in .device/libs.tar.xz (made by
# scripts/device_pack.sh); bench/configs/*.json; tests/oracle/ and bench/peers/. Work goes to
# WORK (default /tmp/metw); results to OUT (default ./out-h200): log.txt, results.tar.gz with the
# campaign JSON/Markdown (perf/<device>/<model>/), the peers' JSON (peers-<model>.json and
# peers-compiled-<model>.json, filed in perf-data/<device>/<model>/ as <stamp>-peers.json and
# <stamp>-peers-compiled.json beside the campaign's <stamp>.json) and every comparison's output.
#
# Stages, per model (each real-size checkpoint comes from `met model synth --seed 1`, bf16):
#   tiny      TINY (comma list of tests/oracle/configs names; default tiny-llama3, tiny-qwen3, tiny-gemma3,
#             tiny-qwen3-moe, tiny-gemma4, tiny-gemma4-e, tiny-gemma4-moe): optest on cuda, cuda vs the transformers
#             fixtures of tests/oracle (FIXTURES=DIR reads them from DIR) and vs the same packets on
#             the cpu bodies (cpu-oracle)
#   ring      tiny-gemma3, tiny-gemma4 and tiny-gemma4-e as tiny does, emitted with prefill buckets of
#             32 and 48: their sliding layers' caches are rings of 64 rows that prompts and decode wrap
#   fp8       the block-scaled fp8 fixtures (tiny-llama3, tiny-qwen3 -fp8-e4m3) as tiny does (W8A16:
#             the fp8 gemv bodies and the mma.sync GEMM dequantising), then Qwen3-8B's shape synthesised
#             fp8-block128 (FP8_CONFIG, default bench/configs/qwen3-8b.json): optest on cuda and
#             decode and prefill campaigns
#   gptoss    tests/oracle/configs/tiny-gpt-oss.json synthesised with MXFP4 experts (its GPU bodies: the
#             biased router and linears, the MXFP4 experts with the clamped SwiGLU) as tiny does, against
#             the in-repo reference (tests/oracle/reference_gpt_oss.py) until a transformers fixture exists
#   gemma4moe tests/oracle/configs/tiny-gemma4-moe.json (its GPU bodies: the scaled router, the GELU experts
#             of layout 2, moe_down on their one tensor) as tiny does, against the in-repo reference
#             (tests/oracle/reference_gemma4.py); its transformers fixture runs in the tiny stage
#   tptiny    tensor parallelism (TP_RANKS ranks, default 2, one GPU each: the 2-GPU machine):
#             TINY_TP (default tiny-llama3,tiny-qwen3,tiny-gemma3,tiny-gemma4,tiny-qwen3-moe) emitted for h200-sxm with --tp TP_RANKS, run on cuda
#             against their transformers fixtures (free-running and forced), against the same packets on
#             the cpu bodies (cpu-oracle: simulated ranks) and against the --tp 1 emit on cuda
#   tpoptest  one GPU: TP_OPTEST (default tiny-llama3:bf16:2,tiny-llama3:bf16:4,tiny-qwen3-moe:bf16:2,
#             tiny-gemma4-moe:bf16:2,tiny-gemma4-e:bf16:2,tiny-gpt-oss:mxfp4:2; config:dtype:ranks) emitted with
#             --tp, optest of rank 0's packet alone (its row-parallel fp32 bodies on the rank's windows;
#             the collectives skipped): the TP bodies checked where no second GPU is
#   optest    every distinct instruction of a small emit (max-ctx 512, rungs 1 and 16, bucket 128)
#             on cuda vs the cpu bodies
#   oracle    transformers (bf16, greedy) vs met cuda: 64 steps, identical tokens, logits within 2e-2,
#             free-running and teacher-forced (run --follow; compare.py --forced)
#   lengths   transformers (bf16, greedy) vs met cuda on prompts of PROMPT_LENS tokens (default 1,37,700,4000;
#             seeded random ids below the vocabulary, one case each), 16 steps, free-running and
#             teacher-forced: prefill through the emit's buckets (128, 512, 4096) at every length
#   campaign  met circuit run --campaign decode:1,2,4,8,16@ctx=4096 --campaign prefill:128,512,4096
#   ringlong  a sliding-window model emitted with rings (largest bucket 512) and without (4096): optest of
#             the ring emit, both against transformers on 2 of 4 random prompts of 1500-2500 tokens
#             (64 steps, free-running and teacher-forced), and ring against linear
#   long      a prefill of LONG_T tokens (default 32768) through the emit's largest bucket (4096; later
#             chunks read the earlier ones' keys from the cache), an emit of max-ctx LONG_T with one
#             decode rung: met circuit run --campaign prefill:LONG_T (1 warm-up, 5 timed runs) beside its
#             ceiling, and transformers' prefill of the same length (peers.py --modes prefill)
#   tp        the model emitted with --tp TP_RANKS (its own checkpoint of MODELS, e.g. llama-3.1-70b, whose
#             141 GB of bf16 want WORK on a file system that holds them: `df` is printed first), run on
#             cuda: met circuit run --campaign decode:1,16@ctx=4096 --campaign prefill:4096 (per-rank
#             step times and the collectives' time per step are in the campaign record)
#   peers     bench/peers/peers.py: transformers eager and hand-captured CUDA graph, same checkpoint;
#             then bench/peers/compiled.py: the compiled PyTorch decoder (static KV cache, torch.compile,
#             hand-captured CUDA graph), checked against transformers' logits before it is timed
set -uo pipefail
stages="${1:-tiny,ring,fp8,gptoss,gemma4moe,optest,campaign,peers,oracle}"
models="${2:-llama-3.2-1b,qwen3-0.6b,llama-3.1-8b}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
OUT="${OUT:-$root/out-h200}"
WORK="${WORK:-/tmp/metw}"
mkdir -p "$OUT" "$WORK" "$WORK/res"
exec > >(tee -a "$OUT/log.txt") 2>&1

if [[ -f .device/libs.tar.xz ]]; then
  mkdir -p "$WORK/lib" && tar xJf .device/libs.tar.xz -C "$WORK" && export LD_LIBRARY_PATH="$WORK/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
MET="${MET:-$root/.device/met}"
HW="${HW:-$("$MET" circuit probe --identify | head -n 1)}"  # the registry device of this GPU (h200-sxm, h100-sxm, ...)
[[ -n $HW ]] || { echo "scripts/h200_bringup.sh: met names no registry device for this GPU"; exit 1; }
[[ -x "$MET" ]] || { echo "error: $MET is not an executable met"; exit 1; }
has() { [[ ",$stages," == *",$1,"* ]]; }
status=0
# A step piped into tee runs in a subshell, where its status=1 is lost: such a pipeline ends in
# `|| status=1` (pipefail gives it the step's rc).
step() {  # step NAME SECONDS CMD...: runs with a time limit, logs the outcome, never stops the script
  local name="$1" limit="$2"; shift 2
  local t0=$SECONDS
  echo "=== $name"
  timeout "$limit" "$@"
  local rc=$?
  echo "=== $name: rc $rc in $((SECONDS - t0)) s"
  [[ $rc -eq 0 ]] || status=1
  return $rc
}
prompts_of() {  # the --prompt-ids arguments of a fixture
  python3 -c "import json,sys; print(' '.join('--prompt-ids ' + ','.join(map(str, c['prompt'])) for c in json.load(open(sys.argv[1]))['cases']))" "$1"
}
steps_of() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['steps'])" "$1"; }
# attn_of CHECKPOINT: transformers' attention flag for it. Gemma runs the eager attention, the one
# its modelling code writes out (the query_pre_attn_scalar scale, the sliding-window mask), as
# tests/oracle's Gemma fixtures do; other models keep transformers' default.
attn_of() {
  python3 -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1])).get('model_type', '').startswith('gemma') else 1)" \
    "$1/config.json" && echo --attn-implementation eager
}
# against_tf NAME ASSETS TF STEPS OUT RESULT: met cuda on the prompts of transformers' TF, free-running
# (OUT.json) and teacher-forced (OUT-forced.json: fed TF's tokens, so exact bf16 ties in the
# reference cannot send the two paths apart; every step's logits and every decisive argmax are
# judged), each compared with TF at 2e-2 and the comparison appended to RESULT.
against_tf() {
  local name="$1" assets="$2" tf="$3" n="$4" out="$5" res="$6"
  # shellcheck disable=SC2046
  step "$name run cuda" 300 "$MET" circuit run --assets "$assets" --backend cuda $(prompts_of "$tf") --max-tokens "$n" \
    --logits-out "$out.json"
  step "$name cuda vs transformers" 120 python3 tests/oracle/compare.py "$tf" "$out.json" 2e-2 | tee -a "$res" || status=1
  # shellcheck disable=SC2046
  step "$name run cuda forced" 300 "$MET" circuit run --assets "$assets" --backend cuda $(prompts_of "$tf") --max-tokens "$n" \
    --follow "$tf" --logits-out "$out-forced.json"
  step "$name cuda vs transformers forced" 120 python3 tests/oracle/compare.py --forced "$tf" "$out-forced.json" 2e-2 \
    | tee -a "$res" || status=1
}
# same_tokens.py A.json B.json [TOL]: identical greedy tokens in two met --logits-out files (the same
# packets on two backends). Where a sequence's tokens part at a step whose top-1/top-2 gap in B's
# logits is within 2 TOL of its largest magnitude (a near tie that another summation order may break
# either way, as compare.py judges against transformers), it is compared up to that step and no
# further; a parting at any other step fails. The worst relative logit difference over the compared
# steps is printed.
cat >"$WORK/same_tokens.py" <<'EOF'
import json, sys
a, b = (json.load(open(p))["sequences"] for p in sys.argv[1:3])
tol = float(sys.argv[3]) if len(sys.argv) > 3 else 2e-2
if len(a) != len(b) or not a:
    sys.exit(f"same_tokens.py: {len(a)} and {len(b)} sequences")
def gap(row):
    scale = max(abs(v) for v in row) or 1.0
    top = sorted(row, reverse=True)[:2]
    return (top[0] - top[1]) / scale if len(top) == 2 else float("inf")
bad, ties, worst = [], [], 0.0
for k, (x, y) in enumerate(zip(a, b)):
    tx, ty = x["tokens"], y["tokens"]
    last = len(ty)
    first = next((i for i, (p, q) in enumerate(zip(tx, ty)) if p != q), None)
    if first is None and len(tx) != len(ty):
        first = min(len(tx), len(ty))
    if first is not None:
        g = gap(y["logits"][first]) if first < len(y["logits"]) else float("inf")
        if g <= 2 * tol:
            ties.append(f"sequence {k} parts at step {first}, a near tie (gap {g:.4g}): compared up to it")
            last = first + 1
        else:
            bad.append(f"sequence {k} parts at step {first} (gap {g:.4g}): {tx[first:first + 5]} vs {ty[first:first + 5]}")
    for la, lb in list(zip(x["logits"], y["logits"]))[:last]:
        m = max(abs(v) for v in lb) or 1.0
        worst = max(worst, max(abs(p - q) for p, q in zip(la, lb)) / m)
for line in ties + bad:
    print(line)
print(f"sequences {len(a)}: {len(bad)} parted off a near tie, {len(ties)} at one; worst relative logit difference {worst:.4g}")
sys.exit(1 if bad else 0)
EOF

nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv
echo "met: $("$MET" --help | head -1)"

# A tiny fixture on cuda: optest, vs transformers (free-running and teacher-forced), vs the same
# packets on the cpu bodies. tiny_fixture MODEL DTYPE NAME (NAME: the fixture, MODEL-bf16 or MODEL-fp8-e4m3).
# BUCKETS (default 64,128) are the emit's prefill buckets; RING=R also requires build.json's kv_ring
# to be R (the ring stage below).
tiny_fixture() {
  local m="$1" dtype="$2" n="$3"
  local fx="${FIXTURES:-tests/oracle/fixtures}/$n.json"
  step "$n synth" 60 "$MET" model synth --config "tests/oracle/configs/$m.json" --seed 1 --dtype "$dtype" --out "$WORK/$n" >/dev/null
  step "$n emit" 60 "$MET" circuit emit --hardware "$HW" --checkpoint "$WORK/$n" --out "$WORK/$n-a" --max-ctx 256 \
    --decode-rungs 1,2,4,8 --prefill-buckets "${BUCKETS:-64,128}"
  if [[ -n "${RING:-}" ]]; then
    step "$n kv_ring is $RING" 10 python3 -c "import json,sys; r=json.load(open(sys.argv[1])).get('kv_ring'); print('kv_ring', r); sys.exit(r != int(sys.argv[2]))" \
      "$WORK/$n-a/build.json" "$RING"
  fi
  step "$n optest cuda" 120 "$MET" circuit optest --assets "$WORK/$n-a" --backend cuda
  # shellcheck disable=SC2046
  step "$n run cuda" 120 "$MET" circuit run --assets "$WORK/$n-a" --backend cuda $(prompts_of "$fx") --max-tokens "$(steps_of "$fx")" \
    --logits-out "$WORK/$n-cuda.json"
  step "$n cuda vs transformers" 60 python3 tests/oracle/compare.py "$fx" "$WORK/$n-cuda.json" 2e-2
  # shellcheck disable=SC2046
  step "$n run cuda forced" 120 "$MET" circuit run --assets "$WORK/$n-a" --backend cuda $(prompts_of "$fx") \
    --max-tokens "$(steps_of "$fx")" --follow "$fx" --logits-out "$WORK/$n-cuda-forced.json"
  step "$n cuda vs transformers forced" 60 python3 tests/oracle/compare.py --forced "$fx" "$WORK/$n-cuda-forced.json" 2e-2
  # shellcheck disable=SC2046
  step "$n run cpu-oracle" 300 "$MET" circuit run --assets "$WORK/$n-a" --backend cpu-oracle $(prompts_of "$fx") \
    --max-tokens "$(steps_of "$fx")" --logits-out "$WORK/$n-cpu.json"
  step "$n cuda vs cpu-oracle" 60 python3 "$WORK/same_tokens.py" "$WORK/$n-cuda.json" "$WORK/$n-cpu.json"
}

if has tiny; then
  tiny="${TINY:-tiny-llama3,tiny-qwen3,tiny-gemma3,tiny-qwen3-moe,tiny-gemma4,tiny-gemma4-e,tiny-gemma4-moe}"
  for m in ${tiny//,/ }; do tiny_fixture "$m" bf16 "$m-bf16"; done
fi

# Sliding-window caches as rings on cuda: the Gemma fixtures with prefill buckets of 32 and 48, so
# the window of 16 keeps a ring of 64 rows a sequence that the prompts (the longest prefilled in two
# launches) and their decode steps wrap (ctest oracle_kv_ring_* does the same on the cpu bodies).
if has ring; then
  for m in tiny-gemma3 tiny-gemma4 tiny-gemma4-e; do
    mkdir -p "$WORK/ring"
    cp "tests/oracle/fixtures/$m-bf16.json" "$WORK/ring/$m-ring-bf16.json"
    BUCKETS=32,48 RING=64 FIXTURES="$WORK/ring" tiny_fixture "$m" bf16 "$m-ring-bf16"
  done
fi

if has fp8; then
  for m in tiny-llama3 tiny-qwen3; do tiny_fixture "$m" fp8-e4m3 "$m-fp8-e4m3"; done
  f8cfg="${FP8_CONFIG:-bench/configs/qwen3-8b.json}"
  f8="$(basename "$f8cfg" .json)-fp8"
  ck="$WORK/$f8"
  [[ -f "$ck/config.json" ]] || step "$f8 synth" 300 "$MET" model synth --config "$f8cfg" --seed 1 --dtype fp8-block128 --out "$ck"
  step "$f8 emit small" 120 "$MET" circuit emit --hardware "$HW" --checkpoint "$ck" --out "$ck-h" --max-ctx 512 \
    --decode-rungs 1,16 --prefill-buckets 128
  step "$f8 optest cuda" 300 "$MET" circuit optest --assets "$ck-h" --backend cuda | tee "$WORK/res/optest-$f8.txt" || status=1
  step "$f8 emit" 120 "$MET" circuit emit --hardware "$HW" --checkpoint "$ck" --out "$ck-a" \
    --max-ctx 4160 --decode-rungs 1,2,4,8,16 --prefill-buckets 128,512,4096
  step "$f8 campaign" 400 "$MET" circuit run --assets "$ck-a" --backend cuda --campaign decode:1,2,4,8,16@ctx=4096 \
    --campaign prefill:128,512,4096 --perf-dir "$WORK/res/perf"
  # DROP_CHECKPOINTS=1: this checkpoint goes once the stage is done, as each model's does below.
  [[ "${DROP_CHECKPOINTS:-0}" == 1 ]] && rm -rf "$ck"
fi

# A tiny model against its in-repo reference (the prompts of tests/oracle/reference_check.sh) until
# its transformers fixture exists: reference_fixture MODEL DTYPE REFERENCE, then tiny_fixture on it.
reference_fixture() {
  local m="$1" dtype="$2" ref="$3" n="$1-$2"
  mkdir -p "$WORK/ref"
  step "$n synth for the reference" 60 "$MET" model synth --config "tests/oracle/configs/$m.json" --seed 1 --dtype "$dtype" \
    --out "$WORK/ref/$n" >/dev/null  # the same bytes as tiny_fixture's synth, which may not write into it
  step "$n reference" 300 python3 "tests/oracle/$ref" --checkpoint "$WORK/ref/$n" --prompt-ids 1,17,42,99,7 \
    --prompt-ids 5,300,12,900,44,2,8 --steps 12 --out "$WORK/ref/$n.json"
  FIXTURES="$WORK/ref" tiny_fixture "$m" "$dtype" "$n"
}

# Tensor parallelism on TP_RANKS GPUs: tp_fixture MODEL (its bf16 transformers fixture), the emit of
# tiny_fixture with --tp.
tp_ranks="${TP_RANKS:-2}"
# NCCL for the cuda backend's ranks: libnccl.so.2 through the loader's path, else the one PyTorch's
# wheels carry (src/interp/nccl.cpp refuses a library of another major.minor than met's headers).
if (has tptiny || has tp) && [[ -z "${MET_NCCL_LIBRARY:-}" ]] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl.so.2 '; then
  MET_NCCL_LIBRARY="$(python3 -c "import glob, os, nvidia.nccl; print(sorted(glob.glob(os.path.join(list(nvidia.nccl.__path__)[0], 'lib', 'libnccl.so*')))[0])" 2>/dev/null)"
  export MET_NCCL_LIBRARY
  echo "MET_NCCL_LIBRARY=$MET_NCCL_LIBRARY"
fi
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG="${NCCL_DEBUG:-WARN}"
tp_fixture() {
  local m="$1" n="$1-bf16"
  local fx="tests/oracle/fixtures/$n.json" a="$WORK/$n-tp$tp_ranks"
  step "$n synth" 60 "$MET" model synth --config "tests/oracle/configs/$m.json" --seed 1 --dtype bf16 --out "$WORK/$n" >/dev/null
  for t in 1 "$tp_ranks"; do
    step "$n emit --tp $t" 60 "$MET" circuit emit --hardware "$HW" --checkpoint "$WORK/$n" --out "$WORK/$n-tp$t" --max-ctx 256 \
      --decode-rungs 1,2,4,8 --prefill-buckets 64,128 --tp "$t"
  done
  : >"$WORK/res/tp-$n.txt"
  against_tf "$n tp$tp_ranks" "$a" "$fx" "$(steps_of "$fx")" "$WORK/$n-tp$tp_ranks-cuda" "$WORK/res/tp-$n.txt"
  # shellcheck disable=SC2046
  step "$n tp1 run cuda" 120 "$MET" circuit run --assets "$WORK/$n-tp1" --backend cuda $(prompts_of "$fx") \
    --max-tokens "$(steps_of "$fx")" --logits-out "$WORK/$n-tp1-cuda.json"
  step "$n tp$tp_ranks vs tp1 on cuda" 60 python3 "$WORK/same_tokens.py" "$WORK/$n-tp$tp_ranks-cuda.json" "$WORK/$n-tp1-cuda.json" \
    | tee -a "$WORK/res/tp-$n.txt" || status=1
  # shellcheck disable=SC2046
  step "$n tp$tp_ranks run cpu-oracle" 300 "$MET" circuit run --assets "$a" --backend cpu-oracle $(prompts_of "$fx") \
    --max-tokens "$(steps_of "$fx")" --logits-out "$WORK/$n-tp$tp_ranks-cpu.json"
  step "$n tp$tp_ranks cuda vs cpu-oracle" 60 python3 "$WORK/same_tokens.py" "$WORK/$n-tp$tp_ranks-cuda.json" \
    "$WORK/$n-tp$tp_ranks-cpu.json" | tee -a "$WORK/res/tp-$n.txt" || status=1
}
if has tptiny; then
  nvidia-smi topo -m || true
  for m in $(echo "${TINY_TP:-tiny-llama3,tiny-qwen3,tiny-gemma3,tiny-gemma4,tiny-qwen3-moe}" | tr , " "); do tp_fixture "$m"; done
fi

if has tpoptest; then
  for spec in $(echo "${TP_OPTEST:-tiny-llama3:bf16:2,tiny-llama3:bf16:4,tiny-qwen3-moe:bf16:2,tiny-gemma4-moe:bf16:2,tiny-gemma4-e:bf16:2,tiny-gpt-oss:mxfp4:2}" | tr , " "); do
    IFS=: read -r m dt tp <<<"$spec"
    n="$m-$dt"
    [[ -f $WORK/tpo/$n/config.json ]] || step "$n synth" 60 "$MET" model synth --config "tests/oracle/configs/$m.json" --seed 1 \
      --dtype "$dt" --out "$WORK/tpo/$n" >/dev/null
    step "$n emit --tp $tp" 60 "$MET" circuit emit --hardware "$HW" --checkpoint "$WORK/tpo/$n" --out "$WORK/tpo/$n-tp$tp" --tp "$tp" \
      --max-ctx 256 --decode-rungs 1,4 --prefill-buckets 64,200
    step "$n tp$tp optest cuda (rank 0)" 300 "$MET" circuit optest --assets "$WORK/tpo/$n-tp$tp" --backend cuda
  done
fi

if has gptoss; then reference_fixture tiny-gpt-oss mxfp4 reference_gpt_oss.py; fi
if has gemma4moe; then reference_fixture tiny-gemma4-moe bf16 reference_gemma4.py; fi

for m in ${models//,/ }; do
  ck="$WORK/$m"
  if has tp; then df -h "$WORK" /dev/shm 2>/dev/null || true; fi
  if has optest || has oracle || has campaign || has peers || has lengths || has ringlong || has long || has tp; then
    [[ -f "$ck/config.json" ]] || step "$m synth" 300 "$MET" model synth --config "bench/configs/$m.json" --seed 1 --dtype bf16 --out "$ck"
  fi
  if has optest; then
    step "$m emit small" 120 "$MET" circuit emit --hardware "$HW" --checkpoint "$ck" --out "$ck-h" --max-ctx 512 \
      --decode-rungs 1,16 --prefill-buckets 128
    step "$m optest cuda" 300 "$MET" circuit optest --assets "$ck-h" --backend cuda | tee "$WORK/res/optest-$m.txt" || status=1
  fi
  if has oracle || has campaign || has lengths; then
    [[ -f "$ck-a/model.pkt" ]] || step "$m emit" 120 "$MET" circuit emit --hardware "$HW" --checkpoint "$ck" --out "$ck-a" \
      --max-ctx 4160 --decode-rungs 1,2,4,8,16 --prefill-buckets 128,512,4096
  fi
  if has campaign; then
    step "$m campaign" 400 "$MET" circuit run --assets "$ck-a" --backend cuda --campaign decode:1,2,4,8,16@ctx=4096 \
      --campaign prefill:128,512,4096 --perf-dir "$WORK/res/perf"
  fi
  if has tp; then
    step "$m emit --tp $tp_ranks" 300 "$MET" circuit emit --hardware "$HW" --checkpoint "$ck" --out "$ck-tp$tp_ranks" \
      --max-ctx 4160 --decode-rungs 1,16 --prefill-buckets 4096 --tp "$tp_ranks"
    step "$m campaign --tp $tp_ranks" 600 "$MET" circuit run --assets "$ck-tp$tp_ranks" --backend cuda \
      --campaign decode:1,16@ctx=4096 --campaign prefill:4096 --perf-dir "$WORK/res/perf"
  fi
  if has peers; then
    step "$m peers" 400 python3 bench/peers/peers.py --checkpoint "$ck" --out "$WORK/res/peers-$m.json"
    step "$m peers compiled" 400 python3 bench/peers/compiled.py --checkpoint "$ck" --out "$WORK/res/peers-compiled-$m.json"
  fi
  if has oracle; then
    # The 2 most decisive of 16 seeded random prompts (random weights give flat logits; each case
    # records its smallest top-1/top-2 margin), plus one fixed prompt.
    # shellcheck disable=SC2046
    step "$m transformers" 300 python3 tests/oracle/transformers_logits.py --checkpoint "$ck" --prompt-ids 1,17,42,99,7 \
      --random-prompts 16 --keep 2 --seed 1 --steps 64 $(attn_of "$ck") --out "$WORK/$m-tf.json"
    : >"$WORK/res/oracle-$m.txt"
    against_tf "$m" "$ck-a" "$WORK/$m-tf.json" 64 "$WORK/$m-cuda" "$WORK/res/oracle-$m.txt"
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); [c.pop('logits', None) for c in j['cases']]; json.dump(j, open(sys.argv[2], 'w'))" \
      "$WORK/$m-tf.json" "$WORK/res/oracle-$m-tokens.json" || true
  fi
  if has lengths; then
    ids=()
    for n in $(echo "${PROMPT_LENS:-1,37,700,4000}" | tr , " "); do
      ids+=(--prompt-ids "$(python3 -c "import json,random,sys; v=json.load(open(sys.argv[1]))['vocab_size']; n=int(sys.argv[2]); r=random.Random(n); print(','.join(str(r.randrange(v)) for _ in range(n)))" "$ck/config.json" "$n")")
    done
    # shellcheck disable=SC2046
    step "$m transformers lengths" 600 python3 tests/oracle/transformers_logits.py --checkpoint "$ck" "${ids[@]}" --seed 1 \
      --steps 16 $(attn_of "$ck") --out "$WORK/$m-len-tf.json"
    : >"$WORK/res/lengths-$m.txt"
    against_tf "$m lengths" "$ck-a" "$WORK/$m-len-tf.json" 16 "$WORK/$m-len-cuda" "$WORK/res/lengths-$m.txt"
  fi
  if has ringlong; then
    # Long prompts through a ring (a sliding-window model): an emit whose largest bucket (512) makes
    # its sliding caches rings of window + 511 rows rounded up to 64, beside one whose bucket of
    # 4096 leaves them linear; prompts of 1500-2500 tokens wrap the ring in prefill and in decode.
    step "$m emit ring" 120 "$MET" circuit emit --hardware "$HW" --checkpoint "$ck" --out "$ck-ring" --max-ctx 4096 \
      --decode-rungs 1,2 --prefill-buckets 128,512
    step "$m emit linear" 120 "$MET" circuit emit --hardware "$HW" --checkpoint "$ck" --out "$ck-lin" --max-ctx 4096 \
      --decode-rungs 1,2 --prefill-buckets 128,512,4096
    step "$m kv_ring" 10 python3 -c "import json,sys; r=[json.load(open(f)).get('kv_ring', 0) for f in sys.argv[1:]]; print('kv_ring ring/linear', r); sys.exit(not (r[0] > 0 and r[1] == 0))" \
      "$ck-ring/build.json" "$ck-lin/build.json"
    step "$m optest cuda ring" 300 "$MET" circuit optest --assets "$ck-ring" --backend cuda | tee "$WORK/res/optest-$m-ring.txt" || status=1
    # shellcheck disable=SC2046
    step "$m transformers long" 600 python3 tests/oracle/transformers_logits.py --checkpoint "$ck" --random-prompts 4 --keep 2 \
      --min-prompt-len 1500 --max-prompt-len 2500 --seed 1 --steps 64 $(attn_of "$ck") --out "$WORK/$m-long-tf.json"
    : >"$WORK/res/ringlong-$m.txt"
    for v in ring lin; do
      against_tf "$m $v" "$ck-$v" "$WORK/$m-long-tf.json" 64 "$WORK/$m-long-$v" "$WORK/res/ringlong-$m.txt"
    done
    step "$m cuda ring vs linear" 60 python3 "$WORK/same_tokens.py" "$WORK/$m-long-ring.json" "$WORK/$m-long-lin.json" \
      | tee -a "$WORK/res/ringlong-$m.txt" || status=1
  fi
  if has long; then
    long_t="${LONG_T:-32768}"
    step "$m emit long" 120 "$MET" circuit emit --hardware "$HW" --checkpoint "$ck" --out "$ck-long" --max-ctx "$long_t" \
      --decode-rungs 1 --prefill-buckets 128,512,4096
    step "$m campaign long" 400 "$MET" circuit run --assets "$ck-long" --backend cuda --campaign "prefill:$long_t" --warmup 1 \
      --repeats 5 --perf-dir "$WORK/res/perf"
    step "$m peers long" 400 python3 bench/peers/peers.py --checkpoint "$ck" --modes prefill --prefill "$long_t" \
      --out "$WORK/res/peers-long-$m.json"
  fi
  tar czf "$OUT/results.tar.gz" -C "$WORK/res" .  # after each model: a cut-short run still returns what it measured
  # DROP_CHECKPOINTS=1: the model's checkpoint goes once its stages are done (the machine's 64 GiB
  # disk holds the 27B's 54 GB or several 8Bs, not both). Its packets read the checkpoint, so a
  # later call synthesises and emits again.
  [[ "${DROP_CHECKPOINTS:-0}" == 1 ]] && rm -rf "$ck"
done

tar czf "$OUT/results.tar.gz" -C "$WORK/res" .
echo "bringup: done, status $status"
exit $status
