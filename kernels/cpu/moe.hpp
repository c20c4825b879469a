// cpu reference bodies of mixture-of-experts: router (softmax, top-k, optional renormalisation),
// routed gate/up + silu, and down projection with the routing-weighted sum. Expert weights stack
// along rows of one MetHostWeight (expert e, row j = e * rows_per_expert + j). Include from one TU.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "elementwise.hpp"
#include "quant.hpp"

// x: [rows, hidden]; w_router: [experts, hidden]. ids/weights: [rows, top_k], best first; ties go
// to the lower expert. Weights are softmax probabilities over all experts (fp32 logits), divided
// by their top-k sum when renormalize != 0 (equal to a softmax over the top-k logits).
extern "C" void met_moe_router_topk(const std::uint16_t* x, const MetHostWeight* w_router, std::int64_t rows, std::int32_t top_k, std::int32_t renormalize, std::int32_t* ids, float* weights) {
  const std::int64_t experts = w_router->rows;
  met::cpu::RowDot dot(*w_router);
  std::vector<float> p(static_cast<std::size_t>(experts));
  std::vector<std::int32_t> order(static_cast<std::size_t>(experts));
  for (std::int64_t r = 0; r < rows; ++r) {
    float m = -INFINITY;
    for (std::int64_t e = 0; e < experts; ++e) {
      p[static_cast<std::size_t>(e)] = dot(x + r * w_router->cols, e);
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
      weights[r * top_k + k] = renormalize ? p[static_cast<std::size_t>(e)] / top_sum : p[static_cast<std::size_t>(e)];
    }
  }
}

// x: [rows, hidden]; w_gate_up: [experts * 2*inter, hidden]; h: [rows, top_k, inter] =
// silu(gate) * up of each routed expert, via a bf16 gate_up row (as met_gemv then met_silu_mul).
extern "C" void met_moe_gate_up_silu(const std::uint16_t* x, const MetHostWeight* w_gate_up, const std::int32_t* ids, std::int64_t rows, std::int32_t top_k, std::int32_t inter, std::uint16_t* h) {
  met::cpu::RowDot dot(*w_gate_up);
  std::vector<std::uint16_t> gu(static_cast<std::size_t>(2 * inter));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int32_t k = 0; k < top_k; ++k) {
      const std::int64_t first = static_cast<std::int64_t>(ids[r * top_k + k]) * 2 * inter;
      for (std::int64_t j = 0; j < 2 * inter; ++j)
        gu[static_cast<std::size_t>(j)] = met::cpu::f32_to_bf16(dot(x + r * w_gate_up->cols, first + j));
      met::cpu::silu_mul_row(gu.data(), h + (r * top_k + k) * inter, inter);
    }
}

// h: [rows, top_k, inter]; w_down: [experts * hidden, inter]; y: [rows, hidden] =
// bf16(sum_k weights[k] * (h[k] W_down[ids[k]]^T)), all in fp32 until the one store.
extern "C" void met_moe_down(const std::uint16_t* h, const MetHostWeight* w_down, const std::int32_t* ids, const float* weights, std::int64_t rows, std::int32_t top_k, std::int32_t hidden, std::uint16_t* y) {
  met::cpu::RowDot dot(*w_down);
  const std::int64_t inter = w_down->cols;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = 0; o < hidden; ++o) {
      float acc = 0.0f;
      for (std::int32_t k = 0; k < top_k; ++k) {
        const std::int64_t e = ids[r * top_k + k];
        acc += weights[r * top_k + k] * dot(h + (r * top_k + k) * inter, e * hidden + o);
      }
      y[r * hidden + o] = met::cpu::f32_to_bf16(acc);
    }
}
