// Decode/batch GEMV family (rows <= MET_DEV_MAX_ROWS): the fused qkv, o/down + residual,
// gate_up + activation, lm_head and plain gemv. A slice owns all rows of the rung and a
// range of output columns (head units for qkv), so each weight byte is read once per step.
//
// The dot products run on the tensor cores with mma.sync m16n8k16: weight rows are the M side
// (16 per tile), activation rows the N side (8 per fragment), and the K order inside each 32-wide
// block is permuted identically for both operands, so every thread loads its A and B fragments
// with 16-byte loads straight from memory (the sum over K does not depend on the order).
#pragma once
#include "common/interp/prims.cuh"
#include "common/mma_sync.cuh"

namespace met_interp {

constexpr int kChunk = 256;  // weight rows one gemv_chunk call covers (res row stride)

// Shared-memory layout of the gemv bodies (floats unless noted), inside the block's dynamic smem.
struct GemvSmem {
  float* red;   // 64
  float* res;   // [MET_DEV_MAX_ROWS][kChunk]
  float* part;  // [MET_INTERP_WARPS][16 * 16] k-split partial tiles
  u16* head;    // [MET_INTERP_WARPS][MET_GEMV_HEAD_DIMS] one bf16 head per warp
  u16* xn;      // [rows][K] normalised activations
};
__device__ __forceinline__ GemvSmem gemv_smem(unsigned char* base) {
  GemvSmem s;
  s.red = reinterpret_cast<float*>(base);
  s.res = s.red + 64;
  s.part = s.res + MET_DEV_MAX_ROWS * kChunk;
  s.head = reinterpret_cast<u16*>(s.part + MET_INTERP_WARPS * 256);
  s.xn = s.head + MET_INTERP_WARPS * MET_GEMV_HEAD_DIMS;
  return s;
}

// kF16: fp16 operands (the fp8 loop on staged activations), else bf16.
template <bool kF16 = false>
__device__ __forceinline__ void mma_pair(float d[4], const uint4& wa, const uint4& wb, const uint4& xa) {
  const uint32_t a0[4] = {wa.x, wb.x, wa.y, wb.y}, b0[2] = {xa.x, xa.y};
  const uint32_t a1[4] = {wa.z, wb.z, wa.w, wb.w}, b1[2] = {xa.z, xa.w};
  if constexpr (kF16) {
    met_mma_f16_16816(d, a0, b0);
    met_mma_f16_16816(d, a1, b1);
  } else {
    met_mma_bf16_16816(d, a0, b0);
    met_mma_bf16_16816(d, a1, b1);
  }
}

// A warp's two D fragments of `tile` (16 weight rows): [0],[1] at (weight row g, act rows 2t,
// 2t+1), [2],[3] at weight row g + 8; acc1 holds act rows 8-15. To res when the K sweep is whole
// (ks == 1), else to the warp's partial tile.
__device__ __forceinline__ void gemv_store_tile(const float (&acc0)[4], const float (&acc1)[4], int tile, int n, int R, int ks,
                                                GemvSmem sm) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  if (ks == 1) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int m = tile * 16 + g + (e >= 2 ? 8 : 0), r0 = 2 * t + (e & 1);
      if (m < n && r0 < R) sm.res[r0 * kChunk + m] = acc0[e];
      if (m < n && r0 + 8 < R) sm.res[(r0 + 8) * kChunk + m] = acc1[e];
    }
  } else {
    float* p = sm.part + warp * 256;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int m = g + (e >= 2 ? 8 : 0), r0 = 2 * t + (e & 1);
      p[m * 16 + r0] = acc0[e];
      p[m * 16 + r0 + 8] = acc1[e];
    }
  }
}

// The partial tiles of a K sweep cut in ks parts summed into res (in part order), then the
// block's barrier: res holds the chunk.
__device__ __forceinline__ void gemv_sum_parts(int tiles, int ks, int n, int R, GemvSmem sm) {
  if (ks > 1) {
    __syncthreads();
    for (int i = threadIdx.x; i < tiles * 256; i += MET_INTERP_THREADS) {
      const int tile = i / 256, m = (i % 256) / 16, r0 = i % 16;
      if (tile * 16 + m >= n || r0 >= R) continue;
      float sum = 0.f;
      for (int kp = 0; kp < ks; ++kp) sum += sm.part[(tile * ks + kp) * 256 + m * 16 + r0];
      sm.res[r0 * kChunk + tile * 16 + m] = sum;
    }
  }
  __syncthreads();
}

// The matrix weight a gemv-family op reads: bf16, or fp8 e4m3 codes with f32 block scales
// (MetDevInstr w_format, w_scales; a weight's value is code x its block's scale, as the cpu's
// weight_row decodes it).
struct GemvW {
  const void* w;
  bool fp8;
  const float* scales;     // row block rb, K block kb: scales[rb * scale_cols + kb]
  int64_t block_rows;
  uint32_t kb_shift;       // the scale column of 64-wide K block b is b >> kb_shift
  int64_t scale_cols;
};
__device__ __forceinline__ GemvW gemv_weight(const MetDevInstr& in, const void* w) {
  GemvW v;
  v.w = w;
  v.fp8 = in.w_format == MET_DEV_WEIGHT_FP8_E4M3;
  v.scales = reinterpret_cast<const float*>(in.w_scales);
  v.block_rows = in.w_block_rows > 0 ? in.w_block_rows : 1;
  v.kb_shift = in.w_kb_shift;
  v.scale_cols = in.w_scale_cols;
  return v;
}

// bf16 weights: the accumulators of weight rows a, b (rows g and g + 8 of a tile) against
// activation rows x0, x1 (null past R) over 32-wide K blocks [b0, b1). Thread t reads 8 consecutive
// K of each 32 with one 16-byte load, weights and activations alike: pa, pb are the thread's first
// 8 weights of its rows, the next block's kWStep elements on (32 in the row layout; a bench's
// fragment-ordered copy lays blocks out otherwise).
template <int kWStep = 32>
__device__ __forceinline__ void gemv_tile_bf16(const u16* pa, const u16* pb, const u16* x0, const u16* x1, int R, int64_t b0,
                                               int64_t b1, float (&acc0)[4], float (&acc1)[4]) {
  const int t = threadIdx.x % 4;
  if (x0) x0 += 8 * t;
  if (x1) x1 += 8 * t;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  int64_t b = b0;
  for (; b + 8 <= b1; b += 8) {
    uint4 wa[8], wb[8], xa[8], xb[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      wa[u] = load_weight16(pa + (b + u) * kWStep);
      wb[u] = load_weight16(pb + (b + u) * kWStep);
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      xa[u] = x0 ? *reinterpret_cast<const uint4*>(x0 + (b + u) * 32) : zero;
      xb[u] = x1 ? *reinterpret_cast<const uint4*>(x1 + (b + u) * 32) : zero;
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      mma_pair(acc0, wa[u], wb[u], xa[u]);
      if (R > 8) mma_pair(acc1, wa[u], wb[u], xb[u]);
    }
  }
  for (; b < b1; ++b) {
    const uint4 wa = load_weight16(pa + b * kWStep), wb = load_weight16(pb + b * kWStep);
    const uint4 xa = x0 ? *reinterpret_cast<const uint4*>(x0 + b * 32) : zero;
    const uint4 xb = x1 ? *reinterpret_cast<const uint4*>(x1 + b * 32) : zero;
    mma_pair(acc0, wa, wb, xa);
    if (R > 8) mma_pair(acc1, wa, wb, xb);
  }
}

// The items of a chunk: tiles of 16 weight rows, each split over ks parts of K so that few tiles
// still keep every warp busy.
__device__ __forceinline__ int gemv_ksplit(int tiles) {
  int ks = 1;
  while (ks * 2 * tiles <= MET_INTERP_WARPS) ks *= 2;
  return ks;
}

#if MET_HAS_MMA_SYNC  // fp8 weights: the e4m3 conversions are NVIDIA's (common/interp/prims.cuh)
// One K block of fp8 weights against one group of 8 activation rows (x null: rows past R): the
// block's products into fresh accumulators, then each weight row's (D [0],[1]: row g; [2],[3]:
// row g + 8) scaled and added. kF16: codes and activations as fp16 (below), else bf16.
template <bool kF16>
__device__ __forceinline__ void gemv_fp8_fold(const uint4& alo, const uint4& ahi, const uint4& blo, const uint4& bhi, bool hi,
                                              const u16* x, int64_t k, float s_a, float s_b, float (&acc)[4]) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
  float p[4] = {0.f, 0.f, 0.f, 0.f};
  mma_pair<kF16>(p, alo, blo, x ? *reinterpret_cast<const uint4*>(x + k) : zero);
  if (hi) mma_pair<kF16>(p, ahi, bhi, x ? *reinterpret_cast<const uint4*>(x + k + 8) : zero);
#pragma unroll
  for (int e = 0; e < 4; ++e) acc[e] += (e < 2 ? s_a : s_b) * p[e];
}

// fp8 weights, one K block: the tensor cores take the codes as bf16 (exact) against the bf16
// activations, and each weight row's partial sum is then scaled by its block's scale and added in
// fp32: the cpu's sum of x * (code * scale) reassociated, with no rounding of the weight. `alo`,
// `ahi` (row g) and `blo`, `bhi` (row g + 8) hold the thread's K, `k` where its activations start;
// a 32-wide block (the tail of K % 64 == 32) has no hi half.
template <bool kF16>
__device__ __forceinline__ void gemv_fp8_block(const uint4& alo, const uint4& ahi, const uint4& blo, const uint4& bhi, bool hi,
                                               const u16* x0, const u16* x1, int64_t k, int R, float s_a, float s_b,
                                               float (&acc0)[4], float (&acc1)[4]) {
  gemv_fp8_fold<kF16>(alo, ahi, blo, bhi, hi, x0, k, s_a, s_b, acc0);
  if (R > 8) gemv_fp8_fold<kF16>(alo, ahi, blo, bhi, hi, x1, k, s_a, s_b, acc1);
}

// 16 e4m3 codes as the fold's operands: fp16 (exact, one conversion per two codes from sm_89 on)
// or bf16 (exact, through floats).
template <bool kF16>
__device__ __forceinline__ void fp8_operands(const uint4& v, uint4& lo, uint4& hi) {
  if constexpr (kF16)
    fp8x16_to_f16(v, lo, hi);
  else
    fp8x16_to_bf16(v, 1.f, lo, hi);
}

// fp8 weights: weight rows ra, rb (of a [*, K] code matrix) over 64-wide K blocks [b0, b1), then the
// 32-wide tail when `tail`. Thread t reads 16 consecutive K of each 64 with one 16-byte load (16
// weights, half the bf16 body's bytes per load; the same 8 loads of each row in flight) and the
// matching 16 activations as two.
//
// kF16 (x staged by gemv_stage_f16, inv_s its rows' scales): the codes go to the tensor cores as
// fp16, one conversion instruction per two codes, against the bf16 operands' conversion through
// floats and back, which left the fp8 gemv issue-bound (Qwen3-8B fp8-block128 on the H200, decode
// C=1: 5.27 ms a step, 4.57 of it gemv for 8.2 GB); at the end each output is multiplied by its
// activation row's 1 / scale, a power of two (exact).
template <bool kF16>
__device__ __forceinline__ void gemv_tile_fp8(const GemvW& w, int64_t K, int64_t ra, int64_t rb, const u16* x0, const u16* x1,
                                              int R, int64_t b0, int64_t b1, bool tail, const float* inv_s, float (&acc0)[4],
                                              float (&acc1)[4]) {
  const int t = threadIdx.x % 4;
  const unsigned char* W8 = static_cast<const unsigned char*>(w.w);
  const unsigned char* pa = W8 + ra * K + 16 * t;
  const unsigned char* pb = W8 + rb * K + 16 * t;
  const float* sa = w.scales + (ra / w.block_rows) * w.scale_cols;
  const float* sb = w.scales + (rb / w.block_rows) * w.scale_cols;
  int64_t b = b0;
  for (; b + 8 <= b1; b += 8) {
    uint4 qa[8], qb[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      qa[u] = load_weight16(pa + (b + u) * 64);
      qb[u] = load_weight16(pb + (b + u) * 64);
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      uint4 alo, ahi, blo, bhi;
      fp8_operands<kF16>(qa[u], alo, ahi);
      fp8_operands<kF16>(qb[u], blo, bhi);
      const int64_t kb = (b + u) >> w.kb_shift;
      gemv_fp8_block<kF16>(alo, ahi, blo, bhi, true, x0, x1, (b + u) * 64 + 16 * t, R, __ldg(sa + kb), __ldg(sb + kb), acc0, acc1);
    }
  }
  for (; b < b1; ++b) {
    uint4 alo, ahi, blo, bhi;
    fp8_operands<kF16>(load_weight16(pa + b * 64), alo, ahi);
    fp8_operands<kF16>(load_weight16(pb + b * 64), blo, bhi);
    const int64_t kb = b >> w.kb_shift;
    gemv_fp8_block<kF16>(alo, ahi, blo, bhi, true, x0, x1, b * 64 + 16 * t, R, __ldg(sa + kb), __ldg(sb + kb), acc0, acc1);
  }
  if (tail) {  // K % 64 == 32: 8 codes per thread from the row's last 32
    const int64_t k = (K / 64) * 64;
    const uint2 ca = __ldg(reinterpret_cast<const uint2*>(W8 + ra * K + k + 8 * t));
    const uint2 cb = __ldg(reinterpret_cast<const uint2*>(W8 + rb * K + k + 8 * t));
    uint4 alo, blo, unused;
    fp8_operands<kF16>(make_uint4(ca.x, ca.y, 0, 0), alo, unused);
    fp8_operands<kF16>(make_uint4(cb.x, cb.y, 0, 0), blo, unused);
    const int64_t kb = (K / 64) >> w.kb_shift;
    gemv_fp8_block<kF16>(alo, unused, blo, unused, false, x0, x1, k + 8 * t, R, __ldg(sa + kb), __ldg(sb + kb), acc0, acc1);
  }
  if constexpr (kF16) {
    // D [0],[1] hold act rows 2t, 2t + 1 ([2],[3] the same rows of weight row g + 8); acc1 rows 8 on.
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = 2 * t + (e & 1);
      acc0[e] *= r < R ? inv_s[r] : 0.f;
      acc1[e] *= r + 8 < R ? inv_s[r + 8] : 0.f;
    }
  }
}

// The most rows a slice of the instruction carries (the host's rule, src/interp/cuda_backend.cpp):
// what shared memory was sized for, so every slice of an instruction takes the same path.
__device__ __forceinline__ int64_t gemv_rows_per_slice(const MetDevInstr& in) {
  const int64_t cols = in.col_parts > 0 ? in.col_parts : 1;
  const int64_t parts = max(static_cast<int64_t>(1), static_cast<int64_t>(in.slices) / cols);
  return (in.ints[0] + parts - 1) / parts;
}

// Rows [0, R) of x (K apart, 16-byte aligned; global or shared memory, xh itself for in place) to xh
// (K apart) as fp16 times 2^e_r, e_r chosen so that the row's largest magnitude lands in [2^14,
// 2^15): the fp16 of each value is exact down to 2^-28 of that magnitude (fp16 keeps 11 bits over
// 30 binades; bf16 has 8), no value overflows, and inv_s[r] = 2^-e_r undoes it exactly. A row
// holding inf or NaN keeps them. Warps split rows as rmsnorm_rows_to_smem does; each thread copies
// and then converts the same words. Block-uniform; ends with a barrier. Scratch: sm.part.
__device__ void gemv_stage_f16(const u16* x, int R, int64_t K, u16* xh, float* inv_s, GemvSmem sm) {
  constexpr int kWarps = MET_INTERP_THREADS / MET_WARP;
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  const int groups = min(R, kWarps), G = kWarps / groups;
  const int grp = warp / G, sub = warp % G;
  const int64_t n = K / 8, i0 = sub * n / G, i1 = (sub + 1) * n / G;  // this warp's 16-byte words of a row
  unsigned* top = reinterpret_cast<unsigned*>(sm.part);                // [row][G] largest |bf16| bits
  if (grp < groups)
    for (int r = grp; r < R; r += groups) {
      unsigned m = 0;
      for (int64_t i = i0 + lane; i < i1; i += MET_WARP) {
        const uint4 v = *reinterpret_cast<const uint4*>(x + r * K + i * 8);
        if (xh != x) *reinterpret_cast<uint4*>(xh + r * K + i * 8) = v;
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) m = max(m, max(w[k] & 0x7fffu, (w[k] >> 16) & 0x7fffu));
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
      if (lane == 0) top[r * G + sub] = m;
    }
  __syncthreads();
  if (grp < groups)
    for (int r = grp; r < R; r += groups) {
      unsigned m = 0;
      for (int k = 0; k < G; ++k) m = max(m, top[r * G + k]);
      // The largest magnitude is below 2^(e - 126) for bf16 exponent field e: scale by 2^(141 - e).
      const int e = static_cast<int>(m >> 7), se = min(126, max(-126, 141 - e));
      const float sc = __int_as_float((se + 127) << 23);
      if (sub == 0 && lane == 0) inv_s[r] = __int_as_float((127 - se) << 23);
      for (int64_t i = i0 + lane; i < i1; i += MET_WARP) {
        uint4* p = reinterpret_cast<uint4*>(xh + r * K + i * 8);
        float f[8];
        unpack8(*p, f);
        uint32_t o[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const __half2 h = __floats2half2_rn(f[2 * k] * sc, f[2 * k + 1] * sc);  // .x (lower K) in the low half
          o[k] = *reinterpret_cast<const uint32_t*>(&h);
        }
        *p = make_uint4(o[0], o[1], o[2], o[3]);
      }
    }
  __syncthreads();
}

// res[r * kChunk + j] = x[r] . W[w0 + j] for r < R, j < n (n <= kChunk); W is [*, K] bf16 (32-wide
// K blocks) or, kFp8, e4m3 with its scales (64-wide K blocks, the last k part taking the 32-wide
// tail of K % 64 == 32); K % 32 == 0; x rows are `xs` elements apart (global or shared memory).
// Block-uniform call.
// With kFp8 and inv_s, x holds the rows staged by gemv_stage_f16 (the fp16 tensor-core loop).
template <bool kFp8>
__device__ void gemv_chunk_t(const GemvW& W, int64_t K, int64_t w0, int n, const u16* x, int64_t xs, int R, GemvSmem sm,
                             const float* inv_s = nullptr) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int tiles = (n + 15) / 16, ks = gemv_ksplit(tiles);
  const int64_t nb = kFp8 ? K / 64 : K / 32;
  for (int item = warp; item < tiles * ks; item += MET_INTERP_WARPS) {
    const int tile = item / ks, kp = item % ks;
    const int ra = min(tile * 16 + g, n - 1), rb = min(tile * 16 + g + 8, n - 1);
    const u16* x0 = g < R ? x + g * xs : nullptr;
    const u16* x1 = g + 8 < R ? x + (g + 8) * xs : nullptr;
    float acc0[4] = {0.f, 0.f, 0.f, 0.f}, acc1[4] = {0.f, 0.f, 0.f, 0.f};
    if constexpr (kFp8) {
      if (inv_s)
        gemv_tile_fp8<true>(W, K, w0 + ra, w0 + rb, x0, x1, R, kp * nb / ks, (kp + 1) * nb / ks, kp == ks - 1 && K % 64 != 0,
                            inv_s, acc0, acc1);
      else
        gemv_tile_fp8<false>(W, K, w0 + ra, w0 + rb, x0, x1, R, kp * nb / ks, (kp + 1) * nb / ks, kp == ks - 1 && K % 64 != 0,
                             nullptr, acc0, acc1);
    } else {
      const u16* w16 = static_cast<const u16*>(W.w);
      gemv_tile_bf16(w16 + (w0 + ra) * K + 8 * t, w16 + (w0 + rb) * K + 8 * t, x0, x1, R, kp * nb / ks, (kp + 1) * nb / ks,
                     acc0, acc1);
    }
    gemv_store_tile(acc0, acc1, tile, n, R, ks, sm);
  }
  gemv_sum_parts(tiles, ks, n, R, sm);
}

// res[r * kChunk + j] = x[r] . W[w0 + j] for r < R, j < n (n <= kChunk), W bf16 or fp8 with its
// scales; K % 32 == 0. Block-uniform call.
__device__ __forceinline__ void gemv_chunk(const GemvW& W, int64_t K, int64_t w0, int n, const u16* x, int64_t xs, int R,
                                           GemvSmem sm, const float* inv_s = nullptr) {
  if (W.fp8)
    gemv_chunk_t<true>(W, K, w0, n, x, xs, R, sm, inv_s);
  else
    gemv_chunk_t<false>(W, K, w0, n, x, xs, R, sm);
}
#endif  // MET_HAS_MMA_SYNC

// xn[r] = bf16(bf16(x[r] * inv_rms(x[r])) * w) (rms_scale), or Gemma's bf16(x[r] * inv_rms(x[r]) *
// (offset + w)) (nk.once), for the slice's rows, in shared memory. Rows go to groups of warps (8 / R warps per row up to 8 rows, one warp per row beyond): each warp sums the
// squares of its part of a row with 16-byte loads, the group's partials meet in sm.red after one
// barrier, and the same warps write their part of xn. One block-wide reduction per row, as
// before, cost about 4.5 us more per instruction than o and down at one row and 22 us at 16 on the
// H200 (perf-data/h200-sxm/20261201T1400Z-gemv-balance); by groups of warps the Llama-3.1-8B step
// went from 5.74 to 5.57 ms at C=1 and from 10.81 to 10.12 ms at C=16
// (perf-data/h200-sxm/20261201T1700Z-norm-warps).
__device__ void rmsnorm_rows_to_smem(const u16* x, const u16* w, int64_t K, int R, NormKind nk, GemvSmem sm) {
  constexpr int kWarps = MET_INTERP_THREADS / MET_WARP;
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  const int groups = min(R, kWarps), G = kWarps / groups;  // R * G <= max(R, kWarps) <= 64
  const int grp = warp / G, sub = warp % G;
  const bool vec = aligned16(x) && aligned16(w) && K % 8 == 0;
  const int64_t n = vec ? K / 8 : K, i0 = sub * n / G, i1 = (sub + 1) * n / G;  // this warp's words (or values)
  if (grp < groups)
    for (int r = grp; r < R; r += groups) {
      const u16* xr = x + r * K;
      float ss = 0.f;
      if (vec) {
#pragma unroll 4
        for (int64_t i = i0 + lane; i < i1; i += MET_WARP) {
          float f[8];
          unpack8(*reinterpret_cast<const uint4*>(xr + i * 8), f);
#pragma unroll
          for (int e = 0; e < 8; ++e) ss += f[e] * f[e];
        }
      } else {
        for (int64_t i = i0 + lane; i < i1; i += MET_WARP) {
          const float f = bf(xr[i]);
          ss += f * f;
        }
      }
      ss = met_warp_reduce(ss);
      if (lane == 0) sm.red[r * G + sub] = ss;
    }
  __syncthreads();
  if (grp < groups)
    for (int r = grp; r < R; r += groups) {
      float ss = 0.f;
      for (int k = 0; k < G; ++k) ss += sm.red[r * G + k];  // fixed order
      const float inv = 1.0f / sqrtf(ss / static_cast<float>(K) + nk.eps);
      const u16* xr = x + r * K;
      u16* o = sm.xn + r * K;
      if (vec) {
#pragma unroll 4
        for (int64_t i = i0 + lane; i < i1; i += MET_WARP) {
          float f[8], g[8];
          unpack8(*reinterpret_cast<const uint4*>(xr + i * 8), f);
          unpack8(load_weight16(w + i * 8), g);
#pragma unroll
          for (int e = 0; e < 8; ++e) f[e] = rms_scale_kind(f[e], inv, g[e], nk);
          *reinterpret_cast<uint4*>(o + i * 8) = pack8(f);
        }
      } else {
        for (int64_t i = i0 + lane; i < i1; i += MET_WARP) o[i] = to_bf(rms_scale_kind(bf(xr[i]), inv, bf(w[i]), nk));
      }
    }
  __syncthreads();
}

#if MET_HAS_MMA_SYNC
// What a gemv-family op does with each output value. f32: the fp32 sum itself, unrounded, into an
// f32 `y` (gemv_f32, a row-parallel projection's partial sums under tensor parallelism).
enum class GemvOut { plain, residual, silu, gelu, lm_head, bias, f32, bias_f32 };

// One slice of a gemv-family op: rows [rr) of x (row stride K = w_cols, first row in_row0) against
// the output rows [c) of W (gate_up: N = w_rows / 2 gate rows, then as many up rows); `norm_w`
// (normed ops) folds an RMSNorm of x in first; `bias` (GemvOut::bias) is added to each fp32 product
// before its one rounding.
// One out-of-line copy serves every gemv-family op; kOut is a runtime value. Inlined into each op's
// entry, the interpreter's code grew from 485 to 737 KB and the family ran 5-8% slower on the H200
// (Llama-3.2-1B decode C=1 1.867 ms against 1.773 ms out of line, same call; perf-data/h200-sxm/
// README.md), the instruction fetch of a loop that changes body every few microseconds.
// The weight's shape and format are read from the instruction (global memory): a reference to the
// caller's MetGeom puts the fields read through it in the loop kernel's local memory.
__device__ __noinline__ void gemv_slice(GemvOut kOut, const MetDevInstr* in, SliceRange rr, SliceRange c, const u16* x_in,
                                        int64_t in_row0, const u16* norm_w, NormKind nk, const u16* W, u16* y, int* tokens,
                                        float cap, const u16* bias, unsigned char* smem) {
  const GemvSmem sm = gemv_smem(smem);
  const int R = static_cast<int>(rr.end - rr.begin);
  const int64_t K = in->w_cols;
  const bool gate_up = kOut == GemvOut::silu || kOut == GemvOut::gelu;
  const int64_t N = gate_up ? in->w_rows / 2 : in->w_rows;
  const u16* x = x_in + (in_row0 + rr.begin) * K;
  const GemvW gw = gemv_weight(*in, W);
  if (R <= 0 || c.begin >= c.end) return;
  if (norm_w) {
    rmsnorm_rows_to_smem(x, norm_w, K, R, nk, sm);
    x = sm.xn;
  }
  // fp8 weights: the rows as scaled fp16 for the fp16 tensor cores, in place of the normalised ones
  // or, when the instruction's slices fit (the host sizes shared memory by the same rule), copied in
  // there; their scales
  // in sm.red, which nothing else uses until the lm_head's argmax.
  const float* inv_s = nullptr;
  const int64_t rmax = gemv_rows_per_slice(*in);
  if (gw.fp8 && aligned16(x) && rmax <= MET_GEMV_FP8_F16_MAX_ROWS && (norm_w || rmax * K * 2 <= MET_GEMV_FP8_STAGE_MAX)) {
    gemv_stage_f16(x, R, K, sm.xn, sm.red, sm);
    x = sm.xn;
    inv_s = sm.red;
  }
  const int width = gate_up ? kChunk / 2 : kChunk;
  for (int64_t c0 = c.begin; c0 < c.end; c0 += width) {
    const int n = static_cast<int>(min(static_cast<int64_t>(width), c.end - c0));
    gemv_chunk(gw, K, c0, n, x, K, R, sm, inv_s);
    if (gate_up) {
      // gate values stay in res[.., 0..n); the up rows go to res[.., 128..128+n).
      GemvSmem up = sm;
      up.res = sm.res + kChunk / 2;
      gemv_chunk(gw, K, N + c0, n, x, K, R, up, inv_s);
    }
    for (int i = threadIdx.x; i < R * n; i += MET_INTERP_THREADS) {
      const int r = i / n, j = i % n;
      const float v = sm.res[r * kChunk + j];
      const int64_t col = c0 + j, row = rr.begin + r;
      if (kOut == GemvOut::plain) {
        y[row * N + col] = to_bf(v);
      } else if (kOut == GemvOut::f32) {
        reinterpret_cast<float*>(y)[row * N + col] = v;
      } else if (kOut == GemvOut::bias) {
        y[row * N + col] = to_bf(v + bf(bias[col]));
      } else if (kOut == GemvOut::bias_f32) {
        reinterpret_cast<float*>(y)[row * N + col] = bias ? v + bf(bias[col]) : v;
      } else if (kOut == GemvOut::residual) {
        u16* o = y + row * N + col;
        *o = to_bf(bf(*o) + bf(to_bf(v)));
      } else if (gate_up) {
        const float gt = bf(to_bf(v)), u = bf(to_bf(sm.res[r * kChunk + kChunk / 2 + j]));
        y[row * N + col] = to_bf(gated_act(gt, u, kOut == GemvOut::gelu));
      } else {  // lm_head: logits (bf16), capped when asked
        float lg = bf(to_bf(v));
        if (cap != 0.f) lg = bf(to_bf(cap * tanhf(lg / cap)));
        sm.res[r * kChunk + j] = lg;
        if (y) y[row * N + col] = to_bf(lg);
      }
    }
    __syncthreads();
  }
  if (kOut == GemvOut::lm_head && tokens) {  // only when the slice holds the whole vocabulary (emit's rule)
    for (int r = 0; r < R; ++r) {
      const int t = argmax_block(y + (rr.begin + r) * N, N, sm.red, reinterpret_cast<int*>(sm.red + 32));
      if (threadIdx.x == 0) tokens[rr.begin + r] = t;
      __syncthreads();
    }
  }
}

MET_ENTRY(gemv) {
  const SliceRange c = slice_cols(a, slice, a.geom.w_rows);
  gemv_slice(GemvOut::plain, a.geom.instr, slice_rows(a, slice), c, a.x, a.in_row0, nullptr, NormKind{}, a.w, a.y, nullptr, 0.f, nullptr,
             smem);
}

// The same slice with fp32 outputs (y is f32: gemv_slice's one `y` parameter carries it, and only
// the f32 store reads it as floats).
MET_ENTRY(gemv_f32) {
  const SliceRange c = slice_cols(a, slice, a.geom.w_rows);
  gemv_slice(GemvOut::f32, a.geom.instr, slice_rows(a, slice), c, a.x, a.in_row0, nullptr, NormKind{}, a.w,
             reinterpret_cast<u16*>(a.y), nullptr, 0.f, nullptr, smem);
}

MET_ENTRY(gemv_bias) {
  const SliceRange c = slice_cols(a, slice, a.geom.w_rows);
  gemv_slice(GemvOut::bias, a.geom.instr, slice_rows(a, slice), c, a.x, a.in_row0, nullptr, NormKind{}, a.w, a.y, nullptr, 0.f, a.b,
             smem);
}

// Tensor parallelism: a rank's share of a biased row-parallel projection, fp32, with the bias on the
// first rank (b absent on the others).
MET_ENTRY(gemv_bias_f32) {
  const SliceRange c = slice_cols(a, slice, a.geom.w_rows);
  gemv_slice(GemvOut::bias_f32, a.geom.instr, slice_rows(a, slice), c, a.x, a.in_row0, nullptr, NormKind{}, a.w,
             reinterpret_cast<u16*>(a.y), nullptr, 0.f, a.b, smem);
}

MET_ENTRY(gemv_o_residual) {
  const SliceRange c = slice_cols(a, slice, a.geom.w_rows);
  gemv_slice(GemvOut::residual, a.geom.instr, slice_rows(a, slice), c, a.attn, a.in_row0, nullptr, NormKind{}, a.w_o, a.x, nullptr, 0.f,
             nullptr, smem);
}

MET_ENTRY(gemv_down_residual) {
  const SliceRange c = slice_cols(a, slice, a.geom.w_rows);
  gemv_slice(GemvOut::residual, a.geom.instr, slice_rows(a, slice), c, a.h, a.in_row0, nullptr, NormKind{}, a.w_down, a.x, nullptr, 0.f,
             nullptr, smem);
}

MET_ENTRY(gemv_rmsnorm_gate_up_silu) {
  const SliceRange c = slice_cols(a, slice, a.geom.w_rows / 2);
  gemv_slice(GemvOut::silu, a.geom.instr, slice_rows(a, slice), c, a.x, a.in_row0, a.norm_w, norm_kind(a), a.w_gate_up, a.out, nullptr,
                            0.f, nullptr, smem);
}

MET_ENTRY(gemv_rmsnorm_gate_up_gelu) {
  const SliceRange c = slice_cols(a, slice, a.geom.w_rows / 2);
  gemv_slice(GemvOut::gelu, a.geom.instr, slice_rows(a, slice), c, a.x, a.in_row0, a.norm_w, norm_kind(a), a.w_gate_up, a.out, nullptr,
                            0.f, nullptr, smem);
}

MET_ENTRY(gemv_rmsnorm_lm_head_argmax) {
  const SliceRange c = slice_cols(a, slice, a.geom.w_rows);
  gemv_slice(GemvOut::lm_head, a.geom.instr, slice_rows(a, slice), c, a.x, a.in_row0, a.norm_w, norm_kind(a), a.w_lm_head, a.logits,
                               a.tokens, 0.f, nullptr, smem);
}

MET_ENTRY(gemv_rmsnorm_lm_head_softcap_argmax) {
  const SliceRange c = slice_cols(a, slice, a.geom.w_rows);
  gemv_slice(GemvOut::lm_head, a.geom.instr, slice_rows(a, slice), c, a.x, a.in_row0, a.norm_w, norm_kind(a), a.w_lm_head, a.logits,
                               a.tokens, a.cap, nullptr, smem);
}

// Arrival counters of the fused qkv ops: one per (row part, head), counting the unit_rows-row
// units of the head that slices have written. They only grow (64 bits never wrap): the slice whose
// arrival brings a head's count to a multiple of its units finishes that head. Instructions that
// share them are ordered by their data (each layer's qkv waits on the previous layer's).
__device__ unsigned long long met_qkv_arrivals[MET_QKV_MAX_COUNTERS];

// The rope table of a fused qkv slice's R rows: {cos, sin} of each row's position and each of the
// rot / 2 pairs in sm.res, the pairs' inverse frequencies in sm.part on the way (qkv_slice says why
// both have room). Every thread takes a share: one pow a pair, then one sincospi a row and pair. Out
// of line: inlined, the double-precision calls pushed the interpreter's dispatcher into local memory.
__device__ __noinline__ void qkv_rope_table(const float* table, float theta, int rot, const int* pos, int R, GemvSmem sm) {
  const int half = rot / 2;
  double* inv_freq = reinterpret_cast<double*>(sm.part);
  for (int i = threadIdx.x; i < half; i += MET_INTERP_THREADS) inv_freq[i] = rope_inv_freq(i, rot, theta, table);
  __syncthreads();
  for (int i = threadIdx.x; i < R * half; i += MET_INTERP_THREADS)
    rope_cs_at(inv_freq[i % half], pos[i / half], sm.res[2 * i], sm.res[2 * i + 1]);
  __syncthreads();
}

// rmsnorm -> qkv over output rows [u0, u1) * unit_rows -> [q/k norm] -> rope -> q out, K/V to the
// cache slot. qn / kn (the q and k norm weights) are null for the plain rope op; vn: V heads take a
// weightless norm (Gemma-4's v_norm).
// Each slice writes its rows (bf16, before norm and rope) where they belong; a q or k head (and a v
// head under vn) is then normalised and rotated in place by the slice that completes it (its arrival
// counter), reading the other slices' rows through L2. Otherwise v rows are final as written.
// kFp8: the weight is fp8 (the out-of-line copy below); otherwise bf16.
template <bool kFp8, class A>
__device__ __forceinline__ void qkv_slice(const A& a, const u16* qn, const u16* kn, bool vn, uint32_t s, unsigned char* smem) {
  const GemvSmem sm = gemv_smem(smem);
  const SliceRange rr = slice_rows(a, s);
  const int R = static_cast<int>(rr.end - rr.begin);
  const int64_t K = a.geom.w_cols;
  const int heads = static_cast<int>(a.heads), kvh = static_cast<int>(a.kv_heads);
  const int hd = static_cast<int>(a.head_dim), rot = static_cast<int>(a.rotary_dim);
  const int64_t ur = a.unit_rows, per_head = hd / ur;  // the host holds unit_rows | head_dim
  const SliceRange u = slice_cols(a, s, (heads + 2 * kvh) * per_head);
  if (R <= 0 || u.begin >= u.end) return;
  const int64_t n0 = u.begin * ur, n1 = u.end * ur;  // output rows of the fused weight
  const u16* x = a.x + (a.in_row0 + rr.begin) * K;
  const NormKind nk = norm_kind(a);
  rmsnorm_rows_to_smem(x, a.norm_w, K, R, nk, sm);
  const bool f16 = kFp8 && gemv_rows_per_slice(*a.geom.instr) <= MET_GEMV_FP8_F16_MAX_ROWS;
  if (f16) gemv_stage_f16(sm.xn, R, K, sm.xn, sm.red, sm);  // as gemv_slice stages them
  const int* pos = a.positions;
  const int64_t* slots = a.slots;
  const int64_t kw = static_cast<int64_t>(kvh) * hd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Where element i of head unit h lands for row `row`.
  auto dst = [&](int64_t h, int64_t row) -> u16* {
    return h < heads ? a.q_out + row * heads * hd + h * hd
           : h < heads + kvh ? a.k_cache + slots[row] * kw + (h - heads) * hd
                             : a.v_cache + slots[row] * kw + (h - heads - kvh) * hd;
  };
  for (int64_t c0 = n0; c0 < n1; c0 += kChunk) {
    const int n = static_cast<int>(min(static_cast<int64_t>(kChunk), n1 - c0));
    gemv_chunk_t<kFp8>(gemv_weight(*a.geom.instr, a.w_qkv), K, c0, n, sm.xn, K, R, sm, f16 ? sm.red : nullptr);
    for (int i = threadIdx.x; i < R * n; i += MET_INTERP_THREADS) {
      const int r = i / n, j = i % n;
      const int64_t m = c0 + j;
      dst(m / hd, rr.begin + r)[m % hd] = to_bf(sm.res[r * kChunk + j]);
    }
    __syncthreads();
  }
  // Arrivals for the q and k heads (and v heads under vn) the slice touched, 64 at a time; then finish
  // the completed ones.
  const int64_t finished = heads + kvh + (vn ? kvh : 0);
  const int64_t h_first = n0 / hd, h_end = min(finished, (n1 - 1) / hd + 1);
  const int64_t counter0 = static_cast<int64_t>(s / a.geom.col_parts) * finished;  // the host bounds it
  int* done = reinterpret_cast<int*>(sm.red);
  // The rope table lives where the chunk results were (R <= MET_DEV_MAX_ROWS rows of rot / 2 pairs,
  // rot <= hd <= MET_GEMV_HEAD_DIMS: R * rot floats), the pairs' inverse frequencies in the k-split
  // partials (rot / 2 doubles); nothing reads either after the chunks.
  static_assert(MET_GEMV_HEAD_DIMS <= kChunk && MET_GEMV_HEAD_DIMS / 2 * sizeof(double) <= MET_INTERP_WARPS * 256 * sizeof(float),
                "rope table room");
  const int half = rot / 2;
  const float* cs = sm.res;
  bool have_cs = false;
  for (int64_t hb = h_first; hb < h_end; hb += 64) {
    const int nb = static_cast<int>(min(static_cast<int64_t>(64), h_end - hb));
    if (threadIdx.x < nb) {
      const int64_t h = hb + threadIdx.x;
      const int64_t mine = (min(n1, (h + 1) * hd) - max(n0, h * hd)) / ur;
      bool complete = mine == per_head;
      if (!complete) {
        const unsigned long long old = atom_add_acq_rel(met_qkv_arrivals + counter0 + h, static_cast<unsigned long long>(mine));
        complete = (old + mine) % per_head == 0;
      }
      done[threadIdx.x] = complete ? 1 : 0;
    }
    __syncthreads();
    // The rows' cos and sin, the first time a q or k head completes here: every thread takes a share
    // of the pairs (one pow each, then one sincospi per row and pair), in place of each warp computing
    // them again for every head it rotates.
    if (!have_cs) {
      bool rotates = false;
      for (int j = 0; j < nb; ++j) rotates |= done[j] && hb + j < heads + kvh;
      if (rotates) {
        qkv_rope_table(a.inv_freq, a.theta, rot, pos + rr.begin, R, sm);
        have_cs = true;
      }
    }
    u16* hbuf = sm.head + warp * MET_GEMV_HEAD_DIMS;
    for (int item = warp; item < nb * R; item += MET_INTERP_WARPS) {
      const int j = item / R, r = item % R;
      if (!done[j]) continue;
      const int64_t h = hb + j, row = rr.begin + r;
      u16* d = dst(h, row);
      for (int i = lane; i < hd; i += 32) hbuf[i] = __ldcg(d + i);
      __syncwarp();
      if (h >= heads + kvh) {  // a v head (vn): x / rms(x), rounded once
        const float inv = inv_rms_warp(hbuf, hd, nk.eps);
        for (int i = lane; i < hd; i += 32) d[i] = to_bf(bf(hbuf[i]) * inv);
        __syncwarp();
        continue;
      }
      const u16* nw = h < heads ? qn : kn;
      if (nw) {
        const float inv = inv_rms_warp(hbuf, hd, nk.eps);
        for (int i = lane; i < hd; i += 32) hbuf[i] = to_bf(rms_scale_kind(bf(hbuf[i]), inv, bf(nw[i]), nk));
        __syncwarp();
      }
      rope_head_warp_cs(hbuf, rot, cs + 2 * r * half);
      __syncwarp();
      for (int i = lane; i < hd; i += 32) d[i] = hbuf[i];
      __syncwarp();
    }
    __syncthreads();
  }
}

// fp8 weights run out of line, reloading their arguments from the instruction (three parameters,
// nothing live after the call): inlined beside the bf16 copy, the interpreter's dispatcher spilled.
__device__ __noinline__ void qkv_rope_fp8(const MetDevInstr* in, uint32_t s, unsigned char* smem) {
  qkv_slice<true>(met_load_gemv_rmsnorm_qkv_rope(*in), nullptr, nullptr, false, s, smem);
}
__device__ __noinline__ void qkv_qknorm_rope_fp8(const MetDevInstr* in, uint32_t s, unsigned char* smem) {
  const MetArgs_gemv_rmsnorm_qkv_qknorm_rope a = met_load_gemv_rmsnorm_qkv_qknorm_rope(*in);
  qkv_slice<true>(a, a.q_norm_w, a.k_norm_w, a.v_norm != 0, s, smem);
}

MET_ENTRY(gemv_rmsnorm_qkv_rope) {
  if (a.geom.w_format == MET_DEV_WEIGHT_FP8_E4M3)
    qkv_rope_fp8(a.geom.instr, slice, smem);
  else
    qkv_slice<false>(a, nullptr, nullptr, false, slice, smem);
}

MET_ENTRY(gemv_rmsnorm_qkv_qknorm_rope) {
  if (a.geom.w_format == MET_DEV_WEIGHT_FP8_E4M3)
    qkv_qknorm_rope_fp8(a.geom.instr, slice, smem);
  else
    qkv_slice<false>(a, a.q_norm_w, a.k_norm_w, a.v_norm != 0, slice, smem);
}
#endif  // MET_HAS_MMA_SYNC

}  // namespace met_interp
