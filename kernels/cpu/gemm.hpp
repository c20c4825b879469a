// cpu reference body of the prefill/batch GEMM: y = x W^T over many rows, blocked by rows so each
// weight row is decoded once per block. Sums run in column order like met_gemv, so gemm and gemv
// agree bit for bit on every row. Include from one translation unit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "elementwise.hpp"
#include "quant.hpp"

namespace met::cpu {
inline constexpr std::int64_t kGemmRowBlock = 32;  // activation rows sharing one decoded weight row

// Products of weight rows [w0, w0 + n) for x's rows: p[r * ldp + j] (bf16), each weight row decoded
// once per block of kGemmRowBlock rows; sums in column order.
inline void gemm_products(const std::uint16_t* x, const MetHostWeight* w, std::int64_t rows, std::int64_t w0, std::int64_t n,
                          std::uint16_t* p, std::int64_t ldp) {
  std::vector<float> wrow(static_cast<std::size_t>(w->cols));
  for (std::int64_t r0 = 0; r0 < rows; r0 += kGemmRowBlock) {
    const std::int64_t r1 = std::min(rows, r0 + kGemmRowBlock);
    for (std::int64_t j = 0; j < n; ++j) {
      weight_row(*w, w0 + j, wrow.data());
      for (std::int64_t r = r0; r < r1; ++r) p[r * ldp + j] = f32_to_bf16(dot_act(*w, x + r * w->cols, wrow.data(), w->cols));
    }
  }
}
}  // namespace met::cpu

// x: [rows, w->cols]; y: [rows, w->rows], output columns [out0, out1) written (a tile of y).
extern "C" void met_gemm(const std::uint16_t* x, const MetHostWeight* w, std::uint16_t* y, std::int64_t rows, std::int64_t out0, std::int64_t out1) {
  met::cpu::gemm_products(x, w, rows, out0, out1 - out0, y + out0, w->rows);
}

// As met_gemm with the sums kept in fp32 (y: float [rows, w->rows]; met_gemv_f32's sums).
extern "C" void met_gemm_f32(const std::uint16_t* x, const MetHostWeight* w, float* y, std::int64_t rows, std::int64_t out0,
                             std::int64_t out1) {
  std::vector<float> wrow(static_cast<std::size_t>(w->cols));
  for (std::int64_t r0 = 0; r0 < rows; r0 += met::cpu::kGemmRowBlock) {
    const std::int64_t r1 = std::min(rows, r0 + met::cpu::kGemmRowBlock);
    for (std::int64_t o = out0; o < out1; ++o) {
      met::cpu::weight_row(*w, o, wrow.data());
      for (std::int64_t r = r0; r < r1; ++r) y[r * w->rows + o] = met::cpu::dot_act(*w, x + r * w->cols, wrow.data(), w->cols);
    }
  }
}

namespace met::cpu {

// The biased GEMM's fp32 values, x W^T + b (b null: none), each handed to store(r, o, v).
template <class Store>
void gemm_bias_values(const std::uint16_t* x, const MetHostWeight* w, const std::uint16_t* b, std::int64_t rows, std::int64_t out0,
                      std::int64_t out1, Store store) {
  std::vector<float> wrow(static_cast<std::size_t>(w->cols));
  for (std::int64_t r0 = 0; r0 < rows; r0 += kGemmRowBlock) {
    const std::int64_t r1 = std::min(rows, r0 + kGemmRowBlock);
    for (std::int64_t o = out0; o < out1; ++o) {
      weight_row(*w, o, wrow.data());
      const float bo = b ? bf16_to_f32(b[o]) : 0.0f;
      for (std::int64_t r = r0; r < r1; ++r) store(r, o, dot_bf16_f32(x + r * w->cols, wrow.data(), w->cols) + bo);
    }
  }
}

}  // namespace met::cpu

// As met_gemm with a bias b [w->rows] added to each fp32 sum before its one rounding (gpt-oss's
// q/k/v and o; met_gemv_bias's values).
extern "C" void met_gemm_bias(const std::uint16_t* x, const MetHostWeight* w, const std::uint16_t* b, std::uint16_t* y, std::int64_t rows,
                              std::int64_t out0, std::int64_t out1) {
  met::cpu::gemm_bias_values(x, w, b, rows, out0, out1,
                             [&](std::int64_t r, std::int64_t o, float v) { y[r * w->rows + o] = met::cpu::f32_to_bf16(v); });
}

// As met_gemm_bias with the sums kept in fp32 (met_gemv_bias_f32's values; b null: no bias).
extern "C" void met_gemm_bias_f32(const std::uint16_t* x, const MetHostWeight* w, const std::uint16_t* b, float* y, std::int64_t rows,
                                  std::int64_t out0, std::int64_t out1) {
  met::cpu::gemm_bias_values(x, w, b, rows, out0, out1, [&](std::int64_t r, std::int64_t o, float v) { y[r * w->rows + o] = v; });
}

// The GEMMs with their epilogue fused: each product rounds to bf16 as met_gemm's does, then the
// epilogue op's own span function applies, so the values equal the unfused pair's (gemm, then
// silu_mul / gelu_mul / residual_add).
namespace met::cpu {
// out [rows, dim] columns [out0, out1) = act(gate) * up, gate and up the rows o and dim + o of the
// [2 * dim, K] gate_up weight.
template <class Span>
void gemm_gated(const std::uint16_t* x, const MetHostWeight* w, std::uint16_t* out, std::int64_t rows, std::int64_t out0,
                std::int64_t out1, Span span) {
  const std::int64_t dim = w->rows / 2, n = out1 - out0;
  if (n <= 0 || rows <= 0) return;
  std::vector<std::uint16_t> gate(static_cast<std::size_t>(rows * n)), up(gate.size());
  gemm_products(x, w, rows, out0, n, gate.data(), n);
  gemm_products(x, w, rows, dim + out0, n, up.data(), n);
  for (std::int64_t r = 0; r < rows; ++r) span(gate.data() + r * n, up.data() + r * n, out + r * dim + out0, n);
}
}  // namespace met::cpu

extern "C" void met_gemm_silu(const std::uint16_t* x, const MetHostWeight* w, std::uint16_t* out, std::int64_t rows,
                              std::int64_t out0, std::int64_t out1) {
  met::cpu::gemm_gated(x, w, out, rows, out0, out1, met::cpu::silu_mul_span);
}

extern "C" void met_gemm_gelu(const std::uint16_t* x, const MetHostWeight* w, std::uint16_t* out, std::int64_t rows,
                              std::int64_t out0, std::int64_t out1) {
  met::cpu::gemm_gated(x, w, out, rows, out0, out1, met::cpu::gelu_mul_span);
}

// y [rows, w->rows] columns [out0, out1) += x W^T (y is the residual stream).
extern "C" void met_gemm_residual(const std::uint16_t* x, const MetHostWeight* w, std::uint16_t* y, std::int64_t rows,
                                  std::int64_t out0, std::int64_t out1) {
  const std::int64_t n = out1 - out0;
  if (n <= 0 || rows <= 0) return;
  std::vector<std::uint16_t> p(static_cast<std::size_t>(rows * n));
  met::cpu::gemm_products(x, w, rows, out0, n, p.data(), n);
  for (std::int64_t r = 0; r < rows; ++r) met::cpu::residual_row(y + r * w->rows + out0, p.data() + r * n, n);
}
