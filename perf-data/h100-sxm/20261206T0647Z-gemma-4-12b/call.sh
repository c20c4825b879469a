#!/usr/bin/env bash
# #14: attn_decode_split_merge in head blocks of 8 (a group of 16 query heads per KV head) on the GPU:
# the tiny Gemma-4 with 16 query heads (optest, cuda against its transformers fixture and the cpu
# bodies), optest of the 512-dim g16 shape and Gemma-4 12B, then Gemma-4 12B's transformers oracle,
# campaign and peers.
set -uo pipefail
R=$OUT; W=/tmp/metw; mkdir -p "$W" "$R"
exec > >(tee -a "$R/log.txt") 2>&1
tar xJf .device/libs.tar.xz -C "$W" && export LD_LIBRARY_PATH="$W/lib"
xz -dkf .device/met.xz; chmod +x .device/met
export MET=$PWD/.device/met WORK=$W
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
OUT=$R/b1 TINY=tiny-gemma4-g16 bash scripts/h200_bringup.sh tiny > /dev/null 2>&1; echo "tiny rc $? at $(el) s"
OUT=$R/b2 bash scripts/h200_bringup.sh optest tiny-gemma4-512-g16,gemma-4-12b > /dev/null 2>&1; echo "optest rc $? at $(el) s"
OUT=$R/b3 timeout $((560 - $(el))) bash scripts/h200_bringup.sh oracle,campaign gemma-4-12b > /dev/null 2>&1; echo "oracle+campaign rc $? at $(el) s"
if (( $(el) < 420 )); then
  OUT=$R/b4 timeout $((570 - $(el))) bash scripts/h200_bringup.sh peers gemma-4-12b > /dev/null 2>&1; echo "peers rc $? at $(el) s"
fi
for b in b1 b2 b3 b4; do [[ -f $R/$b/log.txt ]] && { echo "=== $b"; grep -v "^ *$" $R/$b/log.txt | tail -40 | cut -c1-300; }; done
