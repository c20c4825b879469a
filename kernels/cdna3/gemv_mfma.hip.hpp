// Decode/batch GEMV family on the CDNA matrix cores (rows <= MET_DEV_MAX_ROWS): the fused qkv,
// o/down + residual, gate_up + activation, lm_head and plain gemv, with the slices and the cpu
// body's roundings of kernels/common/gemv.cuh. A slice owns all rows of the rung and a range of
// output columns (head units for qkv), so each weight byte is read once per step.
//
// One 16 x 16 MFMA tile is 16 weight rows (A) against up to 16 activation rows (B), 32 k a step
// (cdna3/mfma.hip.hpp). The activations of normed ops are normalised as they are loaded
// (bf16(bf16(x * inv_rms) * w), the cpu's rounding: rms_scale), so LDS holds only results, never a copy of x:
// CDNA's 64 KiB of LDS could not hold 16 rows of a long reduction.
#pragma once
#include "cdna3/mfma.hip.hpp"
#include "common/interp/prims.cuh"

namespace met_interp {

#if MET_HAS_MFMA
constexpr int kMfmaWaves = MET_INTERP_THREADS / MET_WAVE;
constexpr int kMfmaCols = 256;  // output columns one pass computes (the res row length)

struct MfmaGemvLds {
  float res[MET_DEV_MAX_ROWS][kMfmaCols];
  float part[kMfmaWaves][16][16];  // k-split partial tiles: [weight row][activation row]
  float inv[MET_DEV_MAX_ROWS];     // 1 / rms of each row (normed ops)
  float red[64];
  u16 head[MET_INTERP_WARPS][256];  // one bf16 head per 32-lane warp (qkv)
};

// 8 activations of row x at k, as the B operand: normalised when norm_w is given.
__device__ __forceinline__ uint4 mfma_act8(const u16* x, int64_t k, const u16* norm_w, float inv, const NormKind& nk) {
  const uint4 v = *reinterpret_cast<const uint4*>(x + k);
  if (!norm_w) return v;
  float f[8], g[8];
  unpack8(v, f);
  unpack8(*reinterpret_cast<const uint4*>(norm_w + k), g);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = rms_scale_kind(f[i], inv, g[i], nk);
  return pack8(f);
}

// res[r][col0 + j] = x[r] . W[w0 + j] for r < R, j < n <= kMfmaCols; W is [*, K] bf16 with
// K % 32 == 0, x rows K apart. Wavefronts take 16-row tiles, splitting K when tiles are few.
// Block-uniform call; ends in a barrier.
__device__ __forceinline__ void mfma_gemv_cols(const u16* W, int64_t K, int64_t w0, int n, const u16* x, int R, const u16* norm_w,
                                               const NormKind& nk, MfmaGemvLds& lds, int col0) {
  const int wave = threadIdx.x / MET_WAVE, lane = threadIdx.x % MET_WAVE;
  const int m = lane % 16, q = lane / 16;  // operand row of this lane, and its 8-wide k chunk
  const int tiles = (n + 15) / 16;
  int ks = 1;
  while (ks * 2 * tiles <= kMfmaWaves) ks *= 2;
  const int64_t nb = K / 32;
  for (int item = wave; item < tiles * ks; item += kMfmaWaves) {
    const int tile = item / ks, kp = item % ks;
    const int64_t b0 = kp * nb / ks, b1 = (kp + 1) * nb / ks;
    const u16* pw = W + (w0 + min(tile * 16 + m, n - 1)) * K + 8 * q;
    const bool act = m < R;
    const u16* px = x + (act ? m : 0) * K + 8 * q;
    const u16* pn = norm_w ? norm_w + 8 * q : nullptr;
    const float inv = norm_w && act ? lds.inv[m] : 0.f;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    met_f32x4 acc = met_f32x4{};
    int64_t b = b0;
    for (; b + 4 <= b1; b += 4) {  // four 16-byte weight loads in flight per lane
      uint4 w[4], xv[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) w[u] = load_weight16(pw + (b + u) * 32);
#pragma unroll
      for (int u = 0; u < 4; ++u) xv[u] = act ? mfma_act8(px, (b + u) * 32, pn, inv, nk) : zero;
#pragma unroll
      for (int u = 0; u < 4; ++u) acc = met_mfma_16x16_k32(acc, w[u], xv[u]);
    }
    for (; b < b1; ++b) {
      const uint4 w = load_weight16(pw + b * 32);
      const uint4 xv = act ? mfma_act8(px, b * 32, pn, inv, nk) : zero;
      acc = met_mfma_16x16_k32(acc, w, xv);
    }
    // acc[v] = C[weight row 4q + v][activation row m]
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const int j = tile * 16 + 4 * q + v;
      if (ks == 1) {
        if (j < n && act) lds.res[m][col0 + j] = acc[v];
      } else {
        lds.part[item][4 * q + v][m] = acc[v];
      }
    }
  }
  if (ks > 1) {
    __syncthreads();
    for (int i = threadIdx.x; i < tiles * 256; i += MET_INTERP_THREADS) {
      const int tile = i / 256, wr = (i % 256) / 16, r = i % 16;
      if (tile * 16 + wr >= n || r >= R) continue;
      float sum = 0.f;
      for (int kp = 0; kp < ks; ++kp) sum += lds.part[tile * ks + kp][wr][r];  // fixed order
      lds.res[r][col0 + tile * 16 + wr] = sum;
    }
  }
  __syncthreads();
}

// 1 / rms of each of the R rows of x (K apart) into lds.inv.
__device__ __forceinline__ void mfma_row_inv_rms(const u16* x, int64_t K, int R, float eps, MfmaGemvLds& lds) {
  for (int r = 0; r < R; ++r) {
    const float inv = inv_rms_block(x + r * K, K, eps, lds.red);
    if (threadIdx.x == 0) lds.inv[r] = inv;
  }
  __syncthreads();
}

enum class MfmaGemvOut { plain, residual, silu, gelu, lm_head };

// One slice of a gemv-family op (gemv.cuh's gemv_slice on the matrix cores): rows [rr) of x (row
// stride K = w_cols, first row in_row0) against the output rows [c) of W (gate_up: N = w_rows / 2
// gate rows, then as many up rows); norm_w folds an RMSNorm of x in first.
__device__ __forceinline__ void mfma_gemv_slice(MfmaGemvOut out, const MetGeom& geom, SliceRange rr, SliceRange c,
                                                const u16* x_in, int64_t in_row0, const u16* norm_w, NormKind nk, const u16* W,
                                                u16* y, int* tokens, float cap) {
  __shared__ MfmaGemvLds lds;
  const int R = static_cast<int>(rr.end - rr.begin);
  const int64_t K = geom.w_cols;
  const bool gate_up = out == MfmaGemvOut::silu || out == MfmaGemvOut::gelu;
  const int64_t N = gate_up ? geom.w_rows / 2 : geom.w_rows;
  const u16* x = x_in + (in_row0 + rr.begin) * K;
  if (R <= 0 || c.begin >= c.end) return;
  if (norm_w) mfma_row_inv_rms(x, K, R, nk.eps, lds);
  const int width = gate_up ? kMfmaCols / 2 : kMfmaCols;
  for (int64_t c0 = c.begin; c0 < c.end; c0 += width) {
    const int n = static_cast<int>(min(static_cast<int64_t>(width), c.end - c0));
    mfma_gemv_cols(W, K, c0, n, x, R, norm_w, nk, lds, /*col0=*/0);
    if (gate_up) mfma_gemv_cols(W, K, N + c0, n, x, R, norm_w, nk, lds, /*col0=*/kMfmaCols / 2);
    for (int i = threadIdx.x; i < R * n; i += MET_INTERP_THREADS) {
      const int r = i / n, j = i % n;
      const float v = lds.res[r][j];
      u16* o = y ? y + (rr.begin + r) * N + c0 + j : nullptr;
      switch (out) {
        case MfmaGemvOut::plain:
          *o = to_bf(v);
          break;
        case MfmaGemvOut::residual:
          *o = to_bf(bf(*o) + bf(to_bf(v)));
          break;
        case MfmaGemvOut::silu:
        case MfmaGemvOut::gelu: {
          const float g = bf(to_bf(v)), u = bf(to_bf(lds.res[r][kMfmaCols / 2 + j]));
          *o = to_bf(gated_act(g, u, out == MfmaGemvOut::gelu));
          break;
        }
        case MfmaGemvOut::lm_head: {  // bf16 logits, capped when asked
          float lg = bf(to_bf(v));
          if (cap != 0.f) lg = bf(to_bf(cap * tanhf(lg / cap)));
          if (o) *o = to_bf(lg);
          break;
        }
      }
    }
    __syncthreads();
  }
  if (out == MfmaGemvOut::lm_head && tokens) {  // only when the slice holds the whole vocabulary (emit's rule)
    for (int r = 0; r < R; ++r) {
      const int t = argmax_block(y + (rr.begin + r) * N, N, lds.red, reinterpret_cast<int*>(lds.red + 32));
      if (threadIdx.x == 0) tokens[rr.begin + r] = t;
      __syncthreads();
    }
  }
}

MET_ENTRY(gemv) {
  mfma_gemv_slice(MfmaGemvOut::plain, a.geom, slice_rows(a, slice), slice_cols(a, slice, a.geom.w_rows), a.x, a.in_row0, nullptr,
                  NormKind{}, a.w, a.y, nullptr, 0.f);
}

MET_ENTRY(gemv_o_residual) {
  mfma_gemv_slice(MfmaGemvOut::residual, a.geom, slice_rows(a, slice), slice_cols(a, slice, a.geom.w_rows), a.attn, a.in_row0,
                  nullptr, NormKind{}, a.w_o, a.x, nullptr, 0.f);
}

MET_ENTRY(gemv_down_residual) {
  mfma_gemv_slice(MfmaGemvOut::residual, a.geom, slice_rows(a, slice), slice_cols(a, slice, a.geom.w_rows), a.h, a.in_row0,
                  nullptr, NormKind{}, a.w_down, a.x, nullptr, 0.f);
}

MET_ENTRY(gemv_rmsnorm_gate_up_silu) {
  mfma_gemv_slice(MfmaGemvOut::silu, a.geom, slice_rows(a, slice), slice_cols(a, slice, a.geom.w_rows / 2), a.x, a.in_row0,
                  a.norm_w, norm_kind(a), a.w_gate_up, a.out, nullptr, 0.f);
}

MET_ENTRY(gemv_rmsnorm_gate_up_gelu) {
  mfma_gemv_slice(MfmaGemvOut::gelu, a.geom, slice_rows(a, slice), slice_cols(a, slice, a.geom.w_rows / 2), a.x, a.in_row0,
                  a.norm_w, norm_kind(a), a.w_gate_up, a.out, nullptr, 0.f);
}

MET_ENTRY(gemv_rmsnorm_lm_head_argmax) {
  mfma_gemv_slice(MfmaGemvOut::lm_head, a.geom, slice_rows(a, slice), slice_cols(a, slice, a.geom.w_rows), a.x, a.in_row0,
                  a.norm_w, norm_kind(a), a.w_lm_head, a.logits, a.tokens, 0.f);
}

MET_ENTRY(gemv_rmsnorm_lm_head_softcap_argmax) {
  mfma_gemv_slice(MfmaGemvOut::lm_head, a.geom, slice_rows(a, slice), slice_cols(a, slice, a.geom.w_rows), a.x, a.in_row0,
                  a.norm_w, norm_kind(a), a.w_lm_head, a.logits, a.tokens, a.cap);
}

// rmsnorm -> qkv over head units [u) -> [q/k norm] -> rope -> q out, K/V to the cache slot; qn and
// kn (the q and k norm weights) are null for the plain rope op; vn: V heads take a weightless norm
// (Gemma-4's v_norm). A 32-lane warp finishes one head.
template <class A>
__device__ __forceinline__ void mfma_qkv_slice(const A& a, const u16* qn, const u16* kn, bool vn, uint32_t s) {
  __shared__ MfmaGemvLds lds;
  const SliceRange rr = slice_rows(a, s);
  const int R = static_cast<int>(rr.end - rr.begin);
  const int64_t K = a.geom.w_cols;
  const int heads = static_cast<int>(a.heads), kvh = static_cast<int>(a.kv_heads);
  const int hd = static_cast<int>(a.head_dim), rot = static_cast<int>(a.rotary_dim);
  const SliceRange u = slice_cols(a, s, heads + 2 * kvh);
  if (R <= 0 || u.begin >= u.end) return;
  const u16* x = a.x + (a.in_row0 + rr.begin) * K;
  const NormKind nk = norm_kind(a);
  mfma_row_inv_rms(x, K, R, nk.eps, lds);
  const int per_pass = kMfmaCols / hd;  // whole heads per pass
  const int64_t kw = static_cast<int64_t>(kvh) * hd;
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  u16* hbuf = lds.head[warp];
  for (int64_t h0 = u.begin; h0 < u.end; h0 += per_pass) {
    const int nh = static_cast<int>(min(static_cast<int64_t>(per_pass), u.end - h0));
    mfma_gemv_cols(a.w_qkv, K, h0 * hd, nh * hd, x, R, a.norm_w, nk, lds, /*col0=*/0);
    for (int item = warp; item < R * nh; item += MET_INTERP_WARPS) {
      const int r = item / nh, j = item % nh;
      const int64_t unit = h0 + j, row = rr.begin + r;
      for (int i = lane; i < hd; i += MET_WARP) hbuf[i] = to_bf(lds.res[r][j * hd + i]);
      __syncwarp();
      if (unit < heads + kvh) {
        const u16* nw = unit < heads ? qn : kn;
        if (nw) {
          const float inv = inv_rms_warp(hbuf, hd, nk.eps);
          for (int i = lane; i < hd; i += MET_WARP) hbuf[i] = to_bf(rms_scale_kind(bf(hbuf[i]), inv, bf(nw[i]), nk));
          __syncwarp();
        }
        rope_head_warp(hbuf, hd, rot, a.theta, a.inv_freq, a.positions[row]);
        __syncwarp();
      } else if (vn) {
        const float inv = inv_rms_warp(hbuf, hd, nk.eps);
        for (int i = lane; i < hd; i += MET_WARP) hbuf[i] = to_bf(bf(hbuf[i]) * inv);
        __syncwarp();
      }
      const int64_t slot = a.slots[row];
      u16* dst = unit < heads         ? a.q_out + row * heads * hd + unit * hd
                 : unit < heads + kvh ? a.k_cache + slot * kw + (unit - heads) * hd
                                      : a.v_cache + slot * kw + (unit - heads - kvh) * hd;
      for (int i = lane; i < hd; i += MET_WARP) dst[i] = hbuf[i];
      __syncwarp();
    }
    __syncthreads();
  }
}

MET_ENTRY(gemv_rmsnorm_qkv_rope) { mfma_qkv_slice(a, nullptr, nullptr, false, slice); }

MET_ENTRY(gemv_rmsnorm_qkv_qknorm_rope) { mfma_qkv_slice(a, a.q_norm_w, a.k_norm_w, a.v_norm != 0, slice); }
#endif  // MET_HAS_MFMA

}  // namespace met_interp
