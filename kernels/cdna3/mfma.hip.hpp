// The CDNA matrix-core steps the cdna3 bodies share, bf16 in and fp32 accumulate, written once for
// both classes: gfx942 (cdna3) issues two k8 or k16 MFMAs where gfx950 (cdna4) issues one of
// double depth. Every lane feeds 8 consecutive k of its operand row with one 16-byte load; the two
// gfx942 halves take the first and the last 4 of them, the same permutation of k on both operands,
// which leaves every dot product unchanged.
//
// Lane layouts (l = lane of the 64-lane wavefront):
//   32x32, 16 k per step: A[m = l % 32][8 (l / 32) .. +8], B likewise with n for m;
//                          acc[v] = C[8 (v / 4) + 4 (l / 32) + v % 4][l % 32].
//   16x16, 32 k per step: A[m = l % 16][8 (l / 16) .. +8], B likewise;  acc[v] = C[4 (l / 16) + v][l % 16].
#pragma once
#include "common/device.cuh"

#if MET_HAS_MFMA
typedef float met_f32x16 __attribute__((ext_vector_type(16)));
typedef float met_f32x4 __attribute__((ext_vector_type(4)));

#if defined(__gfx950__) && __gfx950__
typedef __bf16 met_bf16x8 __attribute__((ext_vector_type(8)));
__device__ __forceinline__ met_f32x16 met_mfma_32x32_k16(met_f32x16 acc, uint4 a, uint4 b) {
  return __builtin_amdgcn_mfma_f32_32x32x16_bf16(__builtin_bit_cast(met_bf16x8, a), __builtin_bit_cast(met_bf16x8, b), acc,
                                                 /*cbsz=*/0, /*abid=*/0, /*blgp=*/0);
}
__device__ __forceinline__ met_f32x4 met_mfma_16x16_k32(met_f32x4 acc, uint4 a, uint4 b) {
  return __builtin_amdgcn_mfma_f32_16x16x32_bf16(__builtin_bit_cast(met_bf16x8, a), __builtin_bit_cast(met_bf16x8, b), acc,
                                                 /*cbsz=*/0, /*abid=*/0, /*blgp=*/0);
}
#else
typedef short met_bf16x4 __attribute__((ext_vector_type(4)));
__device__ __forceinline__ met_bf16x4 met_mfma_lo(uint4 v) { return __builtin_bit_cast(met_bf16x4, uint2{v.x, v.y}); }
__device__ __forceinline__ met_bf16x4 met_mfma_hi(uint4 v) { return __builtin_bit_cast(met_bf16x4, uint2{v.z, v.w}); }
__device__ __forceinline__ met_f32x16 met_mfma_32x32_k16(met_f32x16 acc, uint4 a, uint4 b) {
  acc = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(met_mfma_lo(a), met_mfma_lo(b), acc, /*cbsz=*/0, /*abid=*/0, /*blgp=*/0);
  return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(met_mfma_hi(a), met_mfma_hi(b), acc, /*cbsz=*/0, /*abid=*/0, /*blgp=*/0);
}
__device__ __forceinline__ met_f32x4 met_mfma_16x16_k32(met_f32x4 acc, uint4 a, uint4 b) {
  acc = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(met_mfma_lo(a), met_mfma_lo(b), acc, /*cbsz=*/0, /*abid=*/0, /*blgp=*/0);
  return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(met_mfma_hi(a), met_mfma_hi(b), acc, /*cbsz=*/0, /*abid=*/0, /*blgp=*/0);
}
#endif
#endif  // MET_HAS_MFMA
