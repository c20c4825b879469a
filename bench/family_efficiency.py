#!/usr/bin/env python3
"""Per kernel family: the planner's ceiling for a campaign case (a gemm's compute over the share
of the SMs its output tiles keep busy, where the class names its GEMM tile) next to the time the
interpreter's timestamps measured for that family, their ratio (the family's efficiency: the share
of that ceiling it reaches), and the per-packet overhead (launch time not covered by any instruction,
per instruction and per fused-plan group: the planner adds the latter to each group's time). These are the figures kernels/<class>/KERNEL_FAMILIES.toml may carry as
`efficiency` with `evidence` naming the campaign file.

    python3 bench/family_efficiency.py CAMPAIGN.json[,CAMPAIGN.json...] CONFIG.json [MET]

CAMPAIGN.json comes from `met circuit run --campaign` (perf-data/<device>/<model>/<stamp>.json);
with several, each case comes from the newest file that measured today's plan of it
(bench/campaign_set.py: a case whose plan changed since every file is refused);
CONFIG.json is the model's config.json (the planner needs nothing else); MET defaults to
build/src/cli/met. The ceilings are recomputed by `met circuit plan` for the same device, mode,
rows and context (datasheet basis)."""
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


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = campaign_set.split_paths(sys.argv[1])
    met = sys.argv[3] if len(sys.argv) == 4 else os.path.join(root, "build", "src", "cli", "met")
    families = family_of_kernel(root)
    with tempfile.TemporaryDirectory() as model_dir:
        with open(sys.argv[2]) as src, open(os.path.join(model_dir, "config.json"), "w") as dst:
            dst.write(src.read())
        hardware = campaign_set.load(paths)[0][1]["hardware"]
        campaign = campaign_set.select(paths, lambda case: plan(met, hardware, model_dir, case)["plan"]["digest"])
        print(f"# Family efficiencies: {campaign['model']} on {campaign['device']} ({campaign_set.rel(campaign['sources'], root)})\n")
        print("| case | family | ceiling ms | measured ms | efficiency |")
        print("|---|---|---:|---:|---:|")
        for case in campaign["cases"]:
            p = plan(met, campaign["hardware"], model_dir, case)
            ceil = {}
            for g in p["groups"]:
                first = g["kernels"].split(",")[0].strip()
                fam = families.get(first, "?")
                # what the planner divides by the efficiency: the ceiling, with a gemm's compute over the share of the
                # SMs its tiles keep busy (HARDWARE.toml gemm_tile), not the prediction
                ceil[fam] = ceil.get(fam, 0.0) + g["fit_seconds_per_layer"] * g["layers"] * 1e3
            name = campaign_set.case_name(case)
            for fam, measured in sorted(case["family_ms"].items()):
                c = ceil.get(fam, 0.0)
                print(f"| {name} | {fam} | {c:.4f} | {measured:.4f} | {c / measured if measured > 0 else 0:.4g} |")
            gap = max(case["timestamped_ms"] - case["instr_wall_sum_ms"], 0.0)
            groups = sum(g["layers"] for g in p["groups"])
            print(f"| {name} | (packet overhead) | | {gap:.4f} | {gap * 1e3 / case['instructions']:.2f} us per instruction, "
                  f"{gap * 1e3 / groups:.2f} us per plan group ({groups}) |")


if __name__ == "__main__":
    main()
