// Mixture-of-experts bodies: the router (logits, softmax over every expert, top-k, weights), the
// routed experts' gate/up with SiLU, and their down projection with the routing-weighted sum. Each
// computes what kernels/cpu/moe.hpp computes, rounding where it rounds; the dot products sum in
// another order, the down projection's copies of a row in the cpu's (expert, slot) order.
// A slice of an expert op holds every row of the instruction and a range of output columns (emit:
// src/emit/slice.cpp). It routes MET_MOE_CHUNK slots at a time (a decode step of up to 16 rows is one
// chunk) and walks the experts those slots picked in ascending order: each expert's rows of the
// slice's columns are read once for all the chunk's slots routed to it, and an expert none picked
// is never read.
#pragma once
#include "common/interp/prims.cuh"

namespace met_interp {

// The bodies run out of line on NVIDIA (MET_OUTLINE, prims.cuh).
// Shared memory of the expert ops (common/interp/smem.h MET_MOE_EXPERT_SMEM).
struct MoeSmem {
  int* sorted;    // [MET_MOE_CHUNK] keys expert * MET_MOE_CHUNK + local slot, ascending
  int* seg;       // [MET_MOE_CHUNK + 4] position of each expert run's first key; seg[nseg] = n
  int* rank;      // [MET_MOE_CHUNK] each local slot's position in sorted
  int* ord;       // [MET_MOE_CHUNK] each row's local slots in summing order (moe_down); -1: not an expert
  int* misc;      // [4] misc[0]: the run count
  float* contrib; // [MET_MOE_CHUNK][MET_MOE_OUT_TILE] moe_down's weighted copies
};
__device__ __forceinline__ MoeSmem moe_smem(unsigned char* smem) {
  MoeSmem m;
  m.sorted = reinterpret_cast<int*>(smem);
  m.seg = m.sorted + MET_MOE_CHUNK;
  m.rank = m.seg + MET_MOE_CHUNK + 4;
  m.ord = m.rank + MET_MOE_CHUNK;
  m.misc = m.ord + MET_MOE_CHUNK;
  m.contrib = reinterpret_cast<float*>(m.misc + 4);
  return m;
}

// Routes slots [t0, t0 + n) (0 < n <= MET_MOE_CHUNK = the block's threads): sorts their (expert,
// slot) keys, a slot whose id is no expert as expert `experts` (after every real one), and returns
// the number of expert runs, whose starts are m.seg. Every thread gets the same count; starts with a
// barrier (the previous chunk's readers are done) and ends with one.
__device__ __forceinline__ int moe_route_chunk(const int* ids, int64_t t0, int n, int64_t experts, const MoeSmem& m) {
  const int i = threadIdx.x;
  int key = 0x7fffffff;
  if (i < n) {
    const int e = ids[t0 + i];
    key = (e >= 0 && e < experts ? e : static_cast<int>(experts)) * MET_MOE_CHUNK + i;
  }
  __syncthreads();
  m.seg[i] = key;  // staging: the keys are distinct, so a key's rank is the count of smaller ones
  __syncthreads();
  if (i < n) {
    int r = 0;
    for (int k = 0; k < n; ++k) r += m.seg[k] < key;
    m.sorted[r] = key;
    m.rank[i] = r;
  }
  __syncthreads();
  if (i < n) {
    int runs = 0, prev = -1;  // runs starting at positions <= i
    for (int k = 0; k <= i; ++k) {
      const int e = m.sorted[k] / MET_MOE_CHUNK;
      runs += e != prev;
      prev = e;
    }
    if (i == 0 || m.sorted[i - 1] / MET_MOE_CHUNK != m.sorted[i] / MET_MOE_CHUNK) m.seg[runs - 1] = i;
    if (i == n - 1) {
      m.seg[runs] = n;
      m.misc[0] = runs;
    }
  }
  __syncthreads();
  return m.misc[0];
}

// Dot products of one warp: da[s] = wa . act row idx[s] (and db[s] = wb . that row when kTwo) over
// n = the rows' length (n % 8 == 0, every row 16-byte aligned) for the first ns <= kP rows, in fp32, each
// lane 8 consecutive k per 16-byte load, kBatch loads of each weight row in flight; reduced over
// the warp (every lane holds the sums).
template <bool kTwo, int kP>
__device__ __forceinline__ void moe_warp_dots(const u16* wa, const u16* wb, const u16* act, const int (&idx)[kP], int ns,
                                              int64_t n, float (&da)[kP], float (&db)[kP]) {
  constexpr int kBatch = 4;
  constexpr int64_t kStep = MET_WARP * 8;
  const int lane = threadIdx.x % MET_WARP;
#pragma unroll
  for (int s = 0; s < kP; ++s) da[s] = db[s] = 0.f;
#pragma unroll 1
  for (int64_t k0 = lane * 8; k0 < n; k0 += kStep * kBatch) {
    uint4 va[kBatch], vb[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      va[u] = vb[u] = make_uint4(0, 0, 0, 0);
      if (k0 + u * kStep < n) {
        va[u] = load_weight16(wa + k0 + u * kStep);
        if (kTwo) vb[u] = load_weight16(wb + k0 + u * kStep);
      }
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (k0 + u * kStep >= n) break;
      float a8[8], b8[8];
      unpack8(va[u], a8);
      if (kTwo) unpack8(vb[u], b8);
#pragma unroll
      for (int s = 0; s < kP; ++s) {
        if (s >= ns) break;
        float x8[8];
        unpack8(*reinterpret_cast<const uint4*>(act + static_cast<int64_t>(idx[s]) * n + k0 + u * kStep), x8);
#pragma unroll
        for (int q = 0; q < 8; ++q) {
          da[s] += a8[q] * x8[q];
          if (kTwo) db[s] += b8[q] * x8[q];
        }
      }
    }
  }
#pragma unroll
  for (int s = 0; s < kP; ++s) {
    if (s >= ns) break;
    da[s] = met_warp_reduce(da[s]);
    if (kTwo) db[s] = met_warp_reduce(db[s]);
  }
}

// x: [rows, hidden]; w_router: [experts, hidden]; ids, weights: [rows, top_k]. One row at a time:
// every warp takes experts for the logits (each rounded to bf16), then warp 0 takes the softmax over
// all experts in fp32 (the sum in expert order), the top-k (largest first, ties to the lower
// expert: the cpu's stable sort) and the weights (divided by the top-k sum, in k order, when
// renormalize), each rounded to bf16.
MET_OUTLINE void moe_router_rows(const u16* x, const u16* w_router, int* ids, float* weights, int64_t row0, int64_t row1,
                                     int64_t hidden, int64_t experts, int top_k, bool renormalize, unsigned char* smem) {
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  float* p = reinterpret_cast<float*>(smem);                // [experts]
  int* sel_e = reinterpret_cast<int*>(p + MET_MOE_MAX_EXPERTS);  // [top_k]
  float* sel_p = reinterpret_cast<float*>(sel_e + MET_MOE_MAX_EXPERTS);
  for (int64_t row = row0; row < row1; ++row) {
    const int idx[1] = {static_cast<int>(row)};
    for (int64_t e = warp; e < experts; e += MET_INTERP_WARPS) {
      float d[1], unused[1];
      moe_warp_dots<false, 1>(w_router + e * hidden, nullptr, x, idx, 1, hidden, d, unused);
      if (lane == 0) p[e] = bf_round(d[0]);
    }
    __syncthreads();
    if (warp == 0) {
      float mx = -INFINITY;
      for (int64_t e = lane; e < experts; e += MET_WARP) mx = fmaxf(mx, p[e]);
      mx = met_warp_reduce_max(mx);
      for (int64_t e = lane; e < experts; e += MET_WARP) p[e] = expf(p[e] - mx);
      __syncwarp();
      float sum = 0.f;
      if (lane == 0)
        for (int64_t e = 0; e < experts; ++e) sum += p[e];
      sum = __shfl_sync(0xffffffffu, sum, 0);
      for (int64_t e = lane; e < experts; e += MET_WARP) p[e] = p[e] / sum;
      __syncwarp();
      for (int k = 0; k < top_k; ++k) {
        float best = -INFINITY;
        int idx = static_cast<int>(experts);
        for (int64_t e = lane; e < experts; e += MET_WARP)
          if (p[e] > best) {  // lanes walk their experts upwards: a tie keeps the lower
            best = p[e];
            idx = static_cast<int>(e);
          }
        for (int o = MET_WARP / 2; o > 0; o >>= 1) {
          const float ov = __shfl_xor_sync(0xffffffffu, best, o);
          const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
          if (ov > best || (ov == best && oi < idx)) {
            best = ov;
            idx = oi;
          }
        }
        if (lane == 0) {
          if (idx >= experts) idx = 0;  // nothing left above -inf (NaN logits): never an index past the experts
          sel_e[k] = idx;
          sel_p[k] = p[idx];
          p[idx] = -INFINITY;  // taken
        }
        __syncwarp();
      }
      float top_sum = 0.f;
      if (lane == 0)
        for (int k = 0; k < top_k; ++k) top_sum += sel_p[k];
      top_sum = __shfl_sync(0xffffffffu, top_sum, 0);
      for (int k = lane; k < top_k; k += MET_WARP) {
        ids[row * top_k + k] = sel_e[k];
        weights[row * top_k + k] = bf_round(renormalize ? sel_p[k] / top_sum : sel_p[k]);
      }
    }
    __syncthreads();
  }
}

MET_ENTRY(moe_router_topk) {
  const SliceRange r = slice_rows(a, slice);
  moe_router_rows(a.x, a.w_router, a.ids, a.weights, r.begin, r.end, a.geom.w_cols, a.geom.w_rows, static_cast<int>(a.top_k),
                  a.renormalize != 0, smem);
}

// x: [rows, hidden]; w_gate_up: [experts * 2 inter, hidden]; h: [rows, top_k, inter]. The slice's
// columns j of inter: per expert run and j, one warp reads gate row j and up row inter + j once per
// MET_MOE_PASS of the run's slots; h = bf16(bf16(silu(bf16(gate))) * bf16(up)).
MET_OUTLINE void moe_gate_up_cols(const u16* x, const u16* w_gate_up, const int* ids, u16* h, SliceRange r, SliceRange c,
                                      int64_t top_k, int64_t inter, int64_t hidden, int64_t experts, unsigned char* smem) {
  const int64_t width = 2 * inter;
  const int nj = static_cast<int>(c.end - c.begin);
  if (nj <= 0 || top_k <= 0) return;
  const MoeSmem m = moe_smem(smem);
  const int64_t chunk_rows = MET_MOE_CHUNK / top_k;
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  for (int64_t r0 = r.begin; r0 < r.end; r0 += chunk_rows) {
    const int64_t t0 = r0 * top_k;
    const int n = static_cast<int>(((r0 + chunk_rows < r.end ? r0 + chunk_rows : r.end) - r0) * top_k);
    const int runs = moe_route_chunk(ids, t0, n, experts, m);
    for (int u = warp; u < runs * nj; u += MET_INTERP_WARPS) {
      const int run = u / nj, p0 = m.seg[run], p1 = m.seg[run + 1];
      const int64_t j = c.begin + u % nj, e = m.sorted[p0] / MET_MOE_CHUNK;
      if (e >= experts) {  // slots routed to no expert: silu(0) * 0, as the cpu's zeroed gate_up rows give
        for (int q = p0 + lane; q < p1; q += MET_WARP) h[(t0 + m.sorted[q] % MET_MOE_CHUNK) * inter + j] = 0;
        continue;
      }
      const u16* wg = w_gate_up + (e * width + j) * hidden;
      const u16* wu = wg + inter * hidden;
      for (int q = p0; q < p1; q += MET_MOE_PASS) {
        const int ns = p1 - q < MET_MOE_PASS ? p1 - q : MET_MOE_PASS;
        int idx[MET_MOE_PASS];  // x rows
#pragma unroll
        for (int s = 0; s < MET_MOE_PASS; ++s) idx[s] = s < ns ? static_cast<int>((t0 + m.sorted[q + s] % MET_MOE_CHUNK) / top_k) : 0;
        float dg[MET_MOE_PASS], du[MET_MOE_PASS];
        moe_warp_dots<true, MET_MOE_PASS>(wg, wu, x, idx, ns, hidden, dg, du);
#pragma unroll
        for (int s = 0; s < MET_MOE_PASS; ++s)
          if (s < ns && lane == s) {
            const int64_t t = t0 + m.sorted[q + s] % MET_MOE_CHUNK;
            h[t * inter + j] = to_bf(gated_act(bf_round(dg[s]), bf_round(du[s]), false));
          }
      }
    }
  }
}

MET_ENTRY(moe_gate_up_silu) {
  const int64_t width = 2 * a.inter;
  moe_gate_up_cols(a.x, a.w_gate_up, a.ids, a.h, slice_rows(a, slice), slice_cols(a, slice, a.inter), a.top_k, a.inter,
                   a.geom.w_cols, width > 0 ? a.geom.w_rows / width : 0, smem);
}

// h: [rows, top_k, inter]; w_down: [experts * hidden, inter]; y: [rows, hidden]. The slice's columns
// o of hidden, MET_MOE_OUT_TILE at a time: per expert run and o, one warp reads row o once per
// MET_MOE_PASS of the run's slots and keeps each slot's copy bf16(weight * bf16(h . row)); then each
// (row, o) sums its copies in fp32 in (expert, slot) order and stores once.
MET_OUTLINE void moe_down_cols(const u16* hin, const u16* w_down, const int* ids, const float* weights, u16* y, SliceRange r,
                                   SliceRange c, int64_t top_k, int64_t hidden, int64_t inter, int64_t experts,
                                   unsigned char* smem) {
  if (c.end <= c.begin || top_k <= 0) return;
  const MoeSmem m = moe_smem(smem);
  const int64_t chunk_rows = MET_MOE_CHUNK / top_k;
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  for (int64_t r0 = r.begin; r0 < r.end; r0 += chunk_rows) {
    const int64_t t0 = r0 * top_k;
    const int nrows = static_cast<int>((r0 + chunk_rows < r.end ? r0 + chunk_rows : r.end) - r0);
    const int n = nrows * static_cast<int>(top_k);
    const int runs = moe_route_chunk(ids, t0, n, experts, m);
    // Each row's slots in the order the cpu sums them: by position in sorted, i.e. (expert, slot).
    if (static_cast<int>(threadIdx.x) < n) {
      const int i = threadIdx.x, row0 = i / static_cast<int>(top_k) * static_cast<int>(top_k);
      int at = 0;
      for (int k = row0; k < row0 + top_k; ++k) at += m.rank[k] < m.rank[i];
      m.ord[row0 + at] = m.sorted[m.rank[i]] / MET_MOE_CHUNK < experts ? i : -1;
    }
    for (int64_t o0 = c.begin; o0 < c.end; o0 += MET_MOE_OUT_TILE) {
      const int no = static_cast<int>(c.end - o0 < MET_MOE_OUT_TILE ? c.end - o0 : MET_MOE_OUT_TILE);
      for (int u = warp; u < runs * no; u += MET_INTERP_WARPS) {
        const int run = u / no, p0 = m.seg[run], p1 = m.seg[run + 1], oo = u % no;
        const int64_t e = m.sorted[p0] / MET_MOE_CHUNK;
        if (e >= experts) continue;
        const u16* wr = w_down + (e * hidden + o0 + oo) * inter;
        for (int q = p0; q < p1; q += MET_MOE_PASS) {
          const int ns = p1 - q < MET_MOE_PASS ? p1 - q : MET_MOE_PASS;
          int idx[MET_MOE_PASS];  // h rows (slots)
#pragma unroll
          for (int s = 0; s < MET_MOE_PASS; ++s) idx[s] = s < ns ? static_cast<int>(t0 + m.sorted[q + s] % MET_MOE_CHUNK) : 0;
          float d[MET_MOE_PASS], unused[MET_MOE_PASS];
          moe_warp_dots<false, MET_MOE_PASS>(wr, nullptr, hin, idx, ns, inter, d, unused);
#pragma unroll
          for (int s = 0; s < MET_MOE_PASS; ++s)
            if (s < ns && lane == s) {
              const int local = m.sorted[q + s] % MET_MOE_CHUNK;
              m.contrib[local * MET_MOE_OUT_TILE + oo] = bf_round(weights[t0 + local] * bf_round(d[s]));
            }
        }
      }
      __syncthreads();
      for (int pr = threadIdx.x; pr < nrows * no; pr += MET_INTERP_THREADS) {
        const int lr = pr / no, oo = pr % no;
        float acc = 0.f;
        for (int k = 0; k < top_k; ++k) {
          const int local = m.ord[lr * top_k + k];
          if (local >= 0) acc += m.contrib[local * MET_MOE_OUT_TILE + oo];
        }
        y[(r0 + lr) * hidden + o0 + oo] = to_bf(acc);
      }
      __syncthreads();  // the copies are read before the next tile writes them
    }
  }
}

MET_ENTRY(moe_down) {
  moe_down_cols(a.h, a.w_down, a.ids, a.weights, a.y, slice_rows(a, slice), slice_cols(a, slice, a.hidden), a.top_k, a.hidden,
                a.geom.w_cols, a.hidden > 0 ? a.geom.w_rows / a.hidden : 0, smem);
}

}  // namespace met_interp
