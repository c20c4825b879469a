#!/usr/bin/env python3
"""Compares met's output (met circuit run --logits-out) with a transformers fixture.

Free-running (default): identical greedy tokens for every step, and logits within a relative
tolerance (max |met - transformers| / max |transformers| per step).

--forced (met ran with --follow FIXTURE, so both sides saw the same tokens at every step): logits
within the tolerance at every step, and met's argmax equal to transformers' at every step whose
top-1/top-2 gap in transformers' logits exceeds twice the tolerance; closer steps are ties that
bf16 rounding may break either way, and are counted, not judged. Random-weight checkpoints have
flat logits with exact ties, which make free-running paths a coin toss; forcing keeps every step
comparable.

Exits non-zero on any difference."""
import json
import sys


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    forced = "--forced" in sys.argv[1:]
    if len(args) != 3:
        sys.exit("usage: compare.py [--forced] FIXTURE.json MET.json TOLERANCE")
    fixture = json.load(open(args[0]))
    met = json.load(open(args[1]))
    tol = float(args[2])
    failures = 0
    worst = 0.0
    judged = ties = 0
    for k, case in enumerate(fixture["cases"]):
        got = met["sequences"][k]
        if got["prompt"] != case["prompt"]:
            sys.exit(f"case {k}: prompts differ: {got['prompt']} vs {case['prompt']}")
        steps = fixture["steps"]
        want_tokens = case["tokens"][:steps]
        got_tokens = got["tokens"][:steps]
        if not forced and got_tokens != want_tokens:
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
            if forced and step < len(got_tokens):
                top = sorted(want, reverse=True)[:2]
                if (top[0] - top[1]) / scale > 2 * tol:
                    judged += 1
                    if got_tokens[step] != want_tokens[step]:
                        print(f"case {k} step {step}: met argmax {got_tokens[step]}, transformers {want_tokens[step]} "
                              f"(gap {(top[0] - top[1]) / scale:.4g})")
                        failures += 1
                else:
                    ties += 1
    extra = f"; argmax judged at {judged} steps, {ties} near-tie steps not judged" if forced else ""
    print(f"{fixture['checkpoint']}: {len(fixture['cases'])} prompts x {fixture['steps']} steps{' (forced)' if forced else ''}, "
          f"worst relative logit difference {worst:.4g} (tolerance {tol}){extra}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
