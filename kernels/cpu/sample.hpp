// cpu reference body of sampling: temperature, top-k and top-p over one row of bf16 logits, with
// the uniform number the host drew from the request's seeded generator. The GPU body
// (kernels/common/interp/ops.cuh) follows the same rule step for step, so both pick the same
// token from the same logits and number:
//  - temperature <= 0: the argmax (ties to the lowest index, NaN never wins);
//  - every token gets an integer weight w = floor(exp((logit - max) / temperature) * 2^24), so
//    every sum below is an integer sum, the same in any order;
//  - top-k (k >= 1): keep tokens whose weight is at least the k-th largest (ties at that weight
//    are all kept); top-p (< 1): of those, keep tokens whose weight is at least the largest
//    threshold that still keeps ceil(top_p * total) of the weight;
//  - the token is the first, in index order, whose running kept weight exceeds floor(u * kept).
// Include from one translation unit.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "bf16.hpp"
#include "elementwise.hpp"

namespace met::cpu {

inline constexpr float kSampleScale = 16777216.0f;  // 2^24: a weight's fixed point

inline std::uint32_t sample_weight(std::uint16_t logit, float max, float inv_t) {
  const float l = bf16_to_f32(logit);
  if (!(l > -INFINITY)) return 0;  // -inf and NaN never win
  return static_cast<std::uint32_t>(std::floor(std::exp((l - max) * inv_t) * kSampleScale));
}

inline std::int32_t sample_row(const std::uint16_t* logits, std::int64_t vocab, float temperature, float top_p,
                               float top_k, float u) {
  const std::int32_t best = argmax_row(logits, vocab);
  const float max = bf16_to_f32(logits[best]);
  if (temperature <= 0.0f || !(max > -INFINITY)) return best;
  const float inv_t = 1.0f / temperature;
  std::vector<std::uint32_t> weights(static_cast<std::size_t>(vocab));
  for (std::int64_t i = 0; i < vocab; ++i) weights[static_cast<std::size_t>(i)] = sample_weight(logits[i], max, inv_t);
  auto w = [&](std::int64_t i) { return weights[static_cast<std::size_t>(i)]; };
  // The largest threshold t in [0, 2^24] with pred(t) true; pred is monotone (true at 0).
  auto search = [](auto pred) {
    std::uint32_t lo = 0, hi = 1u << 24;
    while (lo < hi) {
      const std::uint32_t mid = lo + (hi - lo + 1) / 2;
      if (pred(mid)) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  };
  std::uint32_t floor_w = 0;
  const auto k = static_cast<std::int64_t>(top_k);
  if (k >= 1 && k < vocab) {
    floor_w = search([&](std::uint32_t t) {
      std::int64_t n = 0;
      for (std::int64_t i = 0; i < vocab; ++i) n += w(i) >= t;
      return n >= k;
    });
  }
  if (top_p < 1.0f) {
    std::uint64_t total = 0;
    for (std::int64_t i = 0; i < vocab; ++i) total += w(i) >= floor_w ? w(i) : 0;
    const auto need = static_cast<std::uint64_t>(std::ceil(static_cast<double>(top_p) * static_cast<double>(total)));
    const std::uint32_t p_w = search([&](std::uint32_t t) {
      std::uint64_t mass = 0;
      for (std::int64_t i = 0; i < vocab; ++i) {
        const std::uint32_t x = w(i);
        if (x >= t && x >= floor_w) mass += x;
      }
      return mass >= need;
    });
    floor_w = floor_w > p_w ? floor_w : p_w;
  }
  std::uint64_t kept = 0;
  for (std::int64_t i = 0; i < vocab; ++i) kept += w(i) >= floor_w ? w(i) : 0;
  const auto target = static_cast<std::uint64_t>(std::floor(static_cast<double>(u) * static_cast<double>(kept)));
  std::uint64_t run = 0;
  for (std::int64_t i = 0; i < vocab; ++i) {
    const std::uint32_t x = w(i);
    if (x < floor_w || x == 0) continue;
    run += x;
    if (run > target) return static_cast<std::int32_t>(i);
  }
  return best;
}

}  // namespace met::cpu

// logits [rows, vocab] bf16; params [rows][4] = (temperature, top_p, top_k, u); a row with
// temperature <= 0 is left alone (greedy rows read the argmax's tokens).
extern "C" void met_sample(const std::uint16_t* logits, const float* params, std::int32_t* tokens, std::int64_t rows, std::int64_t vocab) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* p = params + 4 * r;
    if (p[0] <= 0.0f) continue;
    tokens[r] = met::cpu::sample_row(logits + r * vocab, vocab, p[0], p[1], p[2], p[3]);
  }
}
