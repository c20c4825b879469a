#!/usr/bin/env python3
"""An in-repo reference for the tiny Gemma-4 models until a transformers fixture of the MoE one is
committed: a plain Python forward pass (no numpy or torch, so it runs wherever ctest does) over a
`met model synth` checkpoint, written down from transformers' Gemma4 text model
(modeling_gemma4.py, the proportional rope of modeling_rope_utils.py) rather than from met's code,
that writes a fixture in the transformers fixtures' format for tests/oracle/check.sh. With
enable_moe_block false it is the dense model of tiny-gemma4.json, whose transformers fixture checks
the reference itself (README.md).

What it computes, with a bf16 rounding wherever transformers' bf16 tensors round and fp32 sums in
order (dot32) where met's bodies sum:
- The embedding times sqrt(hidden) rounded to bf16 (the normalizer is a bf16 tensor).
- Gemma4RMSNorm: x * (mean(x^2) + eps)^-1/2 in fp32, times the weight in fp32, rounded once; the
  weightless v_norm and the router's norm round x / rms(x) (the router's then times its scale in
  bf16).
- Attention: q/k/v projections (full layers with attention_k_eq_v: V is k_proj's output, one KV
  head group of num_global_key_value_heads), q_norm and k_norm per head, the weightless v_norm,
  rotate-half rope with bf16 cos and sin and each product and the sum rounded: sliding layers over
  the whole head_dim at their rope_theta, full layers the proportional rope over global_head_dim
  (the first partial_rotary_factor * head_dim / 2 frequencies theta^(-2i / head_dim), the others 0).
  Scores unscaled (scale 1), causal, sliding layers see the last sliding_window keys; each
  probability exp(s - max) rounded to bf16 for the sum with V (a flash kernel's rounding), divided
  by the fp32 sum. o_proj, post_attention_layernorm, the residual.
- MLP: pre_feedforward_layernorm, gate and up, bf16(bf16(gelu_tanh(gate)) * up), down.
- With enable_moe_block, beside it (the residual r after attention): the dense output through
  post_feedforward_layernorm_1; the router reads r: n = bf16(bf16(r / rms(r)) * router.scale), n =
  bf16(n * hidden^-1/2), logits = bf16(n proj^T), p = softmax over every expert in fp32 rounded to
  bf16, the top k (ties to the lower expert), w = bf16(p / bf16(sum of the k)), w = bf16(w *
  per_expert_scale[e]); the experts read pre_feedforward_layernorm_2(r): gate_up_proj[e] [2 *
  moe_inter, hidden] (gate rows first), bf16(bf16(gelu_tanh(gate)) * up), down_proj[e] [hidden,
  moe_inter], y_e = bf16(w * out); the block's output starts at 0 and adds each hit expert's y_e in
  ascending expert order, rounding each sum to bf16 (the eager loop's index_add_ into a bf16
  buffer); then post_feedforward_layernorm_2, and the sum of the two branches.
- post_feedforward_layernorm, the residual, times the layer's layer_scalar; the final norm, the tied
  LM head, the final logit softcap cap * tanh(logits / cap) rounded once.
Greedy decoding."""
import json
import math
import os

from reference_common import Checkpoint, dot32, f32, main, round_bf16

GELU_K = f32(0.7978845608028654)  # sqrt(2 / pi), as fp32
GELU_C = f32(0.044715)


def gelu_tanh(g):
    """gelu_pytorch_tanh in fp32, step by step as met's body computes it."""
    inner = f32(g + f32(f32(f32(GELU_C * g) * g) * g))
    return f32(f32(0.5 * g) * f32(1.0 + f32(math.tanh(f32(GELU_K * inner)))))


def gelu_mul(gate, up):
    return [round_bf16(round_bf16(gelu_tanh(g)) * u) for g, u in zip(gate, up)]


def linear(m, x):
    return [round_bf16(dot32(row, x)) for row in m]


class Model:
    def __init__(self, path):
        with open(os.path.join(path, "config.json")) as f:
            c = json.load(f)
        t = c.get("text_config", c)
        self.w = Checkpoint(path)
        self.p = "model.language_model." if "model.language_model.embed_tokens.weight" in self.w else "model."
        self.hidden, self.layers = t["hidden_size"], t["num_hidden_layers"]
        self.heads, self.kv_heads = t["num_attention_heads"], t["num_key_value_heads"]
        self.head_dim, self.global_head_dim = t["head_dim"], t["global_head_dim"]
        self.k_eq_v = t.get("attention_k_eq_v", False)
        self.global_kv_heads = t.get("num_global_key_value_heads") or self.kv_heads
        self.eps, self.window = f32(t["rms_norm_eps"]), t["sliding_window"]
        self.types = t["layer_types"]
        self.softcap = t.get("final_logit_softcapping") or 0.0
        self.moe = bool(t.get("enable_moe_block"))
        if self.moe:
            self.experts, self.top_k = t["num_experts"], t["top_k_experts"]
            if not 1 <= self.top_k <= self.experts:
                raise SystemExit(f"top_k_experts {self.top_k} is not between 1 and num_experts {self.experts}")
        for unsupported in ("hidden_size_per_layer_input", "num_kv_shared_layers"):
            if t.get(unsupported):
                raise SystemExit(f"{unsupported} {t[unsupported]}: the reference runs neither per-layer inputs nor KV sharing")
        rp = t["rope_parameters"]
        sliding, full = rp["sliding_attention"], rp["full_attention"]
        if sliding.get("rope_type", "default") != "default" or full.get("rope_type") != "proportional":
            raise SystemExit("the reference runs a default sliding rope and a proportional full one")
        hd = self.head_dim
        self.inv_sliding = [sliding["rope_theta"] ** (-2.0 * i / hd) for i in range(hd // 2)]
        ghd = self.global_head_dim
        rotated = int(full.get("partial_rotary_factor", 1.0) * ghd // 2)
        self.inv_full = [full["rope_theta"] ** (-2.0 * i / ghd) if i < rotated else 0.0 for i in range(ghd // 2)]
        # The proportional rope's frequencies are an fp32 table; the sliding rope's stay exact.
        self.inv_full = [f32(f) for f in self.inv_full]
        self.embed_scale = round_bf16(math.sqrt(self.hidden))
        embed = self.p + "embed_tokens.weight"
        self.lm_head = "lm_head.weight" if "lm_head.weight" in self.w else embed
        self.root = f32(self.hidden ** -0.5)
        self.reset()

    def reset(self):
        self.k = [[] for _ in range(self.layers)]
        self.v = [[] for _ in range(self.layers)]

    def rms(self, x, g=None, round_once=True):
        """Gemma4RMSNorm (g None: without a weight); round_once False rounds x / rms(x) before g."""
        inv = f32(1.0 / f32(math.sqrt(f32(f32(dot32(x, x) / len(x)) + self.eps))))
        if g is None:
            return [round_bf16(v * inv) for v in x]
        if round_once:
            return [round_bf16(f32(v * inv) * gg) for v, gg in zip(x, g)]
        return [round_bf16(round_bf16(v * inv) * gg) for v, gg in zip(x, g)]

    @staticmethod
    def rope(v, pos, inv_freq):
        half = len(v) // 2
        out = list(v)
        for i in range(half):
            f = pos * inv_freq[i]
            c, s = round_bf16(math.cos(f)), round_bf16(math.sin(f))
            out[i] = round_bf16(round_bf16(v[i] * c) + round_bf16(-v[i + half] * s))
            out[i + half] = round_bf16(round_bf16(v[i + half] * c) + round_bf16(v[i] * s))
        return out

    def attend(self, q, keys, values):
        scores = [dot32(q, k) for k in keys]
        m = max(scores)
        e = [f32(math.exp(f32(s - m))) for s in scores]
        z = 0.0
        for u in e:
            z = f32(z + u)
        inv = f32(1.0 / z)
        pb = [round_bf16(u) for u in e]
        return [round_bf16(f32(dot32(pb, [v[i] for v in values]) * inv)) for i in range(len(values[0]))]

    def mlp(self, p, x):
        gate, up = linear(self.w[p + "gate_proj.weight"], x), linear(self.w[p + "up_proj.weight"], x)
        return linear(self.w[p + "down_proj.weight"], gelu_mul(gate, up))

    def router(self, p, r):
        n = self.rms(r, self.w[p + "router.scale"], round_once=False)
        n = [round_bf16(v * self.root) for v in n]
        logits = linear(self.w[p + "router.proj.weight"], n)
        m = max(logits)
        e = [f32(math.exp(f32(v - m))) for v in logits]
        z = 0.0
        for u in e:
            z = f32(z + u)
        prob = [round_bf16(u / z) for u in e]
        chosen = sorted(range(self.experts), key=lambda x: (-prob[x], x))[:self.top_k]
        s = 0.0
        for x in chosen:
            s = f32(s + prob[x])
        s = round_bf16(s)
        scale = self.w[p + "router.per_expert_scale"]
        return {x: round_bf16(round_bf16(prob[x] / s) * scale[x]) for x in chosen}

    def experts_block(self, p, xn, weight):
        gate_up, down = self.w[p + "experts.gate_up_proj"], self.w[p + "experts.down_proj"]
        inter = len(gate_up[0]) // 2
        y = [0.0] * self.hidden
        for x in sorted(weight):
            gu = linear(gate_up[x], xn)
            out = linear(down[x], gelu_mul(gu[:inter], gu[inter:]))
            y = [round_bf16(a + round_bf16(weight[x] * b)) for a, b in zip(y, out)]
        return y

    def step(self, token, pos):
        x = [round_bf16(v * self.embed_scale) for v in self.w[self.p + "embed_tokens.weight"][token]]
        for layer in range(self.layers):
            p = f"{self.p}layers.{layer}."
            a = p + "self_attn."
            full = self.types[layer] == "full_attention"
            hd = self.global_head_dim if full else self.head_dim
            kvh = self.global_kv_heads if full and self.k_eq_v else self.kv_heads
            inv_freq = self.inv_full if full else self.inv_sliding
            xn = self.rms(x, self.w[p + "input_layernorm.weight"])
            q = linear(self.w[a + "q_proj.weight"], xn)
            k = linear(self.w[a + "k_proj.weight"], xn)
            v = list(k) if full and self.k_eq_v else linear(self.w[a + "v_proj.weight"], xn)
            qn, kn = self.w[a + "q_norm.weight"], self.w[a + "k_norm.weight"]
            qs = [self.rope(self.rms(q[h * hd:(h + 1) * hd], qn), pos, inv_freq) for h in range(self.heads)]
            self.k[layer].append([self.rope(self.rms(k[h * hd:(h + 1) * hd], kn), pos, inv_freq) for h in range(kvh)])
            self.v[layer].append([self.rms(v[h * hd:(h + 1) * hd]) for h in range(kvh)])
            lo = 0 if full else max(0, pos - self.window + 1)
            group = self.heads // kvh
            attn = []
            for h in range(self.heads):
                g = h // group
                attn += self.attend(qs[h], [kk[g] for kk in self.k[layer][lo:]], [vv[g] for vv in self.v[layer][lo:]])
            o = self.rms(linear(self.w[a + "o_proj.weight"], attn), self.w[p + "post_attention_layernorm.weight"])
            x = [round_bf16(u + w) for u, w in zip(x, o)]
            h = self.mlp(p + "mlp.", self.rms(x, self.w[p + "pre_feedforward_layernorm.weight"]))
            if self.moe:
                h1 = self.rms(h, self.w[p + "post_feedforward_layernorm_1.weight"])
                weight = self.router(p, x)
                h2 = self.experts_block(p, self.rms(x, self.w[p + "pre_feedforward_layernorm_2.weight"]), weight)
                h2 = self.rms(h2, self.w[p + "post_feedforward_layernorm_2.weight"])
                h = [round_bf16(u + w) for u, w in zip(h1, h2)]
            h = self.rms(h, self.w[p + "post_feedforward_layernorm.weight"])
            x = [round_bf16(u + w) for u, w in zip(x, h)]
            s = self.w[p + "layer_scalar"][0]
            x = [round_bf16(u * s) for u in x]
        logits = linear(self.w[self.lm_head], self.rms(x, self.w[self.p + "norm.weight"]))
        if self.softcap:
            logits = [round_bf16(self.softcap * math.tanh(f32(v / self.softcap))) for v in logits]
        return logits


if __name__ == "__main__":
    main(Model, "tests/oracle/reference_gemma4.py")
