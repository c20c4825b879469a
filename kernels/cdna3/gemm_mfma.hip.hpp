// Prefill/batch GEMM on CDNA3 matrix cores: C[M, N] = A[M, K] W[N, K]^T (+ residual), bf16 in, fp32
// accumulate with v_mfma_f32_32x32x8_bf16 (1k). 128x128x32 block tile, 4 wavefronts of 64x64 (2x2 MFMA
// tiles each), double-buffered LDS filled through registers. Requires K % 8 == 0 and 16-byte rows.
#pragma once
#include "common/device.cuh"

#define MET_MFMA_BM 128
#define MET_MFMA_BN 128
#define MET_MFMA_BK 32
#define MET_MFMA_PAD 8  // bf16 elements of row padding: the 32 rows one MFMA operand reads spread over banks
#define MET_MFMA_LD (MET_MFMA_BK + MET_MFMA_PAD)
#define MET_MFMA_THREADS 256  // 4 wavefronts of 64 lanes, arranged 2 x 2 over the block tile
#define MET_MFMA_WAVE_M 64
#define MET_MFMA_WAVE_N 64
#define MET_MFMA_TILE 32  // one v_mfma_f32_32x32x8 produces a 32 x 32 fp32 tile
#define MET_MFMA_K 8      // ... and consumes k = 8 per call (4 bf16 per lane, two lane halves)
#define MET_MFMA_CHUNK 8  // bf16 elements per 16-byte global/LDS transfer
#define MET_MFMA_CHUNKS_PER_THREAD (MET_MFMA_BM * MET_MFMA_BK / MET_MFMA_CHUNK / MET_MFMA_THREADS)

#if MET_HAS_MFMA
typedef short met_bf16x4 __attribute__((ext_vector_type(4)));
typedef float met_f32x16 __attribute__((ext_vector_type(16)));

// This thread's chunks of a [128 rows][32 k] tile starting at (row0, k0) of a [rows, K] matrix, into
// registers; rows past `rows` and k past K read as zero (K % 8 == 0: a chunk is wholly in or out).
__device__ __forceinline__ void met_mfma_fetch(uint4 (&reg)[MET_MFMA_CHUNKS_PER_THREAD], const met_bf16* src,
                                               int rows, int K, int row0, int k0) {
  constexpr int kChunksPerRow = MET_MFMA_BK / MET_MFMA_CHUNK;
  #pragma unroll
  for (int i = 0; i < MET_MFMA_CHUNKS_PER_THREAD; ++i) {
    const int c = threadIdx.x + i * MET_MFMA_THREADS;
    const int r = c / kChunksPerRow, kc = (c % kChunksPerRow) * MET_MFMA_CHUNK;
    const bool valid = row0 + r < rows && k0 + kc < K;
    reg[i] = valid ? *reinterpret_cast<const uint4*>(src + static_cast<long>(row0 + r) * K + k0 + kc)
                   : make_uint4(0, 0, 0, 0);
  }
}

// Writes the fetched chunks to their places in an LDS tile (row stride MET_MFMA_LD keeps 16-byte alignment).
__device__ __forceinline__ void met_mfma_stash(met_bf16 (*dst)[MET_MFMA_LD], const uint4 (&reg)[MET_MFMA_CHUNKS_PER_THREAD]) {
  constexpr int kChunksPerRow = MET_MFMA_BK / MET_MFMA_CHUNK;
  #pragma unroll
  for (int i = 0; i < MET_MFMA_CHUNKS_PER_THREAD; ++i) {
    const int c = threadIdx.x + i * MET_MFMA_THREADS;
    const int r = c / kChunksPerRow, kc = (c % kChunksPerRow) * MET_MFMA_CHUNK;
    *reinterpret_cast<uint4*>(&dst[r][kc]) = reg[i];
  }
}

// grid (ceil(N / 128), ceil(M / 128)), block MET_MFMA_THREADS. resid may be null.
// Operand layout of v_mfma_f32_32x32x8_bf16: lane l holds A[l % 32][4 (l / 32) .. +3] and
// B[4 (l / 32) .. +3][l % 32]; output element v of lane l is C[8 (v / 4) + 4 (l / 32) + v % 4][l % 32].
extern "C" __global__ void met_gemm_bf16_mfma(const met_bf16* A, const met_bf16* W, met_bf16* C, const met_bf16* resid, int M, int N, int K) {
  __shared__ __align__(16) met_bf16 a_s[2][MET_MFMA_BM][MET_MFMA_LD];
  __shared__ __align__(16) met_bf16 b_s[2][MET_MFMA_BN][MET_MFMA_LD];
  constexpr int kMTiles = MET_MFMA_WAVE_M / MET_MFMA_TILE, kNTiles = MET_MFMA_WAVE_N / MET_MFMA_TILE;
  const int wave = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  const int wm = wave / (MET_MFMA_BN / MET_MFMA_WAVE_N), wn = wave % (MET_MFMA_BN / MET_MFMA_WAVE_N);
  const int m0 = blockIdx.y * MET_MFMA_BM, n0 = blockIdx.x * MET_MFMA_BN;
  const int lrow = lane % MET_MFMA_TILE;             // operand row (A) / column (B) this lane feeds
  const int lk = (lane / MET_MFMA_TILE) * 4;         // first of the 4 k this lane feeds

  met_f32x16 acc[kMTiles][kNTiles];
  #pragma unroll
  for (int mi = 0; mi < kMTiles; ++mi)
    #pragma unroll
    for (int ni = 0; ni < kNTiles; ++ni)
      #pragma unroll
      for (int v = 0; v < 16; ++v) acc[mi][ni][v] = 0.f;

  uint4 a_reg[MET_MFMA_CHUNKS_PER_THREAD], b_reg[MET_MFMA_CHUNKS_PER_THREAD];
  met_mfma_fetch(a_reg, A, M, K, m0, 0);
  met_mfma_fetch(b_reg, W, N, K, n0, 0);
  met_mfma_stash(a_s[0], a_reg);
  met_mfma_stash(b_s[0], b_reg);
  __syncthreads();

  const int kt_count = (K + MET_MFMA_BK - 1) / MET_MFMA_BK;
  for (int kt = 0; kt < kt_count; ++kt) {
    const int cur = kt & 1;
    const bool more = kt + 1 < kt_count;
    if (more) {  // next tile's global loads overlap this tile's MFMAs
      met_mfma_fetch(a_reg, A, M, K, m0, (kt + 1) * MET_MFMA_BK);
      met_mfma_fetch(b_reg, W, N, K, n0, (kt + 1) * MET_MFMA_BK);
    }
    #pragma unroll
    for (int ks = 0; ks < MET_MFMA_BK; ks += MET_MFMA_K) {
      met_bf16x4 a[kMTiles], b[kNTiles];
      #pragma unroll
      for (int mi = 0; mi < kMTiles; ++mi)
        a[mi] = *reinterpret_cast<const met_bf16x4*>(&a_s[cur][wm * MET_MFMA_WAVE_M + mi * MET_MFMA_TILE + lrow][ks + lk]);
      #pragma unroll
      for (int ni = 0; ni < kNTiles; ++ni)
        b[ni] = *reinterpret_cast<const met_bf16x4*>(&b_s[cur][wn * MET_MFMA_WAVE_N + ni * MET_MFMA_TILE + lrow][ks + lk]);
      #pragma unroll
      for (int mi = 0; mi < kMTiles; ++mi)
        #pragma unroll
        for (int ni = 0; ni < kNTiles; ++ni)
          acc[mi][ni] = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a[mi], b[ni], acc[mi][ni], /*cbsz=*/0, /*abid=*/0, /*blgp=*/0);
    }
    // The other buffer was last read in iteration kt - 1, which ended in a barrier.
    if (more) {
      met_mfma_stash(a_s[cur ^ 1], a_reg);
      met_mfma_stash(b_s[cur ^ 1], b_reg);
    }
    __syncthreads();
  }

  #pragma unroll
  for (int mi = 0; mi < kMTiles; ++mi)
    #pragma unroll
    for (int ni = 0; ni < kNTiles; ++ni)
      #pragma unroll
      for (int v = 0; v < 16; ++v) {
        const int row = m0 + wm * MET_MFMA_WAVE_M + mi * MET_MFMA_TILE + 8 * (v / 4) + 4 * (lane / MET_MFMA_TILE) + v % 4;
        const int col = n0 + wn * MET_MFMA_WAVE_N + ni * MET_MFMA_TILE + lrow;
        if (row < M && col < N) {
          const long i = static_cast<long>(row) * N + col;
          C[i] = met_from_float(acc[mi][ni][v] + (resid ? met_to_float(resid[i]) : 0.f));
        }
      }
}
#endif  // MET_HAS_MFMA
