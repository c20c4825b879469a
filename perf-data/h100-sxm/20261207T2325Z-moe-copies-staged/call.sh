# Call of 2026-12-07 23:20 (carry .device: met-main = main 39dfa31, met-branch = next/moe-copies 2b84e8a,
# met-staged = main + the staged bf16 expert rows (uncommitted; built with the spill check as a warning:
# the loop kernel's frame 176 bytes), each built here, stripped, xz'd; libs.tar.xz):
# 1. bench/prefill_ab.sh met-main met-branch on Qwen3-30B-A3B cut to 4 layers (optest of met-branch);
# 2. bench/decode_ab.sh met-main met-staged on Qwen3-30B-A3B cut to 8 layers (optest of met-staged first);
# 3. scripts/h200_bringup.sh optest,campaign,oracle llama-3.1-8b with met-main, bounded by LIMIT.
set -uo pipefail
W=/tmp/metw; mkdir -p $W $OUT $W/cfg && tar xJf .device/libs.tar.xz -C $W
export LD_LIBRARY_PATH=$W/lib
for b in met-main met-branch met-staged; do [[ -f .device/$b ]] || { xz -d -T8 .device/$b.xz && chmod +x .device/$b; }; done
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
python3 -c "import json; c = json.load(open('bench/configs/qwen3-30b-a3b.json')); c['num_hidden_layers'] = 8
json.dump(c, open('$W/cfg/q30-8l.json', 'w'))"
WORK=$W/ab timeout 170 bash bench/prefill_ab.sh $PWD/.device/met-main $PWD/.device/met-branch > $W/ab.txt 2>&1
echo "prefill ab rc $? at $((SECONDS-t0)) s"; cut -c1-300 $W/ab.txt | grep -v "^    "
tar czf $OUT/ab.tgz -C $W ab.txt $(cd $W/ab && ls -d p-* | sed 's|^|ab/|')
rm -rf $W/ab
MODELS=q30-8l CONFIGS=$W/cfg LONG=none WALLS=1 WORK=$W/dab timeout 230 bash bench/decode_ab.sh $PWD/.device/met-main \
  $PWD/.device/met-staged > $W/dab.txt 2>&1
echo "decode ab rc $? at $((SECONDS-t0)) s"; grep -v "^    " $W/dab.txt | grep -v "^  *[0-9]* *|" | cut -c1-330 | tail -40
tar czf $OUT/dab.tgz -C $W dab.txt $(cd $W/dab && ls -d p-* | sed 's|^|dab/|'); rm -rf $W/dab
MET=$PWD/.device/met-main OUT=$W/bringup WORK=$W/b DROP_CHECKPOINTS=1 timeout $((${LIMIT:-500} - 10 - SECONDS + t0)) \
  bash scripts/h200_bringup.sh optest,campaign,oracle llama-3.1-8b > /dev/null 2>&1
echo "bringup rc $? at $((SECONDS-t0)) s"
grep -E "^=== |worst|failed|FAIL|decode C=1 |decode C=16 |prefill T=" $W/bringup/log.txt | cut -c1-220 | tail -30
tar czf $OUT/bringup.tgz -C $W/bringup .
echo "total $((SECONDS-t0)) s"
