// Decode/batch GEMV family (rows 1-16): y = x W^T on CUDA cores, one warp per output row, weights
// streamed once per launch and reused for every batch row. Fusions fold RMSNorm (gamma into the
// weight, 1/rms into the result), RoPE + KV append, residual adds, gated activations and argmax.
#pragma once
#include "common/device.cuh"

// Max head_dim the fused QKV kernel stages in shared memory.
#define MET_QKV_MAX_HEAD_DIM 256
// Vocab rows one warp scans in the fused lm_head + argmax kernel.
#define MET_LM_ROWS_PER_WARP 4

// Dot products of weight row `row` with `nrows` activation rows (stride `in`). `gamma` (nullable)
// is the RMSNorm weight folded into W. Every lane returns the full sums.
__device__ __forceinline__ void met_warp_gemv_row(const MetWeight& w, long row, const met_bf16* x, int nrows, int in,
                                                  const met_bf16* gamma, float acc[MET_GEMV_MAX_ROWS]) {
  const int lane = threadIdx.x % MET_WARP;
#pragma unroll
  for (int r = 0; r < MET_GEMV_MAX_ROWS; ++r) acc[r] = 0.f;
  for (int k0 = lane * MET_GEMV_VEC; k0 < in; k0 += MET_WARP * MET_GEMV_VEC) {
    float wv[MET_GEMV_VEC];
    met_load_weights(w, row, in, k0, wv);
    if (gamma) {
      float g[MET_GEMV_VEC];
      met_load_act(gamma + k0, g);
      for (int i = 0; i < MET_GEMV_VEC; ++i) wv[i] *= g[i];
    }
#pragma unroll
    for (int r = 0; r < MET_GEMV_MAX_ROWS; ++r) {
      if (r < nrows) {
        float xv[MET_GEMV_VEC];
        met_load_act(x + static_cast<long>(r) * in + k0, xv);
        for (int i = 0; i < MET_GEMV_VEC; ++i) acc[r] += wv[i] * xv[i];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < MET_GEMV_MAX_ROWS; ++r)
    if (r < nrows) acc[r] = met_warp_reduce(acc[r]);
}

// 1/rms of each batch row into shared `inv_rms` (eps < 0: no norm, factor 1).
__device__ __forceinline__ void met_rows_inv_rms(const met_bf16* x, int rows, int dim, float eps, float* inv_rms,
                                                 float* scratch) {
  for (int r = 0; r < rows; ++r) {
    const float v = eps < 0.f ? 1.f : met_inv_rms(x + static_cast<long>(r) * dim, dim, eps, scratch);
    if (threadIdx.x == 0) inv_rms[r] = v;
  }
  __syncthreads();
}

// y[r, o] = (resid ? resid[r, o] : 0) + x[r] . W[o]; y may alias resid.
__device__ __forceinline__ void met_gemv_body(const met_bf16* x, const MetWeight& w, met_bf16* y,
                                              const met_bf16* resid, int rows, int in, int out) {
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  const int o = blockIdx.x * MET_WARPS_PER_BLOCK + warp;
  if (o >= out) return;
  float acc[MET_GEMV_MAX_ROWS];
  met_warp_gemv_row(w, o, x, rows, in, /*gamma=*/nullptr, acc);
  if (lane == 0) {
    for (int r = 0; r < rows; ++r) {
      const long i = static_cast<long>(r) * out + o;
      y[i] = met_from_float(acc[r] + (resid ? met_to_float(resid[i]) : 0.f));
    }
  }
}

extern "C" __global__ void met_gemv(const met_bf16* x, MetWeight w, met_bf16* y, int rows, int in, int out) {
  met_gemv_body(x, w, y, /*resid=*/nullptr, rows, in, out);
}

extern "C" __global__ void met_gemv_o_residual(const met_bf16* attn, MetWeight w_o, met_bf16* resid, int rows,
                                                int in, int out) {
  met_gemv_body(attn, w_o, resid, resid, rows, in, out);
}

extern "C" __global__ void met_gemv_down_residual(const met_bf16* act, MetWeight w_down, met_bf16* resid, int rows,
                                                   int in, int out) {
  met_gemv_body(act, w_down, resid, resid, rows, in, out);
}

// One block per head of the fused q|k|v projection (q heads, then k heads, then v heads): the
// block computes head_dim outputs for every row, optionally RMS-normalises the q/k head, rotates
// it, and writes q to q_out and k/v straight into the cache at each row's position.
__device__ __forceinline__ void met_qkv_body(const met_bf16* x, const met_bf16* norm_w, float eps, const MetWeight& w,
                                             const met_bf16* bias, const met_bf16* q_norm_w, const met_bf16* k_norm_w,
                                             float qk_eps, int rows, int hidden, int heads, int kv_heads,
                                             int head_dim, int rotary_dim, float theta, const float* inv_freq,
                                             const int* positions, const int* slots, met_bf16* q_out,
                                             MetKvCache cache) {
  __shared__ float out_s[MET_GEMV_MAX_ROWS][MET_QKV_MAX_HEAD_DIM];
  __shared__ float inv_rms[MET_GEMV_MAX_ROWS];
  __shared__ float scratch[MET_BLOCK / 32];
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  const int head = blockIdx.x;
  const bool is_q = head < heads, is_k = !is_q && head < heads + kv_heads;
  met_rows_inv_rms(x, rows, hidden, eps, inv_rms, scratch);

  for (int d = warp; d < head_dim; d += MET_WARPS_PER_BLOCK) {
    const long o = static_cast<long>(head) * head_dim + d;
    float acc[MET_GEMV_MAX_ROWS];
    met_warp_gemv_row(w, o, x, rows, hidden, norm_w, acc);
    if (lane == 0)
      for (int r = 0; r < rows; ++r) out_s[r][d] = acc[r] * inv_rms[r] + (bias ? met_to_float(bias[o]) : 0.f);
  }
  __syncthreads();

  const met_bf16* qk_gamma = is_q ? q_norm_w : (is_k ? k_norm_w : nullptr);
  if (qk_gamma) {  // per-head RMSNorm (Qwen3, Gemma 3): one warp per row
    for (int r = warp; r < rows; r += MET_WARPS_PER_BLOCK) {
      float ss = 0.f;
      for (int d = lane; d < head_dim; d += MET_WARP) ss += out_s[r][d] * out_s[r][d];
      const float inv = rsqrtf(met_warp_reduce(ss) / head_dim + qk_eps);
      for (int d = lane; d < head_dim; d += MET_WARP) out_s[r][d] *= inv * met_to_float(qk_gamma[d]);
    }
    __syncthreads();
  }
  if (is_q || is_k) {
    const int half = rotary_dim / 2;
    for (int t = threadIdx.x; t < rows * half; t += blockDim.x) {
      const int r = t / half, i = t % half;
      met_rope_pair(out_s[r][i], out_s[r][i + half], i, rotary_dim, positions[r], theta, inv_freq);
    }
    __syncthreads();
  }
  for (int t = threadIdx.x; t < rows * head_dim; t += blockDim.x) {
    const int r = t / head_dim, d = t % head_dim;
    const met_bf16 v = met_from_float(out_s[r][d]);
    if (is_q) {
      q_out[(static_cast<long>(r) * heads + head) * head_dim + d] = v;
    } else if (is_k) {
      cache.k[met_kv_offset(cache, slots[r], head - heads, positions[r], head_dim) + d] = v;
    } else {
      cache.v[met_kv_offset(cache, slots[r], head - heads - kv_heads, positions[r], head_dim) + d] = v;
    }
  }
}

extern "C" __global__ void met_gemv_rmsnorm_qkv_rope(const met_bf16* x, const met_bf16* norm_w, float eps,
                                                      MetWeight w_qkv, const met_bf16* bias, int rows, int hidden,
                                                      int heads, int kv_heads, int head_dim, int rotary_dim,
                                                      float theta, const float* inv_freq, const int* positions,
                                                      const int* slots, met_bf16* q_out, MetKvCache cache) {
  met_qkv_body(x, norm_w, eps, w_qkv, bias, nullptr, nullptr, 0.f, rows, hidden, heads, kv_heads, head_dim,
               rotary_dim, theta, inv_freq, positions, slots, q_out, cache);
}

extern "C" __global__ void met_gemv_rmsnorm_qkv_qknorm_rope(const met_bf16* x, const met_bf16* norm_w, float eps,
                                                             MetWeight w_qkv, const met_bf16* bias,
                                                             const met_bf16* q_norm_w, const met_bf16* k_norm_w,
                                                             float qk_eps, int rows, int hidden, int heads,
                                                             int kv_heads, int head_dim, int rotary_dim, float theta,
                                                             const float* inv_freq, const int* positions,
                                                             const int* slots, met_bf16* q_out, MetKvCache cache) {
  met_qkv_body(x, norm_w, eps, w_qkv, bias, q_norm_w, k_norm_w, qk_eps, rows, hidden, heads, kv_heads, head_dim,
               rotary_dim, theta, inv_freq, positions, slots, q_out, cache);
}

// RMSNorm + gate/up projection + gated activation. W rows [0, inter) are gate, [inter, 2*inter) up.
__device__ __forceinline__ void met_gate_up_body(const met_bf16* x, const met_bf16* norm_w, float eps,
                                                 const MetWeight& w, met_bf16* out, int rows, int hidden, int inter,
                                                 bool gelu) {
  __shared__ float inv_rms[MET_GEMV_MAX_ROWS];
  __shared__ float scratch[MET_BLOCK / 32];
  met_rows_inv_rms(x, rows, hidden, eps, inv_rms, scratch);
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  const int j = blockIdx.x * MET_WARPS_PER_BLOCK + warp;
  if (j >= inter) return;
  float g[MET_GEMV_MAX_ROWS], u[MET_GEMV_MAX_ROWS];
  met_warp_gemv_row(w, j, x, rows, hidden, norm_w, g);
  met_warp_gemv_row(w, static_cast<long>(inter) + j, x, rows, hidden, norm_w, u);
  if (lane == 0) {
    for (int r = 0; r < rows; ++r) {
      const float gv = g[r] * inv_rms[r], uv = u[r] * inv_rms[r];
      out[static_cast<long>(r) * inter + j] = met_from_float((gelu ? met_gelu_tanh(gv) : met_silu(gv)) * uv);
    }
  }
}

extern "C" __global__ void met_gemv_rmsnorm_gate_up_silu(const met_bf16* x, const met_bf16* norm_w, float eps,
                                                          MetWeight w_gate_up, met_bf16* out, int rows, int hidden,
                                                          int inter) {
  met_gate_up_body(x, norm_w, eps, w_gate_up, out, rows, hidden, inter, /*gelu=*/false);
}

extern "C" __global__ void met_gemv_rmsnorm_gate_up_gelu(const met_bf16* x, const met_bf16* norm_w, float eps,
                                                          MetWeight w_gate_up, met_bf16* out, int rows, int hidden,
                                                          int inter) {
  met_gate_up_body(x, norm_w, eps, w_gate_up, out, rows, hidden, inter, /*gelu=*/true);
}

// Order-preserving map of a float to an unsigned key (larger float -> larger key).
__device__ __forceinline__ unsigned met_float_key(float v) {
  const unsigned b = __float_as_uint(v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Final RMSNorm + lm_head + optional softcap + greedy argmax. Each block scans a slice of the
// vocabulary and publishes its best (logit, id) per row; the last block to finish (ticket on
// `counter`, which it resets to 0) reduces the partials into out_ids. `logits` is optional.
__device__ __forceinline__ void met_lm_head_body(const met_bf16* x, const met_bf16* norm_w, float eps,
                                                 const MetWeight& w, int rows, int hidden, int vocab, float softcap,
                                                 float* logits, unsigned long long* partial, unsigned* counter,
                                                 int* out_ids) {
  __shared__ float inv_rms[MET_GEMV_MAX_ROWS];
  __shared__ float scratch[MET_BLOCK / 32];
  __shared__ unsigned long long best_s[MET_WARPS_PER_BLOCK][MET_GEMV_MAX_ROWS];
  __shared__ bool last_block;
  met_rows_inv_rms(x, rows, hidden, eps, inv_rms, scratch);
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  // key = (ordered logit << 32) | (~id): max key = max logit, lowest id on ties.
  unsigned long long best[MET_GEMV_MAX_ROWS];
#pragma unroll
  for (int r = 0; r < MET_GEMV_MAX_ROWS; ++r) best[r] = 0;
  const int base = (blockIdx.x * MET_WARPS_PER_BLOCK + warp) * MET_LM_ROWS_PER_WARP;
  for (int v = base; v < base + MET_LM_ROWS_PER_WARP && v < vocab; ++v) {
    float acc[MET_GEMV_MAX_ROWS];
    met_warp_gemv_row(w, v, x, rows, hidden, norm_w, acc);
#pragma unroll
    for (int r = 0; r < MET_GEMV_MAX_ROWS; ++r) {
      if (r < rows) {
        float l = acc[r] * inv_rms[r];
        if (softcap > 0.f) l = softcap * tanhf(l / softcap);
        if (logits && lane == 0) logits[static_cast<long>(r) * vocab + v] = l;
        const unsigned long long key =
            (static_cast<unsigned long long>(met_float_key(l)) << 32) | (~static_cast<unsigned>(v));
        if (key > best[r]) best[r] = key;
      }
    }
  }
  if (lane == 0)
    for (int r = 0; r < rows; ++r) best_s[warp][r] = best[r];
  __syncthreads();
  if (threadIdx.x < rows) {
    unsigned long long b = 0;
    for (int w2 = 0; w2 < MET_WARPS_PER_BLOCK; ++w2) b = best_s[w2][threadIdx.x] > b ? best_s[w2][threadIdx.x] : b;
    partial[static_cast<long>(threadIdx.x) * gridDim.x + blockIdx.x] = b;
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last_block = atomicAdd(counter, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last_block) return;
  __threadfence();
  for (int r = warp; r < rows; r += MET_WARPS_PER_BLOCK) {
    unsigned long long b = 0;
    for (int i = lane; i < static_cast<int>(gridDim.x); i += MET_WARP) {
      const unsigned long long p = partial[static_cast<long>(r) * gridDim.x + i];
      b = p > b ? p : b;
    }
    for (int m = MET_WARP / 2; m > 0; m >>= 1) {
      const unsigned lo = met_shfl_xor_int(static_cast<int>(b & 0xffffffffu), m);
      const unsigned hi = met_shfl_xor_int(static_cast<int>(b >> 32), m);
      const unsigned long long o = (static_cast<unsigned long long>(hi) << 32) | lo;
      b = o > b ? o : b;
    }
    if (lane == 0) out_ids[r] = static_cast<int>(~static_cast<unsigned>(b & 0xffffffffu));
  }
  if (threadIdx.x == 0) *counter = 0;
}

extern "C" __global__ void met_gemv_rmsnorm_lm_head_argmax(const met_bf16* x, const met_bf16* norm_w, float eps,
                                                            MetWeight w_lm, int rows, int hidden, int vocab,
                                                            float* logits, unsigned long long* partial,
                                                            unsigned* counter, int* out_ids) {
  met_lm_head_body(x, norm_w, eps, w_lm, rows, hidden, vocab, /*softcap=*/0.f, logits, partial, counter, out_ids);
}

extern "C" __global__ void met_gemv_rmsnorm_lm_head_softcap_argmax(const met_bf16* x, const met_bf16* norm_w,
                                                                    float eps, MetWeight w_lm, int rows, int hidden,
                                                                    int vocab, float softcap, float* logits,
                                                                    unsigned long long* partial, unsigned* counter,
                                                                    int* out_ids) {
  met_lm_head_body(x, norm_w, eps, w_lm, rows, hidden, vocab, softcap, logits, partial, counter, out_ids);
}
