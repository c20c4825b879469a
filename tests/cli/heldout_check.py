#!/usr/bin/env python3
"""Held-out validation of the H200 calibration: `met circuit calibrate --held-out` fits on every
model but one and predicts the one left out through the planner, for each model with campaigns of
today's plans. Prints its table; fails when more than MAX_SHARE of the cases are off by more than
OVER, or any case by more than WORST (issue 13's bar). That docs/arch/planner.md holds this table
is checked by calibrate_check.sh (ctest calibrate_h200_current, byte for byte through --write-doc).
Run from the repository root.

    heldout_check.py MET
"""
import subprocess
import sys

OVER, MAX_SHARE, WORST = 0.15, 0.10, 0.25


def main():
    met = sys.argv[1]
    out = subprocess.run([met, "circuit", "calibrate", "perf-data/h200-sxm", "--configs", "bench/configs", "--hardware", "h200-sxm",
                          "--held-out"], check=True, capture_output=True, text=True).stdout
    print(out)
    errors = []
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 5 and cells[4].endswith("%"):
            errors.append((f"{cells[0]} {cells[1]}", float(cells[4].rstrip("%")) / 100))
    if len(errors) < 2:
        sys.exit(f"FAIL: {len(errors)} held-out cases in the table")
    over = [(n, e) for n, e in errors if abs(e) > OVER]
    worst = max(errors, key=lambda x: abs(x[1]))
    print(f"{len(over)} of {len(errors)} held-out cases off by more than {OVER:.0%} (at most {MAX_SHARE:.0%} allowed); "
          f"worst {worst[0]} at {worst[1]:+.1%} (at most {WORST:.0%})")
    for n, e in over:
        print(f"  over: {n} {e:+.1%}")
    bad = len(over) > MAX_SHARE * len(errors) or abs(worst[1]) > WORST
    if bad:
        print("FAIL")
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
