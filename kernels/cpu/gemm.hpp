// cpu reference body of the prefill/batch GEMM: y = x W^T over many rows, blocked by rows so each
// weight row is decoded once per block. Sums run in column order like met_gemv, so gemm and gemv
// agree bit for bit on every row. Include from one translation unit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "quant.hpp"

namespace met::cpu {
inline constexpr std::int64_t kGemmRowBlock = 32;  // activation rows sharing one decoded weight row
}

// x: [rows, w->cols]; y: [rows, w->rows], output columns [out0, out1) written (a tile of y).
extern "C" void met_gemm(const std::uint16_t* x, const MetHostWeight* w, std::uint16_t* y, std::int64_t rows, std::int64_t out0, std::int64_t out1) {
  std::vector<float> wrow(static_cast<std::size_t>(w->cols));
  for (std::int64_t r0 = 0; r0 < rows; r0 += met::cpu::kGemmRowBlock) {
    const std::int64_t r1 = std::min(rows, r0 + met::cpu::kGemmRowBlock);
    for (std::int64_t o = out0; o < out1; ++o) {
      met::cpu::weight_row(*w, o, wrow.data());
      for (std::int64_t r = r0; r < r1; ++r)
        y[r * w->rows + o] = met::cpu::f32_to_bf16(met::cpu::dot_bf16_f32(x + r * w->cols, wrow.data(), w->cols));
    }
  }
}
