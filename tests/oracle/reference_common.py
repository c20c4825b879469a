"""What the in-repo Python references share: bf16 rounding, greedy decoding over a model's `step`,
and the command line that writes a fixture in the transformers fixtures' format
(tests/oracle/check.sh reads it)."""
import argparse
import json
import os
import struct


def bf16_to_f32(u):
    return struct.unpack("<f", struct.pack("<I", u << 16))[0]


def round_bf16(v):
    u = struct.unpack("<I", struct.pack("<f", v))[0]
    return bf16_to_f32((u + 0x7FFF + ((u >> 16) & 1)) >> 16)


class SafetensorsFile:
    """A checkpoint's model.safetensors: its header, its bytes, and a cache of decoded tensors."""

    def __init__(self, path):
        with open(os.path.join(path, "model.safetensors"), "rb") as f:
            self.raw = f.read()
        n = struct.unpack("<Q", self.raw[:8])[0]
        self.header = json.loads(self.raw[8:8 + n])
        self.base = 8 + n
        self.cache = {}

    def __contains__(self, name):
        return name in self.header


def greedy(model, prompt, steps):
    """The prompt but its last token fed through model.step, then `steps` greedy tokens (ties to the
    lower id) and each step's logits."""
    model.reset()
    for i, t in enumerate(prompt[:-1]):
        model.step(t, i)
    tokens, logits, cur = [], [], prompt[-1]
    for s in range(steps):
        row = model.step(cur, len(prompt) - 1 + s)
        cur = max(range(len(row)), key=lambda i: (row[i], -i))
        tokens.append(cur)
        logits.append([round(v, 5) for v in row])
    return tokens, logits


def main(model_class, generated_by):
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--prompt-ids", action="append", required=True, help="comma-separated token ids; repeat for several")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    model = model_class(args.checkpoint)
    cases = []
    for text in args.prompt_ids:
        prompt = [int(t) for t in text.split(",")]
        tokens, logits = greedy(model, prompt, args.steps)
        margin = min(sorted(r, reverse=True)[0] - sorted(r, reverse=True)[1] for r in logits)
        cases.append({"prompt": prompt, "tokens": tokens, "min_margin": round(margin, 5), "logits": logits})
    fixture = {"schema": "met-oracle/1", "checkpoint": os.path.basename(os.path.normpath(args.checkpoint)),
               "generated_by": generated_by, "dtype": "bfloat16", "steps": args.steps, "cases": cases}
    with open(args.out, "w") as f:
        json.dump(fixture, f, separators=(",", ":"))
        f.write("\n")
