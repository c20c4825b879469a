// bf16 storage for the cpu reference: a uint16_t holding the top half of an IEEE fp32, rounded
// to nearest even; NaN stays a quiet NaN. Every cpu op body stores bf16 and accumulates in fp32.
#pragma once

#include <cstdint>
#include <cstring>

namespace met::cpu {

inline float bf16_to_f32(std::uint16_t h) {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline std::uint16_t f32_to_bf16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  constexpr std::uint32_t kAbsMask = 0x7fffffffu;
  constexpr std::uint32_t kInf = 0x7f800000u;
  constexpr std::uint32_t kQuietBit = 0x0040u;  // top mantissa bit of the bf16 half
  if ((bits & kAbsMask) > kInf) return static_cast<std::uint16_t>((bits >> 16) | kQuietBit);
  const std::uint32_t lsb = (bits >> 16) & 1u;  // ties go to the even neighbour
  bits += 0x7fffu + lsb;
  return static_cast<std::uint16_t>(bits >> 16);
}

// The value an fp32 takes once stored as bf16.
inline float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

}  // namespace met::cpu
