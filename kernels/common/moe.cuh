// Mixture-of-experts decode bodies (rows 1-16): router logits + top-k selection, the routed
// experts' gate/up GEMV with SiLU gating, and the down GEMV with the routing-weighted sum. Expert
// weights are one [experts * out, in] matrix so every MetWeight format works unchanged.
#pragma once
#include "common/device.cuh"
#include "common/gemv.cuh"

// Largest expert count the router stages in shared memory.
#define MET_MOE_MAX_EXPERTS 512

// One block per row. softmax_first: softmax over all experts then top-k (Qwen/DeepSeek style,
// renormalize = norm_topk_prob); else top-k over logits then softmax over the chosen (gpt-oss).
extern "C" __global__ void met_moe_router_topk(const met_bf16* x, MetWeight w_router, const met_bf16* bias,
                                               int hidden, int experts, int top_k, int softmax_first,
                                               int renormalize, int* topk_ids, float* topk_w) {
  __shared__ float logit_s[MET_MOE_MAX_EXPERTS];
  const int r = blockIdx.x, warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  const met_bf16* xr = x + static_cast<long>(r) * hidden;
  for (int e = warp; e < experts; e += MET_WARPS_PER_BLOCK) {
    float acc[MET_GEMV_MAX_ROWS];
    met_warp_gemv_row(w_router, e, xr, /*nrows=*/1, hidden, /*gamma=*/nullptr, acc);
    if (lane == 0) logit_s[e] = acc[0] + (bias ? met_to_float(bias[e]) : 0.f);
  }
  __syncthreads();
  if (warp != 0) return;
  if (softmax_first) {
    float mx = -INFINITY;
    for (int e = lane; e < experts; e += MET_WARP) mx = fmaxf(mx, logit_s[e]);
    mx = met_warp_reduce_max(mx);
    float sum = 0.f;
    for (int e = lane; e < experts; e += MET_WARP) sum += __expf(logit_s[e] - mx);
    sum = met_warp_reduce(sum);
    for (int e = lane; e < experts; e += MET_WARP) logit_s[e] = __expf(logit_s[e] - mx) / sum;
  }
  // Repeated warp argmax; a chosen expert is masked with -inf.
  float chosen_sum = 0.f, first = 0.f;
  for (int k = 0; k < top_k; ++k) {
    float v = -INFINITY;
    int idx = 0x7fffffff;
    for (int e = lane; e < experts; e += MET_WARP)
      if (logit_s[e] > v) { v = logit_s[e]; idx = e; }
    met_warp_argmax(v, idx);
    if (k == 0) first = v;
    const float wk = softmax_first ? v : __expf(v - first);  // top-1 is the max: stable softmax
    chosen_sum += wk;
    if (lane == 0) {
      topk_ids[r * top_k + k] = idx;
      topk_w[r * top_k + k] = wk;
      logit_s[idx] = -INFINITY;
    }
  }
  if (lane == 0 && (!softmax_first || renormalize))
    for (int k = 0; k < top_k; ++k) topk_w[r * top_k + k] /= chosen_sum;
}

// act [rows * top_k, inter] = silu(x W_gate[e]^T) * (x W_up[e]^T); w_gate_up is [experts, 2*inter,
// hidden] (gate rows first). grid (ceil(inter / warps), rows * top_k).
extern "C" __global__ void met_moe_gate_up_silu(const met_bf16* x, MetWeight w_gate_up, const int* topk_ids,
                                                int hidden, int inter, int top_k, met_bf16* act) {
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  const int j = blockIdx.x * MET_WARPS_PER_BLOCK + warp, slot = blockIdx.y, r = slot / top_k;
  if (j >= inter) return;
  const long e = topk_ids[slot];
  const met_bf16* xr = x + static_cast<long>(r) * hidden;
  float g[MET_GEMV_MAX_ROWS], u[MET_GEMV_MAX_ROWS];
  met_warp_gemv_row(w_gate_up, e * 2 * inter + j, xr, /*nrows=*/1, hidden, nullptr, g);
  met_warp_gemv_row(w_gate_up, e * 2 * inter + inter + j, xr, /*nrows=*/1, hidden, nullptr, u);
  if (lane == 0) act[static_cast<long>(slot) * inter + j] = met_from_float(met_silu(g[0]) * u[0]);
}

// out [rows, hidden] = sum_k topk_w[r, k] * act[r, k] W_down[e_k]^T; w_down is [experts, hidden,
// inter]. Summed in slot order in registers: deterministic, no atomics. grid (ceil(hidden/warps), rows).
extern "C" __global__ void met_moe_down(const met_bf16* act, MetWeight w_down, const int* topk_ids,
                                        const float* topk_w, int hidden, int inter, int top_k, met_bf16* out) {
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  const int o = blockIdx.x * MET_WARPS_PER_BLOCK + warp, r = blockIdx.y;
  if (o >= hidden) return;
  float sum = 0.f;
  for (int k = 0; k < top_k; ++k) {
    const int slot = r * top_k + k;
    float acc[MET_GEMV_MAX_ROWS];
    met_warp_gemv_row(w_down, static_cast<long>(topk_ids[slot]) * hidden + o, act + static_cast<long>(slot) * inter,
                      /*nrows=*/1, inter, nullptr, acc);
    sum += topk_w[slot] * acc[0];
  }
  if (lane == 0) out[static_cast<long>(r) * hidden + o] = met_from_float(sum);
}
