// The op bodies of the persistent interpreter: one slice of one instruction, run by a whole block
// (MET_INTERP_THREADS threads), computing exactly what the cpu body of the same opcode computes for
// that slice (src/emit/opcodes.cpp, kernels/cpu): the same operands, the same slice geometry (rows,
// output columns, head units, splits) and the same bf16 roundings at op boundaries. Float sums run
// in another order than on the cpu, so results agree to rounding, not bit for bit.
//
// Memory: activations, caches and IO are written by other blocks of the same launch, so they are
// read with plain coherent loads (never the read-only path); weights and generated tables never
// change during a launch and stream through the non-coherent path without L1 allocation.
#pragma once
#include "common/device.cuh"
#include "common/interp/abi.h"
#include "common/interp/smem.h"
#include "common/interp/slices.cuh"

namespace met_interp {

typedef unsigned short u16;

__device__ __forceinline__ float bf(u16 v) { return __uint_as_float(static_cast<unsigned>(v) << 16); }
__device__ __forceinline__ u16 to_bf(float f) {
  const __nv_bfloat16 b = __float2bfloat16_rn(f);
  return *reinterpret_cast<const u16*>(&b);
}
template <class T>
__device__ __forceinline__ T* op(const MetDevInstr& in, int k) {
  return reinterpret_cast<T*>(in.ops[k]);
}
__device__ __forceinline__ uint4 load_weight16(const void* p) {  // read-only, streamed
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// 8 bf16 values of one 16-byte word, and back (each value rounded once, as the scalar paths do).
__device__ __forceinline__ void unpack8(const uint4& v, float (&f)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    f[2 * k] = __uint_as_float(w[k] << 16);
    f[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
  }
}
__device__ __forceinline__ uint4 pack8(const float (&f)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) w[k] = static_cast<uint32_t>(to_bf(f[2 * k])) | (static_cast<uint32_t>(to_bf(f[2 * k + 1])) << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}
__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// ---------------------------------------------------------------- block reductions
__device__ __forceinline__ float block_sum(float v, float* red) {
  v = met_warp_reduce(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float s = 0.f;
  for (int w = 0; w < MET_INTERP_WARPS; ++w) s += red[w];  // fixed order: every thread the same sum
  return s;
}

// 1 / rms of a bf16 vector, as the cpu computes it (fp32 sum of squares, then 1/sqrt(mean + eps)).
__device__ __forceinline__ float inv_rms_block(const u16* x, int64_t n, float eps, float* red) {
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += MET_INTERP_THREADS) {
    const float f = bf(x[i]);
    ss += f * f;
  }
  ss = block_sum(ss, red);
  return 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
}

__device__ __forceinline__ float inv_rms_warp(const u16* x, int n, float eps) {
  float ss = 0.f;
  for (int i = threadIdx.x % 32; i < n; i += 32) {
    const float f = bf(x[i]);
    ss += f * f;
  }
  ss = met_warp_reduce(ss);
  return 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
}

// ---------------------------------------------------------------- elementwise and data movement
__device__ void body_embed(const MetDevInstr& in, uint32_t s) {
  const SliceRange r = slice_rows(in, s);
  const int* tokens = op<const int>(in, 0) + in.ints[1];
  const u16* table = op<const u16>(in, 1);
  u16* out = op<u16>(in, 2);
  const int64_t dim = in.w_cols, chunks = dim / 8;
  for (int64_t row = r.begin; row < r.end; ++row) {
    const int64_t tok = tokens[row];
    const uint4* src = reinterpret_cast<const uint4*>(table + tok * dim);
    uint4* dst = reinterpret_cast<uint4*>(out + row * dim);
    for (int64_t c = threadIdx.x; c < chunks; c += MET_INTERP_THREADS) dst[c] = load_weight16(src + c);
  }
}

// ints [rows, in_row0, count, dim, x_stride, x_col0, y_stride, y_col0], imms [eps]; one warp per vector.
__device__ void body_rmsnorm(const MetDevInstr& in, uint32_t s) {
  const SliceRange r = slice_rows(in, s);
  const u16* x = op<const u16>(in, 0);
  const u16* w = op<const u16>(in, 1);
  u16* y = op<u16>(in, 2);
  const int64_t count = in.ints[2], dim = in.ints[3];
  const float eps = in.imms[0];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t items = (r.end - r.begin) * count;
  for (int64_t it = warp; it < items; it += MET_INTERP_WARPS) {
    const int64_t row = r.begin + it / count, v = it % count;
    const u16* xv = x + (in.ints[1] + row) * in.ints[4] + in.ints[5] + v * dim;
    u16* yv = y + row * in.ints[6] + in.ints[7] + v * dim;
    if (dim % 8 == 0 && aligned16(xv) && aligned16(yv) && aligned16(w)) {  // 16-byte words per lane
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
        unpack8(*reinterpret_cast<const uint4*>(w + i), g);
#pragma unroll
        for (int k = 0; k < 8; ++k) f[k] = f[k] * inv * g[k];
        *reinterpret_cast<uint4*>(yv + i) = pack8(f);
      }
      continue;
    }
    const float inv = inv_rms_warp(xv, static_cast<int>(dim), eps);
    for (int64_t i = lane; i < dim; i += 32) yv[i] = to_bf(bf(xv[i]) * inv * bf(w[i]));
  }
}

// cos/sin of pos * inv_freq_i in double, as the cpu computes them.
__device__ __forceinline__ void rope_cs(int i, int rotary_dim, float theta, const float* table, int pos, float& c,
                                        float& sn) {
  const double inv_freq = table ? static_cast<double>(table[i]) : pow(static_cast<double>(theta), -2.0 * i / rotary_dim);
  // sincospi reduces its argument exactly (no Payne-Hanek slow path, so no local memory); the
  // division by pi moves the angle by far less than the float rounding that follows.
  const double turns = static_cast<double>(pos) * inv_freq * 0.31830988618379067154;
  double sd, cd;
  sincospi(turns, &sd, &cd);
  c = static_cast<float>(cd);
  sn = static_cast<float>(sd);
}

// Rotates one bf16 head in place (half-split form), lanes over pairs; no fused multiply-add, so
// every rounding is the cpu's.
__device__ __forceinline__ void rope_head_warp(u16* h, int head_dim, int rotary_dim, float theta, const float* table,
                                               int pos) {
  const int half = rotary_dim / 2;
  for (int i = threadIdx.x % 32; i < half; i += 32) {
    float c, sn;
    rope_cs(i, rotary_dim, theta, table, pos, c, sn);
    const float x1 = bf(h[i]), x2 = bf(h[i + half]);
    h[i] = to_bf(__fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, sn)));
    h[i + half] = to_bf(__fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, sn)));
  }
}

// ints [rows, stride, heads, kv_heads, head_dim, rotary_dim, k_col0], imms [theta]; ops [qkv, positions, inv_freq].
__device__ void body_rope(const MetDevInstr& in, uint32_t s) {
  const SliceRange r = slice_rows(in, s);
  u16* qkv = op<u16>(in, 0);
  const int* pos = op<const int>(in, 1);
  const float* table = op<const float>(in, 2);
  const int64_t stride = in.ints[1];
  const int heads = static_cast<int>(in.ints[2]), kvh = static_cast<int>(in.ints[3]);
  const int hd = static_cast<int>(in.ints[4]), rot = static_cast<int>(in.ints[5]);
  const int warp = threadIdx.x / 32;
  const int64_t per_row = heads + kvh;
  for (int64_t it = warp; it < (r.end - r.begin) * per_row; it += MET_INTERP_WARPS) {
    const int64_t row = r.begin + it / per_row, h = it % per_row;
    u16* base = qkv + row * stride + (h < heads ? h * hd : in.ints[6] + (h - heads) * hd);
    rope_head_warp(base, hd, rot, in.imms[0], table, pos[row]);
    __syncwarp();
  }
}

// ints [rows, stride, k_col0, v_col0, kv_heads, head_dim, v_head_dim]; ops [qkv, slots, k_cache, v_cache].
__device__ void body_kv_append(const MetDevInstr& in, uint32_t s) {
  const SliceRange r = slice_rows(in, s);
  const u16* qkv = op<const u16>(in, 0);
  const int64_t* slots = op<const int64_t>(in, 1);
  u16* kc = op<u16>(in, 2);
  u16* vc = op<u16>(in, 3);
  const int64_t kw = in.ints[4] * in.ints[5], vw = in.ints[4] * in.ints[6];
  const int64_t stride = in.ints[1], k0 = in.ints[2], v0 = in.ints[3];
  // Every thread takes (row, 16-byte chunk) pairs across all rows, so a prefill's thousands of
  // rows move at the SM's bandwidth; odd widths or offsets fall back to 2-byte copies.
  const bool vec = kw % 8 == 0 && vw % 8 == 0 && stride % 8 == 0 && k0 % 8 == 0 && v0 % 8 == 0;
  const int64_t kc_n = vec ? kw / 8 : kw, vc_n = vec ? vw / 8 : vw, per_row = kc_n + vc_n;
  for (int64_t i = threadIdx.x; i < (r.end - r.begin) * per_row; i += MET_INTERP_THREADS) {
    const int64_t row = r.begin + i / per_row, c = i % per_row;
    const u16* base = qkv + row * stride;
    const int64_t slot = slots[row];
    const bool is_k = c < kc_n;
    const int64_t e = is_k ? c : c - kc_n;
    const u16* src = base + (is_k ? k0 : v0);
    u16* dst = is_k ? kc + slot * kw : vc + slot * vw;
    if (vec)
      reinterpret_cast<uint4*>(dst)[e] = reinterpret_cast<const uint4*>(src)[e];
    else
      dst[e] = src[e];
  }
}

__device__ __forceinline__ float silu_f(float g) { return g / (1.0f + expf(-g)); }
__device__ __forceinline__ float gelu_f(float g) {
  const float k0 = 0.7978845608028654f, k1 = 0.044715f;
  return 0.5f * g * (1.0f + tanhf(k0 * (g + k1 * g * g * g)));
}

// residual_add [rows, width]: x += y; silu_mul/gelu_mul [rows, dim]; scale/softcap [rows, width].
__device__ void body_elementwise(const MetDevInstr& in, uint32_t s) {
  const SliceRange r = slice_rows(in, s);
  const int64_t w = in.ints[1];
  switch (in.body) {
    case MET_BODY_RESIDUAL_ADD: {
      u16* x = op<u16>(in, 0);
      const u16* y = op<const u16>(in, 1);
      if (w % 8 == 0 && aligned16(x) && aligned16(y)) {
        for (int64_t i = r.begin * w / 8 + threadIdx.x; i < r.end * w / 8; i += MET_INTERP_THREADS) {
          float a[8], b[8];
          unpack8(reinterpret_cast<const uint4*>(x)[i], a);
          unpack8(reinterpret_cast<const uint4*>(y)[i], b);
#pragma unroll
          for (int k = 0; k < 8; ++k) a[k] = a[k] + b[k];
          reinterpret_cast<uint4*>(x)[i] = pack8(a);
        }
        break;
      }
      for (int64_t i = r.begin * w + threadIdx.x; i < r.end * w; i += MET_INTERP_THREADS)
        x[i] = to_bf(bf(x[i]) + bf(y[i]));
      break;
    }
    case MET_BODY_SILU_MUL:
    case MET_BODY_GELU_MUL: {
      const u16* gu = op<const u16>(in, 0);
      u16* out = op<u16>(in, 1);
      const bool gelu = in.body == MET_BODY_GELU_MUL;
      if (w % 8 == 0 && aligned16(gu) && aligned16(out)) {
        for (int64_t i = r.begin * w / 8 + threadIdx.x; i < r.end * w / 8; i += MET_INTERP_THREADS) {
          const int64_t row = i / (w / 8), c = (i % (w / 8)) * 8;
          float g[8], u[8];
          unpack8(*reinterpret_cast<const uint4*>(gu + row * 2 * w + c), g);
          unpack8(*reinterpret_cast<const uint4*>(gu + row * 2 * w + w + c), u);
#pragma unroll
          for (int k = 0; k < 8; ++k) g[k] = (gelu ? gelu_f(g[k]) : silu_f(g[k])) * u[k];
          reinterpret_cast<uint4*>(out)[i] = pack8(g);
        }
        break;
      }
      for (int64_t i = r.begin * w + threadIdx.x; i < r.end * w; i += MET_INTERP_THREADS) {
        const int64_t row = i / w, c = i % w;
        const float g = bf(gu[row * 2 * w + c]), u = bf(gu[row * 2 * w + w + c]);
        out[i] = to_bf((gelu ? gelu_f(g) : silu_f(g)) * u);
      }
      break;
    }
    case MET_BODY_SCALE: {
      u16* x = op<u16>(in, 0);
      for (int64_t i = r.begin * w + threadIdx.x; i < r.end * w; i += MET_INTERP_THREADS) x[i] = to_bf(bf(x[i]) * in.imms[0]);
      break;
    }
    case MET_BODY_SOFTCAP: {
      u16* x = op<u16>(in, 0);
      const float cap = in.imms[0];
      for (int64_t i = r.begin * w + threadIdx.x; i < r.end * w; i += MET_INTERP_THREADS)
        x[i] = to_bf(cap * tanhf(bf(x[i]) / cap));
      break;
    }
    default: break;
  }
}

// Index of the largest value of a bf16 row: ties to the lowest index, NaN never wins, 0 when
// nothing beats -inf (the cpu's argmax_row).
__device__ int argmax_block(const u16* x, int64_t n, float* red_v, int* red_i) {
  float best = -INFINITY;
  int idx = 0x7fffffff;
  for (int64_t i = threadIdx.x; i < n; i += MET_INTERP_THREADS) {
    const float v = bf(x[i]);
    if (v > best) {
      best = v;
      idx = static_cast<int>(i);
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (ov > best || (ov == best && oi < idx)) {
      best = ov;
      idx = oi;
    }
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) {
    red_v[warp] = best;
    red_i[warp] = idx;
  }
  __syncthreads();
  best = -INFINITY;
  idx = 0x7fffffff;
  for (int w = 0; w < MET_INTERP_WARPS; ++w)
    if (red_v[w] > best || (red_v[w] == best && red_i[w] < idx)) {
      best = red_v[w];
      idx = red_i[w];
    }
  return best == -INFINITY ? 0 : idx;
}

// ints [rows, in_row0, vocab]; ops [logits, tokens].
__device__ void body_argmax(const MetDevInstr& in, uint32_t s, float* smem) {
  const SliceRange r = slice_rows(in, s);
  const u16* logits = op<const u16>(in, 0);
  int* tokens = op<int>(in, 1);
  const int64_t vocab = in.ints[2];
  for (int64_t row = r.begin; row < r.end; ++row) {
    const int t = argmax_block(logits + (in.ints[1] + row) * vocab, vocab, smem, reinterpret_cast<int*>(smem + 32));
    if (threadIdx.x == 0) tokens[row] = t;
    __syncthreads();
  }
}

// ---------------------------------------------------------------- sampling
// The rule of kernels/cpu/sample.hpp, step for step: integer weights floor(exp((l - max) / T) *
// 2^24), so every sum is an integer sum and the block's order cannot change it.
__device__ __forceinline__ uint32_t sample_weight(u16 logit, float max, float inv_t) {
  const float l = bf(logit);
  if (!(l > -INFINITY)) return 0;
  return static_cast<uint32_t>(floorf(expf((l - max) * inv_t) * 16777216.0f));
}

__device__ unsigned long long block_sum_u64(unsigned long long v, unsigned long long* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  unsigned long long s = 0;
  for (int w = 0; w < MET_INTERP_WARPS; ++w) s += red[w];
  return s;
}

// Sum of the weights of logits[0, n) that are >= lo and >= t (count instead of weight when count).
__device__ unsigned long long sample_mass(const u16* l, int64_t n, float max, float inv_t, uint32_t lo, uint32_t t, bool count,
                                          unsigned long long* red) {
  unsigned long long acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += MET_INTERP_THREADS) {
    const uint32_t w = sample_weight(l[i], max, inv_t);
    if (w >= lo && w >= t) acc += count ? 1ull : w;
  }
  return block_sum_u64(acc, red);
}

// The largest t in [0, 2^24] whose mass (or count) above it is still >= need.
__device__ uint32_t sample_search(const u16* l, int64_t n, float max, float inv_t, uint32_t lo, unsigned long long need,
                                  bool count, unsigned long long* red) {
  uint32_t a = 0, b = 1u << 24;
  while (a < b) {
    const uint32_t mid = a + (b - a + 1) / 2;
    if (sample_mass(l, n, max, inv_t, lo, mid, count, red) >= need) a = mid;
    else b = mid - 1;
  }
  return a;
}

// ints [rows, in_row0, vocab]; ops [logits, params (temperature, top_p, top_k, u per row), tokens].
__device__ void body_sample(const MetDevInstr& in, uint32_t s, unsigned char* smem) {
  const SliceRange r = slice_rows(in, s);
  const int64_t vocab = in.ints[2];
  float* red_f = reinterpret_cast<float*>(smem);
  unsigned long long* red = reinterpret_cast<unsigned long long*>(smem + 256);
  unsigned long long* scan = red + 64;  // one chunk sum per thread
  for (int64_t row = r.begin; row < r.end; ++row) {
    const float* p = op<const float>(in, 1) + 4 * row;
    const float temperature = p[0], top_p = p[1], top_k = p[2], u = p[3];
    if (temperature <= 0.f) continue;  // greedy rows read the argmax
    const u16* l = op<const u16>(in, 0) + (in.ints[1] + row) * vocab;
    const int best = argmax_block(l, vocab, red_f, reinterpret_cast<int*>(red_f + 32));
    const float max = bf(l[best]);
    int token = best;
    if (max > -INFINITY) {
      const float inv_t = 1.0f / temperature;
      uint32_t floor_w = 0;
      const int64_t k = static_cast<int64_t>(top_k);
      if (k >= 1 && k < vocab) floor_w = sample_search(l, vocab, max, inv_t, 0, static_cast<unsigned long long>(k), true, red);
      if (top_p < 1.0f) {
        const unsigned long long total = sample_mass(l, vocab, max, inv_t, floor_w, 0, false, red);
        const auto need = static_cast<unsigned long long>(ceil(static_cast<double>(top_p) * static_cast<double>(total)));
        const uint32_t p_w = sample_search(l, vocab, max, inv_t, floor_w, need, false, red);
        floor_w = floor_w > p_w ? floor_w : p_w;
      }
      // Contiguous chunks per thread, scanned in thread order: index order overall.
      const int64_t chunk = (vocab + MET_INTERP_THREADS - 1) / MET_INTERP_THREADS;
      const int64_t c0 = min(vocab, threadIdx.x * chunk), c1 = min(vocab, c0 + chunk);
      unsigned long long mine = 0;
      for (int64_t i = c0; i < c1; ++i) {
        const uint32_t w = sample_weight(l[i], max, inv_t);
        if (w >= floor_w) mine += w;
      }
      __syncthreads();
      scan[threadIdx.x] = mine;
      __syncthreads();
      if (threadIdx.x == 0) {
        unsigned long long run = 0;
        for (int t = 0; t < MET_INTERP_THREADS; ++t) {
          const unsigned long long v = scan[t];
          scan[t] = run;
          run += v;
        }
        red[0] = run;
      }
      __syncthreads();
      const unsigned long long kept = red[0];
      const auto target = static_cast<unsigned long long>(floor(static_cast<double>(u) * static_cast<double>(kept)));
      const unsigned long long before = scan[threadIdx.x];
      if (mine > 0 && before <= target && target < before + mine) {
        unsigned long long run = before;
        for (int64_t i = c0; i < c1; ++i) {
          const uint32_t w = sample_weight(l[i], max, inv_t);
          if (w < floor_w || w == 0) continue;
          run += w;
          if (run > target) {
            red[1] = static_cast<unsigned long long>(i);
            break;
          }
        }
      }
      __syncthreads();
      if (kept > 0) token = static_cast<int>(red[1]);
    }
    if (threadIdx.x == 0) op<int>(in, 2)[row] = token;
    __syncthreads();
  }
}

}  // namespace met_interp
