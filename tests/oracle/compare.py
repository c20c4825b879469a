#!/usr/bin/env python3
"""Compares met's CPU backend output (met circuit run --logits-out) with a transformers fixture:
identical greedy tokens for every step, and logits within a relative tolerance
(max |met - transformers| / max |transformers| per step). Exits non-zero on any difference."""
import json
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: compare.py FIXTURE.json MET.json TOLERANCE")
    fixture = json.load(open(sys.argv[1]))
    met = json.load(open(sys.argv[2]))
    tol = float(sys.argv[3])
    failures = 0
    worst = 0.0
    for k, case in enumerate(fixture["cases"]):
        got = met["sequences"][k]
        if got["prompt"] != case["prompt"]:
            sys.exit(f"case {k}: prompts differ: {got['prompt']} vs {case['prompt']}")
        steps = fixture["steps"]
        want_tokens = case["tokens"][:steps]
        got_tokens = got["tokens"][:steps]
        if got_tokens != want_tokens:
            first = next(i for i, (a, b) in enumerate(zip(got_tokens + [None] * steps, want_tokens)) if a != b)
            print(f"case {k}: greedy tokens differ from step {first}: met {got_tokens[first:first + 5]} transformers {want_tokens[first:first + 5]}")
            failures += 1
        for step, (want, have) in enumerate(zip(case["logits"], got["logits"])):
            if len(want) != len(have):
                sys.exit(f"case {k} step {step}: {len(have)} logits, fixture has {len(want)}")
            scale = max(abs(v) for v in want) or 1.0
            diff = max(abs(a - b) for a, b in zip(want, have)) / scale
            worst = max(worst, diff)
            if diff > tol:
                print(f"case {k} step {step}: max |diff| / max |logit| = {diff:.4g} > {tol}")
                failures += 1
                break
    print(f"{fixture['checkpoint']}: {len(fixture['cases'])} prompts x {fixture['steps']} steps, worst relative logit difference {worst:.4g} (tolerance {tol})")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
