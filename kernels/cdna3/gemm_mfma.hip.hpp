// Prefill/batch GEMM on the CDNA matrix cores: one slice is one output tile of at most 128 rows x
// 128 columns of y = x W^T (bf16 in, fp32 accumulate, bf16 out), the tile emit cuts for every GPU
// GEMM (src/emit/slice.cpp). 4 wavefronts of 64 x 64 (2 x 2 MFMA tiles of 32 x 32), K in steps of
// 32 through double-buffered LDS filled from registers, so the next tile's loads overlap this
// tile's MFMAs. K % 8 == 0 (the rule's requires); k past K reads as zero.
#pragma once
#include "cdna3/mfma.hip.hpp"
#include "common/interp/prims.cuh"

namespace met_interp {

#if MET_HAS_MFMA
constexpr int kMfmaBM = 128, kMfmaBN = 128, kMfmaBK = 32;
constexpr int kMfmaLD = kMfmaBK + 8;  // bf16 row stride of an LDS tile: 80 bytes, 16-byte aligned rows
constexpr int kMfmaWaveTile = 64;     // each wavefront owns 64 x 64 outputs
constexpr int kMfmaChunks = kMfmaBM * kMfmaBK / 8 / MET_INTERP_THREADS;  // 16-byte chunks per thread per tile

// This thread's chunks of the [128][32] tile at (0, k0) of a [rows, K] matrix; rows past `rows`
// and k past K read as zero.
__device__ __forceinline__ void mfma_fetch(uint4 (&reg)[kMfmaChunks], const u16* src, int64_t rows, int64_t K, int64_t k0) {
#pragma unroll
  for (int i = 0; i < kMfmaChunks; ++i) {
    const int c = threadIdx.x + i * MET_INTERP_THREADS;
    const int r = c / (kMfmaBK / 8), kc = (c % (kMfmaBK / 8)) * 8;
    reg[i] = r < rows && k0 + kc < K ? *reinterpret_cast<const uint4*>(src + r * K + k0 + kc) : make_uint4(0, 0, 0, 0);
  }
}
__device__ __forceinline__ void mfma_stash(u16 (*dst)[kMfmaLD], const uint4 (&reg)[kMfmaChunks]) {
#pragma unroll
  for (int i = 0; i < kMfmaChunks; ++i) {
    const int c = threadIdx.x + i * MET_INTERP_THREADS;
    *reinterpret_cast<uint4*>(&dst[c / (kMfmaBK / 8)][(c % (kMfmaBK / 8)) * 8]) = reg[i];
  }
}

MET_ENTRY(gemm_bf16_mfma) {
  const SliceRange rr = slice_rows(a, slice);
  const int64_t N = a.geom.w_rows, K = a.geom.w_cols;
  const SliceRange cc = slice_cols(a, slice, N);
  const int64_t M = rr.end - rr.begin, Nt = cc.end - cc.begin;
  if (M <= 0 || Nt <= 0) return;
  const u16* A = a.x + (a.in_row0 + rr.begin) * K;
  const u16* B = a.w + cc.begin * K;
  __shared__ __align__(16) u16 a_s[2][kMfmaBM][kMfmaLD];
  __shared__ __align__(16) u16 b_s[2][kMfmaBN][kMfmaLD];
  const int wave = threadIdx.x / MET_WAVE, lane = threadIdx.x % MET_WAVE;
  const int wm = wave / 2, wn = wave % 2;
  const int lrow = lane % 32, lk = (lane / 32) * 8;  // operand row and first k this lane feeds

  met_f32x16 acc[2][2];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 2; ++ni) acc[mi][ni] = met_f32x16{};

  uint4 a_reg[kMfmaChunks], b_reg[kMfmaChunks];
  mfma_fetch(a_reg, A, M, K, 0);
  mfma_fetch(b_reg, B, Nt, K, 0);
  mfma_stash(a_s[0], a_reg);
  mfma_stash(b_s[0], b_reg);
  __syncthreads();
  const int64_t kt_count = (K + kMfmaBK - 1) / kMfmaBK;
  for (int64_t kt = 0; kt < kt_count; ++kt) {
    const int cur = static_cast<int>(kt & 1);
    const bool more = kt + 1 < kt_count;
    if (more) {
      mfma_fetch(a_reg, A, M, K, (kt + 1) * kMfmaBK);
      mfma_fetch(b_reg, B, Nt, K, (kt + 1) * kMfmaBK);
    }
#pragma unroll
    for (int ks = 0; ks < kMfmaBK; ks += 16) {
      uint4 fa[2], fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        fa[i] = *reinterpret_cast<const uint4*>(&a_s[cur][wm * kMfmaWaveTile + i * 32 + lrow][ks + lk]);
        fb[i] = *reinterpret_cast<const uint4*>(&b_s[cur][wn * kMfmaWaveTile + i * 32 + lrow][ks + lk]);
      }
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 2; ++ni) acc[mi][ni] = met_mfma_32x32_k16(acc[mi][ni], fa[mi], fb[ni]);
    }
    // The other buffer was last read in iteration kt - 1, which ended in a barrier.
    if (more) {
      mfma_stash(a_s[cur ^ 1], a_reg);
      mfma_stash(b_s[cur ^ 1], b_reg);
    }
    __syncthreads();
  }

  u16* Y = a.y;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 2; ++ni)
#pragma unroll
      for (int v = 0; v < 16; ++v) {
        const int64_t row = wm * kMfmaWaveTile + mi * 32 + 8 * (v / 4) + 4 * (lane / 32) + v % 4;
        const int64_t col = wn * kMfmaWaveTile + ni * 32 + lrow;
        if (row < M && col < Nt) Y[(rr.begin + row) * N + cc.begin + col] = to_bf(acc[mi][ni][v]);
      }
}
#endif  // MET_HAS_MFMA

}  // namespace met_interp
