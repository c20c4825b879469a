#!/usr/bin/env python3
"""One line per case of the campaign JSON files under DIR (met circuit run --campaign --perf-dir):
PREFIX, C=rows (decode) or T=rows (prefill), the median step, the time no instruction covers, and
the per-kernel walls of the timestamped run; then each kernel's mean slice and start spread.
bench/interp_variants.sh and bench/prefill_check.sh print their campaigns with it, and
bench/instr_cost.py reads the decode lines back.

    python3 bench/campaign_walls.py DIR PREFIX"""
import glob
import json
import sys

d, prefix = sys.argv[1:3]
for f in sorted(glob.glob(d + "/**/*.json", recursive=True)):
    rec = json.load(open(f))
    if rec.get("schema") != "met-campaign/1":  # the peers' and the oracle's files beside the campaigns
        continue
    for c in rec["cases"]:
        rows = f"{'T' if c.get('kind') == 'prefill' else 'C'}={c['rows']:<2}"
        ks = " ".join(f"{k}={v:.3f}" for k, v in sorted(c.get("kernel_ms", {}).items()))
        idle = c["timestamped_ms"] - c["instr_wall_sum_ms"]
        print(f"{prefix} {rows} {c['ms']['median']:8.3f} ms  idle {idle:.3f}  {ks}")
        sl, sp = c.get("kernel_slice_mean_ms", {}), c.get("kernel_start_spread_ms", {})
        if sl:
            print("    mean slice / start spread: " + " ".join(f"{k}={sl[k]:.3f}/{sp.get(k, 0):.3f}" for k in sorted(sl)))
