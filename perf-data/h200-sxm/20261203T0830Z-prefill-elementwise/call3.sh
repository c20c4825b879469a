#!/usr/bin/env bash
# call 3 (the session's last): the merged met of this session's head (.device/met) and, for the
# elementwise A/B, the met carried in calls 1-2 (met-old, 9531315's bodies) with its own image
# (head) or with norm.cubin (the rmsnorm change) or rope.cubin (rmsnorm + rope) through
# MET_INTERP_CUBIN. Every stage is time-guarded; the log is written as it goes.
set -u
R=$OUT
exec > >(tee -a $R/log.txt) 2>&1
export WORK=/tmp/metw
mkdir -p $WORK && tar xJf .device/libs.tar.xz -C $WORK && export LD_LIBRARY_PATH=$WORK/lib
for f in met met-old norm.cubin rope.cubin; do xz -dc .device/$f.xz > $WORK/$f; done
chmod +x $WORK/met $WORK/met-old
met=$WORK/met
old=$WORK/met-old
LIMIT=${LIMIT:-150}
t() { local t0=$SECONDS; "$@"; echo "  [rc $? in $((SECONDS - t0)) s, at $SECONDS s]"; }
time_left() { ((SECONDS < LIMIT)) || { echo "=== skipped (at $SECONDS s): $*"; return 1; }; }
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv,noheader

echo "=== 1. new met: optest on Qwen3-0.6B (rmsnorm per-head path, rope, gather_rows at 1, 16 and 128 rows)"
ck=$WORK/qwen3-0.6b
t $met model synth --config bench/configs/qwen3-0.6b.json --seed 1 --dtype bf16 --out $ck 2>&1 | tail -1
t $met circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-h --max-ctx 512 --decode-rungs 1,16 --prefill-buckets 128 2>&1 | tail -1
t timeout 60 $met circuit optest --assets $ck-h --backend cuda > $R/optest-qwen3-0.6b.txt 2>&1; tail -1 $R/optest-qwen3-0.6b.txt

echo "=== 2. elementwise A/B, old met: head | norm | rope (prefill 4096)"
ab() {  # ab MODEL
  local m=$1 ck=$WORK/$1
  [[ -f $ck/config.json ]] || t $old model synth --config bench/configs/$m.json --seed 1 --dtype bf16 --out $ck 2>&1 | tail -1
  t $old circuit emit --hardware h200-sxm --checkpoint $ck --out $ck-old --max-ctx 4160 --decode-rungs 1 --prefill-buckets 4096 2>&1 | tail -1
  for v in head norm rope; do
    if [[ $v == head ]]; then unset MET_INTERP_CUBIN; else export MET_INTERP_CUBIN=$WORK/$v.cubin; fi
    mkdir -p $WORK/ab-$m-$v
    t timeout 40 $old circuit run --assets $ck-old --backend cuda --campaign prefill:4096 --warmup 2 --repeats 10 --perf-dir $WORK/ab-$m-$v 2>&1 | tail -1
    find $WORK/ab-$m-$v -name '*.md' -exec grep -E '^\| prefill T|^\| `prefill_4096` \| argmax' {} \; | cut -c1-420 | sed "s/^/$v: /"
    find $WORK/ab-$m-$v -name '*.md' -exec cp {} $R/ab-$m-$v.md \;
  done
  unset MET_INTERP_CUBIN
}
ab qwen3-0.6b
rm -rf $WORK/qwen3-0.6b*

echo "=== 4. MoE grouped prefill (moe_*_mma): Qwen3-30B-A3B's config with 4 of its 48 layers"
python3 -c "import json,sys; c=json.load(open('bench/configs/qwen3-30b-a3b.json')); c['num_hidden_layers']=4; json.dump(c, open(sys.argv[1], 'w'), indent=1)" $WORK/q30b4.json
q=$WORK/q30b4
t $met model synth --config $WORK/q30b4.json --seed 1 --dtype bf16 --out $q 2>&1 | tail -1
t $met circuit emit --hardware h200-sxm --checkpoint $q --out $q-h --max-ctx 1280 --decode-rungs 1,16 --prefill-buckets 32,100,1000 2>&1 | tail -1
t timeout 60 $met circuit optest --assets $q-h --backend cuda > $R/optest-q30b4.txt 2>&1; grep -E 'FAIL|moe.*_mma' $R/optest-q30b4.txt | cut -c1-160 | head -12; tail -1 $R/optest-q30b4.txt
t $met circuit emit --hardware h200-sxm --checkpoint $q --out $q-a --max-ctx 4160 --decode-rungs 1 --prefill-buckets 128,4096 2>&1 | tail -1
mkdir -p $WORK/pq
t timeout 40 $met circuit run --assets $q-a --backend cuda --campaign prefill:128,4096 --warmup 1 --repeats 5 --perf-dir $WORK/pq 2>&1 | tail -1
find $WORK/pq -name '*.md' -exec grep -E '^\| prefill T|^\| `prefill_4096` \| argmax|^\| `prefill_128` \| argmax' {} \; | cut -c1-420
find $WORK/pq -name '*.md' -exec cp {} $R/q30b4-prefill.md \;
rm -rf $q $q-h $q-a
echo "=== 5. gpt-oss transformers fixtures (tiny-gpt-oss, bf16 and MXFP4)"
for d in bf16 mxfp4; do
  time_left "gpt-oss $d" || break
  t $met model synth --config tests/oracle/configs/tiny-gpt-oss.json --seed 1 --dtype $d --out $WORK/tiny-gpt-oss-$d 2>&1 | tail -1
  t timeout 50 python3 tests/oracle/transformers_logits.py --checkpoint $WORK/tiny-gpt-oss-$d --prompt-ids 1,17,42,99,7 \
    --random-prompts 60 --keep 3 --min-router-gap 4 --seed 1 --steps 32 --out $R/tiny-gpt-oss-$d.json 2>&1 | grep -v Loading | tail -4
done
echo "=== 3. new met: tiny fixtures on cuda (optest, transformers, cpu-oracle)"
time_left "tiny" && OUT=$R/tiny WORK=$WORK/tiny TINY=tiny-qwen3,tiny-qwen3-moe,tiny-gemma4 MET=$met t timeout 120 bash scripts/h200_bringup.sh tiny > /dev/null 2>&1
[[ -f $R/tiny/log.txt ]] && grep -E '^=== .*: rc|optest:|worst|sequences' $R/tiny/log.txt | cut -c1-200 && mv $R/tiny/log.txt $R/tiny-log.txt && rm -rf $R/tiny
time_left "A/B llama-3.2-1b" && ab llama-3.2-1b
echo "=== end at $SECONDS s"
