#!/usr/bin/env python3
"""Draws prompts that route far from router ties, for oracle tests whose two sides sum the experts
in different rounding chains (tensor parallelism's fp32 sums against the reference's bf16 ones):
random prompts (random.Random(SEED), 5-8 ids in [1, vocab)) through an in-repo reference with
--router-gaps' bookkeeping, kept where every prompt token and each of STEPS greedy steps routes at
least GAP bf16 steps from a tie (reference_common.greedy's gaps). Prints the kept prompts as
--prompt-ids arguments (the tests' REFERENCE_ARGS).

  python3 tests/oracle/draw_router_prompts.py --reference reference_gpt_oss --checkpoint CKPT \\
      [--seed 1] [--steps 6] [--gap 7] [--keep 3] [--draws 400]

The gpt-oss TP tests' prompts (tests/CMakeLists.txt) came from this with its defaults on the
tiny-gpt-oss checkpoints of `met model synth --seed 1` (bf16 and mxfp4)."""
import argparse
import importlib
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_common import greedy  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference", required=True, help="module name of the reference (reference_gpt_oss)")
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--gap", type=int, default=7)
    ap.add_argument("--keep", type=int, default=3)
    ap.add_argument("--draws", type=int, default=400)
    a = ap.parse_args()
    model = importlib.import_module(a.reference).Model(a.checkpoint)
    model.watch_router = True
    with open(os.path.join(a.checkpoint, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    rng = random.Random(a.seed)
    kept = []
    for _ in range(a.draws):
        prompt = [rng.randrange(1, vocab) for _ in range(rng.randint(5, 8))]
        _, _, gaps, prompt_gap = greedy(model, prompt, a.steps)
        if gaps is None:
            sys.exit(f"{a.reference} records no router gaps: it has no router, or no --router-gaps bookkeeping")
        if min(gaps + [prompt_gap]) >= a.gap:
            kept.append(prompt)
            if len(kept) == a.keep:
                break
    if len(kept) < a.keep:
        sys.exit(f"only {len(kept)} of {a.keep} prompts in {a.draws} draws route {a.gap} bf16 steps from a tie")
    print(" ".join("--prompt-ids " + ",".join(map(str, p)) for p in kept))


if __name__ == "__main__":
    main()
