"""What the in-repo Python references share: bf16 and fp32 rounding, fp32 dot products, reading a
checkpoint's BF16 tensors, greedy decoding over a model's `step`, and the command line that writes a
fixture in the transformers fixtures' format (tests/oracle/check.sh reads it)."""
import argparse
import array
import json
import os
import struct


def bf16_to_f32(u):
    return struct.unpack("<f", struct.pack("<I", u << 16))[0]


def round_bf16(v):
    u = struct.unpack("<I", struct.pack("<f", v))[0]
    return bf16_to_f32((u + 0x7FFF + ((u >> 16) & 1)) >> 16)


_F32 = array.array("f", [0.0])


def f32(v):
    """v rounded to fp32."""
    _F32[0] = v
    return _F32[0]


def dot32(row, x):
    """A dot product summed as met's and a GPU's fp32 loops sum it: each product and each partial sum
    rounded to fp32, in order. In double, the sums round to a different bf16 now and then, and in a
    tiny MoE one such step can move a router logit across a near tie."""
    acc = 0.0
    for a, w in zip(row, x):
        _F32[0] = a * w
        _F32[0] = acc + _F32[0]
        acc = _F32[0]
    return acc


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


class Checkpoint(SafetensorsFile):
    """model.safetensors of BF16 (and U8) tensors, decoded on first use into nested lists: a vector,
    a matrix as a list of rows, [experts, a, b] as a list of matrices."""

    def raw_values(self, name, dtype):
        h = self.header[name]
        if h["dtype"] != dtype:
            raise SystemExit(f"{name}: {h['dtype']}, expected {dtype}")
        a, b = h["data_offsets"]
        data = self.raw[self.base + a:self.base + b]
        if dtype == "BF16":
            return [bf16_to_f32(u) for u in struct.unpack(f"<{len(data) // 2}H", data)], h["shape"]
        return list(data), h["shape"]

    def __getitem__(self, name):
        if name not in self.cache:
            vals, shape = self.raw_values(name, "BF16")
            if len(shape) <= 1:
                self.cache[name] = vals
            elif len(shape) == 2:
                self.cache[name] = [vals[i * shape[1]:(i + 1) * shape[1]] for i in range(shape[0])]
            else:  # [experts, a, b]
                e, a, b = shape
                self.cache[name] = [[vals[(x * a + i) * b:(x * a + i + 1) * b] for i in range(a)] for x in range(e)]
        return self.cache[name]


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
