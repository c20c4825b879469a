// Prefill GEMM body of the interpreter: one slice is one output tile of at most 128 rows x 128
// columns of y = x W^T (bf16 in, fp32 accumulate, bf16 out). 8 warps of 64 x 32 outputs,
// mma.sync m16n8k16 fed by ldmatrix from a 3-stage cp.async pipeline of MET_GEMM_BK-wide K tiles.
// Requires K % MET_GEMM_BK == 0 (the host refuses other shapes).
#pragma once
#include "common/interp/prims.cuh"
#include "common/mma_sync.cuh"

namespace met_interp {

// Tile geometry: kernels/common/interp/smem.h (the host sizes shared memory from the same macros).
constexpr int kGemmBM = MET_GEMM_TILE, kGemmBN = MET_GEMM_TILE, kGemmBK = MET_GEMM_BK, kGemmLD = kGemmBK + MET_GEMM_PAD,
              kGemmStages = MET_GEMM_STAGES;

// Copies a [128][BK] bf16 tile at (row0, k0) of a [rows, K] matrix; rows past `rows` are zero.
__device__ __forceinline__ void gemm_tile_load(u16* dst, const u16* src, int64_t rows, int64_t K, int64_t k0) {
  constexpr int kChunks = kGemmBK / 8;  // 16-byte chunks per row
#pragma unroll
  for (int c = threadIdx.x; c < kGemmBM * kChunks; c += MET_INTERP_THREADS) {
    const int r = c / kChunks, kc = (c % kChunks) * 8;
    const bool valid = r < rows;
    met_copy16(dst + r * kGemmLD + kc, src + (valid ? r : 0) * K + k0 + kc, valid);
  }
}

#if MET_HAS_MMA_SYNC && MET_HAS_CP_ASYNC
MET_ENTRY(gemm_bf16_mma) {
  const SliceRange rr = slice_rows(a, slice);
  const int64_t N = a.geom.w_rows, K = a.geom.w_cols;
  const SliceRange cc = slice_cols(a, slice, N);
  const int64_t M = rr.end - rr.begin, Nt = cc.end - cc.begin;
  if (M <= 0 || Nt <= 0) return;
  const u16* A = a.x + (a.in_row0 + rr.begin) * K;
  const u16* B = a.w + cc.begin * K;
  u16* a_s = reinterpret_cast<u16*>(smem);
  u16* b_s = a_s + kGemmStages * kGemmBM * kGemmLD;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / 4, wn = warp % 4;  // 2 x 4 warps of 64 rows x 32 columns
  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  const int64_t kt_count = K / kGemmBK;
  for (int st = 0; st < kGemmStages - 1; ++st) {
    if (st < kt_count) {
      gemm_tile_load(a_s + st * kGemmBM * kGemmLD, A, M, K, st * kGemmBK);
      gemm_tile_load(b_s + st * kGemmBN * kGemmLD, B, Nt, K, st * kGemmBK);
    }
    met_copy_commit();
  }
  for (int64_t kt = 0; kt < kt_count; ++kt) {
    met_copy_wait<kGemmStages - 2>();
    __syncthreads();
    const int64_t next = kt + kGemmStages - 1;
    if (next < kt_count) {
      const int st = static_cast<int>(next % kGemmStages);
      gemm_tile_load(a_s + st * kGemmBM * kGemmLD, A, M, K, next * kGemmBK);
      gemm_tile_load(b_s + st * kGemmBN * kGemmLD, B, Nt, K, next * kGemmBK);
    }
    met_copy_commit();
    const int cur = static_cast<int>(kt % kGemmStages);
    const u16* as = a_s + cur * kGemmBM * kGemmLD;
    const u16* bs = b_s + cur * kGemmBN * kGemmLD;
#pragma unroll
    for (int kk = 0; kk < kGemmBK; kk += 16) {
      uint32_t a[4][4], b[4][2];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
        met_ldmatrix_x4(a[mi], as + (wm * 64 + mi * 16 + lane % 16) * kGemmLD + kk + (lane / 16) * 8);
#pragma unroll
      for (int nj = 0; nj < 4; nj += 2) {
        uint32_t r[4];
        const int mat = lane / 8;
        met_ldmatrix_x4(r, bs + (wn * 32 + nj * 8 + (mat / 2) * 8 + lane % 8) * kGemmLD + kk + (mat % 2) * 8);
        b[nj][0] = r[0];
        b[nj][1] = r[1];
        b[nj + 1][0] = r[2];
        b[nj + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) met_mma_bf16_16816(acc[mi][ni], a[mi], b[ni]);
    }
  }
  met_copy_wait<0>();
  __syncthreads();  // the next slice reuses the stages

  u16* Y = a.y;
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = wm * 64 + mi * 16 + g + h * 8;
        const int64_t col = wn * 32 + ni * 8 + 2 * t;
        if (row >= M) continue;
        u16* y = Y + (rr.begin + row) * N + cc.begin + col;
        if (col + 1 < Nt && ((cc.begin + col) & 1) == 0) {
          const uint32_t packed = met_pack_bf16x2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
          *reinterpret_cast<uint32_t*>(y) = packed;
        } else {
          if (col < Nt) y[0] = to_bf(acc[mi][ni][2 * h]);
          if (col + 1 < Nt) y[1] = to_bf(acc[mi][ni][2 * h + 1]);
        }
      }
}

#endif  // MET_HAS_MMA_SYNC && MET_HAS_CP_ASYNC

}  // namespace met_interp
