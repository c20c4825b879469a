// Decode attention: split-KV (one row and one split per slice, every head) and the merge of the
// split states (one (row, head) per slice, the whole block over its splits). In a split, one warp
// owns one (row, KV head): lanes take 32 keys at a time for the scores, then the lanes own output
// dims for P V. Caches are [slot][kv_heads][dim] bf16; a sequence's position p lives at slot base + p.
#pragma once
#include "common/interp/prims.cuh"

namespace met_interp {

constexpr int kMaxVDims = 4;  // v_head_dim / 32 per lane: v head dims up to 128
constexpr int kMaxGroup = 4;  // query heads sharing one KV head in one warp

// Unnormalised online-softmax state of one (row, head): lane owns output dims lane * DPL + i.
struct WarpAttn {
  float m, l;
  float o[kMaxVDims];
};

template <int DPL>
__device__ __forceinline__ void load_seg(const u16* p, float (&v)[DPL]) {
  if constexpr (DPL == 1) {
    v[0] = bf(p[0]);
  } else if constexpr (DPL == 2) {
    const uint32_t w = *reinterpret_cast<const uint32_t*>(p);
    v[0] = __uint_as_float(w << 16);
    v[1] = __uint_as_float(w & 0xffff0000u);
  } else if constexpr (DPL == 4) {
    const uint2 w = *reinterpret_cast<const uint2*>(p);
    const uint32_t ws[2] = {w.x, w.y};
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      v[2 * k] = __uint_as_float(ws[k] << 16);
      v[2 * k + 1] = __uint_as_float(ws[k] & 0xffff0000u);
    }
  } else {
    const uint4 w = *reinterpret_cast<const uint4*>(p);
    const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      v[2 * k] = __uint_as_float(ws[k] << 16);
      v[2 * k + 1] = __uint_as_float(ws[k] & 0xffff0000u);
    }
  }
}

// Folds keys [lo, hi) into the states of G query heads that share one KV head (the cpu's
// attend_range per head, with the softmax of each 32-key chunk taken at once): lanes score one
// key each for all G heads from one K load, then own DPL output dims for P V, loading the V rows
// of several keys before using them. q points at the first head; the others follow hd apart.
template <int DPL, int G>
__device__ void attend_group_t(const u16* q, const u16* kc, const u16* vc, int64_t base, int64_t lo, int64_t hi, int kv_head,
                               int kv_heads, int hd, float scale, float softcap, WarpAttn* st) {
  constexpr int kBatch = DPL >= 8 ? 4 : 8;
  const int lane = threadIdx.x % 32;
  const int vhd = 32 * DPL;
  const int64_t kw = static_cast<int64_t>(kv_heads) * hd, vw = static_cast<int64_t>(kv_heads) * vhd;
  for (int64_t c0 = lo; c0 < hi; c0 += 32) {
    const int64_t j = c0 + lane;
    float p[G];
    {
      float dot[G];
#pragma unroll
      for (int g = 0; g < G; ++g) dot[g] = 0.f;
      if (j < hi) {
        const u16* k = kc + (base + j) * kw + static_cast<int64_t>(kv_head) * hd;
#pragma unroll 2
        for (int d = 0; d < hd; d += 8) {
          const uint4 kv = *reinterpret_cast<const uint4*>(k + d);
          const uint32_t kk[4] = {kv.x, kv.y, kv.z, kv.w};
#pragma unroll
          for (int g = 0; g < G; ++g) {
            const uint4 qv = *reinterpret_cast<const uint4*>(q + g * hd + d);
            const uint32_t qq[4] = {qv.x, qv.y, qv.z, qv.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              dot[g] += __uint_as_float(qq[e] << 16) * __uint_as_float(kk[e] << 16);
              dot[g] += __uint_as_float(qq[e] & 0xffff0000u) * __uint_as_float(kk[e] & 0xffff0000u);
            }
          }
        }
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float score = -INFINITY;
        if (j < hi) {
          score = dot[g] * scale;
          if (softcap > 0.f) score = softcap * tanhf(score / softcap);
        }
        const float cmax = met_warp_reduce_max(score);
        const float m_new = fmaxf(st[g].m, cmax);
        const float carry = st[g].m == -INFINITY ? 0.f : expf(st[g].m - m_new);
        p[g] = j < hi ? expf(score - m_new) : 0.f;
        st[g].l = st[g].l * carry + met_warp_reduce(p[g]);
#pragma unroll
        for (int i = 0; i < DPL; ++i) st[g].o[i] *= carry;
        st[g].m = m_new;
      }
    }
    const int n = static_cast<int>(min(static_cast<int64_t>(32), hi - c0));
    const u16* v0 = vc + (base + c0) * vw + static_cast<int64_t>(kv_head) * vhd + lane * DPL;
    for (int jb = 0; jb < n; jb += kBatch) {
      float v[kBatch][DPL];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        if (jb + u < n) {
          load_seg<DPL>(v0 + (jb + u) * vw, v[u]);
        } else {
#pragma unroll
          for (int i = 0; i < DPL; ++i) v[u][i] = 0.f;
        }
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u)
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const float pj = __shfl_sync(0xffffffffu, p[g], (jb + u) & 31);
#pragma unroll
          for (int i = 0; i < DPL; ++i) st[g].o[i] += pj * v[u][i];
        }
    }
  }
}

template <int DPL>
__device__ void attend_dpl(const u16* q, const u16* kc, const u16* vc, int64_t base, int64_t lo, int64_t hi, int kv_head,
                           int kv_heads, int hd, int group, float scale, float softcap, WarpAttn* st) {
  switch (group) {
    case 1: attend_group_t<DPL, 1>(q, kc, vc, base, lo, hi, kv_head, kv_heads, hd, scale, softcap, st); break;
    case 2: attend_group_t<DPL, 2>(q, kc, vc, base, lo, hi, kv_head, kv_heads, hd, scale, softcap, st); break;
    default: attend_group_t<DPL, 4>(q, kc, vc, base, lo, hi, kv_head, kv_heads, hd, scale, softcap, st); break;
  }
}

// Dispatch on v_head_dim (32, 64 or 128) and the query heads per KV head (1, 2 or 4); the host
// refuses other shapes.
__device__ void attend_group(const u16* q, const u16* kc, const u16* vc, int64_t base, int64_t lo, int64_t hi, int kv_head,
                             int kv_heads, int hd, int vhd, int group, float scale, float softcap, WarpAttn* st) {
  switch (vhd / 32) {
    case 1: attend_dpl<1>(q, kc, vc, base, lo, hi, kv_head, kv_heads, hd, group, scale, softcap, st); break;
    case 2: attend_dpl<2>(q, kc, vc, base, lo, hi, kv_head, kv_heads, hd, group, scale, softcap, st); break;
    default: attend_dpl<4>(q, kc, vc, base, lo, hi, kv_head, kv_heads, hd, group, scale, softcap, st); break;
  }
}

__device__ __forceinline__ void attn_init(WarpAttn& st) {
  st.m = -INFINITY;
  st.l = 0.f;
#pragma unroll
  for (int k = 0; k < kMaxVDims; ++k) st.o[k] = 0.f;
}

__device__ __forceinline__ int64_t window_start(int64_t pos, int64_t window) {
  return window > 0 ? max(static_cast<int64_t>(0), pos - window + 1) : 0;
}

MET_ENTRY(attn_decode_split) {
  const SliceRange rr = slice_rows(a, slice);
  const int heads = static_cast<int>(a.heads), kvh = static_cast<int>(a.kv_heads);
  const int hd = static_cast<int>(a.head_dim), vhd = static_cast<int>(a.v_head_dim);
  const int64_t window = a.window, splits = a.splits, q_stride = a.q_stride;
  const SliceRange sp = slice_cols(a, slice, splits);
  const int group = heads / kvh;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t* base = a.seq_base;
  const int* seq_len = a.seq_len;
  float* part_o = a.part_o;
  float* part_ml = a.part_ml;
  const int64_t n_split = sp.end - sp.begin;
  const int dpl = vhd / 32;
  for (int64_t row = rr.begin; row < rr.end; ++row) {
    const int64_t len = seq_len[row];
    const int64_t lo = window_start(len - 1, window);
    const int64_t chunk = (len - lo + splits - 1) / splits;
    // One warp per (KV head, split): its query heads share every K and V load.
    for (int64_t it = warp; it < kvh * n_split; it += MET_INTERP_WARPS) {
      const int kv = static_cast<int>(it % kvh);
      const int64_t i = sp.begin + it / kvh;
      const int64_t k0 = min(len, lo + i * chunk), k1 = min(len, k0 + chunk);
      WarpAttn st[kMaxGroup];
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) attn_init(st[g]);
      attend_group(a.q + row * q_stride + kv * group * hd, a.k_cache, a.v_cache, base[row], k0, k1, kv, kvh, hd, vhd, group,
                   a.scale, a.softcap, st);
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g >= group) break;
        const int64_t idx = (row * heads + kv * group + g) * splits + i;
#pragma unroll
        for (int k = 0; k < kMaxVDims; ++k)
          if (k < dpl) part_o[idx * vhd + lane * dpl + k] = st[g].o[k];
        if (lane == 0) {
          part_ml[2 * idx] = st[g].m;
          part_ml[2 * idx + 1] = st[g].l;
        }
      }
    }
  }
}

// Normalised bf16 output of one (row, head)'s split states and an optional sink logit (the cpu's
// merge_states), by the whole block: threads over splits for the max and the weights (w_s), then
// groups of threads over splits, each thread 4 output dims, summed across groups in a fixed order.
__device__ void merge_block(const float* po, const float* pml, int64_t splits, int vhd, const u16* sink, u16* out,
                            float* w_s, float* acc_s, float* red) {
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  float m = -INFINITY;
  for (int64_t i = tid; i < splits; i += MET_INTERP_THREADS) m = fmaxf(m, pml[2 * i]);
  m = met_warp_reduce_max(m);
  if (lane == 0) red[warp] = m;
  __syncthreads();
  m = sink ? bf(*sink) : -INFINITY;
  for (int w = 0; w < MET_INTERP_WARPS; ++w) m = fmaxf(m, red[w]);
  float l = 0.f;
  for (int64_t i = tid; i < splits; i += MET_INTERP_THREADS) {
    const float w = pml[2 * i + 1] == 0.f ? 0.f : expf(pml[2 * i] - m);
    w_s[i] = w;
    l += pml[2 * i + 1] * w;
  }
  l = met_warp_reduce(l);
  if (lane == 0) red[32 + warp] = l;
  __syncthreads();
  l = 0.f;
  for (int w = 0; w < MET_INTERP_WARPS; ++w) l += red[32 + w];
  if (sink) l += expf(bf(*sink) - m);
  const float inv = l > 0.f ? 1.f / l : 0.f;
  const int cols = vhd / 4, groups = MET_INTERP_THREADS / cols;
  const int col = tid % cols, grp = tid / cols;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  if (grp < groups) {
#pragma unroll 8
    for (int64_t i = grp; i < splits; i += groups) {
      const float4 v = *reinterpret_cast<const float4*>(po + i * vhd + col * 4);
      const float w = w_s[i];
      acc[0] += v.x * w;
      acc[1] += v.y * w;
      acc[2] += v.z * w;
      acc[3] += v.w * w;
    }
    *reinterpret_cast<float4*>(acc_s + (grp * cols + col) * 4) = make_float4(acc[0], acc[1], acc[2], acc[3]);
  }
  __syncthreads();
  for (int d = tid; d < vhd; d += MET_INTERP_THREADS) {
    float sum = 0.f;
    for (int g = 0; g < groups; ++g) sum += acc_s[(g * cols + d / 4) * 4 + d % 4];
    out[d] = to_bf(sum * inv);
  }
  __syncthreads();
}

MET_ENTRY(attn_decode_merge) {
  const SliceRange rr = slice_rows(a, slice);
  const int heads = static_cast<int>(a.heads), vhd = static_cast<int>(a.v_head_dim);
  const int64_t splits = a.splits;
  const SliceRange hs = slice_cols(a, slice, heads);  // the slice's heads
  const u16* sinks = a.sinks;
  float* w_s = reinterpret_cast<float*>(smem);
  float* acc_s = w_s + MET_MERGE_MAX_SPLITS;
  float* red = acc_s + MET_INTERP_THREADS * 4;
  for (int64_t row = rr.begin; row < rr.end; ++row)
    for (int64_t h = hs.begin; h < hs.end; ++h) {
      const int64_t idx = (row * heads + h) * splits;
      merge_block(a.part_o + idx * vhd, a.part_ml + idx * 2, splits, vhd, sinks ? sinks + h : nullptr,
                  a.out + (row * heads + h) * vhd, w_s, acc_s, red);
    }
}

}  // namespace met_interp
