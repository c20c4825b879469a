#!/usr/bin/env bash
# `met serve --backend cuda` (met's own image) against the same packets on the cpu bodies, for the
# tiny Gemma-4 and the tiny Qwen3 with their real tokenizers and chat templates
# (scripts/h200_serve_check.sh).
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R/res"
exec > >(tee -a "$R/log.txt") 2>&1
[[ -d $W/lib ]] || tar xJf .device/libs.tar.xz -C "$W"; export LD_LIBRARY_PATH="$W/lib"
[[ -x .device/met ]] || { xz -dkf .device/met.xz; chmod +x .device/met; }; M=$PWD/.device/met
for v in pp0 pp1; do [[ -f .device/$v.cubin ]] || xz -dkf .device/$v.cubin.xz; done
HW=$($M circuit probe --identify | head -n1); echo "HW=$HW"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
for model in gemma4 qwen3; do
  MODEL=$model timeout 200 bash scripts/h200_serve_check.sh > $R/res/serve-$model.txt 2>&1
  echo "serve check $model rc $? at $(el) s"; tail -n 25 $R/res/serve-$model.txt
done
echo "done at $(el) s"
tar czf $R/res.tar.gz -C $R res
