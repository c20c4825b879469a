// Mixture-of-experts bodies: the router (logits, softmax over every expert, top-k, weights), the
// routed experts' gate/up with SiLU, and their down projection with the routing-weighted sum; and
// gpt-oss's (layout 1 of the expert ops): its router with a bias (the top k of the logits, a softmax
// over those k), its experts as MXFP4 rows with their biases and the clamped SwiGLU; and Gemma-4's
// (layout 2, layout 0's bytes): its router over the normalised and scaled residual with per-expert
// scales on the weights, its experts with GELU (tanh) in place of SiLU, moe_down as it is. Each
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

// Adds the products of 8 weights of row a (and of row b when kTwo) with columns [k, k + 8) of each of
// the first ns activation rows idx[s] (rows n long) to da[s] (db[s]).
template <bool kTwo, int kP>
__device__ __forceinline__ void moe_dot8(const float (&a8)[8], const float (&b8)[8], const u16* act, const int (&idx)[kP], int ns,
                                         int64_t n, int64_t k, float (&da)[kP], float (&db)[kP]) {
#pragma unroll
  for (int s = 0; s < kP; ++s) {
    if (s >= ns) break;
    float x8[8];
    unpack8(*reinterpret_cast<const uint4*>(act + static_cast<int64_t>(idx[s]) * n + k), x8);
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      da[s] += a8[q] * x8[q];
      if (kTwo) db[s] += b8[q] * x8[q];
    }
  }
}

// The warp's sums of the first ns dot products (every lane holds them).
template <bool kTwo, int kP>
__device__ __forceinline__ void moe_dots_reduce(int ns, float (&da)[kP], float (&db)[kP]) {
#pragma unroll
  for (int s = 0; s < kP; ++s) {
    if (s >= ns) break;
    da[s] = met_warp_reduce(da[s]);
    if (kTwo) db[s] = met_warp_reduce(db[s]);
  }
}

// 16-byte loads of each weight row a lane of moe_warp_dots has in flight (an A/B switch for
// bench/interp_variants.sh; the sums' order does not depend on it). 8 instead of 4 made no
// difference on the experts' rows of Qwen3-30B-A3B (perf-data/h100-sxm/20261205T1815Z-moe-decode).
#ifndef MET_MOE_DOT_BATCH
#define MET_MOE_DOT_BATCH 4
#endif

// Dot products of one warp: da[s] = wa . act row idx[s] (and db[s] = wb . that row when kTwo) over
// n = the rows' length (n % 8 == 0, every row 16-byte aligned) for the first ns <= kP rows, in fp32, each
// lane 8 consecutive k per 16-byte load, kBatch loads of each weight row in flight; reduced over
// the warp (every lane holds the sums). A lane adds its products in ascending k whatever kBatch is.
// The activations of a batch's k are loaded for one row at a time before its products: one load
// before each 8 products (moe_dot8, as the MXFP4 rows still do) made a chain of L2 round trips per
// batch (Qwen3-30B-A3B decode on the H100: perf-data/h100-sxm/20261205T1815Z-moe-decode).
template <bool kTwo, int kP, int kBatch = MET_MOE_DOT_BATCH>
__device__ __forceinline__ void moe_warp_dots(const u16* wa, const u16* wb, const u16* act, const int (&idx)[kP], int ns,
                                              int64_t n, float (&da)[kP], float (&db)[kP]) {
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
    for (int s = 0; s < kP; ++s) {
      if (s >= ns) break;
      const u16* xr = act + static_cast<int64_t>(idx[s]) * n;
      uint4 xv[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u)
        xv[u] = k0 + u * kStep < n ? *reinterpret_cast<const uint4*>(xr + k0 + u * kStep) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        if (k0 + u * kStep >= n) break;
        float a8[8], b8[8], x8[8];
        unpack8(va[u], a8);
        if (kTwo) unpack8(vb[u], b8);
        unpack8(xv[u], x8);
#pragma unroll
        for (int q = 0; q < 8; ++q) {
          da[s] += a8[q] * x8[q];
          if (kTwo) db[s] += b8[q] * x8[q];
        }
      }
    }
  }
  moe_dots_reduce<kTwo, kP>(ns, da, db);
}

// MXFP4 weight rows (MET_DEV_WEIGHT_MXFP4, gpt-oss's experts): row r's e2m1 codes at codes + r * n / 2
// bytes (two a byte, the lower column in the low nibble) and its e8m0 scales at scales + r * n / 32,
// one per 32 columns; a weight is code x 2^(scale - 127), as the cpu's weight_row decodes it.
__device__ __forceinline__ float fp4_e2m1_value(uint32_t nibble) {  // +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}
  const uint32_t e = (nibble >> 1) & 3u, m = nibble & 1u;
  const uint32_t mag = e == 0 ? (m ? 0x3f000000u : 0u) : ((e + 126u) << 23) | (m << 22);
  return __uint_as_float(mag | ((nibble & 8u) << 28));
}
__device__ __forceinline__ float e8m0_value(uint32_t v) {  // 2^(v - 127); 0xff is NaN
  return v == 0xffu ? __uint_as_float(0x7fc00000u) : v == 0 ? __uint_as_float(0x00400000u) : __uint_as_float(v << 23);
}

// moe_warp_dots over MXFP4 rows a (and b when kTwo): codes ca, cb and scales sa, sb of the rows, n %
// 32 == 0. Each lane takes whole 32-column blocks (16 bytes of codes, one scale): the block's
// products in fp32 times its scale (a power of two, so the same as scaling each weight first).
template <bool kTwo, int kP>
__device__ __forceinline__ void moe_warp_dots_mx(const unsigned char* ca, const unsigned char* sa, const unsigned char* cb,
                                                 const unsigned char* sb, const u16* act, const int (&idx)[kP], int ns, int64_t n,
                                                 float (&da)[kP], float (&db)[kP]) {
  const int lane = threadIdx.x % MET_WARP;
#pragma unroll
  for (int s = 0; s < kP; ++s) da[s] = db[s] = 0.f;
#pragma unroll 1
  for (int64_t blk = lane; blk * 32 < n; blk += MET_WARP) {
    const uint4 qa = load_weight16(ca + blk * 16);
    const uint4 qb = kTwo ? load_weight16(cb + blk * 16) : make_uint4(0, 0, 0, 0);
    const float scale_a = e8m0_value(sa[blk]), scale_b = kTwo ? e8m0_value(sb[blk]) : 0.f;
    const uint32_t wa[4] = {qa.x, qa.y, qa.z, qa.w}, wb[4] = {qb.x, qb.y, qb.z, qb.w};
    float pa[kP], pb[kP];
#pragma unroll
    for (int s = 0; s < kP; ++s) pa[s] = pb[s] = 0.f;
#pragma unroll
    for (int q = 0; q < 4; ++q) {  // columns 8q .. 8q + 7 of the block
      float a8[8], b8[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        a8[i] = fp4_e2m1_value((wa[q] >> (4 * i)) & 0xfu);
        b8[i] = kTwo ? fp4_e2m1_value((wb[q] >> (4 * i)) & 0xfu) : 0.f;
      }
      moe_dot8<kTwo, kP>(a8, b8, act, idx, ns, n, blk * 32 + 8 * q, pa, pb);
    }
#pragma unroll
    for (int s = 0; s < kP; ++s) {
      if (s >= ns) break;
      da[s] += pa[s] * scale_a;
      if (kTwo) db[s] += pb[s] * scale_b;
    }
  }
  moe_dots_reduce<kTwo, kP>(ns, da, db);
}

// Warp 0's top k of p[0, experts) into sel_e, sel_p, largest first, ties to the lower expert (the
// cpu's stable sort); each taken entry of p becomes -inf.
__device__ __forceinline__ void moe_warp_topk(float* p, int64_t experts, int top_k, int* sel_e, float* sel_p) {
  const int lane = threadIdx.x % MET_WARP;
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
}

// How a router scores: renormalize (moe_router_topk's int), bias (gpt-oss), or Gemma-4's scaled
// router (expert_scale set: scale, eps and root as moe_router_scaled's operands).
struct MoeRouter {
  bool renormalize;
  const u16* bias;
  const u16* scale;
  const u16* expert_scale;
  float eps, root;
};

// Gemma-4's router input in smem: n = bf16(bf16(bf16(x / rms(x)) * scale) * root), the cpu's
// rmsnorm_row without its offset (rms_scale) then the product with root, each rounded. red:
// MET_INTERP_WARPS floats. Ends with a barrier.
__device__ __forceinline__ void moe_router_norm_row(const u16* x, const MoeRouter& o, int64_t hidden, u16* n, float* red) {
  const float inv = inv_rms_block(x, hidden, o.eps, red);
  for (int64_t i = threadIdx.x; i < hidden; i += MET_INTERP_THREADS)
    n[i] = to_bf(bf_round(rms_scale(bf(x[i]), inv, bf(o.scale[i]))) * o.root);
  __syncthreads();
}

// The bf16-rounded logits of experts [e0, e1) of rows [row0, row0 + rows) of act into dst (shared or
// global memory: row r's logit of expert e at dst[r * dst_stride + e]), by every warp, two experts a
// pass over up to kP rows a read of their weights, kBatch loads of each weight row in flight per lane.
// act: x, or the scaled router's normalised row in smem. bias (gpt-oss): bf16(x . w + bias), one
// rounding.
template <int kP, int kBatch>
__device__ __forceinline__ void moe_router_logits(const u16* act, int64_t row0, int64_t rows, const u16* w_router,
                                                  const MoeRouter& o, int64_t e0, int64_t e1, int64_t hidden, float* dst,
                                                  int64_t dst_stride) {
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  for (int64_t e = e0 + 2 * warp; e < e1; e += 2 * MET_INTERP_WARPS) {
    const bool two = e + 1 < e1;
    for (int64_t r0 = 0; r0 < rows; r0 += kP) {
      const int ns = rows - r0 < kP ? static_cast<int>(rows - r0) : kP;
      float d[kP], d2[kP];
      int idx[kP];
#pragma unroll
      for (int s = 0; s < kP; ++s) idx[s] = static_cast<int>(row0 + r0) + (s < ns ? s : 0);
      if (two)
        moe_warp_dots<true, kP, kBatch>(w_router + e * hidden, w_router + (e + 1) * hidden, act, idx, ns, hidden, d, d2);
      else
        moe_warp_dots<false, kP, kBatch>(w_router + e * hidden, nullptr, act, idx, ns, hidden, d, d2);
#pragma unroll
      for (int s = 0; s < kP; ++s)
        if (s < ns && lane == s) {
          float* row = dst + (r0 + s) * dst_stride;
          row[e] = bf_round(o.bias ? d[s] + bf(o.bias[e]) : d[s]);
          if (two) row[e + 1] = bf_round(o.bias ? d2[s] + bf(o.bias[e + 1]) : d2[s]);
        }
    }
  }
}

// One warp's choice for one row from its logits p[0, experts) (shared memory; overwritten): the
// softmax over all experts in fp32 (the sum in expert order), the top k (largest first, ties to the
// lower expert: the cpu's stable sort) and the weights (divided by the top-k sum, in k order, when
// renormalize), each rounded to bf16, into ids and weights (the row's top_k each); sel_e, sel_p:
// top_k entries of the warp's own.
// bias (gpt-oss, moe_router_topk_bias): the top k of the logits are taken and the weights are a
// softmax over those k in fp32, each rounded to bf16.
// expert_scale (Gemma-4, moe_router_scaled): each probability rounded to bf16 before the top k, their
// sum rounded to bf16, and weight = bf16(bf16(p / sum) * expert_scale[e]).
__device__ __forceinline__ void moe_router_select(float* p, int64_t experts, int top_k, const MoeRouter& o, int* sel_e,
                                                  float* sel_p, int* ids, float* weights) {
  const int lane = threadIdx.x % MET_WARP;
  const bool scaled = o.expert_scale != nullptr;
  if (o.bias) {
    moe_warp_topk(p, experts, top_k, sel_e, sel_p);
    float sum = 0.f;
    if (lane == 0)
      for (int k = 0; k < top_k; ++k) sum += expf(sel_p[k] - sel_p[0]);
    sum = __shfl_sync(0xffffffffu, sum, 0);
    for (int k = lane; k < top_k; k += MET_WARP) {
      ids[k] = sel_e[k];
      weights[k] = bf_round(expf(sel_p[k] - sel_p[0]) / sum);
    }
    return;
  }
  float mx = -INFINITY;
  for (int64_t e = lane; e < experts; e += MET_WARP) mx = fmaxf(mx, p[e]);
  mx = met_warp_reduce_max(mx);
  for (int64_t e = lane; e < experts; e += MET_WARP) p[e] = expf(p[e] - mx);
  __syncwarp();
  float sum = 0.f;
  if (lane == 0)
    for (int64_t e = 0; e < experts; ++e) sum += p[e];
  sum = __shfl_sync(0xffffffffu, sum, 0);
  for (int64_t e = lane; e < experts; e += MET_WARP) p[e] = scaled ? bf_round(p[e] / sum) : p[e] / sum;
  __syncwarp();
  moe_warp_topk(p, experts, top_k, sel_e, sel_p);
  float top_sum = 0.f;
  if (lane == 0)
    for (int k = 0; k < top_k; ++k) top_sum += sel_p[k];
  top_sum = __shfl_sync(0xffffffffu, top_sum, 0);
  if (scaled) top_sum = bf_round(top_sum);
  for (int k = lane; k < top_k; k += MET_WARP) {
    ids[k] = sel_e[k];
    weights[k] = scaled ? bf_round(bf_round(sel_p[k] / top_sum) * bf(o.expert_scale[sel_e[k]]))
                        : bf_round(o.renormalize ? sel_p[k] / top_sum : sel_p[k]);
  }
}

// x: [rows, hidden]; w_router: [experts, hidden]; ids, weights: [rows, top_k]. Up to MET_MOE_PASS
// rows at a time: every warp takes experts and scores them for every row of the pass, one read of
// each weight row (moe_router_logits, as moe_router_parts does), then warp w chooses row w of the
// pass (moe_router_select) from its own part of the shared memory: the row's logits, then its
// choice. A row at a time read every router weight once per row: 25 of Qwen3-30B-A3B's 448 ms
// prefill of 4096 rows on an H100 (perf-data/h100-sxm/20261207T1625Z-moe-bk128).
// expert_scale (Gemma-4, moe_router_scaled): one row at a time, the logits of the normalised row
// (moe_router_norm_row, in smem after the router's buffers), warp 0 choosing.
MET_OUTLINE void moe_router_rows(const u16* x, const u16* w_router, MoeRouter o, int* ids, float* weights, int64_t row0,
                                 int64_t row1, int64_t hidden, int64_t experts, int top_k, unsigned char* smem) {
  const int warp = threadIdx.x / MET_WARP;
  if (o.expert_scale) {
    float* p = reinterpret_cast<float*>(smem);                     // [experts]
    int* sel_e = reinterpret_cast<int*>(p + MET_MOE_MAX_EXPERTS);  // [top_k]
    float* sel_p = reinterpret_cast<float*>(sel_e + MET_MOE_MAX_EXPERTS);
    u16* normed = reinterpret_cast<u16*>(smem + MET_MOE_ROUTER_SMEM);  // [hidden]
    for (int64_t row = row0; row < row1; ++row) {
      moe_router_norm_row(x + row * hidden, o, hidden, normed, sel_p);  // sel_p: free until the top k
      moe_router_logits<1, 8>(normed, 0, 1, w_router, o, 0, experts, hidden, p, 0);
      __syncthreads();
      if (warp == 0) moe_router_select(p, experts, top_k, o, sel_e, sel_p, ids + row * top_k, weights + row * top_k);
      __syncthreads();
    }
    return;
  }
  const int64_t per_warp = experts + 2 * top_k;
  const int64_t fit = MET_MOE_SMEM / 4 / per_warp;
  const int pass = static_cast<int>(fit < MET_MOE_PASS ? fit : MET_MOE_PASS);  // the host bounds experts and top_k: fit >= 1
  static_assert(MET_MOE_PASS <= MET_INTERP_WARPS, "a warp chooses each row of a pass");
  float* p = reinterpret_cast<float*>(smem) + warp * per_warp;
  int* sel_e = reinterpret_cast<int*>(p + experts);
  float* sel_p = reinterpret_cast<float*>(sel_e + top_k);
  for (int64_t r0 = row0; r0 < row1; r0 += pass) {
    const int n = row1 - r0 < pass ? static_cast<int>(row1 - r0) : pass;
    moe_router_logits<MET_MOE_PASS, MET_MOE_DOT_BATCH>(x, r0, n, w_router, o, 0, experts, hidden, reinterpret_cast<float*>(smem),
                                                       per_warp);
    __syncthreads();
    if (warp < n) moe_router_select(p, experts, top_k, o, sel_e, sel_p, ids + (r0 + warp) * top_k, weights + (r0 + warp) * top_k);
    __syncthreads();
  }
}

// Arrival counter of a router split by experts (one router runs at a time: each reads the residual
// that the layer before it wrote): the last part to arrive chooses and puts it back to 0.
__device__ unsigned long long met_router_arrivals[1];

// A router's column part (col_slices > 1: a decode row, every row in each slice): the logits of the
// slice's experts [e0, e1) of every row into logits [rows, experts], then its arrival; the last part
// to arrive reads every logit (the other parts wrote them: from L2) and chooses each row, a warp a
// row, as moe_router_rows does (the same logits, so the same choice). The scaled router (Gemma-4)
// scores a row at a time, from its normalised row in smem.
MET_OUTLINE void moe_router_parts(const u16* x, const u16* w_router, MoeRouter o, int* ids, float* weights, float* logits,
                                  int64_t rows, int64_t e0, int64_t e1, int64_t hidden, int64_t experts, int parts, int top_k,
                                  unsigned char* smem) {
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  u16* normed = reinterpret_cast<u16*>(smem + MET_MOE_ROUTER_SMEM);  // [hidden] (the scaled router)
  if (o.expert_scale) {
    for (int64_t row = 0; row < rows; ++row) {
      moe_router_norm_row(x + row * hidden, o, hidden, normed, reinterpret_cast<float*>(smem));
      moe_router_logits<1, 8>(normed, 0, 1, w_router, o, e0, e1, hidden, logits + row * experts, 0);
      __syncthreads();  // normed is read before the next row's norm writes it
    }
  } else {
    // Up to MET_MOE_PASS rows a read of the weights (moe_gate_up_cols's dot products; a 1-row, 8-deep
    // form beside this one made the kernel's function spill).
    moe_router_logits<MET_MOE_PASS, MET_MOE_DOT_BATCH>(x, 0, rows, w_router, o, e0, e1, hidden, logits, experts);
  }
#if defined(__HIP_PLATFORM_AMD__)
  __threadfence();  // each thread's logits at device scope before thread 0's arrival releases them
#endif
  __syncthreads();
  volatile int* flag = reinterpret_cast<volatile int*>(smem);
  if (threadIdx.x == 0) {
#if defined(__HIP_PLATFORM_AMD__)
    const unsigned long long before =
        __hip_atomic_fetch_add(met_router_arrivals, 1ull, __ATOMIC_ACQ_REL, __HIP_MEMORY_SCOPE_AGENT);
    const bool last = before == static_cast<unsigned long long>(parts - 1);
    if (last) __hip_atomic_store(met_router_arrivals, 0ull, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
#else
    const bool last = atom_add_acq_rel(met_router_arrivals, 1ull) == static_cast<unsigned long long>(parts - 1);
    if (last) atomicExch(met_router_arrivals, 0ull);
#endif
    *flag = last ? 1 : 0;
  }
  __syncthreads();
  const bool last = *flag != 0;
  __syncthreads();  // the flag is read before the warps' buffers take its word
  if (!last) return;
#if defined(__HIP_PLATFORM_AMD__)
  __threadfence();  // each thread's reads after the other parts' writes
#endif
  // A warp a row, each in a part of the shared memory of its own: the row's logits, then its choice.
  const int64_t per_warp = experts + 2 * top_k;
  const int64_t fit = MET_MOE_SMEM / 4 / per_warp;
  const int warps = fit < MET_INTERP_WARPS ? static_cast<int>(fit) : MET_INTERP_WARPS;
  if (warp >= warps) return;
  float* p = reinterpret_cast<float*>(smem) + warp * per_warp;
  int* sel_e = reinterpret_cast<int*>(p + experts);
  float* sel_p = reinterpret_cast<float*>(sel_e + top_k);
  for (int64_t row = warp; row < rows; row += warps) {
#if defined(__HIP_PLATFORM_AMD__)
    for (int64_t e = lane; e < experts; e += MET_WARP) p[e] = logits[row * experts + e];
#else
    for (int64_t e = lane; e < experts; e += MET_WARP) p[e] = __ldcg(logits + row * experts + e);
#endif
    __syncwarp();
    moe_router_select(p, experts, top_k, o, sel_e, sel_p, ids + row * top_k, weights + row * top_k);
    __syncwarp();
  }
}

// A router's slice: its rows (one column part), or its experts of every row (several).
__device__ __forceinline__ void moe_router_slice(const u16* x, const u16* w_router, const MoeRouter& o, int* ids, float* weights,
                                                 float* logits, SliceRange r, SliceRange e, int64_t parts, int64_t hidden,
                                                 int64_t experts, int top_k, unsigned char* smem) {
  if (parts > 1)
    moe_router_parts(x, w_router, o, ids, weights, logits, r.end, e.begin, e.end, hidden, experts, static_cast<int>(parts), top_k,
                     smem);
  else
    moe_router_rows(x, w_router, o, ids, weights, r.begin, r.end, hidden, experts, top_k, smem);
}

MET_ENTRY(moe_router_topk) {
  const MoeRouter o{a.renormalize != 0, nullptr, nullptr, nullptr, 0.f, 0.f};
  moe_router_slice(a.x, a.w_router, o, a.ids, a.weights, a.logits, slice_rows(a, slice), slice_cols(a, slice, a.geom.w_rows),
                   a.geom.col_parts, a.geom.w_cols, a.geom.w_rows, static_cast<int>(a.top_k), smem);
}

MET_ENTRY(moe_router_topk_bias) {
  const MoeRouter o{true, a.bias, nullptr, nullptr, 0.f, 0.f};
  moe_router_slice(a.x, a.w_router, o, a.ids, a.weights, a.logits, slice_rows(a, slice), slice_cols(a, slice, a.geom.w_rows),
                   a.geom.col_parts, a.geom.w_cols, a.geom.w_rows, static_cast<int>(a.top_k), smem);
}

// Gemma-4 (moe_router scoring 3): its smem holds the normalised row after the router's buffers
// (the host sizes it MET_MOE_ROUTER_SMEM + 2 hidden).
MET_ENTRY(moe_router_scaled) {
  const MoeRouter o{true, nullptr, a.scale, a.expert_scale, a.eps, a.root};
  moe_router_slice(a.x, a.w_router, o, a.ids, a.weights, a.logits, slice_rows(a, slice), slice_cols(a, slice, a.geom.w_rows),
                   a.geom.col_parts, a.geom.w_cols, a.geom.w_rows, static_cast<int>(a.top_k), smem);
}

// gpt-oss's experts (layout 1) as the expert bodies read them: MXFP4 rows (the instruction's
// w_scales; codes at the weight operand), a bf16 bias per expert row, and for gate/up the clamped
// SwiGLU's limit and alpha over interleaved rows (gate row 2j, up row 2j + 1 of an expert's
// 2 inter). scales null: the bf16 experts of layout 0 (gate row j, up row inter + j; SiLU), or with
// gelu Gemma-4's of layout 2 (layout 0's bytes; gelu_tanh in place of SiLU).
struct MoeFused {
  const unsigned char* scales;
  const u16* bias;
  float limit, alpha;
  bool gelu;
};

// The clamped SwiGLU of gpt-oss on a slot's gate and up products, with their biases, every step
// rounded to bf16 as transformers' bf16 tensors are (the cpu's met_moe_gate_up_swiglu).
__device__ __forceinline__ float moe_swiglu(float gate_dot, float up_dot, float gate_bias, float up_bias, float limit, float alpha) {
  const float gate = fminf(bf_round(bf_round(gate_dot) + gate_bias), limit);
  const float up = fminf(fmaxf(bf_round(bf_round(up_dot) + up_bias), -limit), limit);
  const float sig = bf_round(1.f / (1.f + expf(-bf_round(gate * alpha))));
  return bf_round(up + 1.f) * bf_round(gate * sig);
}

// x: [rows, hidden]; w_gate_up: [experts * 2 inter, hidden]; h: [rows, top_k, inter]. The slice's
// columns j of inter: per expert run and j, one warp reads gate row j and up row inter + j once per
// MET_MOE_PASS of the run's slots; h = bf16(bf16(silu(bf16(gate))) * bf16(up)) (f.gelu: gelu_tanh, the
// cpu's gelu_mul_span). With f.scales, the
// MXFP4 rows 2j and 2j + 1 and moe_swiglu.
MET_OUTLINE void moe_gate_up_cols(const u16* x, const u16* w_gate_up, const int* ids, u16* h, SliceRange r, SliceRange c,
                                  int64_t top_k, int64_t inter, int64_t hidden, int64_t experts, MoeFused f, unsigned char* smem) {
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
        if (!f.scales)     // (gpt-oss's cpu body leaves them unwritten)
          for (int q = p0 + lane; q < p1; q += MET_WARP) h[(t0 + m.sorted[q] % MET_MOE_CHUNK) * inter + j] = 0;
        continue;
      }
      const u16* wg = f.scales ? nullptr : w_gate_up + (e * width + j) * hidden;
      const u16* wu = f.scales ? nullptr : wg + inter * hidden;
      const int64_t gate_row = e * width + 2 * j;  // MXFP4: the row's codes and scales
      const unsigned char* cg = f.scales ? reinterpret_cast<const unsigned char*>(w_gate_up) + gate_row * (hidden / 2) : nullptr;
      const unsigned char* sg = f.scales ? f.scales + gate_row * (hidden / 32) : nullptr;
      for (int q = p0; q < p1; q += MET_MOE_PASS) {
        const int ns = p1 - q < MET_MOE_PASS ? p1 - q : MET_MOE_PASS;
        int idx[MET_MOE_PASS];  // x rows
#pragma unroll
        for (int s = 0; s < MET_MOE_PASS; ++s) idx[s] = s < ns ? static_cast<int>((t0 + m.sorted[q + s] % MET_MOE_CHUNK) / top_k) : 0;
        float dg[MET_MOE_PASS], du[MET_MOE_PASS];
        if (f.scales)
          moe_warp_dots_mx<true, MET_MOE_PASS>(cg, sg, cg + hidden / 2, sg + hidden / 32, x, idx, ns, hidden, dg, du);
        else
          moe_warp_dots<true, MET_MOE_PASS>(wg, wu, x, idx, ns, hidden, dg, du);
#pragma unroll
        for (int s = 0; s < MET_MOE_PASS; ++s)
          if (s < ns && lane == s) {
            const int64_t t = t0 + m.sorted[q + s] % MET_MOE_CHUNK;
            h[t * inter + j] = to_bf(f.scales ? moe_swiglu(dg[s], du[s], bf(f.bias[gate_row]), bf(f.bias[gate_row + 1]), f.limit, f.alpha)
                                              : gated_act(bf_round(dg[s]), bf_round(du[s]), f.gelu));
          }
      }
    }
  }
}

MET_ENTRY(moe_gate_up_silu) {
  const int64_t width = 2 * a.inter;
  moe_gate_up_cols(a.x, a.w_gate_up, a.ids, a.h, slice_rows(a, slice), slice_cols(a, slice, a.inter), a.top_k, a.inter,
                   a.geom.w_cols, width > 0 ? a.geom.w_rows / width : 0, MoeFused{}, smem);
}

// Gemma-4's experts (layout 2): one tensor [experts, 2 inter, hidden], the stacked rows of layout 0.
MET_ENTRY(moe_gate_up_gelu) {
  const int64_t width = 2 * a.inter;
  MoeFused f{};
  f.gelu = true;
  moe_gate_up_cols(a.x, a.w_gate_up, a.ids, a.h, slice_rows(a, slice), slice_cols(a, slice, a.inter), a.top_k, a.inter,
                   a.geom.w_cols, width > 0 ? a.geom.w_rows / width : 0, f, smem);
}

// gpt-oss: MXFP4 experts only (the host refuses bf16 ones: layout 1 stores them [experts, in, out]).
MET_ENTRY(moe_gate_up_swiglu) {
  const MoeFused f{reinterpret_cast<const unsigned char*>(a.geom.instr->w_scales), a.bias, a.limit, a.alpha, false};
  moe_gate_up_cols(a.x, a.w_gate_up, a.ids, a.h, slice_rows(a, slice), slice_cols(a, slice, a.inter), a.top_k, a.inter, a.hidden,
                   a.experts, f, smem);
}

// h: [rows, top_k, inter]; w_down: [experts * hidden, inter]; y: [rows, hidden]. The slice's columns
// o of hidden, MET_MOE_OUT_TILE at a time: per expert run and o, one warp reads row o once per
// MET_MOE_PASS of the run's slots and keeps each slot's copy bf16(weight * bf16(h . row)); then each
// (row, o) sums its copies in fp32 in (expert, slot) order and stores once. With f.scales, MXFP4 rows
// and each copy bf16(weight * bf16(bf16(h . row) + bias)). With y32 (moe_down_f32, a rank's share
// under tensor parallelism): each copy weight * (h . row) (+ bias with MXFP4 rows, where f.bias is
// given: moe_down_bias_f32 on the first rank) and the sum stored in y32, all unrounded.
MET_OUTLINE void moe_down_cols(const u16* hin, const u16* w_down, const int* ids, const float* weights, u16* y, SliceRange r,
                               SliceRange c, int64_t top_k, int64_t hidden, int64_t inter, int64_t experts, MoeFused f,
                               unsigned char* smem, float* y32 = nullptr) {
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
      // bf16 rows two at a time: columns oo and oo + 1 in one warp's pass (twice the loads in flight:
      // the rows are inter long, 768 for Qwen3-30B-A3B, three loads a lane).
      const int per = f.scales ? 1 : 2, nu = (no + per - 1) / per;
      for (int u = warp; u < runs * nu; u += MET_INTERP_WARPS) {
        const int run = u / nu, p0 = m.seg[run], p1 = m.seg[run + 1], oo = (u % nu) * per;
        const bool two = per == 2 && oo + 1 < no;
        const int64_t e = m.sorted[p0] / MET_MOE_CHUNK;
        if (e >= experts) continue;
        const int64_t row = e * hidden + o0 + oo;
        const u16* wr = f.scales ? nullptr : w_down + row * inter;
        const unsigned char* cr = f.scales ? reinterpret_cast<const unsigned char*>(w_down) + row * (inter / 2) : nullptr;
        const float bias = f.scales && f.bias ? bf(f.bias[row]) : 0.f;
        for (int q = p0; q < p1; q += MET_MOE_PASS) {
          const int ns = p1 - q < MET_MOE_PASS ? p1 - q : MET_MOE_PASS;
          int idx[MET_MOE_PASS];  // h rows (slots)
#pragma unroll
          for (int s = 0; s < MET_MOE_PASS; ++s) idx[s] = s < ns ? static_cast<int>(t0 + m.sorted[q + s] % MET_MOE_CHUNK) : 0;
          float d[MET_MOE_PASS], d2[MET_MOE_PASS];
          if (f.scales)
            moe_warp_dots_mx<false, MET_MOE_PASS>(cr, f.scales + row * (inter / 32), nullptr, nullptr, hin, idx, ns, inter, d, d2);
          else if (two)
            moe_warp_dots<true, MET_MOE_PASS>(wr, wr + inter, hin, idx, ns, inter, d, d2);
          else
            moe_warp_dots<false, MET_MOE_PASS>(wr, nullptr, hin, idx, ns, inter, d, d2);
#pragma unroll
          for (int s = 0; s < MET_MOE_PASS; ++s)
            if (s < ns && lane == s) {
              const int local = m.sorted[q + s] % MET_MOE_CHUNK;
              if (y32) {
                m.contrib[local * MET_MOE_OUT_TILE + oo] = weights[t0 + local] * (d[s] + bias);
                if (two) m.contrib[local * MET_MOE_OUT_TILE + oo + 1] = weights[t0 + local] * d2[s];
              } else {
                const float v = f.scales ? bf_round(bf_round(d[s]) + bias) : bf_round(d[s]);
                m.contrib[local * MET_MOE_OUT_TILE + oo] = bf_round(weights[t0 + local] * v);
                if (two) m.contrib[local * MET_MOE_OUT_TILE + oo + 1] = bf_round(weights[t0 + local] * bf_round(d2[s]));
              }
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
        if (y32)
          y32[(r0 + lr) * hidden + o0 + oo] = acc;
        else
          y[(r0 + lr) * hidden + o0 + oo] = to_bf(acc);
      }
      __syncthreads();  // the copies are read before the next tile writes them
    }
  }
}

MET_ENTRY(moe_down) {
  moe_down_cols(a.h, a.w_down, a.ids, a.weights, a.y, slice_rows(a, slice), slice_cols(a, slice, a.hidden), a.top_k, a.hidden,
                a.geom.w_cols, a.hidden > 0 ? a.geom.w_rows / a.hidden : 0, MoeFused{}, smem);
}

// Tensor parallelism: this rank's share of the intermediate size, fp32 and unrounded for the
// all-reduce (bf16 experts only).
MET_ENTRY(moe_down_f32) {
  moe_down_cols(a.h, a.w_down, a.ids, a.weights, nullptr, slice_rows(a, slice), slice_cols(a, slice, a.hidden), a.top_k,
                a.hidden, a.geom.w_cols, a.hidden > 0 ? a.geom.w_rows / a.hidden : 0, MoeFused{}, smem, a.y);
}

// gpt-oss: MXFP4 experts only, as moe_gate_up_swiglu.
MET_ENTRY(moe_down_bias) {
  const MoeFused f{reinterpret_cast<const unsigned char*>(a.geom.instr->w_scales), a.bias, 0.f, 0.f, false};
  moe_down_cols(a.h, a.w_down, a.ids, a.weights, a.y, slice_rows(a, slice), slice_cols(a, slice, a.hidden), a.top_k, a.hidden,
                a.inter, a.experts, f, smem);
}

// Tensor parallelism for gpt-oss (MXFP4 experts only, as moe_down_bias): this rank's share of the
// intermediate size, fp32 and unrounded; the bias on the first rank only (absent on the others).
MET_ENTRY(moe_down_bias_f32) {
  const MoeFused f{reinterpret_cast<const unsigned char*>(a.geom.instr->w_scales), a.bias, 0.f, 0.f, false};
  moe_down_cols(a.h, a.w_down, a.ids, a.weights, nullptr, slice_rows(a, slice), slice_cols(a, slice, a.hidden), a.top_k, a.hidden,
                a.inter, a.experts, f, smem, a.y);
}

}  // namespace met_interp
