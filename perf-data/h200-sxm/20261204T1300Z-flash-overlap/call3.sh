#!/usr/bin/env bash
# Call 3 of 2026-12-04 afternoon: the carried met of call 2 (its image "ovl": the overlapped flash,
# 7966454) against gep.cubin: the same tree with the gated GEMM's epilogue (gated_rows) taking four
# items a thread at a time instead of one. optest of gep on prefill buckets 200 and 1100
# (Llama-3.2-1B, Qwen3-0.6B), then prefill:4096 campaigns on Llama-3.2-1B, Qwen3-0.6B, Llama-3.1-8B.
set -u
cd "$(dirname "$0")/../../.."
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
R=$OUT W=/tmp/metw
exec > >(tee -a $R/log.txt) 2>&1
mkdir -p $W && tar xJf .device/libs.tar.xz -C $W && export LD_LIBRARY_PATH=$W/lib
for c in gep; do xz -dc .device/$c.cubin.xz > $W/$c.cubin; done
met=$PWD/.device/met
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv,noheader
t() { local t0=$SECONDS; "$@"; echo "  [rc $? in $((SECONDS - t0)) s, at $SECONDS s]"; }
for m in llama-3.2-1b qwen3-0.6b llama-3.1-8b; do
  ck=$W/$m
  t $met model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck 2>&1 | tail -1
  if [[ $m != llama-3.1-8b ]]; then
    t $met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-o --max-ctx 1280 --decode-rungs 1 --prefill-buckets 200,1100 2>&1 | tail -1
    MET_INTERP_CUBIN=$W/gep.cubin t timeout 90 $met circuit optest --assets $ck-o --backend cuda > $R/optest-gep-$m.txt 2>&1
    grep -E "silu" $R/optest-gep-$m.txt | cut -c1-100; tail -n 1 $R/optest-gep-$m.txt
  fi
  t $met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-a --max-ctx 4160 --decode-rungs 1 --prefill-buckets 4096 2>&1 | tail -1
done
for round in 1 2; do
  for v in ovl gep; do
    if [[ $v == ovl ]]; then unset MET_INTERP_CUBIN; else export MET_INTERP_CUBIN=$W/$v.cubin; fi
    for m in llama-3.2-1b qwen3-0.6b llama-3.1-8b; do
      d=$W/pf-$v-$m-$round
      t timeout 90 $met circuit run --assets $W/$m-a --backend cuda --campaign prefill:4096 --warmup 2 --repeats 10 --perf-dir $d > /dev/null 2>&1
      python3 bench/campaign_walls.py $d "$m $v r$round"
    done
  done
done
unset MET_INTERP_CUBIN
tar czf $R/campaigns.tar.gz -C $W $(cd $W && ls -d pf-*)
echo "=== end at $SECONDS s"
