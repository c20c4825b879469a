// Split-KV decode attention (decode/batch, 1-128 rows): each block takes one (row, kv head, KV
// split), one warp per q head of the GQA group sharing the K/V tiles staged in shared memory, and
// keeps an online softmax; a merge kernel combines the splits (and attention sinks) per q head.
#pragma once
#include "common/device.cuh"

// Keys per shared-memory tile: one key per lane when scoring.
#define MET_ATTN_TILE MET_WARP
// Largest v_head_dim / MET_WARP a lane accumulates in registers (head_dim up to 256 on 32 lanes).
#define MET_ATTN_MAX_DPL 8
// Padding (bf16 elements) of a staged K row so that lanes reading one column hit distinct banks.
#define MET_ATTN_K_PAD 2

// Dynamic shared memory the split kernel needs for a launch (the emitter uses the same formula).
__host__ __device__ inline int met_attn_decode_smem_bytes(int group, int head_dim, int v_head_dim) {
  return group * head_dim * 4 + MET_ATTN_TILE * (head_dim + MET_ATTN_K_PAD) * 2 +
         MET_ATTN_TILE * v_head_dim * 2 + group * MET_ATTN_TILE * 4;
}

// q [rows, heads, head_dim]; grid (kv_heads, splits, rows), block = (heads / kv_heads) warps.
// Writes unnormalised partial outputs part_o [rows, heads, splits, v_head_dim] and (max, sum) in
// part_ml [rows, heads, splits, 2]. Row r attends keys [max(0, len - window), len), len = pos + 1.
extern "C" __global__ void met_attn_decode_split(const met_bf16* q, MetKvCache cache, const int* positions,
                                                 const int* slots, int heads, float sm_scale, int window,
                                                 float softcap, int keys_per_split, float* part_o, float* part_ml) {
  extern __shared__ float met_attn_smem[];
  const int kvh = blockIdx.x, split = blockIdx.y, r = blockIdx.z, splits = gridDim.y;
  const int group = heads / cache.kv_heads;
  const int hd = cache.head_dim, vd = cache.v_head_dim, kstride = hd + MET_ATTN_K_PAD;
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  const int h = kvh * group + warp;

  float* q_s = met_attn_smem;                                               // [group][hd]
  met_bf16* k_s = reinterpret_cast<met_bf16*>(q_s + group * hd);            // [TILE][kstride]
  met_bf16* v_s = k_s + MET_ATTN_TILE * kstride;                            // [TILE][vd]
  float* p_s = reinterpret_cast<float*>(v_s + MET_ATTN_TILE * vd);          // [group][TILE]

  const int len = positions[r] + 1;
  const int lo_win = window > 0 ? max(0, len - window) : 0;
  const int begin = max(lo_win, split * keys_per_split), end = min(len, (split + 1) * keys_per_split);

  for (int i = threadIdx.x; i < group * hd; i += blockDim.x)
    q_s[i] = met_to_float(q[(static_cast<long>(r) * heads + kvh * group) * hd + i]) * sm_scale;

  float m = -INFINITY, l = 0.f, o[MET_ATTN_MAX_DPL];
#pragma unroll
  for (int i = 0; i < MET_ATTN_MAX_DPL; ++i) o[i] = 0.f;
  const met_bf16* kbase = cache.k + met_kv_offset(cache, slots[r], kvh, 0, hd);
  const met_bf16* vbase = cache.v + met_kv_offset(cache, slots[r], kvh, 0, vd);

  for (int t0 = begin; t0 < end; t0 += MET_ATTN_TILE) {
    __syncthreads();  // previous tile fully consumed (and q_s written on the first pass)
    const int n = min(MET_ATTN_TILE, end - t0);
    for (int i = threadIdx.x; i < n * hd; i += blockDim.x)
      k_s[(i / hd) * kstride + i % hd] = kbase[static_cast<long>(t0) * hd + i];
    for (int i = threadIdx.x; i < n * vd; i += blockDim.x) v_s[i] = vbase[static_cast<long>(t0) * vd + i];
    __syncthreads();

    // Score: lane j owns key t0 + j.
    float s = -INFINITY;
    if (lane < n) {
      float acc = 0.f;
      for (int d = 0; d < hd; ++d) acc += q_s[warp * hd + d] * met_to_float(k_s[lane * kstride + d]);
      s = softcap > 0.f ? softcap * tanhf(acc / softcap) : acc;
    }
    const float m_new = fmaxf(m, met_warp_reduce_max(s));
    const float p = lane < n ? __expf(s - m_new) : 0.f;
    const float corr = __expf(m - m_new);  // exp(-inf) = 0 on the first tile
    l = l * corr + met_warp_reduce(p);
    m = m_new;
    p_s[warp * MET_ATTN_TILE + lane] = p;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < MET_ATTN_MAX_DPL; ++i) {
      const int d = lane + i * MET_WARP;
      if (d < vd) {
        float acc = o[i] * corr;
        for (int j = 0; j < n; ++j) acc += p_s[warp * MET_ATTN_TILE + j] * met_to_float(v_s[j * vd + d]);
        o[i] = acc;
      }
    }
  }
  if (warp >= group) return;
  const long part = (static_cast<long>(r) * heads + h) * splits + split;
#pragma unroll
  for (int i = 0; i < MET_ATTN_MAX_DPL; ++i) {
    const int d = lane + i * MET_WARP;
    if (d < vd) part_o[part * vd + d] = o[i];
  }
  if (lane == 0) {
    part_ml[part * 2 + 0] = m;
    part_ml[part * 2 + 1] = l;
  }
}

// out [rows, heads, v_head_dim] = sum_s exp(m_s - M) o_s / (sum_s exp(m_s - M) l_s + exp(sink - M)).
// grid (heads, rows); sinks (nullable) are per-head logits that only join the denominator.
extern "C" __global__ void met_attn_decode_merge(const float* part_o, const float* part_ml, const met_bf16* sinks,
                                                 int heads, int splits, int v_head_dim, met_bf16* out) {
  const int h = blockIdx.x, r = blockIdx.y;
  const long base = (static_cast<long>(r) * heads + h) * splits;
  const float sink = sinks ? met_to_float(sinks[h]) : -INFINITY;
  float M = sink;
  for (int s = 0; s < splits; ++s) M = fmaxf(M, part_ml[(base + s) * 2]);
  float L = sinks ? __expf(sink - M) : 0.f;
  for (int s = 0; s < splits; ++s) {
    const float ms = part_ml[(base + s) * 2];
    if (ms != -INFINITY) L += part_ml[(base + s) * 2 + 1] * __expf(ms - M);
  }
  const float inv_l = L > 0.f ? 1.f / L : 0.f;
  for (int d = threadIdx.x; d < v_head_dim; d += blockDim.x) {
    float acc = 0.f;
    for (int s = 0; s < splits; ++s) {
      const float ms = part_ml[(base + s) * 2];
      if (ms != -INFINITY) acc += part_o[(base + s) * v_head_dim + d] * __expf(ms - M);
    }
    out[(static_cast<long>(r) * heads + h) * v_head_dim + d] = met_from_float(acc * inv_l);
  }
}
