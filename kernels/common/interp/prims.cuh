// Primitives the interpreter's op bodies share (kernels/common/*.cuh): bf16 conversions, 16-byte
// loads and packs, block reductions, rms, rope and the activations. Every body computes exactly
// what the cpu body of the same opcode computes for its slice (src/interp/cpu_bodies.cpp,
// kernels/cpu): the same operands, the same slice geometry and the same bf16 roundings at op
// boundaries. Float sums run in another order than on the cpu, so results agree to rounding.
//
// Memory: activations, caches and IO are written by other blocks of the same launch, so they are
// read with plain coherent loads (never the read-only path); weights and generated tables never
// change during a launch and stream through the non-coherent path without L1 allocation.
#pragma once
#include "common/device.cuh"
#include "common/interp/abi.h"
#include "common/interp/args.cuh"
#include "common/interp/smem.h"

namespace met_interp {

// A helper that several bodies call, out of line on NVIDIA: inlined into the interpreter's dispatch
// (run_body), its registers made run_body save registers to local memory around every body (the
// MoE bodies; the gated activations and scales once Gemma-4's gelu_mul_split and scale_tensor came).
// On AMD each body is its own kernel (MET_ENTRY), where a call would need a stack (scratch).
#if defined(__HIP_PLATFORM_AMD__)
#define MET_OUTLINE __device__ __forceinline__
#else
#define MET_OUTLINE __device__ __noinline__
#endif

__device__ __forceinline__ float bf(u16 v) { return __uint_as_float(static_cast<unsigned>(v) << 16); }
__device__ __forceinline__ u16 to_bf(float f) {
  const __nv_bfloat16 b = __float2bfloat16_rn(f);
  return *reinterpret_cast<const u16*>(&b);
}
// A float rounded to the nearest bf16, kept as a float: where a bf16 transformers run holds an
// intermediate tensor, the bodies round there too (the cpu bodies' round_bf16).
__device__ __forceinline__ float bf_round(float f) { return bf(to_bf(f)); }
#if defined(__HIP_PLATFORM_AMD__)
typedef unsigned met_u32x4 __attribute__((ext_vector_type(4)));
__device__ __forceinline__ uint4 load_weight16(const void* p) {  // read-only, streamed (nontemporal)
  const met_u32x4 v = __builtin_nontemporal_load(static_cast<const met_u32x4*>(p));
  return make_uint4(v.x, v.y, v.z, v.w);
}
#else
__device__ __forceinline__ uint4 load_weight16(const void* p) {  // read-only, streamed
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
#endif

#if !defined(__HIP_PLATFORM_AMD__)
// An arrival on a counter other blocks of the launch count too: releases the block's writes that a
// barrier ordered before it, and acquires the writes of the arrivals before it.
__device__ __forceinline__ unsigned long long atom_add_acq_rel(unsigned long long* p, unsigned long long v) {
  unsigned long long old;
  asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
}
#endif

#if !defined(__HIP_PLATFORM_AMD__)
// Four fp8 e4m3 codes of one word (byte i = code i) as the exact floats they define (every e4m3
// value, subnormals included, is a float and a bf16). sm_89 and later convert two codes per
// instruction; earlier archs place the code's bits in a float whose exponent is 120 short, then
// scale (a subnormal code becomes a subnormal float: no flush, the bodies build without fast math).
// The NaN code (S.1111.111) is read as 480 on the second path; no checkpoint holds it.
__device__ __forceinline__ void fp8x4_to_f32(uint32_t w, float (&f)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("{\n\t.reg .b16 c01, c23, h0, h1, h2, h3;\n\t.reg .b32 p01, p23;\n\t"
      "mov.b32 {c01, c23}, %4;\n\t"
      "cvt.rn.f16x2.e4m3x2 p01, c01;\n\t"
      "cvt.rn.f16x2.e4m3x2 p23, c23;\n\t"
      "mov.b32 {h0, h1}, p01;\n\t"
      "mov.b32 {h2, h3}, p23;\n\t"
      "cvt.f32.f16 %0, h0;\n\t"
      "cvt.f32.f16 %1, h1;\n\t"
      "cvt.f32.f16 %2, h2;\n\t"
      "cvt.f32.f16 %3, h3;\n\t}"
      : "=f"(f[0]), "=f"(f[1]), "=f"(f[2]), "=f"(f[3])
      : "r"(w));
#else
  constexpr float kBias = 1.329227995784916e36f;  // 2^120: e4m3's exponent bias 7 against float's 127
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t c = (w >> (8 * i)) & 0xffu;
    f[i] = __uint_as_float(((c & 0x80u) << 24) | ((c & 0x7fu) << 20)) * kBias;
  }
#endif
}

// 16 e4m3 codes (one 16-byte load) as 16 fp16 values in the same order (`lo` codes 0-7, code 0 in
// the low half of lo.x; `hi` codes 8-15), exactly: every e4m3 value, subnormals included, is an
// fp16 value. sm_89 and later convert two codes per instruction; earlier archs go through floats.
__device__ __forceinline__ void fp8x16_to_f16(const uint4& v, uint4& lo, uint4& hi) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t o[8];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    asm("{\n\t.reg .b16 c01, c23;\n\t"
        "mov.b32 {c01, c23}, %2;\n\t"
        "cvt.rn.f16x2.e4m3x2 %0, c01;\n\t"
        "cvt.rn.f16x2.e4m3x2 %1, c23;\n\t}"
        : "=r"(o[2 * k]), "=r"(o[2 * k + 1])
        : "r"(w[k]));
#else
    float f[4];
    fp8x4_to_f32(w[k], f);
    const __half2 p01 = __floats2half2_rn(f[0], f[1]), p23 = __floats2half2_rn(f[2], f[3]);
    o[2 * k] = *reinterpret_cast<const uint32_t*>(&p01);
    o[2 * k + 1] = *reinterpret_cast<const uint32_t*>(&p23);
#endif
  }
  lo = make_uint4(o[0], o[1], o[2], o[3]);
  hi = make_uint4(o[4], o[5], o[6], o[7]);
}

// 16 e4m3 codes (one 16-byte load) times `scale` as 16 bf16 values in the same order: `lo` holds
// codes 0-7 (code 0 in the low half of lo.x), `hi` codes 8-15. Exact for scale 1 (every e4m3 value
// is a bf16); otherwise each product is rounded once.
__device__ __forceinline__ void fp8x16_to_bf16(const uint4& v, float scale, uint4& lo, uint4& hi) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t o[8];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    float f[4];
    fp8x4_to_f32(w[k], f);
    const __nv_bfloat162 p01 = __floats2bfloat162_rn(f[0] * scale, f[1] * scale), p23 = __floats2bfloat162_rn(f[2] * scale, f[3] * scale);
    o[2 * k] = *reinterpret_cast<const uint32_t*>(&p01);  // .x (the lower code) in the low half
    o[2 * k + 1] = *reinterpret_cast<const uint32_t*>(&p23);
  }
  lo = make_uint4(o[0], o[1], o[2], o[3]);
  hi = make_uint4(o[4], o[5], o[6], o[7]);
}
#endif

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

// Exclusive prefix of v over the block's threads (thread order); `total` gets the sum. Every
// thread calls it; it ends with a barrier (part may be reused).
__device__ __forceinline__ int block_scan_excl(int v, int* part, int& total) {
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  int inc = v;
#pragma unroll
  for (int o = 1; o < MET_WARP; o <<= 1) {
    const int u = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += u;
  }
  if (lane == MET_WARP - 1) part[warp] = inc;
  __syncthreads();
  int before = 0, sum = 0;
  for (int w = 0; w < MET_INTERP_WARPS; ++w) {
    before += w < warp ? part[w] : 0;
    sum += part[w];
  }
  __syncthreads();
  total = sum;
  return before + inc - v;
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
// Pair i's inverse frequency in double, as the cpu computes it: the rope type's table where it has
// one, else theta^(-2i / rotary_dim).
__device__ __forceinline__ double rope_inv_freq(int i, int rotary_dim, float theta, const float* table) {
  return table ? static_cast<double>(table[i]) : pow(static_cast<double>(theta), -2.0 * i / rotary_dim);
}

// cos/sin of pos * inv_freq in double, as the cpu computes them.
// attn_scale: YaRN's attention factor, multiplied into cos and sin in fp32 before their rounding as
// the cpu's rope_heads does (1: exact, the plain rope).
__device__ __forceinline__ void rope_cs_at(double inv_freq, int pos, float& c, float& sn, float attn_scale = 1.f) {
  // sincospi reduces its argument exactly (no Payne-Hanek slow path, so no local memory); the
  // division by pi moves the angle by far less than the float rounding that follows.
  const double turns = static_cast<double>(pos) * inv_freq * 0.31830988618379067154;
  double sd, cd;
  sincospi(turns, &sd, &cd);
  c = bf_round(__fmul_rn(static_cast<float>(cd), attn_scale));  // bf16 cos and sin, as a bf16 rotary table holds them
  sn = bf_round(__fmul_rn(static_cast<float>(sd), attn_scale));
}

__device__ __forceinline__ void rope_cs(int i, int rotary_dim, float theta, const float* table, int pos, float& c,
                                        float& sn, float attn_scale = 1.f) {
  rope_cs_at(rope_inv_freq(i, rotary_dim, theta, table), pos, c, sn, attn_scale);
}

// One rotated pair, rounded as the cpu's rope_heads rounds (kernels/cpu/elementwise.hpp): each
// product to bf16, then their sum; c and sn are already bf16 values (rope_cs). No fused
// multiply-add: every rounding is explicit.
__device__ __forceinline__ void rope_rotate(float x1, float x2, float c, float sn, u16& o1, u16& o2) {
  o1 = to_bf(__fsub_rn(bf_round(__fmul_rn(x1, c)), bf_round(__fmul_rn(x2, sn))));
  o2 = to_bf(__fadd_rn(bf_round(__fmul_rn(x2, c)), bf_round(__fmul_rn(x1, sn))));
}

// Rotates one bf16 head in place (half-split form), lanes over pairs.
__device__ __forceinline__ void rope_head_warp(u16* h, int head_dim, int rotary_dim, float theta, const float* table,
                                               int pos) {
  const int half = rotary_dim / 2;
  for (int i = threadIdx.x % 32; i < half; i += 32) {
    float c, sn;
    rope_cs(i, rotary_dim, theta, table, pos, c, sn);
    rope_rotate(bf(h[i]), bf(h[i + half]), c, sn, h[i], h[i + half]);
  }
}

// The same rotation with cos and sin read from a table ({cos, sin} per pair) that the block computed
// once for the head's row (rope_cs_at): a slice finishing several heads of a row pays for the double
// precision angles once, not once per head.
__device__ __forceinline__ void rope_head_warp_cs(u16* h, int rotary_dim, const float* cs) {
  const int half = rotary_dim / 2;
  for (int i = threadIdx.x % 32; i < half; i += 32)
    rope_rotate(bf(h[i]), bf(h[i + half]), cs[2 * i], cs[2 * i + 1], h[i], h[i + half]);
}

__device__ __forceinline__ float silu_f(float g) { return g / (1.0f + expf(-g)); }
__device__ __forceinline__ float gelu_f(float g) {
  const float k0 = 0.7978845608028654f, k1 = 0.044715f;
  return 0.5f * g * (1.0f + tanhf(k0 * (g + k1 * g * g * g)));
}

// act(gate) * up for a gated MLP: the activation rounded to bf16 (a bf16 tensor in transformers),
// then the product rounded on store.
__device__ __forceinline__ float gated_act(float g, float u, bool gelu) { return bf_round(gelu ? gelu_f(g) : silu_f(g)) * u; }

// One normalised element before its store's rounding, as the cpu's rmsnorm_row computes it.
// rms_scale (Llama, Qwen): x * inv_rms rounded to bf16 first, then times the weight (transformers'
// LlamaRMSNorm casts to the input dtype before the weight). rms_scale_once (Gemma: offset 1 + w on
// Gemma-3, w on Gemma-4): x * inv_rms * (offset + w) in fp32, rounded once on store.
__device__ __forceinline__ float rms_scale(float x, float inv, float w) { return bf_round(x * inv) * w; }
__device__ __forceinline__ float rms_scale_once(float x, float inv, float w, float offset) { return x * inv * (offset + w); }
// The kind a fused gemv op's norm is (ops.def norm_once, norm_offset), chosen per instruction.
struct NormKind {
  float eps;
  bool once;
  float offset;
};
__device__ __forceinline__ float rms_scale_kind(float x, float inv, float w, const NormKind& k) {
  return k.once ? rms_scale_once(x, inv, w, k.offset) : rms_scale(x, inv, w);
}
template <class A>
__device__ __forceinline__ NormKind norm_kind(const A& a) {
  return NormKind{a.eps, a.norm_once != 0, static_cast<float>(a.norm_offset)};
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

}  // namespace met_interp
