// Hopper prefill/batch GEMMs on warpgroup tensor cores: C[M, N] = A[M, K] W[N, K]^T (+ residual).
// TMA streams 128x64 operand tiles (128-byte swizzle) through a 4-stage mbarrier ring; one
// warpgroup issues wgmma.mma_async on two m64 halves. The fp8 GEMM takes A in registers.
#pragma once
#include "hopper/wgmma.cuh"

#define MET_WG_BM 128
#define MET_WG_BN 128
#define MET_WG_BK 64      // bf16: one 128-byte swizzle row per tile row
#define MET_WG_STAGES 4
#define MET_WG_THREADS 128  // one warpgroup
#define MET_WG_FP8_BK 128   // fp8: 128 one-byte elements per swizzle row
// Largest finite fp8 e4m3 value, the saturation bound of on-the-fly activation quantisation.
#define MET_FP8_E4M3_MAX 448.f

// Dynamic shared memory of one launch: the operand ring plus one mbarrier per stage.
__host__ __device__ constexpr int met_gemm_wgmma_smem_bytes() {
  return MET_WG_STAGES * (MET_WG_BM + MET_WG_BN) * MET_WG_BK * 2 + MET_WG_STAGES * 8 + MET_SWIZZLE_GROUP_BYTES;
}

// Epilogue shared by the wgmma GEMMs: a 64xN accumulator of warpgroup half `mh`; register 4i+{0,1}
// is (row 16w + g, col 8i + 2t + {0,1}), 4i+{2,3} the same columns at row + 8.
template <int NREGS>
__device__ __forceinline__ void met_wgmma_store(const float (&acc)[NREGS], int m0, int n0, float scale, met_bf16* C,
                                                const met_bf16* resid, int M, int N) {
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < NREGS / 4; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int row = m0 + 16 * warp + g + 8 * h, col = n0 + 8 * i + 2 * t + e;
        if (row >= M || col >= N) continue;
        const long idx = static_cast<long>(row) * N + col;
        C[idx] = met_from_float(acc[4 * i + 2 * h + e] * scale + (resid ? met_to_float(resid[idx]) : 0.f));
      }
}

#if MET_HAS_WGMMA && MET_HAS_TMA
// a_map: A [M, K] bf16, box {64, 128}; w_map: W [N, K] bf16, box {64, 128}; both SWIZZLE_128B.
// TMA zero-fills out-of-range rows and columns, so M, N, K need no padding.
// grid (ceil(N / 128), ceil(M / 128)), block 128, dynamic smem met_gemm_wgmma_smem_bytes().
extern "C" __global__ void met_gemm_bf16_wgmma(const __grid_constant__ MetTensorMap a_map, const __grid_constant__ MetTensorMap w_map, met_bf16* C, const met_bf16* resid, int M, int N, int K) {
  extern __shared__ __align__(1024) unsigned char met_wg_smem[];
  // Swizzled tiles need 1024-byte alignment; round the dynamic base up.
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(met_wg_smem) + MET_SWIZZLE_GROUP_BYTES - 1) & ~uintptr_t(MET_SWIZZLE_GROUP_BYTES - 1));
  constexpr int kTileA = MET_WG_BM * MET_WG_BK * 2, kTileB = MET_WG_BN * MET_WG_BK * 2;
  unsigned char* a_s = base;
  unsigned char* b_s = base + MET_WG_STAGES * kTileA;
  uint64_t* full = reinterpret_cast<uint64_t*>(b_s + MET_WG_STAGES * kTileB);
  const int m0 = blockIdx.y * MET_WG_BM, n0 = blockIdx.x * MET_WG_BN;
  const int kt_count = (K + MET_WG_BK - 1) / MET_WG_BK;

  if (threadIdx.x == 0) {
    for (int s = 0; s < MET_WG_STAGES; ++s) met_mbar_init(&full[s], /*arrivals=*/1);
    met_fence_barrier_init();
  }
  __syncthreads();
  auto issue = [&](int kt) {
    const int s = kt % MET_WG_STAGES;
    met_mbar_expect_tx(&full[s], kTileA + kTileB);
    met_tma_load_2d(a_s + s * kTileA, &a_map, kt * MET_WG_BK, m0, &full[s]);
    met_tma_load_2d(b_s + s * kTileB, &w_map, kt * MET_WG_BK, n0, &full[s]);
  };
  if (threadIdx.x == 0)
    for (int kt = 0; kt < MET_WG_STAGES - 1 && kt < kt_count; ++kt) issue(kt);

  float acc[2][64];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[h][i] = 0.f;

  for (int kt = 0; kt < kt_count; ++kt) {
    const int s = kt % MET_WG_STAGES;
    met_mbar_wait(&full[s], (kt / MET_WG_STAGES) & 1);
    met_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < MET_WG_BK / 16; ++kk) {
      // K-step kk: 16 bf16 = 32 bytes further along the swizzled row.
      const uint64_t db = met_wgmma_desc(b_s + s * kTileB + kk * 32, 16, MET_SWIZZLE_GROUP_BYTES);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint64_t da = met_wgmma_desc(a_s + s * kTileA + h * 64 * MET_SWIZZLE_ATOM_BYTES + kk * 32, 16,
                                           MET_SWIZZLE_GROUP_BYTES);
        met_wgmma_m64n128k16_bf16_ss(acc[h], da, db, /*accumulate=*/1);
      }
    }
    met_wgmma_commit();
    met_wgmma_wait<0>();
    met_wgmma_fence_regs(acc[0]);
    met_wgmma_fence_regs(acc[1]);
    __syncthreads();  // stage (kt - 1) % STAGES is free for the next prefetch
    if (threadIdx.x == 0 && kt + MET_WG_STAGES - 1 < kt_count) issue(kt + MET_WG_STAGES - 1);
  }
  #pragma unroll
  for (int h = 0; h < 2; ++h) met_wgmma_store(acc[h], m0 + 64 * h, n0, 1.f, C, resid, M, N);
}
#endif  // MET_HAS_WGMMA && MET_HAS_TMA

#if MET_HAS_WGMMA && MET_HAS_FP8_MMA
// Four consecutive A elements of row `row`, column k, as e4m3 bytes packed in one register. A bf16
// A (fp8-e4m3 x bf16 rule) is quantised here, on the fly: q = sat(a / a_scale).
__device__ __forceinline__ uint32_t met_fp8_a_quad(const void* A, int a_is_bf16, float inv_a_scale, int row, int k,
                                                   int M, int K) {
  if (row >= M || k >= K) return 0;
  if (!a_is_bf16) return *reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(A) + static_cast<long>(row) * K + k);
  const uint2 raw = *reinterpret_cast<const uint2*>(static_cast<const met_bf16*>(A) + static_cast<long>(row) * K + k);
  const met_bf16* h = reinterpret_cast<const met_bf16*>(&raw);
  float f[4];
  for (int i = 0; i < 4; ++i) f[i] = fminf(fmaxf(met_to_float(h[i]) * inv_a_scale, -MET_FP8_E4M3_MAX), MET_FP8_E4M3_MAX);
  unsigned short lo, hi;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(f[1]), "f"(f[0]));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(f[3]), "f"(f[2]));
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// C = (A W^T) * a_scale * w_scale (+ residual). A [M, K] is fp8-e4m3 (a_is_bf16 = 0) or bf16
// quantised per tensor by a_scale in the prologue of each k-step; W [N, K] fp8-e4m3 arrives by TMA
// (w_map box {128, 128}, SWIZZLE_128B). A goes to the tensor cores from registers. K % 16 == 0.
// grid (ceil(N / 128), ceil(M / 128)), block 128, dynamic smem STAGES * 128 * 128 + 1 KiB.
extern "C" __global__ void met_gemm_fp8_wgmma(const void* A, int a_is_bf16, float a_scale, const __grid_constant__ MetTensorMap w_map, float w_scale, met_bf16* C, const met_bf16* resid, int M, int N, int K) {
  extern __shared__ __align__(1024) unsigned char met_wg_smem[];
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(met_wg_smem) + MET_SWIZZLE_GROUP_BYTES - 1) & ~uintptr_t(MET_SWIZZLE_GROUP_BYTES - 1));
  constexpr int kTileB = MET_WG_BN * MET_WG_FP8_BK;
  unsigned char* b_s = base;
  uint64_t* full = reinterpret_cast<uint64_t*>(b_s + MET_WG_STAGES * kTileB);
  const int m0 = blockIdx.y * MET_WG_BM, n0 = blockIdx.x * MET_WG_BN;
  const int kt_count = (K + MET_WG_FP8_BK - 1) / MET_WG_FP8_BK;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const float inv_a_scale = 1.f / a_scale;

  if (threadIdx.x == 0) {
    for (int s = 0; s < MET_WG_STAGES; ++s) met_mbar_init(&full[s], /*arrivals=*/1);
    met_fence_barrier_init();
  }
  __syncthreads();
  auto issue = [&](int kt) {
    const int s = kt % MET_WG_STAGES;
    met_mbar_expect_tx(&full[s], kTileB);
    met_tma_load_2d(b_s + s * kTileB, &w_map, kt * MET_WG_FP8_BK, n0, &full[s]);
  };
  if (threadIdx.x == 0)
    for (int kt = 0; kt < MET_WG_STAGES - 1 && kt < kt_count; ++kt) issue(kt);

  float acc[2][64];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[h][i] = 0.f;

  for (int kt = 0; kt < kt_count; ++kt) {
    const int s = kt % MET_WG_STAGES;
    // A fragments (k32 steps): reg0 (row g, k 4t..4t+3), reg1 (row g+8), reg2/3 the same at k+16.
    uint32_t a[2][MET_WG_FP8_BK / 32][4];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int kk = 0; kk < MET_WG_FP8_BK / 32; ++kk)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int row = m0 + 64 * h + 16 * warp + g + 8 * (j & 1);
          const int k = kt * MET_WG_FP8_BK + kk * 32 + 4 * t + 16 * (j >> 1);
          a[h][kk][j] = met_fp8_a_quad(A, a_is_bf16, inv_a_scale, row, k, M, K);
        }
    met_mbar_wait(&full[s], (kt / MET_WG_STAGES) & 1);
    met_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < MET_WG_FP8_BK / 32; ++kk) {
      const uint64_t db = met_wgmma_desc(b_s + s * kTileB + kk * 32, 16, MET_SWIZZLE_GROUP_BYTES);
#pragma unroll
      for (int h = 0; h < 2; ++h) met_wgmma_m64n128k32_e4m3_rs(acc[h], a[h][kk], db, /*accumulate=*/1);
    }
    met_wgmma_commit();
    met_wgmma_wait<0>();
    met_wgmma_fence_regs(acc[0]);
    met_wgmma_fence_regs(acc[1]);
    __syncthreads();
    if (threadIdx.x == 0 && kt + MET_WG_STAGES - 1 < kt_count) issue(kt + MET_WG_STAGES - 1);
  }
  #pragma unroll
  for (int h = 0; h < 2; ++h) met_wgmma_store(acc[h], m0 + 64 * h, n0, a_scale * w_scale, C, resid, M, N);
}
#endif  // MET_HAS_WGMMA && MET_HAS_FP8_MMA
