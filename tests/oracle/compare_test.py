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
failed = 0
with tempfile.TemporaryDirectory() as work:
    fx_path = os.path.join(work, "fixture.json")
    json.dump(fixture, open(fx_path, "w"))
    empty_fixture = os.path.join(work, "empty.json")
    json.dump(dict(fixture, cases=[]), open(empty_fixture, "w"))
    runs = [(name, fx_path, met, ok) for name, (met, ok) in cases.items()]
    runs.append(("a fixture with no cases fails", empty_fixture, {"sequences": []}, False))
    for name, fx, met, ok in runs:
        met_path = os.path.join(work, "met.json")
        json.dump(met, open(met_path, "w"))
        for mode in ([], ["--forced"]):
            r = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), *mode, fx, met_path, "2e-2"],
                               capture_output=True, text=True)
            if (r.returncode == 0) == ok:
                print(f"ok: {name}{' (forced)' if mode else ''}")
            else:
                failed += 1
                print(f"FAIL: {name}{' (forced)' if mode else ''}: exit {r.returncode}\n{r.stdout}{r.stderr}")
print(f"{2 * len(runs) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
