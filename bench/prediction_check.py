#!/usr/bin/env python3
"""The planner's prediction for every case of a campaign beside what the campaign measured: the
check of a calibration on shapes it was not fitted on (kernels/<class>/KERNEL_FAMILIES.toml names
the campaign each efficiency came from; any other campaign of the same binary is held out).

    python3 bench/prediction_check.py CAMPAIGN.json[,CAMPAIGN.json...] CONFIG.json [--and CAMPAIGN2 CONFIG2 ...]
        [--max-gmean X] [--max-worst Y] [--over R --max-share S] [MET]

With several campaign files, each case comes from the newest that measured today's plan of it
(bench/campaign_set.py).

Prints a Markdown table (case, measured ms, predicted ms, predicted / measured) and the geometric
mean of max(r, 1/r) over the cases. With --max-gmean / --max-worst it exits 1 when the geometric
mean or the worst case is off by more than that factor; with --over R --max-share S, when more
than the share S of the cases are off by more than the factor R. --and adds another model's
campaigns (and its config.json) to the same count. MET defaults to build/src/cli/met; the
prediction is the report of `met circuit plan` for the campaign's device, mode, rows and context."""
import math
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import campaign_set  # noqa: E402
from family_efficiency import plan, plan_args  # noqa: E402


def predicted_ms(met, hardware, model_dir, case):
    """The report's prediction line for the case (the JSON lists only the standard rungs and sizes)."""
    args = plan_args(met, hardware, model_dir, case)
    text = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    m = re.search(r"^\| prediction \| ([0-9.]+) (s|ms|µs) per step", text, re.M)
    if not m:
        sys.exit(f"prediction_check.py: no prediction line in `{' '.join(args)}`")
    return float(m.group(1)) * {"s": 1e3, "ms": 1.0, "µs": 1e-3}[m.group(2)]


def check(met, root, paths, config):
    """Prints the table of one model's campaigns; returns max(r, 1/r) of each case."""
    off = []
    with tempfile.TemporaryDirectory() as model_dir:
        with open(config) as src, open(os.path.join(model_dir, "config.json"), "w") as dst:
            dst.write(src.read())
        hardware = campaign_set.load(paths)[0][1]["hardware"]
        campaign = campaign_set.select(paths, lambda case: plan(met, hardware, model_dir, case)["plan"]["digest"])
        names = ", ".join(os.path.basename(p) for p in campaign["sources"])
        print(f"# Predictions against {names}: {campaign['model']} on {campaign['device']}\n")
        print("| case | measured ms | predicted ms | predicted / measured |")
        print("|---|---:|---:|---:|")
        for case in campaign["cases"]:
            measured = case["ms"]["median"]
            pred = predicted_ms(met, campaign["hardware"], model_dir, case)
            name = campaign_set.case_name(case)
            ratio = pred / measured
            off.append(max(ratio, 1 / ratio))
            print(f"| {name} | {measured:.3f} | {pred:.3f} | {ratio:.3f} |")
    print()
    return off


def main():
    args, limits, sets = [], {}, []
    argv = sys.argv[1:]
    while argv:
        a = argv.pop(0)
        if a in ("--max-gmean", "--max-worst", "--over", "--max-share"):
            limits[a] = float(argv.pop(0))
        elif a == "--and":
            sets.append((argv.pop(0), argv.pop(0)))
        else:
            args.append(a)
    if len(args) not in (2, 3) or (("--over" in limits) != ("--max-share" in limits)):
        sys.exit(__doc__)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    met = args[2] if len(args) == 3 else os.path.join(root, "build", "src", "cli", "met")
    off = []
    for paths, config in [(args[0], args[1])] + sets:
        off += check(met, root, campaign_set.split_paths(paths), config)
    gmean = math.exp(sum(math.log(x) for x in off) / len(off))
    over = limits.get("--over", 1.15)
    n_over = sum(x > over for x in off)
    print(f"geometric-mean error x{gmean:.3f}, worst x{max(off):.3f}, {sum(x <= 1.2 for x in off)} of {len(off)} within 20%, "
          f"{n_over} of {len(off)} off by more than {round((over - 1) * 100)}%")
    bad = (gmean > limits.get("--max-gmean", math.inf)) or (max(off) > limits.get("--max-worst", math.inf))
    bad = bad or n_over > limits.get("--max-share", 1.0) * len(off)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
