#!/usr/bin/env bash
# One device call: synthesise the Llama-3.2-1B and Qwen3-0.6B shapes with transformers, then the
# compiled peer on each (default mode), a peers.py smoke run, and the 1B with max-autotune.
set -u
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
T0=$SECONDS
P=out/compiled-peer-carry/peers
LOG=$OUT/log.txt
el() { echo "=== $* at $((SECONDS - T0)) s" | tee -a $LOG; }
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv >>$LOG 2>&1
python3 - >>$LOG 2>&1 <<'PY'
import os, shutil, time, torch, transformers
from transformers import AutoConfig, AutoModelForCausalLM
print("torch", torch.__version__, "transformers", transformers.__version__)
for m in ["llama-3.2-1b", "qwen3-0.6b"]:
    t = time.time(); d = f"/tmp/ck/{m}"; os.makedirs(d, exist_ok=True)
    shutil.copy(f"bench/configs/{m}.json", f"{d}/config.json")
    cfg = AutoConfig.from_pretrained(d)
    torch.manual_seed(1)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model.save_pretrained(d)
    print(m, sorted(os.listdir(d)), f"{time.time() - t:.1f} s", flush=True)
    del model
PY
el synth done
grep -o '"rope[^}]*}' /tmp/ck/llama-3.2-1b/config.json >>$LOG
run() { local limit=$1; shift; timeout "$limit" "$@" >>$LOG 2>&1; local rc=$?; el "rc $rc: $*"; }
run 80 python3 $P/compiled.py --checkpoint /tmp/ck/llama-3.2-1b --out $OUT/compiled-llama-3.2-1b.json
run 80 python3 $P/compiled.py --checkpoint /tmp/ck/qwen3-0.6b --out $OUT/compiled-qwen3-0.6b.json
run 40 python3 $P/peers.py --checkpoint /tmp/ck/qwen3-0.6b --out $OUT/peers-smoke-qwen3-0.6b.json --modes graph,prefill \
  --batch 1 --ctx 64 --steps 4 --prefill 16
left=$((290 - SECONDS + T0))
run $left python3 $P/compiled.py --checkpoint /tmp/ck/llama-3.2-1b --out $OUT/compiled-autotune-llama-3.2-1b.json \
  --compile-mode max-autotune-no-cudagraphs
grep -E "===|median|FAILED|error|Error" $LOG | tail -40
