// Portable device helpers shared by every GPU class: bf16 storage type, warp/block reductions,
// exact software decoders for quantized weight formats, and the weight/KV-cache views op bodies take.
// Everything here is the CUDA subset HIP accepts; no inline PTX (NVIDIA-only code lives behind guards).
#pragma once

#if defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_bf16.h>
#include <hip/hip_runtime.h>
typedef __hip_bfloat16 met_bf16;
#define MET_WARP 64  // CDNA wavefront width
#else
#include <cuda_bf16.h>
#include <stdint.h>
typedef __nv_bfloat16 met_bf16;
#define MET_WARP 32
#endif

// Threads per block of the cuda-core op bodies (gemv, norms, decode attention merge).
#define MET_BLOCK 256
#define MET_WARPS_PER_BLOCK (MET_BLOCK / MET_WARP)
// Batch rows one gemv launch carries (decode/batch rules cover rows [1, 16]).
#define MET_GEMV_MAX_ROWS 16
// Elements one lane consumes per gemv step: 16 bytes of bf16, 8 of fp8, 4 of fp4.
#define MET_GEMV_VEC 8

// Weight storage formats a gemv-family kernel can read (exact dequantisation to fp32 in registers).
#define MET_WFMT_BF16 0
#define MET_WFMT_FP8_E4M3 1  // one byte per weight, fp32 scale per output row (or per tensor)
#define MET_WFMT_MXFP4 2     // e2m1 pairs per byte, one e8m0 scale per 32 weights
#define MET_WFMT_NVFP4 3     // e2m1 pairs per byte, one fp8-e4m3 scale per 16 weights + tensor scale

#define MET_MXFP4_BLOCK 32
#define MET_NVFP4_BLOCK 16

// A [out, in] weight matrix (row-major, rows = output features) in any MET_WFMT_* format.
struct MetWeight {
  const void* data;           // bf16 / fp8 bytes / packed fp4 (low nibble = even k)
  const uint8_t* scales;      // mxfp4: e8m0 [out, in/32]; nvfp4: e4m3 [out, in/16]; else null
  const float* row_scale;     // fp8: per-output-row scale, null = tensor_scale only
  float tensor_scale;         // multiplies every weight (1.0 when unused)
  int format;                 // MET_WFMT_*
};

// Contiguous per-sequence KV cache: [slot][kv_head][max_ctx][head_dim], bf16.
struct MetKvCache {
  met_bf16* k;
  met_bf16* v;
  int max_ctx;
  int kv_heads;
  int head_dim;
  int v_head_dim;
};

__device__ __forceinline__ float met_to_float(met_bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ met_bf16 met_from_float(float x) { return __float2bfloat16(x); }

__device__ __forceinline__ float met_shfl_xor(float v, int mask) {
#if defined(__HIP_PLATFORM_AMD__)
  return __shfl_xor(v, mask);
#else
  return __shfl_xor_sync(0xffffffffu, v, mask);
#endif
}
__device__ __forceinline__ int met_shfl_xor_int(int v, int mask) {
#if defined(__HIP_PLATFORM_AMD__)
  return __shfl_xor(v, mask);
#else
  return __shfl_xor_sync(0xffffffffu, v, mask);
#endif
}
__device__ __forceinline__ float met_shfl(float v, int lane) {
#if defined(__HIP_PLATFORM_AMD__)
  return __shfl(v, lane);
#else
  return __shfl_sync(0xffffffffu, v, lane);
#endif
}

// Butterfly reduction over the whole warp: every lane ends with the result.
__device__ __forceinline__ float met_warp_reduce(float v) {
  for (int m = MET_WARP / 2; m > 0; m >>= 1) v += met_shfl_xor(v, m);
  return v;
}
__device__ __forceinline__ float met_warp_reduce_max(float v) {
  for (int m = MET_WARP / 2; m > 0; m >>= 1) v = fmaxf(v, met_shfl_xor(v, m));
  return v;
}
// Argmax over the warp; ties go to the lower index so results are deterministic.
__device__ __forceinline__ void met_warp_argmax(float& v, int& idx) {
  for (int m = MET_WARP / 2; m > 0; m >>= 1) {
    const float ov = met_shfl_xor(v, m);
    const int oi = met_shfl_xor_int(idx, m);
    if (ov > v || (ov == v && oi < idx)) { v = ov; idx = oi; }
  }
}

// Block-wide sum; `scratch` holds one float per warp. All threads get the result.
__device__ __forceinline__ float met_block_reduce(float v, float* scratch) {
  const int lane = threadIdx.x % MET_WARP, warp = threadIdx.x / MET_WARP;
  const int nwarps = (blockDim.x + MET_WARP - 1) / MET_WARP;
  v = met_warp_reduce(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < nwarps; ++w) total += scratch[w];
  return total;
}

// Exact fp8 e4m3 (OCP, finite-only, bias 7) -> fp32.
__device__ __forceinline__ float met_fp8e4m3_to_float(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 0xf, man = b & 0x7;
  float v;
  if (exp == 0xf && man == 0x7) v = __int_as_float(0x7fc00000);  // the only NaN encoding
  else if (exp == 0) v = ldexpf(static_cast<float>(man), -9);    // subnormal: man * 2^-6 / 8
  else v = ldexpf(static_cast<float>(8 + man), exp - 10);         // (1 + man/8) * 2^(exp-7)
  return sign ? -v : v;
}
// e2m1 (fp4) magnitudes indexed by the 3 low bits; bit 3 is the sign.
__device__ __forceinline__ float met_fp4e2m1_to_float(uint8_t nib) {
  const float mag[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  const float v = mag[nib & 7];
  return (nib & 8) ? -v : v;
}
// e8m0 block scale: 2^(e - 127); 0xff is NaN.
__device__ __forceinline__ float met_e8m0_to_float(uint8_t e) {
  return e == 0xff ? __int_as_float(0x7fc00000) : ldexpf(1.f, static_cast<int>(e) - 127);
}

// Dequantise MET_GEMV_VEC consecutive weights of row `row`, starting at column `k0` (a multiple of
// MET_GEMV_VEC, so a group never straddles an mxfp4/nvfp4 scale block).
__device__ __forceinline__ void met_load_weights(const MetWeight& w, long row, int in, int k0,
                                                 float out[MET_GEMV_VEC]) {
  switch (w.format) {
    case MET_WFMT_FP8_E4M3: {
      const uint8_t* p = static_cast<const uint8_t*>(w.data) + row * in + k0;
      const uint2 raw = *reinterpret_cast<const uint2*>(p);
      const float s = w.tensor_scale * (w.row_scale ? w.row_scale[row] : 1.f);
      for (int i = 0; i < 4; ++i) out[i] = s * met_fp8e4m3_to_float((raw.x >> (8 * i)) & 0xff);
      for (int i = 0; i < 4; ++i) out[4 + i] = s * met_fp8e4m3_to_float((raw.y >> (8 * i)) & 0xff);
      break;
    }
    case MET_WFMT_MXFP4:
    case MET_WFMT_NVFP4: {
      const uint8_t* p = static_cast<const uint8_t*>(w.data) + (row * in + k0) / 2;
      const uint32_t raw = *reinterpret_cast<const uint32_t*>(p);
      float s;
      if (w.format == MET_WFMT_MXFP4) {
        s = met_e8m0_to_float(w.scales[row * (in / MET_MXFP4_BLOCK) + k0 / MET_MXFP4_BLOCK]);
      } else {
        s = w.tensor_scale * met_fp8e4m3_to_float(w.scales[row * (in / MET_NVFP4_BLOCK) + k0 / MET_NVFP4_BLOCK]);
      }
      for (int i = 0; i < 8; ++i) out[i] = s * met_fp4e2m1_to_float((raw >> (4 * i)) & 0xf);
      break;
    }
    default: {
      const met_bf16* p = static_cast<const met_bf16*>(w.data) + row * in + k0;
      const uint4 raw = *reinterpret_cast<const uint4*>(p);
      const met_bf16* h = reinterpret_cast<const met_bf16*>(&raw);
      for (int i = 0; i < 8; ++i) out[i] = met_to_float(h[i]);
      break;
    }
  }
}

// Load MET_GEMV_VEC bf16 activations as fp32.
__device__ __forceinline__ void met_load_act(const met_bf16* x, float out[MET_GEMV_VEC]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(x);
  const met_bf16* h = reinterpret_cast<const met_bf16*>(&raw);
  for (int i = 0; i < MET_GEMV_VEC; ++i) out[i] = met_to_float(h[i]);
}

__device__ __forceinline__ float met_silu(float g) { return g / (1.f + __expf(-g)); }
__device__ __forceinline__ float met_gelu_tanh(float g) {
  const float kSqrt2OverPi = 0.7978845608f, kCubic = 0.044715f;
  return 0.5f * g * (1.f + tanhf(kSqrt2OverPi * (g + kCubic * g * g * g)));
}

// 1/rms of one vector of `dim` bf16 values, computed by the whole block.
__device__ __forceinline__ float met_inv_rms(const met_bf16* x, int dim, float eps, float* scratch) {
  float ss = 0.f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = met_to_float(x[i]);
    ss += v * v;
  }
  ss = met_block_reduce(ss, scratch);
  return rsqrtf(ss / dim + eps);
}

// Rotary embedding of one (x1, x2) pair, rotate-half (NeoX/HF) convention. `inv_freq` is the
// emitter's table ([rotary_dim/2], carries any rope scaling); without it theta^(-2i/rotary_dim).
__device__ __forceinline__ void met_rope_pair(float& x1, float& x2, int i, int rotary_dim, int pos,
                                              float theta, const float* inv_freq) {
  const float f = inv_freq ? inv_freq[i] : powf(theta, -2.f * i / rotary_dim);
  float s, c;
  sincosf(pos * f, &s, &c);
  const float a = x1, b = x2;
  x1 = a * c - b * s;
  x2 = b * c + a * s;
}

// Offset of (slot, kv_head, position) in a MetKvCache plane of width `dim`.
__device__ __forceinline__ long met_kv_offset(const MetKvCache& c, int slot, int kv_head, int pos, int dim) {
  return ((static_cast<long>(slot) * c.kv_heads + kv_head) * c.max_ctx + pos) * dim;
}
