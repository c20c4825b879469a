// cpu reference bodies of mixture-of-experts: routers (softmax, top-k, optional renormalisation;
// gpt-oss's biased one; Gemma-4's scaled one), routed gate/up + silu or gelu, and down projection
// with the routing-weighted sum. Expert weights stack
// along rows of one MetHostWeight (expert e, row j = e * rows_per_expert + j). gpt-oss's experts
// (the *_bias and swiglu bodies) read one weight over every expert as its checkpoint stores it:
// bf16 [experts, in, out] (the input dimension first), or MXFP4 rows [experts * out, in]. The expert bodies
// walk experts, not rows: each expert a slice's rows picked is read once for all of them, and an
// expert none picked is never read (the cost the planner charges). Include from one TU.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "elementwise.hpp"
#include "quant.hpp"

namespace met::cpu {

// The (row, k) slots routed to each expert, slot = row * top_k + k, ascending within an expert.
inline std::vector<std::vector<std::int64_t>> routed_slots(const std::int32_t* ids, std::int64_t rows, std::int32_t top_k,
                                                           std::int64_t experts) {
  std::vector<std::vector<std::int64_t>> by_expert(static_cast<std::size_t>(experts));
  for (std::int64_t t = 0; t < rows * top_k; ++t) {
    const std::int32_t e = ids[t];
    if (e >= 0 && e < experts) by_expert[static_cast<std::size_t>(e)].push_back(t);
  }
  return by_expert;
}

// One routed expert's projection of an input row for outputs [o0, o1) of `outs`, in fp32, each
// output summed over the inputs in order, into y[0, o1 - o0). A bf16 weight is [experts, ins, outs]
// (gpt-oss's bf16 layout), any other format rows [experts * outs, ins] (MXFP4 blocks).
inline void fused_expert_proj(const MetHostWeight& w, std::int64_t e, std::int64_t ins, std::int64_t outs, const std::uint16_t* x,
                              std::int64_t o0, std::int64_t o1, float* y, std::vector<float>& row) {
  if (w.format == MET_WEIGHT_BF16) {
    const auto* d = static_cast<const std::uint16_t*>(w.data) + e * ins * outs;
    for (std::int64_t o = o0; o < o1; ++o) y[o - o0] = 0.0f;
    for (std::int64_t i = 0; i < ins; ++i) {
      const float xi = bf16_to_f32(x[i]);
      const std::uint16_t* wi = d + i * outs;
      for (std::int64_t o = o0; o < o1; ++o) y[o - o0] += xi * bf16_to_f32(wi[o]);
    }
    return;
  }
  row.resize(static_cast<std::size_t>(ins));
  for (std::int64_t o = o0; o < o1; ++o) {
    weight_row(w, e * outs + o, row.data());
    y[o - o0] = dot_act(w, x, row.data(), ins);
  }
}

}  // namespace met::cpu

// gpt-oss's router: x [rows, hidden], w_router [experts, hidden], bias [experts]. The logits are
// bf16(x w + bias) (one rounding, as a bf16 Linear with a bias), the top k of them best first (ties
// to the lower expert), and the weights a softmax over those k in fp32, each rounded to bf16.
extern "C" void met_moe_router_topk_bias(const std::uint16_t* x, const MetHostWeight* w_router, const std::uint16_t* bias, std::int64_t rows, std::int32_t top_k, std::int32_t* ids, float* weights) {
  const std::int64_t experts = w_router->rows;
  met::cpu::RowDot dot(*w_router);
  std::vector<float> logit(static_cast<std::size_t>(experts));
  std::vector<std::int32_t> order(static_cast<std::size_t>(experts));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t e = 0; e < experts; ++e)
      logit[static_cast<std::size_t>(e)] =
          met::cpu::round_bf16(dot(x + r * w_router->cols, e) + met::cpu::bf16_to_f32(bias[e]));
    for (std::int64_t e = 0; e < experts; ++e) order[static_cast<std::size_t>(e)] = static_cast<std::int32_t>(e);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
      return logit[static_cast<std::size_t>(a)] > logit[static_cast<std::size_t>(b)];
    });
    const float m = logit[static_cast<std::size_t>(order[0])];
    float sum = 0.0f;
    for (std::int32_t k = 0; k < top_k; ++k) sum += std::exp(logit[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])] - m);
    for (std::int32_t k = 0; k < top_k; ++k) {
      const std::int32_t e = order[static_cast<std::size_t>(k)];
      ids[r * top_k + k] = e;
      weights[r * top_k + k] = met::cpu::round_bf16(std::exp(logit[static_cast<std::size_t>(e)] - m) / sum);
    }
  }
}

// gpt-oss's experts' gate/up: x [rows, hidden]; per routed slot, gate_up = bf16(bf16(x W_e) +
// bias[e]) (a bf16 product, then the bias added in bf16), gate = column 2j, up = 2j + 1; then
// gate = min(gate, limit), up = clamp(up, -limit, limit) and h = bf16(bf16(up + 1) * glu), glu =
// bf16(gate * bf16(sigmoid(bf16(gate * alpha)))), every step a bf16 tensor in transformers.
// Only columns [col0, col1) of inter are computed and written into h [rows, top_k, inter].
extern "C" void met_moe_gate_up_swiglu(const std::uint16_t* x, const MetHostWeight* w_gate_up, const std::uint16_t* bias, const std::int32_t* ids, std::int64_t rows, std::int32_t top_k, std::int32_t inter, std::int32_t hidden, std::int32_t experts, float limit, float alpha, std::uint16_t* h, std::int64_t col0, std::int64_t col1) {
  const std::int64_t width = 2 * static_cast<std::int64_t>(inter), n = col1 - col0;
  if (n <= 0) return;
  const auto by_expert = met::cpu::routed_slots(ids, rows, top_k, experts);
  std::vector<float> gu(static_cast<std::size_t>(2 * n));
  std::vector<float> row;
  using met::cpu::round_bf16;
  for (std::size_t e = 0; e < by_expert.size(); ++e) {
    const auto ee = static_cast<std::int64_t>(e);
    for (const std::int64_t t : by_expert[e]) {
      met::cpu::fused_expert_proj(*w_gate_up, ee, hidden, width, x + (t / top_k) * hidden, 2 * col0, 2 * col1, gu.data(), row);
      for (std::int64_t j = col0; j < col1; ++j) {
        const std::uint16_t* b = bias + ee * width + 2 * j;
        float gate = round_bf16(round_bf16(gu[static_cast<std::size_t>(2 * (j - col0))]) + met::cpu::bf16_to_f32(b[0]));
        float up = round_bf16(round_bf16(gu[static_cast<std::size_t>(2 * (j - col0) + 1)]) + met::cpu::bf16_to_f32(b[1]));
        gate = std::min(gate, limit);
        up = std::clamp(up, -limit, limit);
        const float sig = round_bf16(1.0f / (1.0f + std::exp(-round_bf16(gate * alpha))));
        const float glu = round_bf16(gate * sig);
        h[t * inter + j] = met::cpu::f32_to_bf16(round_bf16(up + 1.0f) * glu);
      }
    }
  }
}

namespace met::cpu {

// gpt-oss's experts' down projection, each row's sums over its routed slots of columns [col0,
// col1) ([rows, col1 - col0]), in (expert, slot) order: rounded as transformers rounds them (each
// slot's bf16(bf16(h W_e) + bias[e]) and its weighted copy bf16), or, unrounded, a tensor-parallel
// rank's share (bias null: a rank other than the first adds none).
inline std::vector<float> fused_down_sums(const std::uint16_t* h, const MetHostWeight* w_down, const std::uint16_t* bias,
                                          const std::int32_t* ids, const float* weights, std::int64_t rows, std::int32_t top_k,
                                          std::int32_t hidden, std::int32_t inter, std::int32_t experts, std::int64_t col0,
                                          std::int64_t col1, bool rounded) {
  const std::int64_t n = col1 - col0;
  const auto by_expert = routed_slots(ids, rows, top_k, experts);
  std::vector<float> acc(static_cast<std::size_t>(rows * n), 0.0f), out(static_cast<std::size_t>(n));
  std::vector<float> row;
  for (std::size_t e = 0; e < by_expert.size(); ++e) {
    const auto ee = static_cast<std::int64_t>(e);
    for (const std::int64_t t : by_expert[e]) {
      fused_expert_proj(*w_down, ee, inter, hidden, h + t * inter, col0, col1, out.data(), row);
      for (std::int64_t o = col0; o < col1; ++o) {
        const float p = out[static_cast<std::size_t>(o - col0)], b = bias ? bf16_to_f32(bias[ee * hidden + o]) : 0.0f;
        acc[static_cast<std::size_t>((t / top_k) * n + o - col0)] +=
            rounded ? round_bf16(weights[t] * round_bf16(round_bf16(p) + b)) : weights[t] * (p + b);
      }
    }
  }
  return acc;
}

}  // namespace met::cpu

// gpt-oss's experts' down projection: h [rows, top_k, inter]; per routed slot out = bf16(bf16(h
// W_e) + bias[e]) and its weighted copy bf16(weight * out); the row's copies summed in fp32 (in
// expert order) with one rounding at the store, as transformers' grouped and batched experts sum
// them (a bf16 sum over the top-k dimension). Only columns [col0, col1) of y are computed and
// written.
extern "C" void met_moe_down_bias(const std::uint16_t* h, const MetHostWeight* w_down, const std::uint16_t* bias, const std::int32_t* ids, const float* weights, std::int64_t rows, std::int32_t top_k, std::int32_t hidden, std::int32_t inter, std::int32_t experts, std::uint16_t* y, std::int64_t col0, std::int64_t col1) {
  const std::int64_t n = col1 - col0;
  if (n <= 0) return;
  const auto acc = met::cpu::fused_down_sums(h, w_down, bias, ids, weights, rows, top_k, hidden, inter, experts, col0, col1, true);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = 0; o < n; ++o) y[r * hidden + col0 + o] = met::cpu::f32_to_bf16(acc[static_cast<std::size_t>(r * n + o)]);
}

// Tensor parallelism for gpt-oss's experts: y [rows, hidden] fp32 (columns [col0, col1)) = each
// row's sum over its routed slots of weights[k] * (h[k] W_e + bias[e]) over this rank's slice of the
// intermediate size, unrounded, in (expert, slot) order; bias null on every rank but the first (the
// bias is added once). The ranks' sums are added before the one rounding (met_allreduce_residual).
extern "C" void met_moe_down_bias_f32(const std::uint16_t* h, const MetHostWeight* w_down, const std::uint16_t* bias, const std::int32_t* ids, const float* weights, std::int64_t rows, std::int32_t top_k, std::int32_t hidden, std::int32_t inter, std::int32_t experts, float* y, std::int64_t col0, std::int64_t col1) {
  const std::int64_t n = col1 - col0;
  if (n <= 0) return;
  const auto acc = met::cpu::fused_down_sums(h, w_down, bias, ids, weights, rows, top_k, hidden, inter, experts, col0, col1, false);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = 0; o < n; ++o) y[r * hidden + col0 + o] = acc[static_cast<std::size_t>(r * n + o)];
}

namespace met::cpu {

// A router's scoring of one row: p holds its bf16 logits [experts] and becomes their softmax over
// every expert in fp32 (each probability rounded to bf16 when round_p: Gemma-4's); order becomes the
// experts by p, largest first, ties to the lower expert (a stable sort). Returns the top k's sum of
// p, in k order.
inline float softmax_top_k(std::vector<float>& p, std::vector<std::int32_t>& order, std::int32_t top_k, bool round_p) {
  float m = -INFINITY;
  for (const float v : p) m = std::max(m, v);
  float sum = 0.0f;
  for (float& v : p) sum += (v = std::exp(v - m));
  for (float& v : p) v = round_p ? round_bf16(v / sum) : v / sum;
  for (std::size_t e = 0; e < order.size(); ++e) order[e] = static_cast<std::int32_t>(e);
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return p[static_cast<std::size_t>(a)] > p[static_cast<std::size_t>(b)];
  });
  float top_sum = 0.0f;
  for (std::int32_t k = 0; k < top_k; ++k) top_sum += p[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])];
  return top_sum;
}

}  // namespace met::cpu

// x: [rows, hidden]; w_router: [experts, hidden]. ids/weights: [rows, top_k], best first; ties go
// to the lower expert. The logits are rounded to bf16 (a bf16 projection's output, as transformers'
// router computes them); the weights are their softmax over all experts in fp32, divided by the
// top-k sum when renormalize != 0 (equal to a softmax over the top-k logits), then rounded to bf16
// (the routing weights are cast back to the activations' dtype before the experts use them).
extern "C" void met_moe_router_topk(const std::uint16_t* x, const MetHostWeight* w_router, std::int64_t rows, std::int32_t top_k, std::int32_t renormalize, std::int32_t* ids, float* weights) {
  const std::int64_t experts = w_router->rows;
  met::cpu::RowDot dot(*w_router);
  std::vector<float> p(static_cast<std::size_t>(experts));
  std::vector<std::int32_t> order(static_cast<std::size_t>(experts));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t e = 0; e < experts; ++e) p[static_cast<std::size_t>(e)] = met::cpu::round_bf16(dot(x + r * w_router->cols, e));
    const float top_sum = met::cpu::softmax_top_k(p, order, top_k, /*round_p=*/false);
    for (std::int32_t k = 0; k < top_k; ++k) {
      const std::int32_t e = order[static_cast<std::size_t>(k)];
      ids[r * top_k + k] = e;
      weights[r * top_k + k] =
          met::cpu::round_bf16(renormalize ? p[static_cast<std::size_t>(e)] / top_sum : p[static_cast<std::size_t>(e)]);
    }
  }
}

namespace met::cpu {

// The routed experts' gate/up with a gated activation: x [rows, hidden]; w_gate_up [experts *
// 2*inter, hidden]; h [rows, top_k, inter] = act(gate) * up of each routed expert, via a bf16 gate_up
// row (as met_gemv then the activation body). Only columns [col0, col1) of inter (gate row j, up row
// inter + j) are computed and written. act_span: silu_mul_span or gelu_mul_span.
template <class ActSpan>
void moe_gate_up_act(const std::uint16_t* x, const MetHostWeight* w_gate_up, const std::int32_t* ids, std::int64_t rows,
                     std::int32_t top_k, std::int32_t inter, std::uint16_t* h, std::int64_t col0, std::int64_t col1,
                     ActSpan act_span) {
  const std::int64_t width = 2 * static_cast<std::int64_t>(inter), hidden = w_gate_up->cols, n = col1 - col0;
  if (n <= 0) return;
  const auto by_expert = routed_slots(ids, rows, top_k, w_gate_up->rows / width);
  std::vector<std::uint16_t> gu(static_cast<std::size_t>(rows * top_k * 2 * n));  // per slot: gate [n], then up [n]
  std::vector<float> row(static_cast<std::size_t>(hidden));
  for (std::size_t e = 0; e < by_expert.size(); ++e) {
    if (by_expert[e].empty()) continue;
    for (std::int64_t half = 0; half < 2; ++half)
      for (std::int64_t j = col0; j < col1; ++j) {
        weight_row(*w_gate_up, static_cast<std::int64_t>(e) * width + half * inter + j, row.data());
        for (const std::int64_t t : by_expert[e])
          gu[static_cast<std::size_t>((t * 2 + half) * n + j - col0)] =
              f32_to_bf16(dot_act(*w_gate_up, x + (t / top_k) * hidden, row.data(), hidden));
      }
  }
  for (std::int64_t t = 0; t < rows * top_k; ++t) act_span(gu.data() + t * 2 * n, gu.data() + t * 2 * n + n, h + t * inter + col0, n);
}

}  // namespace met::cpu

// Qwen3-MoE's and Mixtral's experts: silu(gate) * up (met::cpu::moe_gate_up_act).
extern "C" void met_moe_gate_up_silu(const std::uint16_t* x, const MetHostWeight* w_gate_up, const std::int32_t* ids, std::int64_t rows, std::int32_t top_k, std::int32_t inter, std::uint16_t* h, std::int64_t col0, std::int64_t col1) {
  met::cpu::moe_gate_up_act(x, w_gate_up, ids, rows, top_k, inter, h, col0, col1, met::cpu::silu_mul_span);
}

// Gemma-4's experts: gelu_tanh(gate) * up, gelu rounded to bf16 before the product (its
// gate_up_proj [experts, 2 * inter, hidden] is the stacked layout's bytes: gate rows, then up rows).
extern "C" void met_moe_gate_up_gelu(const std::uint16_t* x, const MetHostWeight* w_gate_up, const std::int32_t* ids, std::int64_t rows, std::int32_t top_k, std::int32_t inter, std::uint16_t* h, std::int64_t col0, std::int64_t col1) {
  met::cpu::moe_gate_up_act(x, w_gate_up, ids, rows, top_k, inter, h, col0, col1, met::cpu::gelu_mul_span);
}

// Gemma-4's router (Gemma4TextRouter), from the raw residual x [rows, hidden]: n = bf16(bf16(x /
// rms(x)) * scale) (its weightless norm, then the scale vector in bf16), n = bf16(n * root) (root =
// hidden^-1/2, an fp32 number), logits = bf16(n W^T) (w_router [experts, hidden]), p = a softmax
// over every expert in fp32 rounded to bf16, the top k of p (ties to the lower expert), each
// divided by their sum (the sum and the quotient rounded to bf16), then times its expert's
// expert_scale entry (rounded to bf16). ids/weights: [rows, top_k], best first.
extern "C" void met_moe_router_scaled(const std::uint16_t* x, const MetHostWeight* w_router, const std::uint16_t* scale, const std::uint16_t* expert_scale, std::int64_t rows, std::int32_t top_k, float eps, float root, std::int32_t* ids, float* weights) {
  const std::int64_t experts = w_router->rows, hidden = w_router->cols;
  using met::cpu::bf16_to_f32;
  using met::cpu::round_bf16;
  met::cpu::RowDot dot(*w_router);
  std::vector<std::uint16_t> n(static_cast<std::size_t>(hidden));
  std::vector<float> p(static_cast<std::size_t>(experts));
  std::vector<std::int32_t> order(static_cast<std::size_t>(experts));
  for (std::int64_t r = 0; r < rows; ++r) {
    met::cpu::rmsnorm_row(x + r * hidden, scale, n.data(), /*count=*/1, hidden, eps);
    for (auto& v : n) v = met::cpu::f32_to_bf16(bf16_to_f32(v) * root);
    for (std::int64_t e = 0; e < experts; ++e) p[static_cast<std::size_t>(e)] = round_bf16(dot(n.data(), e));
    const float top_sum = round_bf16(met::cpu::softmax_top_k(p, order, top_k, /*round_p=*/true));
    for (std::int32_t k = 0; k < top_k; ++k) {
      const std::int32_t e = order[static_cast<std::size_t>(k)];
      ids[r * top_k + k] = e;
      weights[r * top_k + k] = round_bf16(round_bf16(p[static_cast<std::size_t>(e)] / top_sum) * bf16_to_f32(expert_scale[e]));
    }
  }
}

namespace met::cpu {

// The down projection's sums: acc [rows, n] (columns [col0, col1)) = each row's weighted copies
// bf16(weights[k] * bf16(h[k] W_down[ids[k]]^T)) added in fp32 in (expert, slot) order; with
// rounded false, weights[k] * (h[k] W_down[ids[k]]^T) unrounded (a tensor-parallel rank's partial
// sums, which round only after the ranks' are added).
inline std::vector<float> moe_down_sums(const std::uint16_t* h, const MetHostWeight* w_down, const std::int32_t* ids,
                                        const float* weights, std::int64_t rows, std::int32_t top_k, std::int32_t hidden,
                                        std::int64_t col0, std::int64_t col1, bool rounded = true) {
  const std::int64_t inter = w_down->cols, n = col1 - col0;
  const auto by_expert = routed_slots(ids, rows, top_k, w_down->rows / hidden);
  std::vector<float> acc(static_cast<std::size_t>(rows * n), 0.0f);
  std::vector<float> row(static_cast<std::size_t>(inter));
  for (std::size_t e = 0; e < by_expert.size(); ++e) {
    if (by_expert[e].empty()) continue;
    for (std::int64_t o = col0; o < col1; ++o) {
      weight_row(*w_down, static_cast<std::int64_t>(e) * hidden + o, row.data());
      for (const std::int64_t t : by_expert[e]) {
        const float y = dot_act(*w_down, h + t * inter, row.data(), inter);
        acc[static_cast<std::size_t>((t / top_k) * n + o - col0)] += rounded ? round_bf16(weights[t] * round_bf16(y)) : weights[t] * y;
      }
    }
  }
  return acc;
}

}  // namespace met::cpu

// h: [rows, top_k, inter]; w_down: [experts * hidden, inter]; y: [rows, hidden] =
// bf16(sum over the routed experts of bf16(weights[k] * bf16(h[k] W_down[ids[k]]^T))): each
// expert's output is a bf16 projection, its weighted copy a bf16 product (weights are bf16), and
// the top-k copies sum in fp32 (in expert order) with one rounding at the store. Only columns
// [col0, col1) of y are computed and written.
extern "C" void met_moe_down(const std::uint16_t* h, const MetHostWeight* w_down, const std::int32_t* ids, const float* weights, std::int64_t rows, std::int32_t top_k, std::int32_t hidden, std::uint16_t* y, std::int64_t col0, std::int64_t col1) {
  const std::int64_t n = col1 - col0;
  if (n <= 0) return;
  const auto acc = met::cpu::moe_down_sums(h, w_down, ids, weights, rows, top_k, hidden, col0, col1);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = 0; o < n; ++o) y[r * hidden + col0 + o] = met::cpu::f32_to_bf16(acc[static_cast<std::size_t>(r * n + o)]);
}

// Tensor parallelism: y [rows, hidden] fp32 (columns [col0, col1)) = each row's sum over its routed
// experts of weights[k] * (h[k] W_down[ids[k]]^T), unrounded, in (expert, slot) order. h and w_down
// hold this rank's slice of the intermediate size; the ranks' sums are added before any rounding
// (met_allreduce_residual), so the expert outputs and their weighted copies round once, at the end.
extern "C" void met_moe_down_f32(const std::uint16_t* h, const MetHostWeight* w_down, const std::int32_t* ids, const float* weights, std::int64_t rows, std::int32_t top_k, std::int32_t hidden, float* y, std::int64_t col0, std::int64_t col1) {
  const std::int64_t n = col1 - col0;
  if (n <= 0) return;
  const auto sums = met::cpu::moe_down_sums(h, w_down, ids, weights, rows, top_k, hidden, col0, col1, /*rounded=*/false);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = 0; o < n; ++o) y[r * hidden + col0 + o] = sums[static_cast<std::size_t>(r * n + o)];
}

// met_moe_down that also leaves each row's fp32 sums in acc [rows, hidden] (columns [col0, col1)),
// as the grouped GPU body keeps them (kernels/common/moe_mma.cuh).
extern "C" void met_moe_down_mma(const std::uint16_t* h, const MetHostWeight* w_down, const std::int32_t* ids, const float* weights, std::int64_t rows, std::int32_t top_k, std::int32_t hidden, float* acc, std::uint16_t* y, std::int64_t col0, std::int64_t col1) {
  const std::int64_t n = col1 - col0;
  if (n <= 0) return;
  const auto sums = met::cpu::moe_down_sums(h, w_down, ids, weights, rows, top_k, hidden, col0, col1);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = 0; o < n; ++o) {
      acc[r * hidden + col0 + o] = sums[static_cast<std::size_t>(r * n + o)];
      y[r * hidden + col0 + o] = met::cpu::f32_to_bf16(sums[static_cast<std::size_t>(r * n + o)]);
    }
}
