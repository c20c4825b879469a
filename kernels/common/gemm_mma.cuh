// Prefill/batch GEMM on warp tensor cores: C[M, N] = A[M, K] W[N, K]^T (+ residual), bf16 in,
// fp32 accumulate, mma.sync m16n8k16. 128x128x32 block tile, 8 warps of 64x32, double-buffered
// shared memory filled by cp.async where the class has it. Requires K % 32 == 0; M, N any.
#pragma once
#include "common/mma_sync.cuh"

#define MET_GEMM_BM 128
#define MET_GEMM_BN 128
#define MET_GEMM_BK 32
#define MET_GEMM_PAD 8  // bf16 elements of row padding: ldmatrix rows land on distinct banks
#define MET_GEMM_LD (MET_GEMM_BK + MET_GEMM_PAD)
#define MET_GEMM_THREADS 256
#define MET_GEMM_WARP_M 64
#define MET_GEMM_WARP_N 32

#if MET_HAS_MMA_SYNC
// Copy a [128 rows][32 k] bf16 tile starting at (row0, k0) of a [rows, K] matrix.
__device__ __forceinline__ void met_gemm_load_tile(met_bf16 (*dst)[MET_GEMM_LD], const met_bf16* src, int rows,
                                                   int K, int row0, int k0) {
  constexpr int kChunksPerRow = MET_GEMM_BK / 8;  // 16-byte chunks
  for (int c = threadIdx.x; c < MET_GEMM_BM * kChunksPerRow; c += MET_GEMM_THREADS) {
    const int r = c / kChunksPerRow, kc = (c % kChunksPerRow) * 8;
    const bool valid = row0 + r < rows;
    const met_bf16* g = src + static_cast<long>(valid ? row0 + r : 0) * K + k0 + kc;
    met_copy16(&dst[r][kc], g, valid);
  }
}

// grid (ceil(N / 128), ceil(M / 128)), block MET_GEMM_THREADS.
extern "C" __global__ void met_gemm_bf16_mma(const met_bf16* A, const met_bf16* W, met_bf16* C, const met_bf16* resid,
                                             int M, int N, int K) {
  __shared__ __align__(128) met_bf16 a_s[2][MET_GEMM_BM][MET_GEMM_LD];
  __shared__ __align__(128) met_bf16 b_s[2][MET_GEMM_BN][MET_GEMM_LD];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / (MET_GEMM_BN / MET_GEMM_WARP_N), wn = warp % (MET_GEMM_BN / MET_GEMM_WARP_N);
  const int m0 = blockIdx.y * MET_GEMM_BM, n0 = blockIdx.x * MET_GEMM_BN;
  constexpr int kMFrags = MET_GEMM_WARP_M / 16, kNFrags = MET_GEMM_WARP_N / 8;
  float acc[kMFrags][kNFrags][4] = {};

  const int kt_count = K / MET_GEMM_BK;
  met_gemm_load_tile(a_s[0], A, M, K, m0, 0);
  met_gemm_load_tile(b_s[0], W, N, K, n0, 0);
  met_copy_commit();
  for (int kt = 0; kt < kt_count; ++kt) {
    const int cur = kt & 1;
    if (kt + 1 < kt_count) {  // prefetch the next tile while this one is multiplied
      met_gemm_load_tile(a_s[cur ^ 1], A, M, K, m0, (kt + 1) * MET_GEMM_BK);
      met_gemm_load_tile(b_s[cur ^ 1], W, N, K, n0, (kt + 1) * MET_GEMM_BK);
      met_copy_commit();
      met_copy_wait<1>();
    } else {
      met_copy_wait<0>();
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < MET_GEMM_BK; kk += 16) {
      uint32_t a[kMFrags][4], b[kNFrags][2];
#pragma unroll
      for (int mi = 0; mi < kMFrags; ++mi)
        met_ldmatrix_x4(a[mi], &a_s[cur][wm * MET_GEMM_WARP_M + mi * 16 + lane % 16][kk + (lane / 16) * 8]);
#pragma unroll
      for (int nj = 0; nj < kNFrags; nj += 2) {  // one x4 load = two n-fragments x two k-halves
        uint32_t r[4];
        const int mat = lane / 8;
        met_ldmatrix_x4(r, &b_s[cur][wn * MET_GEMM_WARP_N + nj * 8 + (mat / 2) * 8 + lane % 8][kk + (mat % 2) * 8]);
        b[nj][0] = r[0]; b[nj][1] = r[1]; b[nj + 1][0] = r[2]; b[nj + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < kMFrags; ++mi)
#pragma unroll
        for (int ni = 0; ni < kNFrags; ++ni) met_mma_bf16_16816(acc[mi][ni], a[mi], b[ni]);
    }
    __syncthreads();
  }

  // Accumulator (mi, ni): c0,c1 at row g, cols 2t..2t+1; c2,c3 at row g+8 (g = lane/4, t = lane%4).
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mi = 0; mi < kMFrags; ++mi)
#pragma unroll
    for (int ni = 0; ni < kNFrags; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + wm * MET_GEMM_WARP_M + mi * 16 + g + h * 8;
        const int col = n0 + wn * MET_GEMM_WARP_N + ni * 8 + 2 * t;
        if (row >= M) continue;
        for (int e = 0; e < 2; ++e) {
          if (col + e >= N) continue;
          const long i = static_cast<long>(row) * N + col + e;
          C[i] = met_from_float(acc[mi][ni][2 * h + e] + (resid ? met_to_float(resid[i]) : 0.f));
        }
      }
}
#endif  // MET_HAS_MMA_SYNC
