#!/usr/bin/env python3
"""Campaign records taken together: several `met circuit run --campaign` files of one model and
device (met-campaign/1), each case from the newest file that holds it. A case is a decode at
(rows, ctx) or a prefill at rows. With a planner at hand (`current_plan`), only a file whose case
carries the plan digest the planner gives now may supply it: a campaign of an older plan is not
evidence for the plan that runs today, and a case no file measured with today's plan is an error,
never a silent fallback to the old one.

Used by bench/side_by_side.py; paths are given as one argument, comma-separated. `met circuit
calibrate` keeps the same rule in C++ (src/estimate/calibrate.cpp: only a case whose plan digest is
today's counts, the newest file per model and case)."""
import json
import os
import sys


def case_name(case):
    if case["kind"] == "decode":
        return f"decode C={case['rows']} ctx={case['ctx']}"
    return f"prefill T={case['rows']}"


def load(paths):
    """[(path, record)] of the campaign files, checked to be of one model, device and class."""
    out = []
    for p in paths:
        with open(p) as f:
            rec = json.load(f)
        if rec.get("schema") != "met-campaign/1":
            sys.exit(f"{p}: not a campaign record (schema {rec.get('schema')!r})")
        out.append((p, rec))
    if not out:
        sys.exit("no campaign file given")
    first = out[0][1]
    for p, rec in out[1:]:
        for key in ("model", "device", "hardware"):
            if rec.get(key) != first.get(key):
                sys.exit(f"{p}: {key} {rec.get(key)!r} is not {out[0][0]}'s {first.get(key)!r}")
    return out


def select(paths, current_digest=None):
    """A campaign-shaped dict: the first file's model, device and class, and per case (in the order
    the files list them) the newest file's measurement, or with `current_digest(case)` the newest
    whose plan digest is today's. Each case gets "source": the file it came from."""
    files = load(paths)
    order, best = [], {}
    for p, rec in files:
        for case in rec["cases"]:
            name = case_name(case)
            if name not in best:
                order.append(name)
                best[name] = None
            key = rec.get("stamp", "")
            if current_digest is not None and case.get("plan_digest") != current_digest(case):
                continue
            if best[name] is None or key > best[name][0]:
                best[name] = (key, dict(case, source=p))
    stale = [n for n in order if best[n] is None]
    if stale:
        sys.exit("no campaign measured today's plan for: " + ", ".join(stale) + " (files: " + ", ".join(paths) +
                 "); measure them or leave them out")
    out = dict(files[0][1])
    out["cases"] = [best[n][1] for n in order]
    out["sources"] = sorted({c["source"] for c in out["cases"]})
    return out


def split_paths(arg):
    return [p for p in arg.split(",") if p]


def rel(paths, root):
    return ", ".join(os.path.relpath(p, root) for p in paths)
