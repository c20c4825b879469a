#!/usr/bin/env python3
"""An in-repo reference for the tiny Qwen3-MoE until its transformers fixture is committed: a plain
Python forward pass (no numpy or torch, so it runs wherever ctest does) over a `met model synth`
checkpoint, written down from transformers' Qwen3-MoE rather than from met's code, that writes a
fixture in the transformers fixtures' format for tests/oracle/check.sh.

What it computes: bf16 weights, fp32 arithmetic, a bf16 rounding wherever transformers' bf16
tensors round: after every projection and residual; RMSNorm rounds the normalised vector, then its
product with the weight; RoPE uses bf16 cos and sin and rounds each product and the sum; SiLU
rounds silu(gate), then its product with up; attention rounds each probability exp(s - max) to
bf16 for the sum with V (as a flash kernel does) and divides by the fp32 sum. RMSNorm on q and k
per head; rotate-half RoPE; causal GQA attention; per layer either the dense SiLU MLP
(mlp_only_layers, decoder_sparse_step) or the router (softmax over every expert's bf16 logit in
fp32, top-k, divided by the top-k sum when norm_topk_prob, then rounded to bf16) and the routed
experts' outputs, each times its weight rounded to bf16, summed and rounded once. Greedy
decoding."""
import json
import math
import os
import struct

from reference_common import SafetensorsFile, bf16_order, bf16_to_f32, main, round_bf16


class Checkpoint(SafetensorsFile):
    """model.safetensors of BF16 tensors, decoded on first use (a matrix is a list of rows)."""

    def __getitem__(self, name):
        if name not in self.cache:
            h = self.header[name]
            if h["dtype"] != "BF16":
                raise SystemExit(f"{name}: {h['dtype']}; the reference reads BF16 checkpoints only")
            a, b = h["data_offsets"]
            vals = [bf16_to_f32(u) for u in struct.unpack(f"<{(b - a) // 2}H", self.raw[self.base + a:self.base + b])]
            shape = h["shape"]
            self.cache[name] = [vals[i * shape[1]:(i + 1) * shape[1]] for i in range(shape[0])] if len(shape) == 2 else vals
        return self.cache[name]


class Model:
    def __init__(self, path):
        with open(os.path.join(path, "config.json")) as f:
            c = json.load(f)
        self.w = Checkpoint(path)
        self.hidden, self.layers = c["hidden_size"], c["num_hidden_layers"]
        self.heads, self.kv_heads, self.head_dim = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.experts, self.top_k = c["num_experts"], c["num_experts_per_tok"]
        self.norm_topk = c.get("norm_topk_prob", False)  # transformers' default
        self.eps, self.theta = c["rms_norm_eps"], c["rope_theta"]
        step = c.get("decoder_sparse_step", 1)
        self.dense = set(c.get("mlp_only_layers") or []) | {i for i in range(self.layers) if (i + 1) % step != 0}
        self.lm_head = "lm_head.weight" if "lm_head.weight" in self.w else "model.embed_tokens.weight"
        self.watch_router = False  # --router-gaps
        self.reset()

    def reset(self):
        self.k = [[] for _ in range(self.layers)]
        self.v = [[] for _ in range(self.layers)]

    @staticmethod
    def linear(m, x):
        return [round_bf16(sum(a * b for a, b in zip(row, x))) for row in m]

    def rms(self, x, g):
        s = math.sqrt(sum(v * v for v in x) / len(x) + self.eps)
        return [round_bf16(round_bf16(v / s) * gg) for v, gg in zip(x, g)]

    def rope(self, v, pos):
        half = self.head_dim // 2
        out = list(v)
        for i in range(half):
            f = pos / self.theta ** (2 * i / self.head_dim)
            c, s = round_bf16(math.cos(f)), round_bf16(math.sin(f))
            out[i] = round_bf16(round_bf16(v[i] * c) + round_bf16(-v[i + half] * s))
            out[i + half] = round_bf16(round_bf16(v[i + half] * c) + round_bf16(v[i] * s))
        return out

    def mlp(self, prefix, x):
        gate, up = self.linear(self.w[prefix + "gate_proj.weight"], x), self.linear(self.w[prefix + "up_proj.weight"], x)
        return self.linear(self.w[prefix + "down_proj.weight"], [round_bf16(round_bf16(g / (1 + math.exp(-g))) * u) for g, u in zip(gate, up)])

    def moe(self, prefix, x):
        logits = self.linear(self.w[prefix + "gate.weight"], x)
        m = max(logits)
        p = [math.exp(v - m) for v in logits]
        z = sum(p)
        p = [v / z for v in p]
        order = sorted(range(self.experts), key=lambda e: (-p[e], e))
        chosen = order[:self.top_k]
        if self.watch_router and self.top_k < self.experts:  # k-th against (k+1)-th bf16 logit (reference_common.greedy)
            gap = bf16_order(logits[order[self.top_k - 1]]) - bf16_order(logits[order[self.top_k]])
            self.router_gap = gap if self.router_gap is None else min(self.router_gap, gap)
        weights = [p[e] for e in chosen]
        if self.norm_topk:
            s = sum(weights)
            weights = [v / s for v in weights]
        weights = [round_bf16(v) for v in weights]
        y = [0.0] * self.hidden
        for e, we in zip(chosen, weights):
            out = self.mlp(f"{prefix}experts.{e}.", x)
            y = [a + round_bf16(we * b) for a, b in zip(y, out)]
        return [round_bf16(v) for v in y]

    def step(self, token, pos):
        self.router_gap = None  # this token's smallest router gap over the MoE layers (moe)
        hd, group = self.head_dim, self.heads // self.kv_heads
        x = list(self.w["model.embed_tokens.weight"][token])
        for layer in range(self.layers):
            p = f"model.layers.{layer}."
            xn = self.rms(x, self.w[p + "input_layernorm.weight"])
            q = self.linear(self.w[p + "self_attn.q_proj.weight"], xn)
            k = self.linear(self.w[p + "self_attn.k_proj.weight"], xn)
            v = self.linear(self.w[p + "self_attn.v_proj.weight"], xn)
            qn, kn = self.w[p + "self_attn.q_norm.weight"], self.w[p + "self_attn.k_norm.weight"]
            qs = [self.rope(self.rms(q[h * hd:(h + 1) * hd], qn), pos) for h in range(self.heads)]
            self.k[layer].append([self.rope(self.rms(k[h * hd:(h + 1) * hd], kn), pos) for h in range(self.kv_heads)])
            self.v[layer].append([v[h * hd:(h + 1) * hd] for h in range(self.kv_heads)])
            attn = []
            for h in range(self.heads):
                g = h // group
                scores = [sum(a * b for a, b in zip(qs[h], keys[g])) / math.sqrt(hd) for keys in self.k[layer]]
                m = max(scores)
                e = [math.exp(s - m) for s in scores]
                z = sum(e)
                pb = [round_bf16(v) for v in e]
                attn += [round_bf16(sum(pb[t] * self.v[layer][t][g][i] for t in range(len(e))) / z) for i in range(hd)]
            x = [round_bf16(a + b) for a, b in zip(x, self.linear(self.w[p + "self_attn.o_proj.weight"], attn))]
            xn = self.rms(x, self.w[p + "post_attention_layernorm.weight"])
            y = self.mlp(p + "mlp.", xn) if layer in self.dense else self.moe(p + "mlp.", xn)
            x = [round_bf16(a + b) for a, b in zip(x, y)]
        return self.linear(self.w[self.lm_head], self.rms(x, self.w["model.norm.weight"]))


if __name__ == "__main__":
    main(Model, "tests/oracle/reference_qwen3_moe.py",
         [("--router-gaps", "watch_router", "record each case's router_gaps and prompt_router_gap, in bf16 steps of the "
                                             "router logits, as transformers_logits.py does, for compare.py to set near ties aside")])
