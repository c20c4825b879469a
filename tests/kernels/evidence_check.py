#!/usr/bin/env python3
"""The measured figures a class carries (KERNEL_FAMILIES.toml efficiencies, HARDWARE.toml
packet_overhead_us) must be what bench/family_efficiency.py computes from the campaign files their
evidence names (one set for the class, comma-separated; each case from the newest file that
measured today's plan of it, so a plan change without a new campaign fails here): each `efficiency_by_rows` point from the campaign case of that mode and rows
(decode C=rows at context 4096, prefill T=rows), a plain `efficiency` (the fallback of a mode
without points) from the largest prefill case, the overhead per plan group from decode C=1; a
family fitted from two model sizes (`fixed_us_by_rows`, `fixed_evidence`) takes the efficiency
points of each mode it has fixed times for, and those times, from family_efficiency.py --second. A typed number that drifts from its source fails.

    evidence_check.py MET CLASS CONFIG.json
"""
import json
import os
import re
import subprocess
import sys
import tomllib

def close(a, b):
    return abs(a - b) <= max(5e-5, 0.01 * b)


def main():
    met, klass, config = sys.argv[1:4]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "kernels", klass, "KERNEL_FAMILIES.toml"), "rb") as f:
        families = {fam["id"]: fam for fam in tomllib.load(f)["family"] if "efficiency" in fam or "efficiency_by_rows" in fam}
    with open(os.path.join(root, "kernels", klass, "HARDWARE.toml"), "rb") as f:
        hw = tomllib.load(f)
    sources = {fam["evidence"] for fam in families.values()} | {hw.get("packet_overhead_evidence")} - {None}
    if len(sources) != 1:
        sys.exit(f"{klass}: expected one evidence set, found {sorted(sources)}")
    campaign = ",".join(os.path.join(root, p) for p in sources.pop().split(","))
    table = subprocess.run([sys.executable, os.path.join(root, "bench", "family_efficiency.py"), campaign, config, met],
                           check=True, capture_output=True, text=True).stdout
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("| ")]
    # Families fitted from two model sizes: their decode points and fixed times come from the
    # second table of family_efficiency.py --second (the other size's campaign, its bench/configs
    # config.json named by the campaign's model).
    seconds = {fam["fixed_evidence"] for fam in families.values() if "fixed_evidence" in fam}
    if len(seconds) > 1:
        sys.exit(f"{klass}: expected one fixed_evidence, found {sorted(seconds)}")
    two = []
    if seconds:
        other = os.path.join(root, seconds.pop())
        with open(other) as f:
            other_config = os.path.join(root, "bench", "configs", json.load(f)["model"] + ".json")
        table2 = subprocess.run([sys.executable, os.path.join(root, "bench", "family_efficiency.py"), campaign, config, met,
                                 "--second", other, other_config], check=True, capture_output=True, text=True).stdout
        part = table2.split("## Efficiency and fixed time per instruction", 1)[1]
        two = [[c.strip() for c in line.strip("|").split("|")] for line in part.splitlines() if line.startswith("| ")]
    decode_case = "decode C=1 ctx=4096"
    prefill_case = f"prefill T={max(int(r[0].split('=')[1]) for r in rows if r[0].startswith('prefill'))}"
    failures = 0
    for fid, fam in sorted(families.items()):
        for mode, points in sorted(fam.get("fixed_us_by_rows", {}).items()):
            for n, carried in points:
                case = f"decode C={n} ctx=4096" if mode == "decode" else f"prefill T={n}"
                got = [float(r[3]) for r in two if r[0] == case and r[1] == fid and r[3] != "-"]
                ok = bool(got) and abs(carried - got[0]) <= max(0.01, 0.01 * got[0])
                print(f"{'ok  ' if ok else 'FAIL'} {fid}: {mode} rows {n}: fixed {carried} us carried, "
                      f"{got[0] if got else 'no row'} computed ({case}, two sizes)")
                failures += not ok
        for mode, points in sorted(fam.get("efficiency_by_rows", {}).items()):
            for n, carried in points:
                case = f"decode C={n} ctx=4096" if mode == "decode" else f"prefill T={n}"
                if mode in fam.get("fixed_us_by_rows", {}):
                    got = [float(r[2]) for r in two if r[0] == case and r[1] == fid and r[2] != "-"]
                else:
                    got = [float(r[4]) for r in rows if r[0] == case and r[1] == fid]
                ok = bool(got) and close(carried, got[0])
                print(f"{'ok  ' if ok else 'FAIL'} {fid}: {mode} rows {n}: {carried} carried, "
                      f"{got[0] if got else 'no row'} computed ({case})")
                failures += not ok
        if "efficiency" in fam:
            got = [float(r[4]) for r in rows if r[0] == prefill_case and r[1] == fid]
            ok = bool(got) and close(fam["efficiency"], got[0])
            print(f"{'ok  ' if ok else 'FAIL'} {fid}: efficiency {fam['efficiency']} carried, "
                  f"{got[0] if got else 'no row'} computed ({prefill_case})")
            failures += not ok
    if "packet_overhead_us" in hw:
        over = [r for r in rows if r[0] == decode_case and r[1] == "(packet overhead)"]
        m = re.search(r"([0-9.]+) us per plan group", over[0][4]) if over else None
        ok = m is not None and abs(float(m.group(1)) - hw["packet_overhead_us"]) <= 0.05
        print(f"{'ok  ' if ok else 'FAIL'} packet_overhead_us {hw['packet_overhead_us']} carried, "
              f"{m.group(1) if m else '?'} computed ({decode_case})")
        failures += not ok
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
