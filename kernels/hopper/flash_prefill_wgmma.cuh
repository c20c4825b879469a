// Hopper flash-attention prefill: one warpgroup owns 64 query rows of one head. TMA brings Q once
// and K/V tiles (64 keys) through a 2-stage mbarrier ring; S = Q K^T and O += P V run as
// wgmma.mma_async (P from registers, V as an MN-major operand); online softmax in registers.
#pragma once
#include "hopper/wgmma.cuh"

#define MET_FW_BQ 64        // query rows per block (one warpgroup, m64)
#define MET_FW_BKV 64       // keys per tile
#define MET_FW_THREADS 128
#define MET_FW_HALF_BYTES (64 * MET_SWIZZLE_ATOM_BYTES)  // one 64-row x 64-column bf16 swizzled box

// Dynamic shared memory for a head dim: Q + 2 stages of K and V, barriers, alignment slack.
__host__ __device__ constexpr int met_flash_wgmma_smem_bytes(int hd) {
  return (hd / 64) * MET_FW_HALF_BYTES * 5 + 64 + MET_SWIZZLE_GROUP_BYTES;
}

#if MET_HAS_WGMMA && MET_HAS_TMA
template <int HD>
__device__ __forceinline__ void met_fw_scores(float (&s)[32], const unsigned char* q_s, const unsigned char* k_s) {
  met_wgmma_fence();
#pragma unroll
  for (int j = 0; j < HD / 16; ++j) {  // 16 head dims per step: half j/4, 32 bytes per step inside it
    const int off = (j / 4) * MET_FW_HALF_BYTES + (j % 4) * 32;
    met_wgmma_m64n64k16_bf16_ss(s, met_wgmma_desc(q_s + off, 16, MET_SWIZZLE_GROUP_BYTES),
                                met_wgmma_desc(k_s + off, 16, MET_SWIZZLE_GROUP_BYTES), /*accumulate=*/j > 0);
  }
  met_wgmma_commit();
  met_wgmma_wait<0>();
  met_wgmma_fence_regs(s);
}

template <int HD>
__device__ __forceinline__ void met_fw_pv(float (&o)[HD / 2], const float (&p)[32], const unsigned char* v_s) {
  met_wgmma_fence();
#pragma unroll
  for (int kj = 0; kj < MET_FW_BKV / 16; ++kj) {
    // P as the A operand: score fragments 2kj and 2kj+1 cover keys 16kj..16kj+15.
    const uint32_t a[4] = {met_pack_bf16(p[8 * kj + 0], p[8 * kj + 1]), met_pack_bf16(p[8 * kj + 2], p[8 * kj + 3]),
                           met_pack_bf16(p[8 * kj + 4], p[8 * kj + 5]), met_pack_bf16(p[8 * kj + 6], p[8 * kj + 7])};
    // V is [key][d]: MN-major B. LBO = distance between the 64-wide d halves, SBO = 8 keys.
    const uint64_t db = met_wgmma_desc(v_s + kj * 16 * MET_SWIZZLE_ATOM_BYTES, MET_FW_HALF_BYTES, MET_SWIZZLE_GROUP_BYTES);
    if constexpr (HD == 128) met_wgmma_m64n128k16_bf16_rs_tb(o, a, db, /*accumulate=*/1);
    else met_wgmma_m64n64k16_bf16_rs_tb(o, a, db, /*accumulate=*/1);
  }
  met_wgmma_commit();
  met_wgmma_wait<0>();
  met_wgmma_fence_regs(o);
}

template <int HD>
__device__ __forceinline__ void met_fw_body(const MetTensorMap* q_map, const MetTensorMap* k_map,
                                            const MetTensorMap* v_map, const MetKvCache& cache, int slot,
                                            int start_pos, int T, int heads, float sm_scale, int window,
                                            float softcap, const met_bf16* sinks, met_bf16* out) {
  constexpr int kHalves = HD / 64, kTile = kHalves * MET_FW_HALF_BYTES;
  extern __shared__ __align__(1024) unsigned char met_fw_smem[];
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(met_fw_smem) + MET_SWIZZLE_GROUP_BYTES - 1) & ~uintptr_t(MET_SWIZZLE_GROUP_BYTES - 1));
  unsigned char* q_s = base;
  unsigned char* k_s = q_s + kTile;      // [2 stages]
  unsigned char* v_s = k_s + 2 * kTile;  // [2 stages]
  uint64_t* bars = reinterpret_cast<uint64_t*>(v_s + 2 * kTile);  // [0] Q, [1..2] K/V stages
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int h = blockIdx.y, kvh = h / (heads / cache.kv_heads), q0 = blockIdx.x * MET_FW_BQ;
  const int plane_row = (slot * cache.kv_heads + kvh) * cache.max_ctx;  // row of key 0 in the K/V maps

  const int last_q = min(start_pos + q0 + MET_FW_BQ, start_pos + T) - 1;
  const int first_tile = (window > 0 ? max(0, start_pos + q0 - window + 1) : 0) / MET_FW_BKV;
  const int last_tile = last_q / MET_FW_BKV;

  if (threadIdx.x == 0) {
    for (int i = 0; i < 3; ++i) met_mbar_init(&bars[i], /*arrivals=*/1);
    met_fence_barrier_init();
  }
  __syncthreads();
  auto issue_kv = [&](int tile) {
    const int s = (tile - first_tile) & 1;
    met_mbar_expect_tx(&bars[1 + s], 2 * kTile);
    for (int hf = 0; hf < kHalves; ++hf) {
      met_tma_load_2d(k_s + s * kTile + hf * MET_FW_HALF_BYTES, k_map, hf * 64, plane_row + tile * MET_FW_BKV, &bars[1 + s]);
      met_tma_load_2d(v_s + s * kTile + hf * MET_FW_HALF_BYTES, v_map, hf * 64, plane_row + tile * MET_FW_BKV, &bars[1 + s]);
    }
  };
  if (threadIdx.x == 0) {
    met_mbar_expect_tx(&bars[0], kTile);
    for (int hf = 0; hf < kHalves; ++hf) met_tma_load_3d(q_s + hf * MET_FW_HALF_BYTES, q_map, hf * 64, h, q0, &bars[0]);
    issue_kv(first_tile);
  }
  met_mbar_wait(&bars[0], 0);

  const int qpos[2] = {start_pos + q0 + 16 * warp + g, start_pos + q0 + 16 * warp + g + 8};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float o[HD / 2];
#pragma unroll
  for (int i = 0; i < HD / 2; ++i) o[i] = 0.f;

  for (int tile = first_tile; tile <= last_tile; ++tile) {
    const int it = tile - first_tile, s = it & 1;
    if (threadIdx.x == 0 && tile + 1 <= last_tile) issue_kv(tile + 1);  // stage s^1 was drained last iteration
    met_mbar_wait(&bars[1 + s], (it >> 1) & 1);
    float sc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) sc[i] = 0.f;
    met_fw_scores<HD>(sc, q_s, k_s + s * kTile);

    // Register 4i + 2hr + e holds (row g + 8hr, key 8i + 2t + e) of this warp's 16 rows.
    float corr[2];
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = tile * MET_FW_BKV + 8 * i + 2 * t + e;
          float v = sc[4 * i + 2 * hr + e] * sm_scale;
          if (softcap > 0.f) v = softcap * tanhf(v / softcap);
          const bool masked = key > qpos[hr] || (window > 0 && key <= qpos[hr] - window);
          sc[4 * i + 2 * hr + e] = masked ? -INFINITY : v;
          mx = fmaxf(mx, sc[4 * i + 2 * hr + e]);
        }
      mx = fmaxf(mx, met_shfl_xor(mx, 1));
      mx = fmaxf(mx, met_shfl_xor(mx, 2));
      const float m_new = fmaxf(m[hr], mx), m_use = m_new == -INFINITY ? 0.f : m_new;
      corr[hr] = __expf(m[hr] - m_use);
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = __expf(sc[4 * i + 2 * hr + e] - m_use);
          sc[4 * i + 2 * hr + e] = p;
          sum += p;
        }
      l[hr] = l[hr] * corr[hr] + sum;
      m[hr] = m_new;
    }
#pragma unroll
    for (int i = 0; i < HD / 8; ++i) {
      o[4 * i + 0] *= corr[0]; o[4 * i + 1] *= corr[0];
      o[4 * i + 2] *= corr[1]; o[4 * i + 3] *= corr[1];
    }
    met_fw_pv<HD>(o, sc, v_s + s * kTile);
    __syncthreads();  // every warp is done with stage s before it is refilled
  }

  const float sink = sinks ? met_to_float(sinks[h]) : -INFINITY;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    l[hr] += met_shfl_xor(l[hr], 1);
    l[hr] += met_shfl_xor(l[hr], 2);
    if (sinks) l[hr] += __expf(sink - (m[hr] == -INFINITY ? 0.f : m[hr]));
    const int row = q0 + 16 * warp + g + 8 * hr;
    if (row >= T) continue;
    const float inv = l[hr] > 0.f ? 1.f / l[hr] : 0.f;
    met_bf16* dst = out + (static_cast<long>(row) * heads + h) * HD;
#pragma unroll
    for (int i = 0; i < HD / 8; ++i) {
      dst[8 * i + 2 * t] = met_from_float(o[4 * i + 2 * hr] * inv);
      dst[8 * i + 2 * t + 1] = met_from_float(o[4 * i + 2 * hr + 1] * inv);
    }
  }
}

// q_map: q [T, heads, head_dim] as 3-D {head_dim, heads, T}, box {64, 1, 64}; k_map / v_map: the
// cache planes as 2-D {head_dim, slots * kv_heads * max_ctx}, box {64, 64}; all SWIZZLE_128B.
// grid (ceil(T / 64), heads), block 128, dynamic smem met_flash_wgmma_smem_bytes(head_dim).
// head_dim 64 or 128 (v_head_dim equal); K/V of the prompt are appended before the launch.
extern "C" __global__ void met_flash_prefill_wgmma(const __grid_constant__ MetTensorMap q_map, const __grid_constant__ MetTensorMap k_map, const __grid_constant__ MetTensorMap v_map, MetKvCache cache, int slot, int start_pos, int T, int heads, float sm_scale, int window, float softcap, const met_bf16* sinks, met_bf16* out) {
  if (cache.head_dim == 128)
    met_fw_body<128>(&q_map, &k_map, &v_map, cache, slot, start_pos, T, heads, sm_scale, window, softcap, sinks, out);
  else if (cache.head_dim == 64)
    met_fw_body<64>(&q_map, &k_map, &v_map, cache, slot, start_pos, T, heads, sm_scale, window, softcap, sinks, out);
}
#endif  // MET_HAS_WGMMA && MET_HAS_TMA
