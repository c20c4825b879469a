#!/usr/bin/env bash
# Call 2 of 2026-12-04 afternoon: the overlapped flash of call 1 (the carried met's image, "ovl")
# against ovl2.cubin: its softmax with each row's max and sum over 4 partial chains and O's rescale
# skipped where every row of the warp keeps its max (ovl2nosm: the same with MET_FW_DIAG=1, no
# softmax arithmetic). optest of ovl2 on prefill buckets 200 and 1100 (Llama-3.2-1B: head dim 64;
# Qwen3-0.6B: 128), then prefill:4096 campaigns on Llama-3.2-1B, Qwen3-0.6B and Llama-3.1-8B.
set -u
cd "$(dirname "$0")/../../.."
[[ -f .device/met ]] || { xz -d -T4 .device/met.xz && chmod +x .device/met; }
R=$OUT W=/tmp/metw
exec > >(tee -a $R/log.txt) 2>&1
mkdir -p $W && tar xJf .device/libs.tar.xz -C $W && export LD_LIBRARY_PATH=$W/lib
for c in ovl2 ovl2nosm; do xz -dc .device/$c.cubin.xz > $W/$c.cubin; done
met=$PWD/.device/met
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv,noheader
t() { local t0=$SECONDS; "$@"; echo "  [rc $? in $((SECONDS - t0)) s, at $SECONDS s]"; }
for m in llama-3.2-1b qwen3-0.6b llama-3.1-8b; do
  ck=$W/$m
  t $met model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck 2>&1 | tail -1
  if [[ $m != llama-3.1-8b ]]; then
    t $met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-o --max-ctx 1280 --decode-rungs 1 --prefill-buckets 200,1100 2>&1 | tail -1
    MET_INTERP_CUBIN=$W/ovl2.cubin t timeout 90 $met circuit optest --assets $ck-o --backend cuda > $R/optest-ovl2-$m.txt 2>&1
    grep -E "flash" $R/optest-ovl2-$m.txt | cut -c1-100; tail -n 1 $R/optest-ovl2-$m.txt
  fi
  t $met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-a --max-ctx 4160 --decode-rungs 1 --prefill-buckets 4096 2>&1 | tail -1
done
for round in 1 2; do
  for v in ovl ovl2 ovl2nosm; do
    [[ $round == 2 && $v == ovl2nosm ]] && continue
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
