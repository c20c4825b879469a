// Prefill GEMM body of the interpreter: one slice is one output tile of at most 128 rows x 128
// columns of y = x W^T (bf16 in, fp32 accumulate, bf16 out). 8 warps of 64 x 32 outputs,
// mma.sync m16n8k16 fed by ldmatrix from a 3-stage cp.async pipeline of MET_GEMM_BK-wide K tiles.
// Requires K % MET_GEMM_BK == 0 (the host refuses other shapes).
// fp8 weights (W8A16: e4m3 codes with f32 block scales, MetDevInstr w_format) take the same tile
// loop out of line: each B tile's codes arrive by cp.async in a staging ring and the block turns
// them into the tile's bf16 stage as bf16(code x scale), so the products run on bf16 weights
// rounded once (the cpu gemm reads the weight unrounded: about 2^-9 relative per weight) against
// bf16 activations, never fp8 x fp8.
#pragma once
#include "common/interp/prims.cuh"
#include "common/mma_sync.cuh"

namespace met_interp {

// Tile geometry: kernels/common/interp/smem.h (the host sizes shared memory from the same macros).
constexpr int kGemmBM = MET_GEMM_TILE, kGemmBN = MET_GEMM_TILE, kGemmBK = MET_GEMM_BK, kGemmLD = kGemmBK + MET_GEMM_PAD,
              kGemmStages = MET_GEMM_STAGES;

// Copies a [128][BK] tile at (row0, k0) of a [rows, K] matrix to rows kLD elements apart; rows
// past `rows` are zero. T: bf16 (u16, into a stage), or fp8 codes (unsigned char, into the fp8
// staging ring, rows kGemmBK bytes apart).
template <class T = u16, int kLD = kGemmLD>
__device__ __forceinline__ void gemm_tile_load(T* dst, const T* src, int64_t rows, int64_t K, int64_t k0) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte chunk
  constexpr int kChunks = kGemmBK / kPer;                   // 16-byte chunks per row
#pragma unroll
  for (int c = threadIdx.x; c < kGemmBM * kChunks; c += MET_INTERP_THREADS) {
    const int r = c / kChunks, kc = (c % kChunks) * kPer;
    const bool valid = r < rows;
    met_copy16(dst + r * kLD + kc, src + (valid ? r : 0) * K + k0 + kc, valid);
  }
}

#if MET_HAS_MMA_SYNC && MET_HAS_CP_ASYNC
// The scales of an fp8 weight (MetGeom): row block rb, K block kb at scales[rb * scale_cols + kb].
struct GemmFp8Scales {
  const float* scales;
  int64_t block_rows, scale_cols;
  uint32_t kb_shift;  // the scale column of 64-wide K block b is b >> kb_shift
};

// fp8 B tiles: the [128][BK] codes go by cp.async to a staging ring after the bf16 stages
// (MET_GEMM_FP8_SMEM), and the whole block converts a tile to its bf16 stage once it has arrived.
constexpr int kGemmFp8Tile = kGemmBN * kGemmBK;  // bytes

// The staged codes of a tile to its stage as bf16(code x scale): row r < rows of the tile is weight
// row row0 + r (rows past: zeros).
__device__ __forceinline__ void gemm_fp8_tile_convert(u16* dst, const unsigned char* codes, const GemmFp8Scales& sc, int64_t row0,
                                                      int64_t rows, int64_t k0) {
  static_assert(kGemmBK == 64, "one scale column per K tile");
  constexpr int kChunks = kGemmBK / 16;
  const int64_t kb = (k0 / 64) >> sc.kb_shift;
  for (int c = threadIdx.x; c < kGemmBN * kChunks; c += MET_INTERP_THREADS) {
    const int r = c / kChunks, kc = (c % kChunks) * 16;
    const float s = r < rows ? __ldg(sc.scales + (row0 + r) / sc.block_rows * sc.scale_cols + kb) : 0.f;
    fp8x16_to_bf16(*reinterpret_cast<const uint4*>(codes + r * kGemmBK + kc), s, *reinterpret_cast<uint4*>(dst + r * kGemmLD + kc),
                   *reinterpret_cast<uint4*>(dst + r * kGemmLD + kc + 8));
  }
}

// One output tile: Y[M, Nt] (row stride N) = A[M, K] . B[Nt, K]^T, B bf16 or (kFp8) e4m3 with `sc`;
// kBias: plus bias[0, Nt) (the tile's columns) in fp32 before the one rounding; kF32: Y is f32 and
// takes the fp32 sums unrounded (gemm_f32), else bf16.
template <bool kFp8, bool kBias = false, bool kF32 = false>
__device__ __forceinline__ void gemm_mma_tile(const u16* A, const void* Bw, void* Yv, int64_t M, int64_t Nt, int64_t N, int64_t K,
                                              int64_t b_row0, GemmFp8Scales sc, unsigned char* smem, const u16* bias = nullptr) {
  const u16* B = static_cast<const u16*>(Bw);
  u16* const Y = static_cast<u16*>(Yv);
  const unsigned char* B8 = static_cast<const unsigned char*>(Bw);
  u16* a_s = reinterpret_cast<u16*>(smem);
  u16* b_s = a_s + kGemmStages * kGemmBM * kGemmLD;
  unsigned char* codes_s = reinterpret_cast<unsigned char*>(b_s + kGemmStages * kGemmBN * kGemmLD);  // fp8 staging
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
      if constexpr (kFp8) {
        gemm_tile_load<unsigned char, kGemmBK>(codes_s + st * kGemmFp8Tile, B8, Nt, K, st * kGemmBK);
      } else {
        gemm_tile_load(b_s + st * kGemmBN * kGemmLD, B, Nt, K, st * kGemmBK);
      }
    }
    met_copy_commit();
  }
  for (int64_t kt = 0; kt < kt_count; ++kt) {
    met_copy_wait<kGemmStages - 2>();
    __syncthreads();
    const int cur = static_cast<int>(kt % kGemmStages);
    // fp8: tile kt's codes have arrived; converted to its stage (last read in kt - 3) before the
    // next copies reuse the staging slot of kt - 1, whose conversion the barrier above ended.
    if constexpr (kFp8) gemm_fp8_tile_convert(b_s + cur * kGemmBN * kGemmLD, codes_s + cur * kGemmFp8Tile, sc, b_row0, Nt, kt * kGemmBK);
    const int64_t next = kt + kGemmStages - 1;
    if (next < kt_count) {
      const int st = static_cast<int>(next % kGemmStages);
      gemm_tile_load(a_s + st * kGemmBM * kGemmLD, A, M, K, next * kGemmBK);
      if constexpr (kFp8)
        gemm_tile_load<unsigned char, kGemmBK>(codes_s + st * kGemmFp8Tile, B8, Nt, K, next * kGemmBK);
      else
        gemm_tile_load(b_s + st * kGemmBN * kGemmLD, B, Nt, K, next * kGemmBK);
    }
    met_copy_commit();
    if constexpr (kFp8) __syncthreads();  // the converted stage, for every warp
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
        float v0 = acc[mi][ni][2 * h], v1 = acc[mi][ni][2 * h + 1];
        if constexpr (kF32) {
          if constexpr (kBias) {
            if (bias && col < Nt) v0 += bf(bias[col]);
            if (bias && col + 1 < Nt) v1 += bf(bias[col + 1]);
          }
          float* yf = static_cast<float*>(Yv) + row * N + col;
          if (col + 1 < Nt && (reinterpret_cast<uintptr_t>(yf) & 7) == 0) {
            *reinterpret_cast<float2*>(yf) = make_float2(v0, v1);
          } else {
            if (col < Nt) yf[0] = v0;
            if (col + 1 < Nt) yf[1] = v1;
          }
          continue;
        }
        u16* y = Y + row * N + col;
        if constexpr (kBias) {
          if (col < Nt) v0 += bf(bias[col]);
          if (col + 1 < Nt) v1 += bf(bias[col + 1]);
        }
        if (col + 1 < Nt && ((b_row0 + col) & 1) == 0) {
          *reinterpret_cast<uint32_t*>(y) = met_pack_bf16x2(v0, v1);
        } else {
          if (col < Nt) y[0] = to_bf(v0);
          if (col + 1 < Nt) y[1] = to_bf(v1);
        }
      }
}

// One slice; kFp8: the weight is e4m3 with the instruction's block scales; kBias: `bias` (one per
// output column of the whole matrix) is added before the rounding; kF32: y is f32, unrounded. Args:
// the bf16 GEMM's arguments, the biased linear's or gemm_f32's, which share the geometry.
template <bool kFp8, bool kBias = false, bool kF32 = false, class Args>
__device__ __forceinline__ void gemm_mma_slice(const Args& a, uint32_t slice, unsigned char* smem, const u16* bias = nullptr) {
  const SliceRange rr = slice_rows(a, slice);
  const int64_t N = a.geom.w_rows, K = a.geom.w_cols;
  const SliceRange cc = slice_cols(a, slice, N);
  const int64_t M = rr.end - rr.begin, Nt = cc.end - cc.begin;
  if (M <= 0 || Nt <= 0) return;
  const u16* A = a.x + (a.in_row0 + rr.begin) * K;
  auto* Y = a.y + rr.begin * N + cc.begin;  // bf16, or f32 (kF32)
  GemmFp8Scales sc{};
  const void* B = a.w + cc.begin * K;
  if constexpr (kFp8) {
    const MetDevInstr& in = *a.geom.instr;
    sc = GemmFp8Scales{reinterpret_cast<const float*>(in.w_scales), in.w_block_rows > 0 ? in.w_block_rows : 1, in.w_scale_cols,
                       in.w_kb_shift};
    B = reinterpret_cast<const unsigned char*>(a.w) + cc.begin * K;
  }
  gemm_mma_tile<kFp8, kBias, kF32>(A, B, Y, M, Nt, N, K, cc.begin, sc, smem, kBias && bias ? bias + cc.begin : nullptr);
}

// fp8 weights run out of line, reloading their arguments from the instruction: inlined beside the
// bf16 copy, the interpreter's dispatcher spilled.
__device__ __noinline__ void gemm_mma_fp8(const MetDevInstr* in, uint32_t slice, unsigned char* smem) {
  gemm_mma_slice<true>(met_load_gemm_bf16_mma(*in), slice, smem);
}

MET_ENTRY(gemm_bf16_mma) {
  if (a.geom.w_format == MET_DEV_WEIGHT_FP8_E4M3)
    gemm_mma_fp8(a.geom.instr, slice, smem);
  else
    gemm_mma_slice<false>(a, slice, smem);
}

// A linear layer with its bias (gpt-oss's q/k/v and o at prefill rows), bf16 weights: the same tile
// loop out of line with the bias in the epilogue.
__device__ __noinline__ void gemm_mma_bias(const MetDevInstr* in, uint32_t slice, unsigned char* smem) {
  const MetArgs_gemm_bias a = met_load_gemm_bias(*in);
  gemm_mma_slice<false, true>(a, slice, smem, a.b);
}

MET_ENTRY(gemm_bias) { gemm_mma_bias(a.geom.instr, slice, smem); }

// Tensor parallelism: a row-parallel o or down projection at prefill rows keeps its fp32 sums
// unrounded (gemm_f32, kernels/common/ops.def) for allreduce_residual. The same tile loop with an
// f32 store, out of line as the other variants (bf16 or fp8 weights by the instruction's format).
__device__ __noinline__ void gemm_mma_f32(const MetDevInstr* in, uint32_t slice, unsigned char* smem) {
  const MetArgs_gemm_f32 a = met_load_gemm_f32(*in);
  if (a.geom.w_format == MET_DEV_WEIGHT_FP8_E4M3)
    gemm_mma_slice<true, false, true>(a, slice, smem);
  else
    gemm_mma_slice<false, false, true>(a, slice, smem);
}

MET_ENTRY(gemm_f32) { gemm_mma_f32(a.geom.instr, slice, smem); }

// Tensor parallelism: a rank's share of a biased row-parallel projection at prefill rows (gpt-oss's
// o), fp32, the bias on the first rank only (bf16 weights, as gemm_bias).
__device__ __noinline__ void gemm_mma_bias_f32(const MetDevInstr* in, uint32_t slice, unsigned char* smem) {
  const MetArgs_gemm_bias_f32 a = met_load_gemm_bias_f32(*in);
  gemm_mma_slice<false, true, true>(a, slice, smem, a.b);
}

MET_ENTRY(gemm_bias_f32) { gemm_mma_bias_f32(a.geom.instr, slice, smem); }

#endif  // MET_HAS_MMA_SYNC && MET_HAS_CP_ASYNC

}  // namespace met_interp
