// Blackwell RTX (sm_120a) fp8 GEMM on warp tensor cores: C = (A W^T) * a_scale * w_scale (+ resid),
// A [M, K] and W [N, K] fp8-e4m3, fp32 accumulate via mma.sync m16n8k32 (sm_120 has no wgmma or
// tcgen05). 128x128x64 tile, 8 warps of 64x32, double-buffered cp.async. Requires K % 64 == 0.
#pragma once
#include "common/mma_sync.cuh"

#define MET_S120_BM 128
#define MET_S120_BN 128
#define MET_S120_BK 64   // fp8 elements (= bytes) per tile row
#define MET_S120_PAD 16  // bytes of row padding: ldmatrix rows land on distinct banks
#define MET_S120_LD (MET_S120_BK + MET_S120_PAD)
#define MET_S120_THREADS 256
#define MET_S120_WARP_M 64
#define MET_S120_WARP_N 32

#if MET_HAS_FP8_MMA && MET_HAS_MMA_SYNC
// d += a (16x32 e4m3, row) * b (32x8 e4m3, col).
__device__ __forceinline__ void met_mma_e4m3_16832(float d[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void met_s120_load_tile(uint8_t (*dst)[MET_S120_LD], const uint8_t* src, int rows, int K,
                                                   int row0, int k0) {
  constexpr int kChunksPerRow = MET_S120_BK / 16;
  for (int c = threadIdx.x; c < MET_S120_BM * kChunksPerRow; c += MET_S120_THREADS) {
    const int r = c / kChunksPerRow, kc = (c % kChunksPerRow) * 16;
    const bool valid = row0 + r < rows;
    met_copy16(&dst[r][kc], src + static_cast<long>(valid ? row0 + r : 0) * K + k0 + kc, valid);
  }
}

// grid (ceil(N / 128), ceil(M / 128)), block MET_S120_THREADS.
extern "C" __global__ void met_gemm_fp8_mma_sm120(const uint8_t* A, const uint8_t* W, float a_scale, float w_scale, met_bf16* C, const met_bf16* resid, int M, int N, int K) {
  __shared__ __align__(128) uint8_t a_s[2][MET_S120_BM][MET_S120_LD];
  __shared__ __align__(128) uint8_t b_s[2][MET_S120_BN][MET_S120_LD];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / (MET_S120_BN / MET_S120_WARP_N), wn = warp % (MET_S120_BN / MET_S120_WARP_N);
  const int m0 = blockIdx.y * MET_S120_BM, n0 = blockIdx.x * MET_S120_BN;
  constexpr int kMFrags = MET_S120_WARP_M / 16, kNFrags = MET_S120_WARP_N / 8;
  float acc[kMFrags][kNFrags][4] = {};

  const int kt_count = K / MET_S120_BK;
  met_s120_load_tile(a_s[0], A, M, K, m0, 0);
  met_s120_load_tile(b_s[0], W, N, K, n0, 0);
  met_copy_commit();
  for (int kt = 0; kt < kt_count; ++kt) {
    const int cur = kt & 1;
    if (kt + 1 < kt_count) {
      met_s120_load_tile(a_s[cur ^ 1], A, M, K, m0, (kt + 1) * MET_S120_BK);
      met_s120_load_tile(b_s[cur ^ 1], W, N, K, n0, (kt + 1) * MET_S120_BK);
      met_copy_commit();
      met_copy_wait<1>();
    } else {
      met_copy_wait<0>();
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < MET_S120_BK; kk += 32) {
      // An 8x8 b16 ldmatrix tile is 8 rows x 16 fp8: fragments load exactly as for bf16 m16n8k16.
      uint32_t a[kMFrags][4], b[kNFrags][2];
#pragma unroll
      for (int mi = 0; mi < kMFrags; ++mi)
        met_ldmatrix_x4(a[mi], &a_s[cur][wm * MET_S120_WARP_M + mi * 16 + lane % 16][kk + (lane / 16) * 16]);
#pragma unroll
      for (int nj = 0; nj < kNFrags; nj += 2) {
        uint32_t r[4];
        const int mat = lane / 8;
        met_ldmatrix_x4(r, &b_s[cur][wn * MET_S120_WARP_N + nj * 8 + (mat / 2) * 8 + lane % 8][kk + (mat % 2) * 16]);
        b[nj][0] = r[0]; b[nj][1] = r[1]; b[nj + 1][0] = r[2]; b[nj + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < kMFrags; ++mi)
#pragma unroll
        for (int ni = 0; ni < kNFrags; ++ni) met_mma_e4m3_16832(acc[mi][ni], a[mi], b[ni]);
    }
    __syncthreads();
  }

  const int g = lane / 4, t = lane % 4;
  const float scale = a_scale * w_scale;
#pragma unroll
  for (int mi = 0; mi < kMFrags; ++mi)
#pragma unroll
    for (int ni = 0; ni < kNFrags; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + wm * MET_S120_WARP_M + mi * 16 + g + h * 8;
        const int col = n0 + wn * MET_S120_WARP_N + ni * 8 + 2 * t;
        if (row >= M) continue;
        for (int e = 0; e < 2; ++e) {
          if (col + e >= N) continue;
          const long i = static_cast<long>(row) * N + col + e;
          C[i] = met_from_float(acc[mi][ni][2 * h + e] * scale + (resid ? met_to_float(resid[i]) : 0.f));
        }
      }
}
#endif  // MET_HAS_FP8_MMA && MET_HAS_MMA_SYNC
