#!/usr/bin/env python3
"""An in-repo reference for the tiny gpt-oss until its transformers fixture is committed: a plain
Python forward pass (no numpy or torch, so it runs wherever ctest does) over a `met model synth`
checkpoint, bf16 or MXFP4, written down from transformers' GptOss (modeling_gpt_oss.py, the YaRN
rope of modeling_rope_utils.py, the MXFP4 dequantisation of integrations/mxfp4.py) rather than
from met's code, that writes a fixture in the transformers fixtures' format for
tests/oracle/check.sh.

What it computes, with a bf16 rounding wherever transformers' bf16 tensors round:
- RMSNorm: the weight is kept fp32, so x / rms(x) * w rounds once.
- q/k/v/o: bf16(x W^T + b), one rounding (a Linear with a bias).
- RoPE: rotate-half over the head; YaRN inverse frequencies (beta_fast, beta_slow, truncate, the
  factor max_position_embeddings / original_max_position_embeddings) and cos, sin times the
  attention factor 0.1 ln(factor) + 1, then rounded to bf16; each product and the sum rounded.
- Attention: causal GQA, the sliding layers (layer_types) keep the last sliding_window keys; each
  head's sink logit joins the softmax's max and denominator and takes no value. As a flash kernel
  with sinks computes it: each probability exp(s - max over the keys) is rounded to bf16 for the
  sum with V, and the sink joins at the end (both sums rescaled to the max with the sink) before
  the division by the fp32 denominator.
- Router: logits bf16(x W^T + b), the top k (ties to the lower expert), a softmax over those k,
  rounded to bf16.
- Experts (ascending expert order): gate_up = bf16(bf16(x W) + b) with gate the even columns and
  up the odd ones; gate = min(gate, limit), up = clamp(up, -limit, limit); glu = bf16(gate *
  bf16(sigmoid(bf16(gate * 1.702)))); h = bf16(bf16(up + 1) * glu); out = bf16(bf16(h W_down) + b);
  the layer's output is the sum of bf16(weight * out) over the routed experts, rounded once (a
  bf16 sum over the top-k dimension, as transformers' grouped and batched experts compute it). MXFP4 experts are dequantised as transformers does: e2m1 codes,
  the low nibble first, times 2^(scale - 127), blocks [experts, out, in / 32, 16] read as [experts,
  in, out].
Greedy decoding."""
import json
import math
import os

from reference_common import Checkpoint as Bf16Checkpoint
from reference_common import bf16_order, dot32, f32, main, round_bf16

FP4 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
ALPHA = 1.702  # GptOssExperts.alpha


class Checkpoint(Bf16Checkpoint):
    """The BF16 checkpoint reader, and MXFP4 fused experts."""

    def experts(self, name):
        """A fused expert tensor as [experts][in][out], from bf16 or from its MXFP4 blocks."""
        if name in self.header:
            return self[name]
        if name not in self.cache:
            blocks, bshape = self.raw_values(name + "_blocks", "U8")
            scales, sshape = self.raw_values(name + "_scales", "U8")
            e, rows, groups, nbytes = bshape
            assert sshape == [e, rows, groups], (name, sshape, bshape)
            cols = groups * nbytes * 2
            w = []
            for x in range(e):
                m = [[0.0] * rows for _ in range(cols)]  # [in][out]
                for r in range(rows):
                    for g in range(groups):
                        s = 2.0 ** (scales[(x * rows + r) * groups + g] - 127)
                        at = ((x * rows + r) * groups + g) * nbytes
                        for j in range(nbytes):
                            byte = blocks[at + j]
                            c = g * nbytes * 2 + 2 * j
                            m[c][r] = FP4[byte & 0x0F] * s
                            m[c + 1][r] = FP4[byte >> 4] * s
                w.append(m)
            self.cache[name] = w
        return self.cache[name]


def yarn(c, dim):
    """transformers' YaRN inverse frequencies and attention factor."""
    base = c["rope_theta"]
    rs = c.get("rope_scaling") or c.get("rope_parameters") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    plain = [1.0 / base ** (i / dim) for i in range(0, dim, 2)]
    if kind == "default":
        return plain, 1.0
    if kind != "yarn":
        raise SystemExit(f"rope type {kind}: the reference runs default and yarn")
    factor = rs["factor"]
    if "original_max_position_embeddings" in rs:
        orig = rs["original_max_position_embeddings"]
        factor = c["max_position_embeddings"] / orig
    else:
        orig = c["max_position_embeddings"]
    attn = rs.get("attention_factor")
    if attn is None:
        attn = 1.0 if factor <= 1 else 0.1 * math.log(factor) + 1.0
    fast, slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

    def corr(rot):
        return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))

    low, high = corr(fast), corr(slow)
    if rs.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    out = []
    for i, f in enumerate(plain):
        ramp = min(max((i - low) / (high - low), 0.0), 1.0)
        kept = 1.0 - ramp
        out.append(f / factor * (1 - kept) + f * kept)
    return out, attn


class Model:
    def __init__(self, path):
        with open(os.path.join(path, "config.json")) as f:
            c = json.load(f)
        self.w = Checkpoint(path)
        self.hidden, self.layers = c["hidden_size"], c["num_hidden_layers"]
        self.heads, self.kv_heads, self.head_dim = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.experts, self.top_k = c["num_local_experts"], c["num_experts_per_tok"]
        self.inter = c["intermediate_size"]
        self.limit = c.get("swiglu_limit", 7.0)
        self.eps = c["rms_norm_eps"]
        self.window = c["sliding_window"]
        self.types = c.get("layer_types") or ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(self.layers)]
        self.bias = c.get("attention_bias", True)
        self.inv_freq, self.attn_factor = yarn(c, self.head_dim)
        self.lm_head = "lm_head.weight" if "lm_head.weight" in self.w else "model.embed_tokens.weight"
        self.eager_scores = False  # True: transformers' eager attention (eager_head), not a flash kernel's
        self.watch_router = False  # --router-gaps
        self.reset()

    def reset(self):
        self.k = [[] for _ in range(self.layers)]
        self.v = [[] for _ in range(self.layers)]

    @staticmethod
    def linear(m, x, b=None):
        if b is None:
            return [round_bf16(dot32(row, x)) for row in m]
        return [round_bf16(dot32(row, x) + bb) for row, bb in zip(m, b)]

    def bias_of(self, name):
        return self.w[name] if self.bias else None

    def rms(self, x, g):
        s = math.sqrt(sum(v * v for v in x) / len(x) + self.eps)
        return [round_bf16(v / s * gg) for v, gg in zip(x, g)]

    def rope(self, v, pos):
        half = self.head_dim // 2
        out = list(v)
        for i in range(half):
            f = pos * self.inv_freq[i]
            c, s = round_bf16(f32(math.cos(f)) * self.attn_factor), round_bf16(f32(math.sin(f)) * self.attn_factor)
            out[i] = round_bf16(round_bf16(v[i] * c) - round_bf16(v[i + half] * s))
            out[i + half] = round_bf16(round_bf16(v[i + half] * c) + round_bf16(v[i] * s))
        return out

    def eager_head(self, q, ks, vs, sink):
        """One head as transformers' bf16 eager attention for gpt-oss computes it (its only attention
        implementation): each score q . k rounded to bf16, times the bf16 scale head_dim^-1/2 and
        rounded; the sink logit joins as one more column; the row's max subtracted (rounded); the
        softmax in fp32 with each probability rounded to bf16, the sink's dropped; the probabilities
        times V summed in fp32 and rounded once."""
        scale = round_bf16(self.head_dim ** -0.5)
        sc = [round_bf16(round_bf16(dot32(q, k)) * scale) for k in ks] + [sink]
        mx = max(sc)
        e = [math.exp(round_bf16(s - mx)) for s in sc]
        z = sum(e)
        p = [round_bf16(u / z) for u in e[:-1]]
        return [round_bf16(dot32(p, [v[i] for v in vs])) for i in range(self.head_dim)]

    @staticmethod
    def project(w, x, cols):
        """x [in] times w [in][out] for the columns cols, each summed over in as dot32 does."""
        return [dot32(x, [w[i][o] for i in range(len(x))]) for o in cols]

    def moe(self, p, x):
        logits = [round_bf16(dot32(row, x) + b) for row, b in zip(self.w[p + "router.weight"], self.w[p + "router.bias"])]
        order = sorted(range(self.experts), key=lambda e: (-logits[e], e))
        chosen = order[:self.top_k]
        if self.watch_router and self.top_k < self.experts:  # k-th against (k+1)-th bf16 logit (reference_common.greedy)
            gap = bf16_order(logits[order[self.top_k - 1]]) - bf16_order(logits[order[self.top_k]])
            self.router_gap = gap if self.router_gap is None else min(self.router_gap, gap)
        m = logits[chosen[0]]
        ex = [math.exp(logits[e] - m) for e in chosen]
        z = sum(ex)
        weight = {e: round_bf16(v / z) for e, v in zip(chosen, ex)}
        gu_w, gu_b = self.w.experts(p + "experts.gate_up_proj"), self.w[p + "experts.gate_up_proj_bias"]
        dn_w, dn_b = self.w.experts(p + "experts.down_proj"), self.w[p + "experts.down_proj_bias"]
        y = [0.0] * self.hidden
        for e in sorted(chosen):
            gu = [round_bf16(round_bf16(v) + b) for v, b in zip(self.project(gu_w[e], x, range(2 * self.inter)), gu_b[e])]
            h = []
            for j in range(self.inter):
                gate = min(gu[2 * j], self.limit)
                up = min(max(gu[2 * j + 1], -self.limit), self.limit)
                sig = round_bf16(1.0 / (1.0 + math.exp(-round_bf16(gate * f32(ALPHA)))))
                h.append(round_bf16(round_bf16(up + 1.0) * round_bf16(gate * sig)))
            out = [round_bf16(round_bf16(v) + b) for v, b in zip(self.project(dn_w[e], h, range(self.hidden)), dn_b[e])]
            y = [a + round_bf16(weight[e] * b) for a, b in zip(y, out)]
        return [round_bf16(v) for v in y]

    def step(self, token, pos):
        hd, group = self.head_dim, self.heads // self.kv_heads
        self.router_gap = None  # this token's smallest router gap over the MoE layers (moe)
        x = list(self.w["model.embed_tokens.weight"][token])
        for layer in range(self.layers):
            p = f"model.layers.{layer}."
            a = p + "self_attn."
            xn = self.rms(x, self.w[p + "input_layernorm.weight"])
            q = self.linear(self.w[a + "q_proj.weight"], xn, self.bias_of(a + "q_proj.bias"))
            k = self.linear(self.w[a + "k_proj.weight"], xn, self.bias_of(a + "k_proj.bias"))
            v = self.linear(self.w[a + "v_proj.weight"], xn, self.bias_of(a + "v_proj.bias"))
            qs = [self.rope(q[h * hd:(h + 1) * hd], pos) for h in range(self.heads)]
            self.k[layer].append([self.rope(k[h * hd:(h + 1) * hd], pos) for h in range(self.kv_heads)])
            self.v[layer].append([v[h * hd:(h + 1) * hd] for h in range(self.kv_heads)])
            lo = max(0, pos - self.window + 1) if self.types[layer] == "sliding_attention" else 0
            sinks = self.w[a + "sinks"]
            attn = []
            for h in range(self.heads):
                g = h // group
                keys = range(lo, pos + 1)
                if self.eager_scores:
                    attn += self.eager_head(qs[h], [self.k[layer][t][g] for t in keys], [self.v[layer][t][g] for t in keys], sinks[h])
                    continue
                scores = [sum(qq * kk for qq, kk in zip(qs[h], self.k[layer][t][g])) / math.sqrt(hd) for t in keys]
                mk = max(scores)
                e = [math.exp(s - mk) for s in scores]
                pb = [round_bf16(u) for u in e]
                m = max(mk, sinks[h])
                w = math.exp(mk - m)
                z = sum(e) * w + math.exp(sinks[h] - m)
                attn += [round_bf16(sum(pb[n] * self.v[layer][t][g][i] for n, t in enumerate(keys)) * w / z) for i in range(hd)]
            o = self.linear(self.w[a + "o_proj.weight"], attn, self.bias_of(a + "o_proj.bias"))
            x = [round_bf16(u + w) for u, w in zip(x, o)]
            xn = self.rms(x, self.w[p + "post_attention_layernorm.weight"])
            x = [round_bf16(u + w) for u, w in zip(x, self.moe(p + "mlp.", xn))]
        return self.linear(self.w[self.lm_head], self.rms(x, self.w["model.norm.weight"]))


if __name__ == "__main__":
    main(Model, "tests/oracle/reference_gpt_oss.py",
         [("--eager-scores", "eager_scores", "attention as transformers' bf16 eager gpt-oss attention rounds it "
                                             "(Model.eager_head), to hold the reference to transformers' fixtures"),
          ("--router-gaps", "watch_router", "record each case's router_gaps and prompt_router_gap, in bf16 steps of the "
                                            "router logits, as transformers_logits.py does, for compare.py to set near ties aside")])
