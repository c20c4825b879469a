// Elementwise bodies: rmsnorm (one warp per vector), rope (one warp per head), residual add, the
// gated activations, scale and softcap. Widths that are multiples of 8 with 16-byte aligned rows
// move 16-byte words; others take the scalar path with the same roundings.
#pragma once
#include "common/interp/prims.cuh"

namespace met_interp {

MET_ENTRY(rmsnorm) {
  const SliceRange r = slice_rows(a, slice);
  const int64_t count = a.count, dim = a.dim;
  const float eps = a.eps;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t items = (r.end - r.begin) * count;
  for (int64_t it = warp; it < items; it += MET_INTERP_WARPS) {
    const int64_t row = r.begin + it / count, v = it % count;
    const u16* xv = a.x + (a.in_row0 + row) * a.x_stride + a.x_col0 + v * dim;
    u16* yv = a.y + row * a.y_stride + a.y_col0 + v * dim;
    if (dim % 8 == 0 && aligned16(xv) && aligned16(yv) && aligned16(a.w)) {  // 16-byte words per lane
      float ss = 0.f;
      for (int64_t i = lane * 8; i < dim; i += 256) {
        float f[8];
        unpack8(*reinterpret_cast<const uint4*>(xv + i), f);
#pragma unroll
        for (int k = 0; k < 8; ++k) ss += f[k] * f[k];
      }
      ss = met_warp_reduce(ss);
      const float inv = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
      for (int64_t i = lane * 8; i < dim; i += 256) {
        float f[8], g[8];
        unpack8(*reinterpret_cast<const uint4*>(xv + i), f);
        unpack8(*reinterpret_cast<const uint4*>(a.w + i), g);
#pragma unroll
        for (int k = 0; k < 8; ++k) f[k] = f[k] * inv * g[k];
        *reinterpret_cast<uint4*>(yv + i) = pack8(f);
      }
      continue;
    }
    const float inv = inv_rms_warp(xv, static_cast<int>(dim), eps);
    for (int64_t i = lane; i < dim; i += 32) yv[i] = to_bf(bf(xv[i]) * inv * bf(a.w[i]));
  }
}

MET_ENTRY(rope) {
  const SliceRange r = slice_rows(a, slice);
  const int heads = static_cast<int>(a.heads), kvh = static_cast<int>(a.kv_heads);
  const int hd = static_cast<int>(a.head_dim), rot = static_cast<int>(a.rotary_dim);
  const int warp = threadIdx.x / 32;
  const int64_t per_row = heads + kvh;
  for (int64_t it = warp; it < (r.end - r.begin) * per_row; it += MET_INTERP_WARPS) {
    const int64_t row = r.begin + it / per_row, h = it % per_row;
    u16* base = a.qkv + row * a.stride + (h < heads ? h * hd : a.k_col0 + (h - heads) * hd);
    rope_head_warp(base, hd, rot, a.theta, a.inv_freq, a.positions[row]);
    __syncwarp();
  }
}

MET_ENTRY(residual_add) {
  const SliceRange r = slice_rows(a, slice);
  const int64_t w = a.width;
  u16* x = a.x;
  const u16* y = a.y;
  if (w % 8 == 0 && aligned16(x) && aligned16(y)) {
    for (int64_t i = r.begin * w / 8 + threadIdx.x; i < r.end * w / 8; i += MET_INTERP_THREADS) {
      float p[8], q[8];
      unpack8(reinterpret_cast<const uint4*>(x)[i], p);
      unpack8(reinterpret_cast<const uint4*>(y)[i], q);
#pragma unroll
      for (int k = 0; k < 8; ++k) p[k] = p[k] + q[k];
      reinterpret_cast<uint4*>(x)[i] = pack8(p);
    }
    return;
  }
  for (int64_t i = r.begin * w + threadIdx.x; i < r.end * w; i += MET_INTERP_THREADS) x[i] = to_bf(bf(x[i]) + bf(y[i]));
}

// out[r] = act(gate[r]) * up[r] over rows [r.begin, r.end) of a [rows, 2 * w] gate_up buffer.
template <bool kGelu>
__device__ __forceinline__ void gated_rows(const u16* gu, u16* out, int64_t w, SliceRange r) {
  if (w % 8 == 0 && aligned16(gu) && aligned16(out)) {
    for (int64_t i = r.begin * w / 8 + threadIdx.x; i < r.end * w / 8; i += MET_INTERP_THREADS) {
      const int64_t row = i / (w / 8), c = (i % (w / 8)) * 8;
      float g[8], u[8];
      unpack8(*reinterpret_cast<const uint4*>(gu + row * 2 * w + c), g);
      unpack8(*reinterpret_cast<const uint4*>(gu + row * 2 * w + w + c), u);
#pragma unroll
      for (int k = 0; k < 8; ++k) g[k] = (kGelu ? gelu_f(g[k]) : silu_f(g[k])) * u[k];
      reinterpret_cast<uint4*>(out)[i] = pack8(g);
    }
    return;
  }
  for (int64_t i = r.begin * w + threadIdx.x; i < r.end * w; i += MET_INTERP_THREADS) {
    const int64_t row = i / w, c = i % w;
    const float g = bf(gu[row * 2 * w + c]), u = bf(gu[row * 2 * w + w + c]);
    out[i] = to_bf((kGelu ? gelu_f(g) : silu_f(g)) * u);
  }
}

MET_ENTRY(silu_mul) { gated_rows<false>(a.gate_up, a.out, a.dim, slice_rows(a, slice)); }

MET_ENTRY(gelu_mul) { gated_rows<true>(a.gate_up, a.out, a.dim, slice_rows(a, slice)); }

MET_ENTRY(scale) {
  const SliceRange r = slice_rows(a, slice);
  for (int64_t i = r.begin * a.width + threadIdx.x; i < r.end * a.width; i += MET_INTERP_THREADS)
    a.x[i] = to_bf(bf(a.x[i]) * a.scale);
}

MET_ENTRY(softcap) {
  const SliceRange r = slice_rows(a, slice);
  for (int64_t i = r.begin * a.width + threadIdx.x; i < r.end * a.width; i += MET_INTERP_THREADS)
    a.x[i] = to_bf(a.cap * tanhf(bf(a.x[i]) / a.cap));
}

}  // namespace met_interp
