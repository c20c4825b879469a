#!/usr/bin/env bash
# call 3: Gemma-3 1B with the decode split caps (window, merge balance) and a part_o buffer per
# shape: optest, campaign, oracle (transformers eager attention)
set -u
export WORK=/tmp/metw
R=$OUT
OUT=$R/gemma DROP_CHECKPOINTS=1 bash scripts/h200_bringup.sh optest,campaign,oracle gemma-3-1b-it > /dev/null 2>&1
cd $R
for f in gemma/log.txt; do [[ -f $f ]] || continue; echo "== $f"; grep -E "^=== .*rc [^0]|bringup: done|optest:|FAIL|error|worst|sequences|case" $f | cut -c1-250 | head -30; done
mkdir -p gemma/r && tar xzf gemma/results.tar.gz -C gemma/r
for f in $(find gemma -name "*.md" -path "*perf*" 2>/dev/null); do echo "-- $f"; grep -E "^\| (decode|prefill)" $f | cut -d'|' -f2,4,7,10 | head -16; grep -E "^\| .decode_1. ctx" $f | head -2; done
tar czf $R/all.tar.gz gemma && rm -rf gemma
