// cpu reference bodies of the grouped expert ops (kernels/common/ops.def: moe_group,
// moe_gate_up_silu_wgmma, moe_down_wgmma, moe_combine, moe_combine_f32): the step's routed slots
// sorted by expert, each expert's run of places cut into tiles, the expert GEMMs over the tiles and
// the weighted sum back into the rows. They are the oracle of the GPU class bodies only (no cpu
// class kernel: the cpu plans keep the expert bodies of moe.hpp), so they carry no met_ symbol.
// Values round as gemm_silu, gemm and moe_down round them. Include from one translation unit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "gemm.hpp"
#include "kernels/common/interp/smem.h"

namespace met::cpu {

inline bool moe_expert_id(std::int32_t e, std::int64_t experts) { return e >= 0 && e < experts; }

// moe_group over token rows [r0, r1) of `rows`: the places of their slots (pos, -1 where the id is
// not an expert) and their activation rows in xs; with r0 == 0 also the tiles ([1 + max tiles, 4]:
// count, then (expert, first place, places, 0) in expert order).
inline void moe_group_rows(const std::uint16_t* x, const std::int32_t* ids, std::int64_t rows, std::int64_t top_k, std::int64_t experts,
                           std::int64_t hidden, std::int64_t r0, std::int64_t r1, std::uint16_t* xs, std::int32_t* pos,
                           std::int32_t* tiles) {
  const std::int64_t slots = rows * top_k, s0 = r0 * top_k, s1 = r1 * top_k;
  std::vector<std::int64_t> count(static_cast<std::size_t>(experts), 0), next(count.size(), 0);
  for (std::int64_t t = 0; t < slots; ++t) {
    if (!moe_expert_id(ids[t], experts)) continue;
    ++count[static_cast<std::size_t>(ids[t])];
    if (t < s0) ++next[static_cast<std::size_t>(ids[t])];
  }
  std::vector<std::int64_t> first(count.size(), 0);
  std::exclusive_scan(count.begin(), count.end(), first.begin(), std::int64_t{0});
  for (std::int64_t t = s0; t < s1; ++t) {
    if (!moe_expert_id(ids[t], experts)) {
      pos[t] = -1;
      continue;
    }
    const auto e = static_cast<std::size_t>(ids[t]);
    const std::int64_t p = first[e] + next[e]++;
    pos[t] = static_cast<std::int32_t>(p);
    std::copy_n(x + (t / top_k) * hidden, hidden, xs + p * hidden);
  }
  if (r0 != 0) return;
  std::int32_t n = 0;
  for (std::int64_t e = 0; e < experts; ++e)
    for (std::int64_t j = 0; j < count[static_cast<std::size_t>(e)]; j += MET_MOE_WGMMA_BM, ++n) {
      std::int32_t* row = tiles + 4 * (1 + n);
      row[0] = static_cast<std::int32_t>(e);
      row[1] = static_cast<std::int32_t>(first[static_cast<std::size_t>(e)] + j);
      row[2] = static_cast<std::int32_t>(std::min<std::int64_t>(MET_MOE_WGMMA_BM, count[static_cast<std::size_t>(e)] - j));
      row[3] = 0;
    }
  tiles[0] = n;
  tiles[1] = tiles[2] = tiles[3] = 0;
}

// One tile of a grouped expert GEMM: places [p0, p0 + n) of x (K = w->cols values a place) against
// expert e's output columns [c0, c1) of `cols` into y ([places, cols]); gated: gate rows
// e * 2 cols + j and up rows e * 2 cols + cols + j, act(gate) * up as gemm_silu; else rows e cols + j.
inline void moe_grouped_tile(const std::uint16_t* x, const MetHostWeight* w, std::uint16_t* y, std::int64_t e, std::int64_t p0,
                             std::int64_t n, std::int64_t cols, std::int64_t c0, std::int64_t c1, bool gated) {
  const std::int64_t m = c1 - c0, K = w->cols;
  if (m <= 0 || n <= 0) return;
  const std::uint16_t* a = x + p0 * K;
  if (!gated) {
    gemm_products(a, w, n, e * cols + c0, m, y + p0 * cols + c0, cols);
    return;
  }
  std::vector<std::uint16_t> gate(static_cast<std::size_t>(n * m)), up(gate.size());
  gemm_products(a, w, n, e * 2 * cols + c0, m, gate.data(), m);
  gemm_products(a, w, n, e * 2 * cols + cols + c0, m, up.data(), m);
  for (std::int64_t r = 0; r < n; ++r) silu_mul_span(gate.data() + r * m, up.data() + r * m, y + (p0 + r) * cols + c0, m);
}

// The tiles slice s of `slices` (col_parts column parts) runs: tile s / col_parts, then every
// slices / col_parts-th after it, each in column part s % col_parts. A tile outside the experts or
// the slots' places is skipped (moe_group writes none).
template <class Tile>
void moe_grouped_slice(const std::int32_t* tiles, std::int64_t slots, std::int64_t experts, std::uint32_t s, std::uint32_t slices,
                       std::int64_t col_parts, std::int64_t cols, Tile tile) {
  const std::int64_t C = std::max<std::int64_t>(1, col_parts), step = std::max<std::int64_t>(1, slices / C);
  const std::int64_t count = std::clamp<std::int64_t>(tiles[0], 0, MET_MOE_WGMMA_MAX_TILES(slots, experts)), cp = s % C;
  for (std::int64_t i = s / C; i < count; i += step) {
    const std::int32_t* row = tiles + 4 * (1 + i);
    if (!moe_expert_id(row[0], experts) || row[1] < 0 || row[2] <= 0 || row[1] + std::int64_t{row[2]} > slots) continue;
    tile(row[0], row[1], row[2], cp * cols / C, (cp + 1) * cols / C);
  }
}

// moe_combine over rows [r0, r1) and columns [c0, c1): each row's slots by ascending expert (then
// slot), sum += bf16(weight x ys[place]) (places below `slots`; -1: none) in fp32 (rounded: moe_down's), or weight x ys[place]
// unrounded; store(row, column, sum).
template <class Store>
void moe_combine_rows(const std::uint16_t* ys, const std::int32_t* pos, const std::int32_t* ids, const float* weights, std::int64_t slots,
                      std::int64_t top_k, std::int64_t hidden, std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1, bool rounded, Store store) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(top_k));
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t s0 = r * top_k;
    std::iota(order.begin(), order.end(), s0);
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return ids[a] < ids[b]; });
    for (std::int64_t c = c0; c < c1; ++c) {
      float sum = 0.0f;
      for (const std::int64_t t : order) {
        if (pos[t] < 0 || pos[t] >= slots) continue;
        const float v = weights[t] * bf16_to_f32(ys[static_cast<std::int64_t>(pos[t]) * hidden + c]);
        sum += rounded ? round_bf16(v) : v;
      }
      store(r, c, sum);
    }
  }
}

}  // namespace met::cpu
