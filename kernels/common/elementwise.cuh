// Elementwise bodies: rmsnorm and rmsnorm_offset (one warp per vector), rope (one warp per head), residual add, the
// gated activations (gelu_mul_split's gate and up in buffers of their own), scale (its factor an
// imm, or scale_tensor's one-element tensor) and softcap. Widths that are multiples of 8 with
// 16-byte aligned rows move 16-byte words; others take the scalar path with the same roundings.
#pragma once
#include "common/interp/prims.cuh"

namespace met_interp {

// One normalised element before its store's rounding: rmsnorm rounds x / rms(x) before the weight
// (rms_scale), rmsnorm_offset rounds once (rms_scale_once: Gemma's norms).
template <bool kOnce>
__device__ __forceinline__ float norm_elem(float x, float inv, float w, float offset) {
  return kOnce ? rms_scale_once(x, inv, w, offset) : rms_scale(x, inv, w);
}

// 8 norm weights from w[i], or 8 ones where w is absent (the weightless norm: x / rms(x), which
// rms_scale_once gives exactly with w 1 and offset 0).
__device__ __forceinline__ void norm_w8(const u16* w, int64_t i, float (&g)[8]) {
  if (w) {
    unpack8(*reinterpret_cast<const uint4*>(w + i), g);
  } else {
#pragma unroll
    for (int k = 0; k < 8; ++k) g[k] = 1.f;
  }
}

// Vectors of at most 256 values (the per-head q and k norms of Qwen3 and Gemma: 163840 vectors of
// 128 values per layer in a Qwen3-8B prefill of 4096 rows): a vector takes `lanes` lanes (the power
// of two at or above its 16-byte words), a warp 32 / lanes vectors at a time, and kU such groups'
// loads are in flight before the first reduction; each lane keeps its word for the store. One
// vector per warp, read twice, took 8.5 of that prefill's 131 ms on the H200. A lane sums its 8
// squares in order and the group's butterfly adds them as met_warp_reduce does (the lanes past a
// vector's words hold 0), so every sum equals the one-vector-per-warp path's. Item indices are 32
// bits (the caller checks that a slice's fit): their divisions by the vector count take a few
// instructions where a 64-bit one is a call.
template <bool kOnce, class Args>
__device__ __forceinline__ void rmsnorm_short(const Args& a, SliceRange r, float offset, uint32_t items) {
  using Idx = uint32_t;
  constexpr int kU = 4;
  const Idx count = static_cast<Idx>(a.count);
  const int64_t dim = a.dim;
  const int words = static_cast<int>(dim / 8);
  int lanes = 1;
  while (lanes < words) lanes *= 2;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gl = lane % lanes, per = 32 / lanes;
  const bool has = gl < words;
  float g[8];
  norm_w8(a.w, has ? 8 * gl : 0, g);
  const Idx step = static_cast<Idx>(MET_INTERP_WARPS * per);  // from one group of a warp's vectors to its next
  for (Idx b = static_cast<Idx>(warp * per); b < items; b += kU * step) {  // warp-uniform
    uint4 v[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const Idx it = b + u * step + static_cast<Idx>(lane / lanes), q = it / count;
      v[u] = make_uint4(0, 0, 0, 0);
      if (has && it < items)
        v[u] = *reinterpret_cast<const uint4*>(a.x + (a.in_row0 + r.begin + static_cast<int64_t>(q)) * a.x_stride + a.x_col0 +
                                               static_cast<int64_t>(it - q * count) * dim + 8 * gl);
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      float f[8];
      unpack8(v[u], f);
      float ss = 0.f;
#pragma unroll
      for (int k = 0; k < 8; ++k) ss += f[k] * f[k];
      for (int o = lanes / 2; o > 0; o >>= 1) ss += met_shfl_xor(ss, o);
      const Idx it = b + u * step + static_cast<Idx>(lane / lanes), q = it / count;
      if (!has || it >= items) continue;
      const float inv = 1.0f / sqrtf(ss / static_cast<float>(dim) + a.eps);
#pragma unroll
      for (int k = 0; k < 8; ++k) f[k] = norm_elem<kOnce>(f[k], inv, g[k], offset);
      *reinterpret_cast<uint4*>(a.y + (r.begin + static_cast<int64_t>(q)) * a.y_stride + a.y_col0 +
                                static_cast<int64_t>(it - q * count) * dim + 8 * gl) = pack8(f);
    }
  }
}

// Vectors of kNormRowMinDim to kNormRowMaxDim values (a prefill's hidden-size norms), one warp each: a lane
// loads all of its 16-byte words of the vector at once and keeps them in registers, so the vector
// is read once and its loads are in flight together. Reading it twice, a word at a time, left an
// 8B prefill of 4096 rows at about 40% of an SM's share of the read bandwidth in its norms (the
// second read misses L1 beside a GEMM ring's shared memory; held: 2.647 -> 2.184 ms of the norms,
// Llama-3.2-1B 0.661 -> 0.596). A lane sums its squares in the same
// order as the two-pass path below (words lane, lane + 32, ...), so the sums are the same.
constexpr int kNormRowWords = 16;  // 16-byte words a lane holds
constexpr int64_t kNormRowMaxDim = 8 * 32 * kNormRowWords;
// Below this a lane holds 4 words or fewer, and the held path did not pay: Qwen3-0.6B's norms of
// 1024 took 2.044 ms of its prefill of 4096 against 1.970 read twice (H200, same call;
// perf-data/h200-sxm/20261205T0200Z-norm-waits).
constexpr int64_t kNormRowMinDim = 2048;
template <bool kOnce, class Args>
__device__ __forceinline__ void rmsnorm_held(const Args& a, SliceRange r, float offset, int64_t items) {
  const int64_t count = a.count, dim = a.dim, words = dim / 8;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t it = warp; it < items; it += MET_INTERP_WARPS) {  // warp-uniform
    const int64_t row = r.begin + it / count, v = it % count;
    const u16* xv = a.x + (a.in_row0 + row) * a.x_stride + a.x_col0 + v * dim;
    u16* yv = a.y + row * a.y_stride + a.y_col0 + v * dim;
    uint4 x[kNormRowWords];
#pragma unroll
    for (int j = 0; j < kNormRowWords; ++j) {
      const int64_t w = lane + 32 * j;
      x[j] = w < words ? *reinterpret_cast<const uint4*>(xv + 8 * w) : make_uint4(0, 0, 0, 0);
    }
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < kNormRowWords; ++j) {
      float f[8];
      unpack8(x[j], f);
#pragma unroll
      for (int k = 0; k < 8; ++k) ss += f[k] * f[k];
    }
    ss = met_warp_reduce(ss);
    const float inv = 1.0f / sqrtf(ss / static_cast<float>(dim) + a.eps);
#pragma unroll
    for (int j = 0; j < kNormRowWords; ++j) {
      const int64_t w = lane + 32 * j;
      if (w >= words) break;
      float f[8], g[8];
      unpack8(x[j], f);
      norm_w8(a.w, 8 * w, g);
#pragma unroll
      for (int k = 0; k < 8; ++k) f[k] = norm_elem<kOnce>(f[k], inv, g[k], offset);
      *reinterpret_cast<uint4*>(yv + 8 * w) = pack8(f);
    }
  }
}

// y = x / rms(x) * (offset + w), rounded as norm_elem rounds: rmsnorm is kOnce false (offset 0);
// rmsnorm_offset kOnce true, Gemma-3's 1 + w, Gemma-4's w, or no w (offset ignored, as the cpu's).
// One warp per (row, vector); where the slice has fewer vectors than the block
// has warps (a decode step's hidden-size norms: one per row), each vector is cut into parts, one
// warp each, whose sums of squares meet in shared memory. One warp walking a 5376-wide vector
// alone took about 10 us per norm (Gemma-3 27B decode C=1 on the H200: 3.7 ms of 22 ms a step).
template <bool kOnce, class Args>
__device__ __forceinline__ void rmsnorm_rows(const Args& a, uint32_t slice, float offset) {
  const SliceRange r = slice_rows(a, slice);
  if (!a.w) offset = 0.f;
  const int64_t count = a.count, dim = a.dim;
  const float eps = a.eps;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t items = (r.end - r.begin) * count;
  const int parts = items >= MET_INTERP_WARPS ? 1 : static_cast<int>(MET_INTERP_WARPS / max(items, static_cast<int64_t>(1)));
  if (parts > 1 && dim % 8 == 0 && aligned16(a.x) && aligned16(a.y) && aligned16(a.w) && a.x_stride % 8 == 0 &&
      a.y_stride % 8 == 0 && a.x_col0 % 8 == 0 && a.y_col0 % 8 == 0) {
    // warp w: vector w / parts, its 16-byte words [part * words / parts, (part + 1) * words / parts)
    __shared__ float partial[MET_INTERP_WARPS];
    const int64_t it = warp / parts, part = warp % parts, words = dim / 8;
    const bool mine = it < items;
    const int64_t row = r.begin + (mine ? it / count : 0), v = mine ? it % count : 0;
    const u16* xv = a.x + (a.in_row0 + row) * a.x_stride + a.x_col0 + v * dim;
    u16* yv = a.y + row * a.y_stride + a.y_col0 + v * dim;
    const int64_t w0 = part * words / parts, w1 = (part + 1) * words / parts;
    float ss = 0.f;
    if (mine) {
#pragma unroll 4
      for (int64_t w = w0 + lane; w < w1; w += 32) {
        float f[8];
        unpack8(*reinterpret_cast<const uint4*>(xv + 8 * w), f);
#pragma unroll
        for (int k = 0; k < 8; ++k) ss += f[k] * f[k];
      }
    }
    ss = met_warp_reduce(ss);
    if (lane == 0) partial[warp] = ss;
    __syncthreads();
    if (mine) {
      float total = 0.f;
      for (int p = 0; p < parts; ++p) total += partial[it * parts + p];
      const float inv = 1.0f / sqrtf(total / static_cast<float>(dim) + eps);
#pragma unroll 4
      for (int64_t w = w0 + lane; w < w1; w += 32) {
        float f[8], g[8];
        unpack8(*reinterpret_cast<const uint4*>(xv + 8 * w), f);
        norm_w8(a.w, 8 * w, g);
#pragma unroll
        for (int k = 0; k < 8; ++k) f[k] = norm_elem<kOnce>(f[k], inv, g[k], offset);
        *reinterpret_cast<uint4*>(yv + 8 * w) = pack8(f);
      }
    }
    return;
  }
  const bool words16 = dim % 8 == 0 && aligned16(a.x) && aligned16(a.y) && aligned16(a.w) && a.x_stride % 8 == 0 &&
                       a.y_stride % 8 == 0 && a.x_col0 % 8 == 0 && a.y_col0 % 8 == 0;
  // (a slice of more than 2^32 - 1024 items, which no real model has, takes the one-vector-per-warp loop below)
  if (words16 && dim <= 256 && items + MET_INTERP_THREADS * 4 <= static_cast<int64_t>(0xffffffffu)) {
    rmsnorm_short<kOnce>(a, r, offset, static_cast<uint32_t>(items));
    return;
  }
  if (words16 && dim >= kNormRowMinDim && dim <= kNormRowMaxDim) {
    rmsnorm_held<kOnce>(a, r, offset, items);
    return;
  }
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
        norm_w8(a.w, i, g);
#pragma unroll
        for (int k = 0; k < 8; ++k) f[k] = norm_elem<kOnce>(f[k], inv, g[k], offset);
        *reinterpret_cast<uint4*>(yv + i) = pack8(f);
      }
      continue;
    }
    const float inv = inv_rms_warp(xv, static_cast<int>(dim), eps);
    for (int64_t i = lane; i < dim; i += 32) yv[i] = to_bf(norm_elem<kOnce>(bf(xv[i]), inv, a.w ? bf(a.w[i]) : 1.f, offset));
  }
}

MET_ENTRY(rmsnorm) { rmsnorm_rows<false>(a, slice, 0.f); }

MET_ENTRY(rmsnorm_offset) { rmsnorm_rows<true>(a, slice, a.offset); }

// Items are (row, group of heads): a warp computes each pair's cos/sin (double precision, the
// cpu's) once per item, its lanes sharing the pairs through the warp's table, and rotates every
// head of its group with them; each pair's inverse frequency (a double pow) is computed once per
// call into shared memory. Every lane computing its own 8 pairs' pow and sincospi for every row
// (4 times over for 128-dim heads) took about 44 us per instruction of a Qwen3-0.6B prefill of
// 4096 rows on the H200 (1.24 ms of its 20.8). Slices of at least 8 rows
// give each warp whole rows; shorter ones split a row's heads over the idle warps. Where the
// halves are multiples of 8 values and 16-byte aligned, a lane rotates 8 pairs with 16-byte loads
// (half / 8 lanes per head, the warp on 32 / (half / 8) heads at once); 2-byte loads left the op
// at about 0.6 TB/s (4.8 ms of a Llama-3.1-8B prefill of 4096 on the H200).
MET_ENTRY(rope) {
  const SliceRange r = slice_rows(a, slice);
  const int heads = static_cast<int>(a.heads), kvh = static_cast<int>(a.kv_heads);
  const int hd = static_cast<int>(a.head_dim), rot = static_cast<int>(a.rotary_dim), half = rot / 2;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int units = heads + kvh;
  const int64_t nrows = r.end - r.begin;
  const int groups = static_cast<int>(min(static_cast<int64_t>(units), max(static_cast<int64_t>(1), MET_INTERP_WARPS / max(nrows, static_cast<int64_t>(1)))));
  const bool vec = half % 8 == 0 && 32 % (half / 8) == 0 && hd % 8 == 0 && a.stride % 8 == 0 && a.k_col0 % 8 == 0 &&
                   aligned16(a.qkv);
  // shared memory: each warp's table of [kPairs] cos then [kPairs] sin, then the pairs' inverse
  // frequencies; the 16-byte path has at most 8 x 32 pairs (32 % (half / 8) == 0)
  constexpr int kPairs = 8 * 32;
  static_assert(MET_INTERP_WARPS * 2 * kPairs * sizeof(float) + kPairs * sizeof(double) <= MET_GEMV_FIXED_SMEM,
                "rope's tables must fit the shared memory every program launches with (src/interp/cuda_backend.cpp)");
  double* invf = reinterpret_cast<double*>(smem + MET_INTERP_WARPS * 2 * kPairs * sizeof(float));
  if (vec) {
    for (int q = threadIdx.x; q < half; q += MET_INTERP_THREADS) invf[q] = rope_inv_freq(q, rot, a.theta, a.inv_freq);
    __syncthreads();
  }
  for (int64_t it = warp; it < nrows * groups; it += MET_INTERP_WARPS) {
    const int64_t row = r.begin + it / groups;
    const int grp = static_cast<int>(it % groups);
    u16* base = a.qkv + row * a.stride;
    const int pos = a.positions[row];
    auto head = [&](int h) { return base + (h < heads ? static_cast<int64_t>(h) * hd : a.k_col0 + static_cast<int64_t>(h - heads) * hd); };
    if (vec) {
      const int lanes = half / 8, per = 32 / lanes, i0 = 8 * (lane % lanes), slot = lane / lanes;
      // the row's cos/sin through the warp's table, each pair computed by one lane, read back into
      // registers by constant index
      float* cs = reinterpret_cast<float*>(smem) + warp * 2 * kPairs;
      __syncwarp();  // every lane has read the previous item's pairs
#pragma unroll 1
      for (int q = lane; q < half; q += 32) rope_cs_at(invf[q], pos, cs[q], cs[kPairs + q], a.attn_scale);
      __syncwarp();
      float c[8], sn[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) c[e] = cs[i0 + e], sn[e] = cs[kPairs + i0 + e];
      for (int h = grp + groups * slot; h < units; h += groups * per) {
        u16* hp = head(h);
        float x1[8], x2[8];
        unpack8(*reinterpret_cast<const uint4*>(hp + i0), x1);
        unpack8(*reinterpret_cast<const uint4*>(hp + i0 + half), x2);
        u16 o1[8], o2[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) rope_rotate(x1[e], x2[e], c[e], sn[e], o1[e], o2[e]);
        uint4 w1, w2;
        w1.x = o1[0] | (static_cast<uint32_t>(o1[1]) << 16), w1.y = o1[2] | (static_cast<uint32_t>(o1[3]) << 16);
        w1.z = o1[4] | (static_cast<uint32_t>(o1[5]) << 16), w1.w = o1[6] | (static_cast<uint32_t>(o1[7]) << 16);
        w2.x = o2[0] | (static_cast<uint32_t>(o2[1]) << 16), w2.y = o2[2] | (static_cast<uint32_t>(o2[3]) << 16);
        w2.z = o2[4] | (static_cast<uint32_t>(o2[5]) << 16), w2.w = o2[6] | (static_cast<uint32_t>(o2[7]) << 16);
        *reinterpret_cast<uint4*>(hp + i0) = w1;
        *reinterpret_cast<uint4*>(hp + i0 + half) = w2;
      }
      continue;
    }
    for (int i = lane; i < half; i += 32) {
      float c, sn;
      rope_cs(i, rot, a.theta, a.inv_freq, pos, c, sn, a.attn_scale);
      for (int h = grp; h < units; h += groups) {
        u16* hp = head(h);
        rope_rotate(bf(hp[i]), bf(hp[i + half]), c, sn, hp[i], hp[i + half]);
      }
    }
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

// out[r] = act(gate[r]) * up[r] over rows [r.begin, r.end), w columns each: the gate and the up row
// of row r at gate + r * gs and up + r * us (a [rows, 2 * w] gate_up buffer: gs = us = 2 * w, up =
// gate + w; gelu_mul_split: a gate buffer of its own and up's columns of the per-layer inputs).
// Out of line on NVIDIA (MET_OUTLINE), one copy for the three ops: inlined into each, with
// rmsnorm_offset's second instantiation, they pushed the hopper run_body into spills.
MET_OUTLINE void gated_rows(const u16* gate, int64_t gs, const u16* up, int64_t us, u16* out, int64_t w,
                                        SliceRange r, bool gelu) {
  if (w % 8 == 0 && gs % 8 == 0 && us % 8 == 0 && aligned16(gate) && aligned16(up) && aligned16(out)) {
    // rows outer: no 64-bit division per word. (Two or four words in flight per thread spilled:
    // run_body shares the kernel's registers.)
    for (int64_t row = r.begin; row < r.end; ++row)
      for (int64_t c = threadIdx.x * 8; c < w; c += MET_INTERP_THREADS * 8) {
        float g[8], u[8];
        unpack8(*reinterpret_cast<const uint4*>(gate + row * gs + c), g);
        unpack8(*reinterpret_cast<const uint4*>(up + row * us + c), u);
#pragma unroll
        for (int k = 0; k < 8; ++k) g[k] = gated_act(g[k], u[k], gelu);
        *reinterpret_cast<uint4*>(out + row * w + c) = pack8(g);
      }
    return;
  }
  for (int64_t i = r.begin * w + threadIdx.x; i < r.end * w; i += MET_INTERP_THREADS) {
    const int64_t row = i / w, c = i % w;
    out[i] = to_bf(gated_act(bf(gate[row * gs + c]), bf(up[row * us + c]), gelu));
  }
}

MET_ENTRY(silu_mul) {
  gated_rows(a.gate_up, 2 * a.dim, a.gate_up + a.dim, 2 * a.dim, a.out, a.dim, slice_rows(a, slice), /*gelu=*/false);
}

MET_ENTRY(gelu_mul) {
  gated_rows(a.gate_up, 2 * a.dim, a.gate_up + a.dim, 2 * a.dim, a.out, a.dim, slice_rows(a, slice), /*gelu=*/true);
}

MET_ENTRY(gelu_mul_split) {
  gated_rows(a.gate, a.dim, a.up + a.up_col0, a.up_stride, a.out, a.dim, slice_rows(a, slice), /*gelu=*/true);
}

// x = bf16(x * s) over rows [r.begin, r.end) of a [rows, w] buffer, as the cpu's met_scale. Out
// of line on NVIDIA (MET_OUTLINE): one copy for scale and scale_tensor.
MET_OUTLINE void scale_rows(u16* x, int64_t w, SliceRange r, float s) {
  if (w % 8 == 0 && aligned16(x)) {
    for (int64_t i = r.begin * w / 8 + threadIdx.x; i < r.end * w / 8; i += MET_INTERP_THREADS) {
      float p[8];
      unpack8(reinterpret_cast<const uint4*>(x)[i], p);
#pragma unroll
      for (int k = 0; k < 8; ++k) p[k] = p[k] * s;
      reinterpret_cast<uint4*>(x)[i] = pack8(p);
    }
    return;
  }
  for (int64_t i = r.begin * w + threadIdx.x; i < r.end * w; i += MET_INTERP_THREADS) x[i] = to_bf(bf(x[i]) * s);
}

MET_ENTRY(scale) { scale_rows(a.x, a.width, slice_rows(a, slice), a.scale); }

// The factor: the one element of a bf16 checkpoint tensor (Gemma-4's layer_scalar).
MET_ENTRY(scale_tensor) { scale_rows(a.x, a.width, slice_rows(a, slice), bf(a.s[0])); }

// rmsnorm_residual: x = bf16(x + n), n = bf16(the norm of y) as rmsnorm_offset (once) or rmsnorm
// computes it, then x = bf16(x * sc) where the op has a layer scalar (sc: its one element, else
// 1, which leaves x as it is). Rows of dim values. Where the slice has fewer rows than the block has
// warps (a decode step: one row), each row is cut into parts, one warp each, whose sums of squares
// meet in shared memory, as rmsnorm_rows does; a round takes 8 / parts rows. Out of line on NVIDIA
// (MET_OUTLINE), beside the other elementwise bodies that run_body would otherwise inline.
MET_OUTLINE void norm_residual_rows(u16* x, const u16* y, const u16* w, int64_t dim, SliceRange r, NormKind nk, bool scaled,
                                    float sc) {
  __shared__ float partial[MET_INTERP_WARPS];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n = r.end - r.begin;
  const int parts = n >= MET_INTERP_WARPS ? 1 : static_cast<int>(MET_INTERP_WARPS / max(n, static_cast<int64_t>(1)));
  const int per_round = MET_INTERP_WARPS / parts;
  const bool vec = dim % 8 == 0 && aligned16(x) && aligned16(y) && aligned16(w);
  const int64_t units = vec ? dim / 8 : dim;  // 16-byte words, or values
  if (!w) nk.offset = 0.f;
  for (int64_t base = r.begin; base < r.end; base += per_round) {  // block-uniform
    const int64_t row = base + warp / parts;
    const int part = warp % parts;
    const bool mine = row < r.end;
    const u16* yv = y + row * dim;
    u16* xv = x + row * dim;
    const int64_t u0 = part * units / parts, u1 = (part + 1) * units / parts;
    float ss = 0.f;
    if (mine) {
      for (int64_t u = u0 + lane; u < u1; u += 32) {
        if (vec) {
          float f[8];
          unpack8(*reinterpret_cast<const uint4*>(yv + 8 * u), f);
#pragma unroll
          for (int k = 0; k < 8; ++k) ss += f[k] * f[k];
        } else {
          const float f = bf(yv[u]);
          ss += f * f;
        }
      }
    }
    ss = met_warp_reduce(ss);
    if (lane == 0) partial[warp] = ss;
    __syncthreads();
    if (mine) {
      float total = 0.f;
      for (int p = 0; p < parts; ++p) total += partial[(warp / parts) * parts + p];
      const float inv = 1.0f / sqrtf(total / static_cast<float>(dim) + nk.eps);
      for (int64_t u = u0 + lane; u < u1; u += 32) {
        if (vec) {
          float f[8], g[8], o[8];
          unpack8(*reinterpret_cast<const uint4*>(yv + 8 * u), f);
          unpack8(*reinterpret_cast<const uint4*>(xv + 8 * u), o);
          norm_w8(w, 8 * u, g);
#pragma unroll
          for (int k = 0; k < 8; ++k) {
            const float sum = bf_round(o[k] + bf_round(rms_scale_kind(f[k], inv, g[k], nk)));
            o[k] = scaled ? sum * sc : sum;
          }
          *reinterpret_cast<uint4*>(xv + 8 * u) = pack8(o);
        } else {
          const float sum = bf_round(bf(xv[u]) + bf_round(rms_scale_kind(bf(yv[u]), inv, w ? bf(w[u]) : 1.f, nk)));
          xv[u] = to_bf(scaled ? sum * sc : sum);
        }
      }
    }
    __syncthreads();  // partial is the next round's
  }
}

MET_ENTRY(rmsnorm_residual) {
  norm_residual_rows(a.x, a.y, a.w, a.dim, slice_rows(a, slice), norm_kind(a), a.s != nullptr, a.s ? bf(a.s[0]) : 1.f);
}

MET_ENTRY(softcap) {
  const SliceRange r = slice_rows(a, slice);
  for (int64_t i = r.begin * a.width + threadIdx.x; i < r.end * a.width; i += MET_INTERP_THREADS)
    a.x[i] = to_bf(a.cap * tanhf(bf(a.x[i]) / a.cap));
}

}  // namespace met_interp
