// Weight formats the cpu op bodies read: bf16, fp8-e4m3 with fp32 scales per 2-D block, mxfp4
// (e2m1 + one e8m0 scale per 32) and nvfp4 (e2m1 + one e4m3 scale per 16 + an fp32 tensor scale).
// Decoding is exact: every weight becomes the fp32 its format defines before any arithmetic.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "bf16.hpp"

// How a weight matrix [rows, cols] (row = output feature) is stored. Experts stack along rows.
// (Host-only view; the GPU classes pass common/device.cuh's MetWeight, which carries no shape.)
enum MetWeightFormat : std::int32_t {
  MET_WEIGHT_BF16 = 0,      // data: uint16_t[rows * cols]
  MET_WEIGHT_FP8_E4M3 = 1,  // data: uint8_t[rows * cols]; scales: float per [block_rows, block_cols]
  MET_WEIGHT_MXFP4 = 2,     // data: uint8_t[rows * cols / 2]; scales: uint8_t e8m0 per 32 along cols
  MET_WEIGHT_NVFP4 = 3,     // data: uint8_t[rows * cols / 2]; scales: uint8_t e4m3 per 16 along cols
};

struct MetHostWeight {
  MetWeightFormat format;
  std::int64_t rows;
  std::int64_t cols;
  const void* data;
  const void* scales;       // null for bf16
  std::int32_t block_rows;  // fp8-e4m3 scale block (e.g. 128 x 128; 1 x cols = per channel)
  std::int32_t block_cols;
  float tensor_scale;       // nvfp4 global scale; ignored otherwise
  // W8A8 with a static per-tensor activation scale (modelopt's input_scale): the math reads each
  // activation as e4m3(x / act_scale) * act_scale. 0: activations are read as bf16 (W8A16, W16A16).
  float act_scale;
};

namespace met::cpu {

inline constexpr std::int64_t kMxfp4Block = 32;  // elements per e8m0 scale
inline constexpr std::int64_t kNvfp4Block = 16;  // elements per e4m3 scale

inline float bits_to_f32(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// fp8 e4m3 (OCP "e4m3fn"): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities;
// S.1111.111 is NaN; exponent 0 is subnormal (m/8 * 2^-6). Largest finite: 448.
inline float fp8_e4m3_to_f32(std::uint8_t v) {
  const std::uint32_t sign = static_cast<std::uint32_t>(v >> 7) << 31;
  const std::uint32_t exp = (v >> 3) & 0xfu;
  const std::uint32_t man = v & 0x7u;
  if (exp == 0xfu && man == 0x7u) return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0) {
    constexpr float kSubnormalStep = 1.0f / 512.0f;  // 2^-6 / 8
    const float mag = static_cast<float>(man) * kSubnormalStep;
    return sign ? -mag : mag;
  }
  constexpr std::uint32_t kBiasShift = 127 - 7;
  return bits_to_f32(sign | ((exp + kBiasShift) << 23) | (man << 20));
}

// The e4m3 code nearest to f, ties to the even code; magnitudes past 448 saturate to 448 (as a
// scaled fp8 conversion clamps); NaN stays NaN (0x7f).
inline std::uint8_t f32_to_fp8_e4m3(float f) {
  if (std::isnan(f)) return 0x7fu;
  const std::uint8_t sign = std::signbit(f) ? 0x80u : 0x00u;
  constexpr float kMax = 448.0f, kMinNormal = 1.0f / 64.0f;  // 1.75 * 2^8, 2^-6
  const float a = std::fmin(std::fabs(f), kMax);
  if (a < kMinNormal) {  // subnormal steps of 2^-9; 8 steps is the smallest normal, code 8
    return static_cast<std::uint8_t>(sign | static_cast<std::uint8_t>(std::nearbyint(a * 512.0f)));
  }
  int e = 0;
  const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1;                    // a = (2m) * 2^exp, 2m in [1, 2)
  int man = static_cast<int>(std::nearbyint((2.0f * m - 1.0f) * 8.0f));
  if (man == 8) {
    man = 0;
    ++exp;
  }
  const int code = std::min((exp + 7) << 3 | man, 0x7e);
  return static_cast<std::uint8_t>(sign | static_cast<std::uint8_t>(code));
}

// KV cache elements. The bodies take the caches as bf16 pointers; where the op's kv_fp8 is 1 their
// bytes are e4m3 codes of x / scale (one per-tensor scale per cache), read back as code * scale.
inline float kv_load(const std::uint16_t* cache, std::int64_t i, std::int32_t fp8, float scale) {
  return fp8 ? fp8_e4m3_to_f32(reinterpret_cast<const std::uint8_t*>(cache)[i]) * scale : bf16_to_f32(cache[i]);
}
inline void kv_store(std::uint16_t* cache, std::int64_t i, std::uint16_t bf16, std::int32_t fp8, float scale) {
  if (fp8)
    reinterpret_cast<std::uint8_t*>(cache)[i] = f32_to_fp8_e4m3(bf16_to_f32(bf16) / scale);
  else
    cache[i] = bf16;
}

// fp4 e2m1: 1 sign, 2 exponent (bias 1), 1 mantissa bit: +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}.
inline float fp4_e2m1_to_f32(std::uint8_t nibble) {
  const std::uint32_t exp = (nibble >> 1) & 0x3u;
  const std::uint32_t man = nibble & 0x1u;
  const float mag = exp == 0 ? 0.5f * static_cast<float>(man)
                             : std::ldexp(1.0f + 0.5f * static_cast<float>(man), static_cast<int>(exp) - 1);
  return (nibble & 0x8u) ? -mag : mag;
}

// e8m0 scale: 2^(v - 127); 0xff is NaN.
inline float e8m0_to_f32(std::uint8_t v) {
  if (v == 0xffu) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(v) - 127);
}

// Row r of a weight, decoded to fp32 into out[0, cols).
inline void weight_row(const MetHostWeight& w, std::int64_t r, float* out) {
  const std::int64_t cols = w.cols;
  const std::int64_t base = r * cols;
  switch (w.format) {
    case MET_WEIGHT_BF16: {
      const auto* d = static_cast<const std::uint16_t*>(w.data) + base;
      for (std::int64_t c = 0; c < cols; ++c) out[c] = bf16_to_f32(d[c]);
      return;
    }
    case MET_WEIGHT_FP8_E4M3: {
      const auto* d = static_cast<const std::uint8_t*>(w.data) + base;
      const auto* s = static_cast<const float*>(w.scales);
      const std::int64_t blocks_per_row = (cols + w.block_cols - 1) / w.block_cols;
      const float* srow = s + (r / w.block_rows) * blocks_per_row;
      for (std::int64_t c = 0; c < cols; ++c) out[c] = fp8_e4m3_to_f32(d[c]) * srow[c / w.block_cols];
      return;
    }
    case MET_WEIGHT_MXFP4:
    case MET_WEIGHT_NVFP4: {
      const auto* d = static_cast<const std::uint8_t*>(w.data);
      const auto* s = static_cast<const std::uint8_t*>(w.scales);
      const bool mx = w.format == MET_WEIGHT_MXFP4;
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::int64_t i = base + c;
        const std::uint8_t byte = d[i / 2];
        const auto nibble = static_cast<std::uint8_t>((i & 1) ? (byte >> 4) : (byte & 0xfu));
        const float v = fp4_e2m1_to_f32(nibble);
        out[c] = mx ? v * e8m0_to_f32(s[i / kMxfp4Block])
                    : v * fp8_e4m3_to_f32(s[i / kNvfp4Block]) * w.tensor_scale;
      }
      return;
    }
  }
}

// fp32 dot of a bf16 activation row with a decoded weight row, summed in column order.
inline float dot_bf16_f32(const std::uint16_t* x, const float* w, std::int64_t n) {
  float acc = 0.0f;
  for (std::int64_t c = 0; c < n; ++c) acc += bf16_to_f32(x[c]) * w[c];
  return acc;
}

// The dot of an activation row with a decoded weight row as the weight's path reads activations:
// bf16, or (act_scale > 0, W8A8 static) quantised to e4m3 with the per-tensor scale first.
inline float dot_act(const MetHostWeight& w, const std::uint16_t* x, const float* wrow, std::int64_t n) {
  if (w.act_scale <= 0.0f) return dot_bf16_f32(x, wrow, n);
  const float s = w.act_scale;
  float acc = 0.0f;
  for (std::int64_t c = 0; c < n; ++c) acc += fp8_e4m3_to_f32(f32_to_fp8_e4m3(bf16_to_f32(x[c]) / s)) * s * wrow[c];
  return acc;
}

// Row-at-a-time dot products against a bf16 activation row; fp32 accumulation in column order,
// so gemv, gemm and the fused bodies produce bit-identical sums for the same (row, weight row).
class RowDot {
 public:
  explicit RowDot(const MetHostWeight& w) : w_(w), row_(static_cast<std::size_t>(w.cols)) {}
  float operator()(const std::uint16_t* x, std::int64_t r) {
    weight_row(w_, r, row_.data());
    return dot_act(w_, x, row_.data(), w_.cols);
  }
  const MetHostWeight& weight() const { return w_; }

 private:
  const MetHostWeight& w_;
  std::vector<float> row_;
};

}  // namespace met::cpu
