// Causal prefill attention on the tensor cores (flash attention, one warp per 16 query rows of one
// head): S = Q K^T and O += P V with mma.sync m16n8k16, the online softmax in registers. Q and K
// fragments come straight from memory with 16-byte loads (the head-dim order inside each 32-wide
// block is permuted identically for both, which leaves every dot product unchanged); V goes
// through a per-warp shared tile and transposed ldmatrix. Keys stream in tiles of 16; heads of up
// to 128 dims take one pass, 256-dim heads two and 512-dim heads four (each pass scores the keys
// over the whole head and computes 128 of the output dims, so the V tile stays 128 dims wide).
#pragma once
#include "common/interp/prims.cuh"
#include "common/mma_sync.cuh"

namespace met_interp {

// Tile geometry: kernels/common/interp/smem.h (the host sizes shared memory from the same macros).
constexpr int kFlashKeys = MET_FLASH_KEYS;
constexpr int kFlashPad = MET_FLASH_PAD;  // bf16 row padding of the V tile: conflict-free ldmatrix rows

constexpr int kFlashMaxDv = MET_FLASH_MAX_DV;  // output dims one pass computes (128: 256- and 512-dim heads take 2 and 4 passes)

// The factor a row's output sums are multiplied by at the end: 1 / (the row's sum over its quad),
// and with a sink, m = max(sink, m), everything rescaled by exp(m_old - m), plus exp(sink - m).
// `ex` is the exponential of the base the scores and m are in (the wgmma body's are base 2).
template <class Exp>
__device__ __forceinline__ float flash_row_scale(float l, float m, bool has_sink, float sink, Exp ex) {
  l += met_shfl_xor(l, 1);
  l += met_shfl_xor(l, 2);
  float w = 1.f;
  if (has_sink) {
    const float mm = fmaxf(sink, m);
    w = m == -INFINITY ? 0.f : ex(m - mm);
    l = l * w + ex(sink - mm);
  }
  return l > 0.f ? w / l : 0.f;
}

// One warp: the query rows row0 + [0, 16) of head h that belong to the sequence at `seg_base`
// (others, and rows at or past row_end, are left alone), output dims [dv0, dv0 + DV). A row's
// position is pos[row]. Scores cover the whole head dim HD on every pass.
// With kRing, the cache is a ring of `ring` rows a sequence (position p at row seg_base + p % ring):
// a 16-key tile starts at a multiple of 16 in position and a ring's rows are a multiple of 64
// (model/kv_ring.hpp), so the tile's keys lie in consecutive rows from its first one's.
template <int HD, int DV, bool kRing = false>
__device__ void flash_block(const u16* q, int64_t q_stride, const u16* kc, const u16* vc, const int64_t* base_of,
                            int64_t seg_base, const int* pos, int64_t row0, int64_t row_end, int h, int kv_head, int kv_heads,
                            int64_t window, float scale, float softcap, const u16* sinks, u16* out, int heads, u16* v_s,
                            int dv0, int ring = 0) {
  constexpr int LD = DV + kFlashPad;
  constexpr int kOFrags = DV / 8;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t kw = static_cast<int64_t>(kv_heads) * HD;
  // Position of lane's row (lanes 0-15), -1 when the row is not in this segment.
  const int64_t lrow = row0 + (lane & 15);
  const int my_pos = lrow < row_end && base_of[lrow] == seg_base ? pos[lrow] : -1;
  const int rows_pos[2] = {__shfl_sync(0xffffffffu, my_pos, g), __shfl_sync(0xffffffffu, my_pos, g + 8)};
  int max_pos = my_pos, min_pos = my_pos < 0 ? 0x7fffffff : my_pos;
  for (int o = 16; o > 0; o >>= 1) {
    max_pos = max(max_pos, __shfl_xor_sync(0xffffffffu, max_pos, o));
    min_pos = min(min_pos, __shfl_xor_sync(0xffffffffu, min_pos, o));
  }
  if (max_pos < 0) return;
  const int64_t first_key = window > 0 ? max(static_cast<int64_t>(0), static_cast<int64_t>(min_pos) - window + 1) : 0;
  const u16* qa = q + min(row0 + g, row_end - 1) * q_stride + h * HD + 8 * t;
  const u16* qb = q + min(row0 + g + 8, row_end - 1) * q_stride + h * HD + 8 * t;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float o[kOFrags][4];
#pragma unroll
  for (int i = 0; i < kOFrags; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;

  const int64_t last_key = max_pos;
  for (int64_t k0 = (first_key / kFlashKeys) * kFlashKeys; k0 <= last_key; k0 += kFlashKeys) {
    const int64_t base = kRing ? seg_base + static_cast<int>(k0) % ring - k0 : seg_base;  // the tile's key t at row base + t
    // V tile: 16 keys x HD, clamped to the last key (masked below).
    __syncwarp();
    constexpr int kChunks = kFlashKeys * DV / 8;
    for (int c = lane; c < kChunks; c += 32) {
      const int r = c / (DV / 8), d = (c % (DV / 8)) * 8;
      const int64_t key = min(k0 + r, last_key);
      met_copy16(v_s + r * LD + d, vc + (base + key) * kw + static_cast<int64_t>(kv_head) * HD + dv0 + d, true);
    }
    met_copy_commit();
    // S = Q K^T for 16 rows x 16 keys: two n-fragments of 8 keys.
    float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
    const u16* k0p = kc + (base + min(k0 + g, last_key)) * kw + static_cast<int64_t>(kv_head) * HD + 8 * t;
    const u16* k1p = kc + (base + min(k0 + 8 + g, last_key)) * kw + static_cast<int64_t>(kv_head) * HD + 8 * t;
#pragma unroll
    for (int d0 = 0; d0 < HD; d0 += 32) {
      const uint4 a0 = *reinterpret_cast<const uint4*>(qa + d0), a1 = *reinterpret_cast<const uint4*>(qb + d0);
      const uint4 b0 = *reinterpret_cast<const uint4*>(k0p + d0), b1 = *reinterpret_cast<const uint4*>(k1p + d0);
      const uint32_t x0[4] = {a0.x, a1.x, a0.y, a1.y}, x1[4] = {a0.z, a1.z, a0.w, a1.w};
      const uint32_t y00[2] = {b0.x, b0.y}, y01[2] = {b0.z, b0.w};
      const uint32_t y10[2] = {b1.x, b1.y}, y11[2] = {b1.z, b1.w};
      met_mma_bf16_16816(s[0], x0, y00);
      met_mma_bf16_16816(s[0], x1, y01);
      met_mma_bf16_16816(s[1], x0, y10);
      met_mma_bf16_16816(s[1], x1, y11);
    }
    // Scale, cap, mask; online softmax per row (a row's four owners are one quad).
    float corr[2];
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float mx = -INFINITY;
#pragma unroll
      for (int nf = 0; nf < 2; ++nf)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t key = k0 + nf * 8 + 2 * t + e;
          float v = s[nf][2 * hr + e] * scale;
          if (softcap > 0.f) v = softcap * tanhf(v / softcap);
          const int64_t p = rows_pos[hr];  // -1: not this segment's row, every key masked
          const bool masked = key > p || (window > 0 && key <= p - window);
          s[nf][2 * hr + e] = masked ? -INFINITY : v;
          mx = fmaxf(mx, s[nf][2 * hr + e]);
        }
      mx = fmaxf(mx, met_shfl_xor(mx, 1));
      mx = fmaxf(mx, met_shfl_xor(mx, 2));
      const float m_new = fmaxf(m[hr], mx);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      corr[hr] = m[hr] == -INFINITY ? 0.f : expf(m[hr] - m_use);
      float sum = 0.f;
#pragma unroll
      for (int nf = 0; nf < 2; ++nf)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = s[nf][2 * hr + e] == -INFINITY ? 0.f : expf(s[nf][2 * hr + e] - m_use);
          s[nf][2 * hr + e] = p;
          sum += p;
        }
      l[hr] = l[hr] * corr[hr] + sum;
      m[hr] = m_new;
    }
#pragma unroll
    for (int i = 0; i < kOFrags; ++i) {
      o[i][0] *= corr[0];
      o[i][1] *= corr[0];
      o[i][2] *= corr[1];
      o[i][3] *= corr[1];
    }
    met_copy_wait<0>();
    __syncwarp();
    // O += P V: the two S fragments form one A fragment over the 16 keys.
    const uint32_t pa[4] = {met_pack_bf16x2(s[0][0], s[0][1]), met_pack_bf16x2(s[0][2], s[0][3]),
                            met_pack_bf16x2(s[1][0], s[1][1]), met_pack_bf16x2(s[1][2], s[1][3])};
#pragma unroll
    for (int dp = 0; dp < DV / 16; ++dp) {
      uint32_t r[4];
      const int mat = lane / 8;
      met_ldmatrix_x4_trans(r, v_s + ((mat % 2) * 8 + lane % 8) * LD + dp * 16 + (mat / 2) * 8);
      const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
      met_mma_bf16_16816(o[2 * dp], pa, b0);
      met_mma_bf16_16816(o[2 * dp + 1], pa, b1);
    }
  }
  __syncwarp();
  const float sink = sinks ? bf(sinks[h]) : -INFINITY;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const float inv = flash_row_scale(l[hr], m[hr], sinks != nullptr, sink, [](float x) { return expf(x); });
    const int64_t row = row0 + g + 8 * hr;
    if (rows_pos[hr] < 0) continue;
    u16* dst = out + (row * heads + h) * HD + dv0;
#pragma unroll
    for (int i = 0; i < kOFrags; ++i) {
      dst[i * 8 + 2 * t] = to_bf(o[i][2 * hr] * inv);
      dst[i * 8 + 2 * t + 1] = to_bf(o[i][2 * hr + 1] * inv);
    }
  }
}

#if MET_HAS_MMA_SYNC
// Causal prefill over the slice's rows on the tensor cores. A slice is a
// row range x a head range; work items are 16 rows x one head on the tensor cores (flash_block above), one
// pass per sequence the rows belong to (padding rows of another sequence share a block with real
// ones). Head dims 32, 64, 128 and 256 with v_head_dim equal, or with kWide 512 alone (the host
// refuses others). Any flash opcode's arguments (the registry gives them one layout), so a class's
// own flash body can hand it the head dims it does not take.
template <bool kWide, bool kRing, class A>
__device__ void flash_prefill_mma_slice(const A& a, uint32_t slice, unsigned char* smem) {
  const SliceRange rr = slice_rows(a, slice);
  const int heads = static_cast<int>(a.heads), kvh = static_cast<int>(a.kv_heads);
  const int hd = static_cast<int>(a.head_dim);
  const int* pos = a.positions;
  const int64_t* base = a.seq_base;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const SliceRange hs = slice_cols(a, slice, heads);
  const int64_t blocks = (rr.end - rr.begin + 15) / 16, nh = hs.end - hs.begin;
  u16* v_s = reinterpret_cast<u16*>(smem) + warp * (MET_FLASH_WARP_SMEM / 2);
  for (int64_t it = warp; it < blocks * nh; it += MET_INTERP_WARPS) {
    const int64_t row0 = rr.begin + (it / nh) * 16, row_end = min(row0 + 16, rr.end);
    const int h = static_cast<int>(hs.begin + it % nh);
    const bool valid = lane < 16 && row0 + lane < row_end;
    const int64_t mine = valid ? base[row0 + lane] : 0;
    unsigned pending = __ballot_sync(0xffffffffu, valid);
    while (pending) {
      const int64_t seg = __shfl_sync(0xffffffffu, mine, __ffs(pending) - 1);
      for (int dv0 = 0; dv0 < hd; dv0 += kFlashMaxDv) {
        const u16* q = a.q;
        const u16* kc = a.k_cache;
        const u16* vc = a.v_cache;
        const u16* sinks = a.sinks;
        u16* out = a.out;
        if (kWide)  // four passes of 128 output dims, each scoring the keys over all 512
          flash_block<512, 128, kRing>(q, a.q_stride, kc, vc, base, seg, pos, row0, row_end, h, h / (heads / kvh), kvh, a.window,
                                a.scale, a.softcap, sinks, out, heads, v_s, dv0, static_cast<int>(a.ring));
        else if (hd == 256)  // two passes of 128 output dims, each scoring the keys over all 256
          flash_block<256, 128, kRing>(q, a.q_stride, kc, vc, base, seg, pos, row0, row_end, h, h / (heads / kvh), kvh, a.window,
                                a.scale, a.softcap, sinks, out, heads, v_s, dv0, static_cast<int>(a.ring));
        else if (hd == 128)
          flash_block<128, 128, kRing>(q, a.q_stride, kc, vc, base, seg, pos, row0, row_end, h, h / (heads / kvh), kvh, a.window,
                               a.scale, a.softcap, sinks, out, heads, v_s, dv0, static_cast<int>(a.ring));
        else if (hd == 64)
          flash_block<64, 64, kRing>(q, a.q_stride, kc, vc, base, seg, pos, row0, row_end, h, h / (heads / kvh), kvh, a.window,
                              a.scale, a.softcap, sinks, out, heads, v_s, dv0, static_cast<int>(a.ring));
        else
          flash_block<32, 32, kRing>(q, a.q_stride, kc, vc, base, seg, pos, row0, row_end, h, h / (heads / kvh), kvh, a.window,
                              a.scale, a.softcap, sinks, out, heads, v_s, dv0, static_cast<int>(a.ring));
      }
      pending &= ~__ballot_sync(0xffffffffu, valid && mine == seg);
    }
  }
}

// 512-dim heads (Gemma-4's full layers) and ring caches run out of line, in one function,
// reloading the instruction's arguments from global memory (a.geom.instr), as the fp8 gemv and GEMM
// bodies do: flash_block<512, 128> inlined into run_body beside the other head dims spilled 152
// bytes of run_body's registers (and with its scores unrolled 8 deep instead of 16, 228), and a
// second such function grew the kernel's frame.
__device__ __noinline__ void flash_out_of_line_slice(const MetDevInstr* in, uint32_t slice, unsigned char* smem) {
  const auto a = met_load_flash_prefill_mma(*in);
  if (a.ring > 0) {
    if (a.head_dim == 512)
      flash_prefill_mma_slice<true, true>(a, slice, smem);
    else
      flash_prefill_mma_slice<false, true>(a, slice, smem);
  } else {
    flash_prefill_mma_slice<true, false>(a, slice, smem);
  }
}

MET_ENTRY(flash_prefill_mma) {
  if (a.head_dim == 512 || a.ring > 0)
    flash_out_of_line_slice(a.geom.instr, slice, smem);
  else
    flash_prefill_mma_slice<false, false>(a, slice, smem);
}
#endif  // MET_HAS_MMA_SYNC

}  // namespace met_interp
