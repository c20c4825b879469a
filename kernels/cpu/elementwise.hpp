// cpu reference bodies of the elementwise and data-movement ops: rmsnorm, rope, residual,
// silu_mul, gelu_mul, scale, scale_tensor, softcap, argmax, kv_append. Each reads bf16, computes in fp32 and
// rounds once to bf16 on store; fused bodies (gemv.hpp) call the same row helpers, so a fusion
// changes scheduling and never numerics. Definitions: include from one translation unit.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "bf16.hpp"
#include "quant.hpp"

// Rotary and head geometry shared by rope and the fused qkv bodies. Rotation is the half-split
// ("neox") form over the first rotary_dim dims of each head: inv_freq_i = theta^(-2i/rotary_dim),
// or, when the op receives an inv_freq table (fp32 [rotary_dim/2], a generated tensor carrying a
// scaled rope such as llama3 or linear), inv_freq_i = table[i] and theta is unused.
struct MetRopeShape {
  std::int32_t heads;
  std::int32_t kv_heads;
  std::int32_t head_dim;
  std::int32_t rotary_dim;
  float theta;
  std::int32_t kv_fp8 = 0;  // the fused qkv bodies' caches: as MetAttnShape's (attention.hpp)
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  // YaRN's attention factor: cos and sin are multiplied by it before they round to bf16 (1: none).
  float attn_scale = 1.0f;
};

namespace met::cpu {

// x[count*dim] -> y: each dim-vector scaled by 1/rms (fp32 sum of squares), then by (offset +
// w[dim]). Llama, Qwen (offset 0, one_rounding false): the normalised vector is rounded to bf16,
// then its product with w (a bf16 reference normalises, casts, then multiplies by the weight in
// bf16). Gemma (1 + w on Gemma-3, w on Gemma-4; one_rounding, implied by an offset): the whole
// product in fp32, rounded once, as Gemma's norms compute it; w null there is the weightless norm
// x / rms(x). x and y may be the same buffer (the q/k/v norms and Gemma's post norms run in place).
inline void rmsnorm_row(const std::uint16_t* x, const std::uint16_t* w, std::uint16_t* y, std::int64_t count, std::int64_t dim,
                        float eps, float offset = 0.0f, bool one_rounding = false) {
  for (std::int64_t v = 0; v < count; ++v) {
    const std::uint16_t* xv = x + v * dim;
    float ss = 0.0f;
    for (std::int64_t i = 0; i < dim; ++i) {
      const float f = bf16_to_f32(xv[i]);
      ss += f * f;
    }
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
    if (!w) {
      for (std::int64_t i = 0; i < dim; ++i) y[v * dim + i] = f32_to_bf16(bf16_to_f32(xv[i]) * inv);
    } else if (offset == 0.0f && !one_rounding) {
      for (std::int64_t i = 0; i < dim; ++i) y[v * dim + i] = f32_to_bf16(round_bf16(bf16_to_f32(xv[i]) * inv) * bf16_to_f32(w[i]));
    } else {
      for (std::int64_t i = 0; i < dim; ++i) y[v * dim + i] = f32_to_bf16(bf16_to_f32(xv[i]) * inv * (offset + bf16_to_f32(w[i])));
    }
  }
}

// Rotates n_heads heads of head_dim in place at position pos; inv_freq_table null: theta-based.
// cos and sin (times attn_scale, YaRN's attention factor) are rounded to bf16, and each product and
// the sum are rounded to bf16 (a bf16 reference's x * cos + rotate_half(x) * sin).
inline void rope_heads(std::uint16_t* x, std::int32_t n_heads, std::int32_t head_dim, std::int32_t rotary_dim,
                       float theta, const float* inv_freq_table, std::int32_t pos, float attn_scale = 1.0f) {
  const std::int32_t half = rotary_dim / 2;
  for (std::int32_t i = 0; i < half; ++i) {
    const double inv_freq = inv_freq_table ? static_cast<double>(inv_freq_table[i])
                                           : std::pow(static_cast<double>(theta), -2.0 * i / rotary_dim);
    const double angle = static_cast<double>(pos) * inv_freq;
    const float c = round_bf16(static_cast<float>(std::cos(angle)) * attn_scale);
    const float s = round_bf16(static_cast<float>(std::sin(angle)) * attn_scale);
    for (std::int32_t h = 0; h < n_heads; ++h) {
      std::uint16_t* xh = x + static_cast<std::int64_t>(h) * head_dim;
      const float x1 = bf16_to_f32(xh[i]);
      const float x2 = bf16_to_f32(xh[i + half]);
      xh[i] = f32_to_bf16(round_bf16(x1 * c) + round_bf16(-x2 * s));
      xh[i + half] = f32_to_bf16(round_bf16(x2 * c) + round_bf16(x1 * s));
    }
  }
}

// Copies one row's K [kv_heads*head_dim] and V [kv_heads*v_head_dim] to cache slot `slot`.
inline void kv_append_row(const std::uint16_t* k, const std::uint16_t* v, std::uint16_t* k_cache,
                          std::uint16_t* v_cache, std::int64_t slot, std::int64_t k_width, std::int64_t v_width,
                          std::int32_t kv_fp8, float k_scale, float v_scale) {
  for (std::int64_t i = 0; i < k_width; ++i) kv_store(k_cache, slot * k_width + i, k[i], kv_fp8, k_scale);
  for (std::int64_t i = 0; i < v_width; ++i) kv_store(v_cache, slot * v_width + i, v[i], kv_fp8, v_scale);
}

inline float silu_f32(float g) { return g / (1.0f + std::exp(-g)); }

// gelu, tanh approximation (Gemma's gelu_pytorch_tanh).
inline float gelu_tanh_f32(float g) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  constexpr float kCubic = 0.044715f;
  return 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + kCubic * g * g * g)));
}

// gate_up row [2*dim] (gate first, up second) -> out [dim].
// out[i] = act(gate[i]) * up[i] for i in [0, n): a column range of a gate_up row; act(gate) is
// rounded to bf16 before the product (a bf16 activation tensor), the product rounded again.
inline void silu_mul_span(const std::uint16_t* gate, const std::uint16_t* up, std::uint16_t* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(round_bf16(silu_f32(bf16_to_f32(gate[i]))) * bf16_to_f32(up[i]));
}

inline void gelu_mul_span(const std::uint16_t* gate, const std::uint16_t* up, std::uint16_t* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(round_bf16(gelu_tanh_f32(bf16_to_f32(gate[i]))) * bf16_to_f32(up[i]));
}

inline void silu_mul_row(const std::uint16_t* gate_up, std::uint16_t* out, std::int64_t dim) {
  silu_mul_span(gate_up, gate_up + dim, out, dim);
}

inline void gelu_mul_row(const std::uint16_t* gate_up, std::uint16_t* out, std::int64_t dim) {
  gelu_mul_span(gate_up, gate_up + dim, out, dim);
}

inline void residual_row(std::uint16_t* x, const std::uint16_t* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = f32_to_bf16(bf16_to_f32(x[i]) + bf16_to_f32(y[i]));
}

inline void softcap_row(std::uint16_t* x, std::int64_t n, float cap) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = f32_to_bf16(cap * std::tanh(bf16_to_f32(x[i]) / cap));
}

// Index of the largest value; ties go to the lowest index; NaN never wins.
inline std::int32_t argmax_row(const std::uint16_t* x, std::int64_t n) {
  std::int64_t best = 0;
  float best_v = -INFINITY;
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = bf16_to_f32(x[i]);
    if (v > best_v) {
      best_v = v;
      best = i;
    }
  }
  return static_cast<std::int32_t>(best);
}

}  // namespace met::cpu

// x, y: [rows, count*dim]; w: [dim].
extern "C" void met_rmsnorm(const std::uint16_t* x, const std::uint16_t* w, std::uint16_t* y, std::int64_t rows, std::int64_t count, std::int64_t dim, float eps) {
  for (std::int64_t r = 0; r < rows; ++r)
    met::cpu::rmsnorm_row(x + r * count * dim, w, y + r * count * dim, count, dim, eps);
}

// As met_rmsnorm with the weight taken as (offset + w) in fp32 and one rounding (Gemma's norms:
// offset 1 on Gemma-3, 0 on Gemma-4); w null: the weightless norm.
extern "C" void met_rmsnorm_offset(const std::uint16_t* x, const std::uint16_t* w, std::uint16_t* y, std::int64_t rows, std::int64_t count, std::int64_t dim, float eps, float offset) {
  for (std::int64_t r = 0; r < rows; ++r)
    met::cpu::rmsnorm_row(x + r * count * dim, w, y + r * count * dim, count, dim, eps, offset, /*one_rounding=*/true);
}

// q: rows of q_stride elements holding heads*head_dim; k: rows of k_stride holding kv_heads*head_dim.
// inv_freq: fp32 [rotary_dim/2] or null (theta-based).
extern "C" void met_rope(std::uint16_t* q, std::int64_t q_stride, std::uint16_t* k, std::int64_t k_stride, const std::int32_t* positions, std::int64_t rows, const MetRopeShape* shape, const float* inv_freq) {
  for (std::int64_t r = 0; r < rows; ++r) {
    met::cpu::rope_heads(q + r * q_stride, shape->heads, shape->head_dim, shape->rotary_dim, shape->theta, inv_freq, positions[r],
                         shape->attn_scale);
    met::cpu::rope_heads(k + r * k_stride, shape->kv_heads, shape->head_dim, shape->rotary_dim, shape->theta, inv_freq, positions[r],
                         shape->attn_scale);
  }
}

// Cache layout: k_cache [slot][kv_heads][head_dim], v_cache [slot][kv_heads][v_head_dim];
// slots[r] is the flat cache slot of row r (sequence base + position). kv_fp8 1: e4m3 caches of
// x / k_scale and x / v_scale (quant.hpp kv_store).
extern "C" void met_kv_append(const std::uint16_t* k, std::int64_t k_stride, const std::uint16_t* v, std::int64_t v_stride, std::uint16_t* k_cache, std::uint16_t* v_cache, const std::int64_t* slots, std::int64_t rows, std::int32_t kv_heads, std::int32_t head_dim, std::int32_t v_head_dim, std::int32_t kv_fp8, float k_scale, float v_scale) {
  const std::int64_t kw = static_cast<std::int64_t>(kv_heads) * head_dim;
  const std::int64_t vw = static_cast<std::int64_t>(kv_heads) * v_head_dim;
  for (std::int64_t r = 0; r < rows; ++r)
    met::cpu::kv_append_row(k + r * k_stride, v + r * v_stride, k_cache, v_cache, slots[r], kw, vw, kv_fp8, k_scale, v_scale);
}

// x += y over n elements.
extern "C" void met_residual_add(std::uint16_t* x, const std::uint16_t* y, std::int64_t n) {
  met::cpu::residual_row(x, y, n);
}

// gate_up: [rows, 2*dim] (gate, then up); out: [rows, dim].
extern "C" void met_silu_mul(const std::uint16_t* gate_up, std::uint16_t* out, std::int64_t rows, std::int64_t dim) {
  for (std::int64_t r = 0; r < rows; ++r) met::cpu::silu_mul_row(gate_up + r * 2 * dim, out + r * dim, dim);
}

extern "C" void met_gelu_mul(const std::uint16_t* gate_up, std::uint16_t* out, std::int64_t rows, std::int64_t dim) {
  for (std::int64_t r = 0; r < rows; ++r) met::cpu::gelu_mul_row(gate_up + r * 2 * dim, out + r * dim, dim);
}

// gate: [rows, dim]; up: rows of up_stride, dim columns from column 0 of the pointer; out: [rows, dim].
extern "C" void met_gelu_mul_split(const std::uint16_t* gate, const std::uint16_t* up, std::int64_t up_stride, std::uint16_t* out,
                                   std::int64_t rows, std::int64_t dim) {
  for (std::int64_t r = 0; r < rows; ++r) met::cpu::gelu_mul_span(gate + r * dim, up + r * up_stride, out + r * dim, dim);
}

extern "C" void met_scale(std::uint16_t* x, std::int64_t n, float s) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = met::cpu::f32_to_bf16(met::cpu::bf16_to_f32(x[i]) * s);
}

// x *= s[0] (a one-element bf16 weight: Gemma-4's layer_scalar).
extern "C" void met_scale_tensor(std::uint16_t* x, std::int64_t n, const std::uint16_t* s) {
  met_scale(x, n, met::cpu::bf16_to_f32(s[0]));
}

// x = x + rmsnorm(y) per row of dim values (norm_once 1: rmsnorm_offset's one rounding with offset
// + w; 0: rmsnorm's), then x *= s[0] where s is not null: rmsnorm_offset (or rmsnorm) into a row
// buffer, residual_add and scale_tensor, in that order, bit for bit.
extern "C" void met_rmsnorm_residual(std::uint16_t* x, const std::uint16_t* y, const std::uint16_t* w, const std::uint16_t* s, std::int64_t rows, std::int64_t dim, std::int32_t norm_once, float norm_offset, float eps) {
  std::vector<std::uint16_t> n(static_cast<std::size_t>(dim));
  for (std::int64_t r = 0; r < rows; ++r) {
    met::cpu::rmsnorm_row(y + r * dim, w, n.data(), /*count=*/1, dim, eps, norm_offset, norm_once != 0);
    met::cpu::residual_row(x + r * dim, n.data(), dim);
    if (s) met_scale_tensor(x + r * dim, dim, s);
  }
}

// x = cap * tanh(x / cap).
extern "C" void met_softcap(std::uint16_t* x, std::int64_t n, float cap) {
  met::cpu::softcap_row(x, n, cap);
}

// logits: [rows, vocab] -> tokens[rows].
extern "C" void met_argmax(const std::uint16_t* logits, std::int32_t* tokens, std::int64_t rows, std::int64_t vocab) {
  for (std::int64_t r = 0; r < rows; ++r) tokens[r] = met::cpu::argmax_row(logits + r * vocab, vocab);
}
