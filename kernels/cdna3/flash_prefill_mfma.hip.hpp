// Causal prefill attention on the CDNA matrix cores (flash attention): one wavefront per 16 query
// rows of one head, S = Q K^T and O += P V as 16 x 16 MFMA tiles 32 k deep
// (cdna3/mfma.hip.hpp), the online softmax in registers. Keys stream in tiles of 32; each tile's V
// goes through the wavefront's LDS, and so does P, to turn S's layout (a lane per key) into the A
// operand's (a lane per row). The slice is emit's flash slice (MET_FLASH_SLICE_ROWS rows x
// MET_FLASH_SLICE_HEADS heads, common/interp/smem.h); one pass per sequence the rows belong to.
// Head dims 32, 64 and 128 with v_head_dim equal (the rule's requires).
#pragma once
#include "cdna3/mfma.hip.hpp"
#include "common/interp/prims.cuh"

namespace met_interp {

#if MET_HAS_MFMA
constexpr int kFlashMfmaKeys = 32;  // keys per tile: one 32-deep P V step
constexpr int kFlashMfmaPad = 8;    // bf16 row padding of the LDS tiles: 16-byte aligned rows

struct FlashMfmaLds {
  u16 v[MET_INTERP_THREADS / MET_WAVE][kFlashMfmaKeys][MET_FLASH_MAX_DV + kFlashMfmaPad];
  u16 p[MET_INTERP_THREADS / MET_WAVE][16][kFlashMfmaKeys + kFlashMfmaPad];
};

// Reductions over the 16 lanes that hold one row of S (lanes with the same lane / 16).
__device__ __forceinline__ float flash_max16(float v) {
  for (int o = 1; o < 16; o <<= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float flash_sum16(float v) {
  for (int o = 1; o < 16; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Position of `row` when it belongs to the sequence at `seg`, else -1 (every key masked).
__device__ __forceinline__ int flash_row_pos(const MetArgs_flash_prefill_mfma& a, int64_t row, int64_t row_end, int64_t seg) {
  return row < row_end && a.seq_base[row] == seg ? a.positions[row] : -1;
}

// One wavefront: query rows row0 + [0, 16) of head h that belong to the sequence at `seg` (rows
// at or past row_end, or of another sequence, are left alone).
template <int HD>
__device__ void flash_wave_mfma(const MetArgs_flash_prefill_mfma& a, int64_t seg, int64_t row0, int64_t row_end, int h,
                                u16 (*v_s)[MET_FLASH_MAX_DV + kFlashMfmaPad], u16 (*p_s)[kFlashMfmaKeys + kFlashMfmaPad]) {
  constexpr int kDimBlocks = HD / 16;
  const int lane = threadIdx.x % MET_WAVE, m = lane % 16, q = lane / 16;
  const int heads = static_cast<int>(a.heads), kvh = static_cast<int>(a.kv_heads);
  const int64_t kw = static_cast<int64_t>(kvh) * HD, window = a.window;
  const int64_t head_off = static_cast<int64_t>(h / (heads / kvh)) * HD;
  // S and O rows of this lane: 4q + v. Q operand row: m.
  int rpos[4];
#pragma unroll
  for (int v = 0; v < 4; ++v) rpos[v] = flash_row_pos(a, row0 + 4 * q + v, row_end, seg);
  const int mine = flash_row_pos(a, row0 + m, row_end, seg);
  int max_pos = mine, min_pos = mine < 0 ? 0x7fffffff : mine;
  for (int o = 1; o < 16; o <<= 1) {
    max_pos = max(max_pos, __shfl_xor_sync(0xffffffffu, max_pos, o));
    min_pos = min(min_pos, __shfl_xor_sync(0xffffffffu, min_pos, o));
  }
  if (max_pos < 0) return;
  const int64_t first_key = window > 0 ? max(static_cast<int64_t>(0), static_cast<int64_t>(min_pos) - window + 1) : 0;
  const u16* qp = a.q + min(row0 + m, row_end - 1) * a.q_stride + static_cast<int64_t>(h) * HD + 8 * q;
  uint4 qf[HD / 32];
#pragma unroll
  for (int i = 0; i < HD / 32; ++i) qf[i] = *reinterpret_cast<const uint4*>(qp + 32 * i);
  float mrow[4], lrow[4];
  met_f32x4 o[kDimBlocks];
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    mrow[v] = -INFINITY;
    lrow[v] = 0.f;
  }
#pragma unroll
  for (int j = 0; j < kDimBlocks; ++j) o[j] = met_f32x4{};

  for (int64_t k0 = (first_key / kFlashMfmaKeys) * kFlashMfmaKeys; k0 <= max_pos; k0 += kFlashMfmaKeys) {
    // V tile: 32 keys x HD, clamped to the last key (masked below).
    for (int c = lane; c < kFlashMfmaKeys * HD / 8; c += MET_WAVE) {
      const int r = c / (HD / 8), d = (c % (HD / 8)) * 8;
      const int64_t key = min(k0 + r, static_cast<int64_t>(max_pos));
      *reinterpret_cast<uint4*>(&v_s[r][d]) = *reinterpret_cast<const uint4*>(a.v_cache + (seg + key) * kw + head_off + d);
    }
    // S = Q K^T: 16 rows x 32 keys as two 16 x 16 tiles; lane holds keys k0 + 16 kb + m.
    met_f32x4 s[2];
#pragma unroll
    for (int kb = 0; kb < 2; ++kb) {
      const int64_t key = min(k0 + 16 * kb + m, static_cast<int64_t>(max_pos));
      const u16* kp = a.k_cache + (seg + key) * kw + head_off + 8 * q;
      s[kb] = met_f32x4{};
#pragma unroll
      for (int i = 0; i < HD / 32; ++i) s[kb] = met_mfma_16x16_k32(s[kb], qf[i], *reinterpret_cast<const uint4*>(kp + 32 * i));
    }
    // Scale, cap, mask; online softmax per row.
    float corr[4];
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      float mx = -INFINITY;
#pragma unroll
      for (int kb = 0; kb < 2; ++kb) {
        const int64_t key = k0 + 16 * kb + m;
        float x = s[kb][v] * a.scale;
        if (a.softcap > 0.f) x = a.softcap * tanhf(x / a.softcap);
        const bool masked = key > rpos[v] || (window > 0 && key <= rpos[v] - window);
        s[kb][v] = masked ? -INFINITY : x;
        mx = fmaxf(mx, s[kb][v]);
      }
      mx = flash_max16(mx);
      const float m_new = fmaxf(mrow[v], mx);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      corr[v] = mrow[v] == -INFINITY ? 0.f : expf(mrow[v] - m_use);
      float sum = 0.f;
#pragma unroll
      for (int kb = 0; kb < 2; ++kb) {
        const float p = s[kb][v] == -INFINITY ? 0.f : expf(s[kb][v] - m_use);
        s[kb][v] = p;
        sum += p;
      }
      lrow[v] = lrow[v] * corr[v] + sum;  // this lane's keys; the 16 lanes are summed at the end
      mrow[v] = m_new;
    }
#pragma unroll
    for (int j = 0; j < kDimBlocks; ++j)
#pragma unroll
      for (int v = 0; v < 4; ++v) o[j][v] *= corr[v];
    // O += P V: P (bf16) through LDS into the A layout, V columns gathered as B.
#pragma unroll
    for (int kb = 0; kb < 2; ++kb)
#pragma unroll
      for (int v = 0; v < 4; ++v) p_s[4 * q + v][16 * kb + m] = to_bf(s[kb][v]);
    __syncwarp();
    const uint4 pa = *reinterpret_cast<const uint4*>(&p_s[m][8 * q]);
#pragma unroll
    for (int j = 0; j < kDimBlocks; ++j) {
      uint32_t w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        w[i] = static_cast<uint32_t>(v_s[8 * q + 2 * i][16 * j + m]) |
               (static_cast<uint32_t>(v_s[8 * q + 2 * i + 1][16 * j + m]) << 16);
      o[j] = met_mfma_16x16_k32(o[j], pa, make_uint4(w[0], w[1], w[2], w[3]));
    }
    __syncwarp();  // the next tile overwrites v_s and p_s
  }
  const float sink = a.sinks ? bf(a.sinks[h]) : -INFINITY;
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    float l = flash_sum16(lrow[v]);
    // With a sink: m = max(sink, m), everything rescaled by exp(m_old - m), plus exp(sink - m).
    float w = 1.f;
    if (a.sinks) {
      const float mm = fmaxf(sink, mrow[v]);
      w = mrow[v] == -INFINITY ? 0.f : expf(mrow[v] - mm);
      l = l * w + expf(sink - mm);
    }
    if (rpos[v] < 0) continue;
    const float inv = l > 0.f ? w / l : 0.f;
    u16* dst = a.out + ((row0 + 4 * q + v) * heads + h) * HD;
#pragma unroll
    for (int j = 0; j < kDimBlocks; ++j) dst[16 * j + m] = to_bf(o[j][v] * inv);
  }
}

MET_ENTRY(flash_prefill_mfma) {
  __shared__ FlashMfmaLds lds;
  const SliceRange rr = slice_rows(a, slice);
  const SliceRange hs = slice_cols(a, slice, a.heads);
  const int wave = threadIdx.x / MET_WAVE;
  const int64_t blocks = (rr.end - rr.begin + 15) / 16, nh = hs.end - hs.begin;
  for (int64_t it = wave; it < blocks * nh; it += MET_INTERP_THREADS / MET_WAVE) {
    const int64_t row0 = rr.begin + (it / nh) * 16, row_end = min(row0 + 16, rr.end);
    const int h = static_cast<int>(hs.begin + it % nh);
    for (int64_t r = row0; r < row_end;) {  // one pass per run of rows of one sequence
      const int64_t seg = a.seq_base[r];
      if (a.head_dim == 128)
        flash_wave_mfma<128>(a, seg, row0, row_end, h, lds.v[wave], lds.p[wave]);
      else if (a.head_dim == 64)
        flash_wave_mfma<64>(a, seg, row0, row_end, h, lds.v[wave], lds.p[wave]);
      else
        flash_wave_mfma<32>(a, seg, row0, row_end, h, lds.v[wave], lds.p[wave]);
      while (r < row_end && a.seq_base[r] == seg) ++r;
    }
  }
}
#endif  // MET_HAS_MFMA

}  // namespace met_interp
