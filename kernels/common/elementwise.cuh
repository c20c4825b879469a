// Elementwise op bodies (any mode, any row count): RMSNorm, RoPE, residual add, gated
// activations, scale and softcap. Memory-bound; grid-stride loops so any launch size is correct.
#pragma once
#include "common/device.cuh"

// y = x / rms(x) * gamma over `count` vectors of `dim` per row; one block per vector. y may alias x.
extern "C" __global__ void met_rmsnorm(const met_bf16* x, const met_bf16* gamma, met_bf16* y, int rows, int dim,
                                       int count, float eps) {
  __shared__ float scratch[MET_BLOCK / 32];
  for (long v = blockIdx.x; v < static_cast<long>(rows) * count; v += gridDim.x) {
    const met_bf16* xv = x + v * dim;
    const float inv = met_inv_rms(xv, dim, eps, scratch);
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
      y[v * dim + i] = met_from_float(met_to_float(xv[i]) * inv * met_to_float(gamma[i]));
  }
}

// In-place rotary embedding of q [rows, heads, head_dim] and k [rows, kv_heads, head_dim].
extern "C" __global__ void met_rope(met_bf16* q, met_bf16* k, const int* positions, int rows, int heads,
                                    int kv_heads, int head_dim, int rotary_dim, float theta, const float* inv_freq) {
  const int half = rotary_dim / 2;
  const long total = static_cast<long>(rows) * (heads + kv_heads) * half;
  for (long t = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<long>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(t % half);
    const long hv = t / half;
    const int h = static_cast<int>(hv % (heads + kv_heads));
    const int r = static_cast<int>(hv / (heads + kv_heads));
    met_bf16* p = h < heads ? q + (static_cast<long>(r) * heads + h) * head_dim
                            : k + (static_cast<long>(r) * kv_heads + (h - heads)) * head_dim;
    float x1 = met_to_float(p[i]), x2 = met_to_float(p[i + half]);
    met_rope_pair(x1, x2, i, rotary_dim, positions[r], theta, inv_freq);
    p[i] = met_from_float(x1);
    p[i + half] = met_from_float(x2);
  }
}

// x += y (the residual stream), n elements.
extern "C" __global__ void met_residual_add(met_bf16* x, const met_bf16* y, long n) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long>(gridDim.x) * blockDim.x)
    x[i] = met_from_float(met_to_float(x[i]) + met_to_float(y[i]));
}

// out[r, j] = act(gate_up[r, j]) * gate_up[r, dim + j]; gate_up rows are [gate | up].
__device__ __forceinline__ void met_gated_body(const met_bf16* gate_up, met_bf16* out, int rows, int dim, bool gelu) {
  const long n = static_cast<long>(rows) * dim;
  for (long t = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<long>(gridDim.x) * blockDim.x) {
    const long r = t / dim, j = t % dim;
    const float g = met_to_float(gate_up[r * 2 * dim + j]), u = met_to_float(gate_up[r * 2 * dim + dim + j]);
    out[t] = met_from_float((gelu ? met_gelu_tanh(g) : met_silu(g)) * u);
  }
}

extern "C" __global__ void met_silu_mul(const met_bf16* gate_up, met_bf16* out, int rows, int dim) {
  met_gated_body(gate_up, out, rows, dim, /*gelu=*/false);
}

extern "C" __global__ void met_gelu_mul(const met_bf16* gate_up, met_bf16* out, int rows, int dim) {
  met_gated_body(gate_up, out, rows, dim, /*gelu=*/true);
}

extern "C" __global__ void met_scale(met_bf16* x, long n, float s) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long>(gridDim.x) * blockDim.x)
    x[i] = met_from_float(met_to_float(x[i]) * s);
}

// x = cap * tanh(x / cap)
extern "C" __global__ void met_softcap(met_bf16* x, long n, float cap) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long>(gridDim.x) * blockDim.x)
    x[i] = met_from_float(cap * tanhf(met_to_float(x[i]) / cap));
}
