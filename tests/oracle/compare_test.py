#!/usr/bin/env python3
"""compare.py must fail when there is less (or more) to compare than the fixture promises: each
case below is met output that a zip-without-length-check comparison passes. A fixture compared with
its own answers must pass. Usage: compare_test.py FIXTURE.json"""
import copy
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
fixture = json.load(open(sys.argv[1]))
answers = {"sequences": [{"prompt": c["prompt"], "tokens": c["tokens"][:fixture["steps"]],
                          "logits": c["logits"][:fixture["steps"]]} for c in fixture["cases"]]}


def mutated(fn):
    out = copy.deepcopy(answers)
    fn(out)
    return out


cases = {  # name -> (met output, should pass)
    "the fixture's own answers pass": (answers, True),
    "no sequences at all fail": ({"sequences": []}, False),
    "one case missing fails": (mutated(lambda m: m["sequences"].pop()), False),
    "an extra sequence fails": (mutated(lambda m: m["sequences"].append(copy.deepcopy(m["sequences"][0]))), False),
    "logits cut to half the steps fail": (mutated(lambda m: m["sequences"][0].update(logits=m["sequences"][0]["logits"][:len(m["sequences"][0]["logits"]) // 2])), False),
    "empty logits fail": (mutated(lambda m: [s.update(logits=[]) for s in m["sequences"]]), False),
    "tokens cut short fail": (mutated(lambda m: m["sequences"][1].update(tokens=m["sequences"][1]["tokens"][:3])), False),
}


def parting(tie):
    """Case 0 takes another token at step 2 and runs on with unrelated logits; with tie, the
    fixture's top two logits at that step are within the tolerance of each other."""
    fx, met = copy.deepcopy(fixture), copy.deepcopy(answers)
    row = fx["cases"][0]["logits"][2]
    best = max(range(len(row)), key=lambda i: row[i])
    other = next(i for i in range(len(row)) if i != best)
    if tie:
        row[other] = row[best] - 1e-3 * (max(abs(v) for v in row) or 1.0)
    seq = met["sequences"][0]
    seq["logits"][2] = list(row)
    seq["tokens"][2] = other
    for step in range(3, fixture["steps"]):
        seq["tokens"][step] = (seq["tokens"][step] + 1) % len(row)
        seq["logits"][step] = [-v for v in seq["logits"][step]]
    return fx, met


def prompt_tie(gap, every_case=False):
    """Case 0 (or every case) answers with unrelated logits from step 0, and the fixture records the
    smallest router gap over its prompt's tokens as `gap`."""
    fx, met = copy.deepcopy(fixture), copy.deepcopy(answers)
    for k in range(len(fx["cases"]) if every_case else 1):
        fx["cases"][k]["prompt_router_gap"] = gap
        seq = met["sequences"][k]
        seq["logits"] = [[-v for v in row] for row in seq["logits"]]
        seq["tokens"] = [(t + 1) % len(seq["logits"][0]) for t in seq["tokens"]]
    return fx, met


with tempfile.TemporaryDirectory() as work:
    def path_of(name, obj):
        path = os.path.join(work, name)
        json.dump(obj, open(path, "w"))
        return path

    fx_path = path_of("fixture.json", fixture)
    runs = [(name, fx_path, met, ok, ([], ["--forced"])) for name, (met, ok) in cases.items()]
    runs.append(("a fixture with no cases fails", path_of("empty.json", dict(fixture, cases=[])), {"sequences": []}, False,
                 ([], ["--forced"])))
    # Free-running only: tokens that part at a near tie are compared up to it; elsewhere they fail.
    for name, tie in (("tokens parting at a near tie pass", True), ("tokens parting at a clear step fail", False)):
        fx, met = parting(tie)
        runs.append((name, path_of(f"tie-{tie}.json", fx), met, tie, ([],)))
    # A router near tie inside a prompt sets its case aside, in both modes; a clear one does not;
    # every case set aside is nothing compared.
    for name, gap, every, ok in (("a case whose prompt meets a router near tie is set aside", 0, False, True),
                                 ("a case whose prompt routes clearly is judged", 10, False, False),
                                 ("every case set aside at a prompt's router tie fails", 0, True, False)):
        fx, met = prompt_tie(gap, every)
        runs.append((name, path_of(f"prompt-tie-{gap}-{every}.json", fx), met, ok, ([], ["--forced"])))
    failed = checked = 0
    for name, fx, met, ok, modes in runs:
        met_path = path_of("met.json", met)
        for mode in modes:
            checked += 1
            r = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), *mode, fx, met_path, "2e-2"],
                               capture_output=True, text=True)
            if (r.returncode == 0) == ok:
                print(f"ok: {name}{' (forced)' if mode else ''}")
            else:
                failed += 1
                print(f"FAIL: {name}{' (forced)' if mode else ''}: exit {r.returncode}\n{r.stdout}{r.stderr}")
print(f"{checked - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
