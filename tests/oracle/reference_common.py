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


def bf16_order(v):
    """A bf16 value as an integer in the order of the values, adjacent values one apart (as
    transformers_logits.py's RouterWatch.ordered counts router gaps)."""
    bits = struct.unpack("<I", struct.pack("<f", round_bf16(v)))[0] >> 16
    return -(bits & 0x7FFF) if bits & 0x8000 else bits


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
    lower id), each step's logits, and, for a model with a router (its step() sets `router_gap`:
    the smallest gap, in bf16 steps, between the k-th and (k+1)-th router logits at any MoE layer
    of that token), each step's gap and the smallest over the prompt's tokens (as
    transformers_logits.py records router_gaps and prompt_router_gap), else None for both."""
    model.reset()
    prompt_gaps = []
    for i, t in enumerate(prompt[:-1]):
        model.step(t, i)
        prompt_gaps.append(getattr(model, "router_gap", None))
    tokens, logits, gaps, cur = [], [], [], prompt[-1]
    for s in range(steps):
        row = model.step(cur, len(prompt) - 1 + s)
        gaps.append(getattr(model, "router_gap", None))
        if s == 0:
            prompt_gaps.append(gaps[0])
        cur = max(range(len(row)), key=lambda i: (row[i], -i))
        tokens.append(cur)
        logits.append([round(v, 5) for v in row])
    if any(g is None for g in gaps + prompt_gaps):
        return tokens, logits, None, None
    return tokens, logits, gaps, min(prompt_gaps)


def follow(model, prompt, tokens, steps):
    """Teacher-forced: the prompt, then the given tokens fed in turn (as met circuit run --follow
    does); each step's logits and argmax (ties to the lower id)."""
    model.reset()
    seq = prompt + tokens[:steps - 1]
    got, logits = [], []
    for i, t in enumerate(seq):
        row = model.step(t, i)
        if i >= len(prompt) - 1:
            got.append(max(range(len(row)), key=lambda j: (row[j], -j)))
            logits.append([round(v, 5) for v in row])
    return got, logits


def main(model_class, generated_by, options=()):
    """options: (flag, attribute, help) switches of the model class, each set on the model when given."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--prompt-ids", action="append", default=[], help="comma-separated token ids; repeat for several")
    ap.add_argument("--follow", help="a fixture: run its prompts teacher-forced along its tokens and write what met "
                                     "circuit run --logits-out writes, for compare.py --forced")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--out", required=True)
    for flag, attr, text in options:
        ap.add_argument(flag, dest=attr, action="store_true", help=text)
    args = ap.parse_args()
    if not args.prompt_ids and not args.follow:
        ap.error("give --prompt-ids or --follow")
    model = model_class(args.checkpoint)
    for _, attr, _ in options:
        setattr(model, attr, getattr(args, attr))
    if args.follow:
        with open(args.follow) as f:
            fx = json.load(f)
        sequences = []
        for case in fx["cases"]:
            tokens, logits = follow(model, case["prompt"], case["tokens"], fx["steps"])
            sequences.append({"prompt": case["prompt"], "tokens": tokens, "logits": logits})
        with open(args.out, "w") as f:
            json.dump({"sequences": sequences}, f, separators=(",", ":"))
            f.write("\n")
        return
    cases = []
    for text in args.prompt_ids:
        prompt = [int(t) for t in text.split(",")]
        tokens, logits, gaps, prompt_gap = greedy(model, prompt, args.steps)
        margin = min(sorted(r, reverse=True)[0] - sorted(r, reverse=True)[1] for r in logits)
        case = {"prompt": prompt, "tokens": tokens, "min_margin": round(margin, 5), "logits": logits}
        if gaps is not None:
            case["router_gaps"] = gaps
            case["prompt_router_gap"] = prompt_gap
        cases.append(case)
    fixture = {"schema": "met-oracle/1", "checkpoint": os.path.basename(os.path.normpath(args.checkpoint)),
               "generated_by": generated_by, "dtype": "bfloat16", "steps": args.steps, "cases": cases}
    with open(args.out, "w") as f:
        json.dump(fixture, f, separators=(",", ":"))
        f.write("\n")
