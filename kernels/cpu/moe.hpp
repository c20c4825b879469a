// cpu reference bodies of mixture-of-experts: router (softmax, top-k, optional renormalisation),
// routed gate/up + silu, and down projection with the routing-weighted sum. Expert weights stack
// along rows of one MetHostWeight (expert e, row j = e * rows_per_expert + j). The expert bodies
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
    float m = -INFINITY;
    for (std::int64_t e = 0; e < experts; ++e) {
      p[static_cast<std::size_t>(e)] = met::cpu::round_bf16(dot(x + r * w_router->cols, e));
      m = std::max(m, p[static_cast<std::size_t>(e)]);
    }
    float sum = 0.0f;
    for (float& v : p) sum += (v = std::exp(v - m));
    for (float& v : p) v /= sum;
    for (std::int64_t e = 0; e < experts; ++e) order[static_cast<std::size_t>(e)] = static_cast<std::int32_t>(e);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
      return p[static_cast<std::size_t>(a)] > p[static_cast<std::size_t>(b)];
    });
    float top_sum = 0.0f;
    for (std::int32_t k = 0; k < top_k; ++k) top_sum += p[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])];
    for (std::int32_t k = 0; k < top_k; ++k) {
      const std::int32_t e = order[static_cast<std::size_t>(k)];
      ids[r * top_k + k] = e;
      weights[r * top_k + k] =
          met::cpu::round_bf16(renormalize ? p[static_cast<std::size_t>(e)] / top_sum : p[static_cast<std::size_t>(e)]);
    }
  }
}

// x: [rows, hidden]; w_gate_up: [experts * 2*inter, hidden]; h: [rows, top_k, inter] =
// silu(gate) * up of each routed expert, via a bf16 gate_up row (as met_gemv then met_silu_mul).
// Only columns [col0, col1) of inter (gate row j, up row inter + j) are computed and written.
extern "C" void met_moe_gate_up_silu(const std::uint16_t* x, const MetHostWeight* w_gate_up, const std::int32_t* ids, std::int64_t rows, std::int32_t top_k, std::int32_t inter, std::uint16_t* h, std::int64_t col0, std::int64_t col1) {
  const std::int64_t width = 2 * static_cast<std::int64_t>(inter), hidden = w_gate_up->cols, n = col1 - col0;
  if (n <= 0) return;
  const auto by_expert = met::cpu::routed_slots(ids, rows, top_k, w_gate_up->rows / width);
  std::vector<std::uint16_t> gu(static_cast<std::size_t>(rows * top_k * 2 * n));  // per slot: gate [n], then up [n]
  std::vector<float> row(static_cast<std::size_t>(hidden));
  for (std::size_t e = 0; e < by_expert.size(); ++e) {
    if (by_expert[e].empty()) continue;
    for (std::int64_t half = 0; half < 2; ++half)
      for (std::int64_t j = col0; j < col1; ++j) {
        met::cpu::weight_row(*w_gate_up, static_cast<std::int64_t>(e) * width + half * inter + j, row.data());
        for (const std::int64_t t : by_expert[e])
          gu[static_cast<std::size_t>((t * 2 + half) * n + j - col0)] =
              met::cpu::f32_to_bf16(met::cpu::dot_act(*w_gate_up, x + (t / top_k) * hidden, row.data(), hidden));
      }
  }
  for (std::int64_t t = 0; t < rows * top_k; ++t)
    met::cpu::silu_mul_span(gu.data() + t * 2 * n, gu.data() + t * 2 * n + n, h + t * inter + col0, n);
}

namespace met::cpu {

// The down projection's sums: acc [rows, n] (columns [col0, col1)) = each row's weighted copies
// bf16(weights[k] * bf16(h[k] W_down[ids[k]]^T)) added in fp32 in (expert, slot) order.
inline std::vector<float> moe_down_sums(const std::uint16_t* h, const MetHostWeight* w_down, const std::int32_t* ids,
                                        const float* weights, std::int64_t rows, std::int32_t top_k, std::int32_t hidden,
                                        std::int64_t col0, std::int64_t col1) {
  const std::int64_t inter = w_down->cols, n = col1 - col0;
  const auto by_expert = routed_slots(ids, rows, top_k, w_down->rows / hidden);
  std::vector<float> acc(static_cast<std::size_t>(rows * n), 0.0f);
  std::vector<float> row(static_cast<std::size_t>(inter));
  for (std::size_t e = 0; e < by_expert.size(); ++e) {
    if (by_expert[e].empty()) continue;
    for (std::int64_t o = col0; o < col1; ++o) {
      weight_row(*w_down, static_cast<std::int64_t>(e) * hidden + o, row.data());
      for (const std::int64_t t : by_expert[e])
        acc[static_cast<std::size_t>((t / top_k) * n + o - col0)] +=
            round_bf16(weights[t] * round_bf16(dot_act(*w_down, h + t * inter, row.data(), inter)));
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
