#!/usr/bin/env bash
# Call 1 of 2026-12-04 afternoon: flash prefill with overlapped steps (step j's Q K^T issued with
# step j - 1's P V, the softmax under that P V) and rmsnorm's unrolled row loops, against the
# previous image (head.cubin: kernels/ of ddc713e) in one call. optest of the new image on
# prefill buckets 200 and 1100 (Llama-3.2-1B: head dim 64; Qwen3-0.6B: 128), then prefill:4096
# campaigns of head, the new image, and the new flash with its timing switches (nosm: no softmax
# arithmetic, MET_FW_DIAG=1; nomma: no Q K^T or P V products but the first, MET_FW_DIAG=6; wrong
# results on purpose) on Llama-3.2-1B, Qwen3-0.6B and Llama-3.1-8B (real configs, synth seed 1).
set -u
cd "$(dirname "$0")/../../.."
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
R=$OUT W=/tmp/metw
exec > >(tee -a $R/log.txt) 2>&1
mkdir -p $W && tar xJf .device/libs.tar.xz -C $W && export LD_LIBRARY_PATH=$W/lib
for c in head nosm nomma; do xz -dc .device/$c.cubin.xz > $W/$c.cubin; done
met=$PWD/.device/met
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv,noheader
t() { local t0=$SECONDS; "$@"; echo "  [rc $? in $((SECONDS - t0)) s, at $SECONDS s]"; }
for m in llama-3.2-1b qwen3-0.6b llama-3.1-8b; do
  ck=$W/$m
  t $met model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck 2>&1 | tail -1
  if [[ $m != llama-3.1-8b ]]; then
    t $met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-o --max-ctx 1280 --decode-rungs 1 --prefill-buckets 200,1100 2>&1 | tail -1
    t timeout 90 $met circuit optest --assets $ck-o --backend cuda > $R/optest-$m.txt 2>&1; grep -E "flash|rmsnorm" $R/optest-$m.txt | head -6; tail -1 $R/optest-$m.txt
  fi
  t $met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-a --max-ctx 4160 --decode-rungs 1 --prefill-buckets 4096 2>&1 | tail -1
done
for round in 1 2; do
  for v in head new nosm nomma; do
    [[ $round == 2 && ( $v == nosm || $v == nomma ) ]] && continue
    if [[ $v == new ]]; then unset MET_INTERP_CUBIN; else export MET_INTERP_CUBIN=$W/$v.cubin; fi
    for m in llama-3.2-1b qwen3-0.6b llama-3.1-8b; do
      d=$W/pf-$v-$m-$round
      t timeout 90 $met circuit run --assets $W/$m-a --backend cuda --campaign prefill:4096 --warmup 2 --repeats 10 --perf-dir $d > /dev/null 2>&1
      python3 bench/campaign_walls.py $d "$m $v r$round"
      mkdir -p $R/$v-$m-$round && find $d -type f -exec cp {} $R/$v-$m-$round/ \;
    done
  done
done
unset MET_INTERP_CUBIN
echo "=== end at $SECONDS s"
