#!/usr/bin/env python3
"""Per kernel family: the planner's ceiling for a campaign case (a gemm's compute over the share
of the SMs its output tiles keep busy, where the class names its GEMM tile) next to the time the
interpreter's timestamps measured for that family, their ratio (the family's efficiency: the share
of that ceiling it reaches), and the per-packet overhead (launch time not covered by any instruction,
per instruction and per fused-plan group: the planner adds the latter to each group's time). These are the figures kernels/<class>/KERNEL_FAMILIES.toml may carry as
`efficiency` with `evidence` naming the campaign file.

    python3 bench/family_efficiency.py CAMPAIGN.json[,CAMPAIGN.json...] CONFIG.json [MET]
                                      [--second CAMPAIGN2.json[,...] CONFIG2.json]

CAMPAIGN.json comes from `met circuit run --campaign` (perf-data/<device>/<model>/<stamp>.json);
with several, each case comes from the newest file that measured today's plan of it
(bench/campaign_set.py: a case whose plan changed since every file is refused);
CONFIG.json is the model's config.json (the planner needs nothing else); MET defaults to
build/src/cli/met. The ceilings are recomputed by `met circuit plan` for the same device, mode,
rows and context (datasheet basis). With --second (the campaigns of another model size and its
config.json), a second table splits each family's time in each case into an efficiency and a fixed
time per instruction (one instruction per plan group and layer), solved from the two sizes: what
KERNEL_FAMILIES.toml carries as `efficiency_by_rows` and `fixed_us_by_rows` with `fixed_evidence`."""
import glob
import json
import os
import subprocess
import sys
import tempfile
import tomllib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import campaign_set  # noqa: E402


def family_of_kernel(root):
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "kernels", "*", "KERNEL_FAMILIES.toml"))):
        with open(path, "rb") as f:
            for fam in tomllib.load(f).get("family", []):
                for k in fam.get("kernels", []):
                    out[k] = fam["id"]
    return out


def plan_args(met, hardware, model_dir, case):
    """`met circuit plan` for a campaign case: its device, mode, rows and context."""
    args = [met, "circuit", "plan", "--hardware", hardware, "--checkpoint", model_dir]
    if case["kind"] == "decode":
        args += ["--mode", "decode" if case["rows"] == 1 else "batch", "--context", str(case["ctx"])]
        if case["rows"] > 1:
            args += ["--rows", str(case["rows"])]
    else:
        args += ["--mode", "prefill", "--rows", str(case["rows"])]
    return args


_plans = {}


def plan(met, hardware, model_dir, case):
    """The planner's JSON for a case, once per (met, device, model, case)."""
    args = plan_args(met, hardware, model_dir, case) + ["--format", "json"]
    if tuple(args) not in _plans:
        _plans[tuple(args)] = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
    return _plans[tuple(args)]


def measure(paths, config, met, root, families):
    """The family table of one model's campaigns: (campaign, rows), each row (case name, family,
    ceiling ms, measured ms, instructions of the family per step) or (case name, None, gap ms,
    instructions, plan groups) for the packet overhead."""
    with tempfile.TemporaryDirectory() as model_dir:
        with open(config) as src, open(os.path.join(model_dir, "config.json"), "w") as dst:
            dst.write(src.read())
        hardware = campaign_set.load(paths)[0][1]["hardware"]
        campaign = campaign_set.select(paths, lambda case: plan(met, hardware, model_dir, case)["plan"]["digest"])
        rows = []
        for case in campaign["cases"]:
            p = plan(met, campaign["hardware"], model_dir, case)
            ceil, count = {}, {}
            for g in p["groups"]:
                first = g["kernels"].split(",")[0].strip()
                fam = families.get(first, "?")
                # what the planner divides by the efficiency: the ceiling, with a gemm's compute over the share of the
                # SMs its tiles keep busy (HARDWARE.toml gemm_tile), not the prediction
                ceil[fam] = ceil.get(fam, 0.0) + g["fit_seconds_per_layer"] * g["layers"] * 1e3
                count[fam] = count.get(fam, 0) + g["layers"]  # one instruction per group and layer
            name = campaign_set.case_name(case)
            for fam, measured in sorted(case["family_ms"].items()):
                rows.append((name, fam, ceil.get(fam, 0.0), measured, count.get(fam, 0)))
            gap = max(case["timestamped_ms"] - case["instr_wall_sum_ms"], 0.0)
            rows.append((name, None, gap, case["instructions"], sum(g["layers"] for g in p["groups"])))
    return campaign, rows


def main():
    args = sys.argv[1:]
    second = None
    if "--second" in args:
        at = args.index("--second")
        second, args = args[at + 1:at + 3], args[:at] + args[at + 3:]
        if len(second) != 2:
            sys.exit(__doc__)
    if len(args) not in (2, 3):
        sys.exit(__doc__)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    met = args[2] if len(args) == 3 else os.path.join(root, "build", "src", "cli", "met")
    families = family_of_kernel(root)
    campaign, rows = measure(campaign_set.split_paths(args[0]), args[1], met, root, families)
    print(f"# Family efficiencies: {campaign['model']} on {campaign['device']} ({campaign_set.rel(campaign['sources'], root)})\n")
    print("| case | family | ceiling ms | measured ms | efficiency |")
    print("|---|---|---:|---:|---:|")
    for name, fam, c, measured, n in rows:
        if fam is None:
            print(f"| {name} | (packet overhead) | | {c:.4f} | {c * 1e3 / measured:.2f} us per instruction, "
                  f"{c * 1e3 / n:.2f} us per plan group ({n}) |")
        else:
            print(f"| {name} | {fam} | {c:.4f} | {measured:.4f} | {c / measured if measured > 0 else 0:.4g} |")
    if second is None:
        return
    # Two model sizes: per case and family, measured = ceiling / efficiency + instructions x
    # fixed, solved from the two (the family's time split into what grows with its bytes and FLOPs
    # and what each instruction costs whatever its size).
    other, rows2 = measure(campaign_set.split_paths(second[0]), second[1], met, root, families)
    by_key = {(name, fam): (c, t, n) for name, fam, c, t, n in rows2 if fam is not None}
    print(f"\n## Efficiency and fixed time per instruction, with {other['model']} "
          f"({campaign_set.rel(other['sources'], root)})\n")
    print("| case | family | efficiency | fixed us per instruction |")
    print("|---|---|---:|---:|")
    for name, fam, c1, t1, n1 in rows:
        if fam is None or (name, fam) not in by_key:
            continue
        c2, t2, n2 = by_key[(name, fam)]
        det = c1 * n2 - c2 * n1
        if n1 == 0 or n2 == 0 or det == 0:
            continue
        inv = (t1 * n2 - t2 * n1) / det  # ms of measured time per ms of ceiling
        fixed = (c1 * t2 - c2 * t1) / det  # ms per instruction
        if inv <= 0 or fixed < 0:
            print(f"| {name} | {fam} | - | - |")  # the two sizes do not separate: no fit
            continue
        print(f"| {name} | {fam} | {1 / inv:.4g} | {fixed * 1e3:.4g} |")


if __name__ == "__main__":
    main()
