// Prefill attention on warp tensor cores (flash attention): S = Q K^T and O += P V with mma.sync
// m16n8k16, online softmax in registers, causal + sliding-window masks, softcap and sinks. One
// block = 64 query rows of one head (4 warps x 16 rows); K/V tiles stream from the KV cache.
#pragma once
#include "common/mma_sync.cuh"

#define MET_FLASH_BQ 64       // query rows per block
#define MET_FLASH_THREADS 128 // 4 warps x 16 rows
#define MET_FLASH_PAD 8       // bf16 row padding of the staged tiles (bank-conflict-free ldmatrix)

// Keys per tile for a head dim: the O accumulator is HD/2 fp32 per thread, so big heads use smaller tiles.
__host__ __device__ constexpr int met_flash_bkv(int hd) { return hd > 128 ? 32 : 64; }
// Dynamic shared memory a launch needs (the emitter uses the same formula and opts in above 48 KiB).
__host__ __device__ constexpr int met_flash_smem_bytes(int hd) {
  return (MET_FLASH_BQ + 2 * met_flash_bkv(hd)) * (hd + MET_FLASH_PAD) * 2;
}

#if MET_HAS_MMA_SYNC
template <int HD>
__device__ __forceinline__ void met_flash_prefill_body(const met_bf16* q, const MetKvCache& cache, int slot,
                                                       int start_pos, int T, int heads, float sm_scale, int window,
                                                       float softcap, const met_bf16* sinks, met_bf16* out) {
  constexpr int BKV = met_flash_bkv(HD), LD = HD + MET_FLASH_PAD;
  constexpr int kSFrags = BKV / 8, kOFrags = HD / 8;
  extern __shared__ __align__(128) unsigned char met_flash_smem[];
  met_bf16* q_s = reinterpret_cast<met_bf16*>(met_flash_smem);  // [BQ][LD]
  met_bf16* k_s = q_s + MET_FLASH_BQ * LD;                        // [BKV][LD]
  met_bf16* v_s = k_s + BKV * LD;                                 // [BKV][LD]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int h = blockIdx.y, kvh = h / (heads / cache.kv_heads);
  const int q0 = blockIdx.x * MET_FLASH_BQ;

  constexpr int kChunks = HD / 8;  // 16-byte chunks per row
  for (int c = threadIdx.x; c < MET_FLASH_BQ * kChunks; c += MET_FLASH_THREADS) {
    const int r = c / kChunks, d = (c % kChunks) * 8;
    const bool valid = q0 + r < T;
    met_copy16(&q_s[r * LD + d], q + (static_cast<long>(valid ? q0 + r : 0) * heads + h) * HD + d, valid);
  }
  met_copy_commit();

  // Absolute positions of this thread's two query rows (g and g + 8 of the warp's 16).
  const int qpos[2] = {start_pos + q0 + warp * 16 + g, start_pos + q0 + warp * 16 + g + 8};
  const int last_q = min(start_pos + q0 + MET_FLASH_BQ, start_pos + T) - 1;
  const int first_key = window > 0 ? max(0, start_pos + q0 - window + 1) : 0;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float o[kOFrags][4] = {};
  const met_bf16* kbase = cache.k + met_kv_offset(cache, slot, kvh, 0, HD);
  const met_bf16* vbase = cache.v + met_kv_offset(cache, slot, kvh, 0, HD);

  for (int k0 = (first_key / BKV) * BKV; k0 <= last_q; k0 += BKV) {
    __syncthreads();
    for (int c = threadIdx.x; c < BKV * kChunks; c += MET_FLASH_THREADS) {
      const int r = c / kChunks, d = (c % kChunks) * 8;
      const bool valid = k0 + r <= last_q;
      const long off = static_cast<long>(valid ? k0 + r : 0) * HD + d;
      met_copy16(&k_s[r * LD + d], kbase + off, valid);
      met_copy16(&v_s[r * LD + d], vbase + off, valid);
    }
    met_copy_commit();
    met_copy_wait<0>();
    __syncthreads();

    // S = Q K^T for the warp's 16 rows x BKV keys.
    float s[kSFrags][4] = {};
#pragma unroll
    for (int kk = 0; kk < HD; kk += 16) {
      uint32_t a[4];
      met_ldmatrix_x4(a, &q_s[(warp * 16 + lane % 16) * LD + kk + (lane / 16) * 8]);
#pragma unroll
      for (int nj = 0; nj < kSFrags; nj += 2) {
        uint32_t r[4];
        const int mat = lane / 8;
        met_ldmatrix_x4(r, &k_s[(nj * 8 + (mat / 2) * 8 + lane % 8) * LD + kk + (mat % 2) * 8]);
        const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
        met_mma_bf16_16816(s[nj], a, b0);
        met_mma_bf16_16816(s[nj + 1], a, b1);
      }
    }

    // Scale, cap, mask, and the online-softmax update (rows g and g+8; a row's 4 owners are a quad).
    float corr[2];
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float mx = -INFINITY;
#pragma unroll
      for (int ni = 0; ni < kSFrags; ++ni)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = k0 + ni * 8 + 2 * t + e;
          float v = s[ni][2 * hr + e] * sm_scale;
          if (softcap > 0.f) v = softcap * tanhf(v / softcap);
          const bool masked = key > qpos[hr] || (window > 0 && key <= qpos[hr] - window);
          s[ni][2 * hr + e] = masked ? -INFINITY : v;
          mx = fmaxf(mx, s[ni][2 * hr + e]);
        }
      mx = fmaxf(mx, met_shfl_xor(mx, 1));
      mx = fmaxf(mx, met_shfl_xor(mx, 2));
      const float m_new = fmaxf(m[hr], mx);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;  // fully masked so far: avoid inf - inf
      corr[hr] = __expf(m[hr] - m_use);
      float sum = 0.f;
#pragma unroll
      for (int ni = 0; ni < kSFrags; ++ni)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = __expf(s[ni][2 * hr + e] - m_use);
          s[ni][2 * hr + e] = p;
          sum += p;
        }
      l[hr] = l[hr] * corr[hr] + sum;  // per-thread partial; quad-reduced at the end
      m[hr] = m_new;
    }
#pragma unroll
    for (int di = 0; di < kOFrags; ++di) {
      o[di][0] *= corr[0]; o[di][1] *= corr[0];
      o[di][2] *= corr[1]; o[di][3] *= corr[1];
    }

    // O += P V: two adjacent S fragments form one A fragment (16 keys); V via transposed ldmatrix.
#pragma unroll
    for (int kj = 0; kj < BKV / 16; ++kj) {
      const uint32_t a[4] = {met_pack_bf16x2(s[2 * kj][0], s[2 * kj][1]), met_pack_bf16x2(s[2 * kj][2], s[2 * kj][3]),
                             met_pack_bf16x2(s[2 * kj + 1][0], s[2 * kj + 1][1]),
                             met_pack_bf16x2(s[2 * kj + 1][2], s[2 * kj + 1][3])};
#pragma unroll
      for (int dp = 0; dp < HD / 16; ++dp) {
        uint32_t r[4];
        const int mat = lane / 8;
        met_ldmatrix_x4_trans(r, &v_s[(kj * 16 + (mat % 2) * 8 + lane % 8) * LD + dp * 16 + (mat / 2) * 8]);
        const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
        met_mma_bf16_16816(o[2 * dp], a, b0);
        met_mma_bf16_16816(o[2 * dp + 1], a, b1);
      }
    }
  }

  const float sink = sinks ? met_to_float(sinks[h]) : -INFINITY;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    l[hr] += met_shfl_xor(l[hr], 1);
    l[hr] += met_shfl_xor(l[hr], 2);
    if (sinks) l[hr] += __expf(sink - (m[hr] == -INFINITY ? 0.f : m[hr]));
    const int row = q0 + warp * 16 + g + hr * 8;
    if (row >= T) continue;
    const float inv = l[hr] > 0.f ? 1.f / l[hr] : 0.f;
    met_bf16* dst = out + (static_cast<long>(row) * heads + h) * HD;
#pragma unroll
    for (int di = 0; di < kOFrags; ++di) {
      dst[di * 8 + 2 * t] = met_from_float(o[di][2 * hr] * inv);
      dst[di * 8 + 2 * t + 1] = met_from_float(o[di][2 * hr + 1] * inv);
    }
  }
}

// q/out [T, heads, head_dim] for one sequence whose first row sits at start_pos; K/V (already
// appended) are read from the cache slot. grid (ceil(T / 64), heads), block MET_FLASH_THREADS,
// dynamic smem met_flash_smem_bytes(head_dim). head_dim 64, 128 or 256 (v_head_dim equal).
extern "C" __global__ void met_flash_prefill_mma(const met_bf16* q, MetKvCache cache, int slot, int start_pos, int T,
                                                 int heads, float sm_scale, int window, float softcap,
                                                 const met_bf16* sinks, met_bf16* out) {
  switch (cache.head_dim) {
    case 64: met_flash_prefill_body<64>(q, cache, slot, start_pos, T, heads, sm_scale, window, softcap, sinks, out); break;
    case 128: met_flash_prefill_body<128>(q, cache, slot, start_pos, T, heads, sm_scale, window, softcap, sinks, out); break;
    case 256: met_flash_prefill_body<256>(q, cache, slot, start_pos, T, heads, sm_scale, window, softcap, sinks, out); break;
    default: break;  // no instantiation: the planner only routes supported head dims here
  }
}
#endif  // MET_HAS_MMA_SYNC
