// Decode attention: split-KV (one row and one split per slice, every head) and the merge of the
// split states (one (row, head) per slice, the whole block over its splits). In a split, one warp
// owns one (row, KV head): lanes take 32 keys at a time for the scores, then the lanes own output
// dims for P V. Where the class has cp.async and mma.sync and the k and v heads are both 64 or 128
// dims (256 too in the merged op), the chunks are staged in the warp's shared memory and folded on
// the tensor cores, the query heads as the rows of one mma tile (attend_mma_t); otherwise, where
// the class has cp.async and the K head has at most MET_ATTN_MAX_HD dims, staged and folded on the
// CUDA cores (attend_staged_t); otherwise the lanes read the cache directly (attend_group_t).
// Caches are [slot][kv_heads][dim] bf16; a sequence's position p lives at slot base + p.
#pragma once
#include "common/interp/prims.cuh"
#include "common/mma_sync.cuh"

// A/B switch (bench/interp_variants.sh '-DMET_ATTN_STAGED=0'): every split reads the cache directly.
// The launch's shared memory (smem.h, sized by the host) stays the staged path's.
#ifndef MET_ATTN_STAGED
#define MET_ATTN_STAGED 1
#endif
// A/B switch: 0 folds every head dim on the CUDA cores (attend_staged_t); 1 folds head dims 64 and
// 128 (k and v alike) on the tensor cores (attend_mma_t).
#ifndef MET_ATTN_MMA
#define MET_ATTN_MMA 1
#endif

namespace met_interp {

constexpr int kMaxVDims = 4;  // V dims / 32 per lane of one fold: 128 (wider heads fold in parts)
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

// dot[g] += q_g . k over hd dims (q's G heads hd apart), 16-byte words, U words per unrolled step.
template <int G, int U>
__device__ __forceinline__ void dot_key(const u16* q, const u16* k, int hd, float (&dot)[G]) {
#pragma unroll U
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

// The online softmax of one 32-key chunk (a key per lane; `live` false past the range's end):
// scales the G states to the chunk's new max and leaves each lane's weight, rounded to bf16, in p.
template <int DPL, int G>
__device__ __forceinline__ void fold_scores(const float (&dot)[G], bool live, float scale, float softcap, WarpAttn* st,
                                            float (&p)[G]) {
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float score = -INFINITY;
    if (live) {
      score = dot[g] * scale;
      if (softcap > 0.f) score = softcap * tanhf(score / softcap);
    }
    const float cmax = met_warp_reduce_max(score);
    const float m_new = fmaxf(st[g].m, cmax);
    const float carry = st[g].m == -INFINITY ? 0.f : expf(st[g].m - m_new);
    const float pf = live ? expf(score - m_new) : 0.f;
    st[g].l = st[g].l * carry + met_warp_reduce(pf);
    p[g] = bf_round(pf);  // P V takes P in bf16, l the fp32 weights (the cpu's attend_range)
#pragma unroll
    for (int i = 0; i < DPL; ++i) st[g].o[i] *= carry;
    st[g].m = m_new;
  }
}

// Folds keys [lo, hi) into the states of G query heads that share one KV head (the cpu's
// attend_range per head, with the softmax of each 32-key chunk taken at once): lanes score one
// key each for all G heads from one K load, then own DPL output dims for P V, loading the V rows
// of several keys before using them. q points at the first head; the others follow hd apart. The
// V cache rows hold kv_heads heads of vfull dims; the fold takes 32 * DPL of them from vc on (vc
// is the cache, or the cache past a head's first dims when a wide V head is folded in parts).
template <int DPL, int G>
__device__ void attend_group_t(const u16* q, const u16* kc, const u16* vc, int64_t base, int64_t lo, int64_t hi, int kv_head,
                               int kv_heads, int hd, int vfull, float scale, float softcap, WarpAttn* st) {
  constexpr int kBatch = DPL >= 8 ? 4 : 8;
  const int lane = threadIdx.x % 32;
  const int64_t kw = static_cast<int64_t>(kv_heads) * hd, vw = static_cast<int64_t>(kv_heads) * vfull;
  for (int64_t c0 = lo; c0 < hi; c0 += 32) {
    const int64_t j = c0 + lane;
    float p[G];
    {
      float dot[G];
#pragma unroll
      for (int g = 0; g < G; ++g) dot[g] = 0.f;
      if (j < hi) dot_key<G, 2>(q, kc + (base + j) * kw + static_cast<int64_t>(kv_head) * hd, hd, dot);
      fold_scores<DPL, G>(dot, j < hi, scale, softcap, st, p);
    }
    const int n = static_cast<int>(min(static_cast<int64_t>(32), hi - c0));
    const u16* v0 = vc + (base + c0) * vw + static_cast<int64_t>(kv_head) * vfull + lane * DPL;
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
                           int kv_heads, int hd, int vfull, int group, float scale, float softcap, WarpAttn* st) {
  switch (group) {
    case 1: attend_group_t<DPL, 1>(q, kc, vc, base, lo, hi, kv_head, kv_heads, hd, vfull, scale, softcap, st); break;
    case 2: attend_group_t<DPL, 2>(q, kc, vc, base, lo, hi, kv_head, kv_heads, hd, vfull, scale, softcap, st); break;
    default: attend_group_t<DPL, 4>(q, kc, vc, base, lo, hi, kv_head, kv_heads, hd, vfull, scale, softcap, st); break;
  }
}

// Dispatch on the V dims folded (32, 64 or 128 of a head of vfull) and the query heads per KV head
// (1, 2 or 4); the host refuses other shapes.
__device__ void attend_group(const u16* q, const u16* kc, const u16* vc, int64_t base, int64_t lo, int64_t hi, int kv_head,
                             int kv_heads, int hd, int vhd, int vfull, int group, float scale, float softcap, WarpAttn* st) {
  switch (vhd / 32) {
    case 1: attend_dpl<1>(q, kc, vc, base, lo, hi, kv_head, kv_heads, hd, vfull, group, scale, softcap, st); break;
    case 2: attend_dpl<2>(q, kc, vc, base, lo, hi, kv_head, kv_heads, hd, vfull, group, scale, softcap, st); break;
    default: attend_dpl<4>(q, kc, vc, base, lo, hi, kv_head, kv_heads, hd, vfull, group, scale, softcap, st); break;
  }
}

#if MET_HAS_CP_ASYNC
// The same fold with each 32-key chunk staged in the warp's shared memory by cp.async: the K rows
// (padded to MET_ATTN_KSTRIDE so lanes reading different keys hit different banks; the query
// heads with the first chunk) and the V rows
// go out as two copy groups, so one chunk costs about one memory latency with every byte of it in
// flight, and the next chunk's K (then V) copies go out while this chunk's P V (then the next
// scores) are computed. Lanes read K and V from shared memory with the global path's order of
// operations, so the sums are the same. hd <= MET_ATTN_MAX_HD.
template <int DPL, int G>
__device__ void attend_staged_t(const u16* q, const u16* kc, const u16* vc, int64_t base, int64_t lo, int64_t hi, int kv_head,
                                int kv_heads, int hd, float scale, float softcap, WarpAttn* st, u16* ks, u16* vs,
                                u16* qs) {
  const int lane = threadIdx.x % 32;
  const int vhd = 32 * DPL;
  const int64_t kw = static_cast<int64_t>(kv_heads) * hd, vw = static_cast<int64_t>(kv_heads) * vhd;
  const u16* kh = kc + static_cast<int64_t>(kv_head) * hd;
  const u16* vh = vc + static_cast<int64_t>(kv_head) * vhd;
  const int kp = hd / 8, vp = vhd / 8;  // 16-byte pieces per key
  // One copy group: the rows of keys [c0, c0 + 32) (at most hi) of a cache (row width w, this head's
  // `pieces` 16-byte words from src) to dst, `stride` bf16 apart.
  auto copy_rows = [&](u16* dst, int stride, const u16* src, int64_t w, int pieces, int64_t c0) {
    const int n = static_cast<int>(min(static_cast<int64_t>(32), hi - c0));
    for (int x = lane; x < n * pieces; x += 32) {
      const int key = x / pieces, piece = x - key * pieces;
      met_copy16(dst + key * stride + piece * 8, src + (base + c0 + key) * w + piece * 8, true);
    }
    met_copy_commit();
  };
  auto copy_k = [&](int64_t c0) { copy_rows(ks, MET_ATTN_KSTRIDE, kh, kw, kp, c0); };
  auto copy_v = [&](int64_t c0) { copy_rows(vs, vhd, vh, vw, vp, c0); };
  if (lo < hi) {
    // The query heads join the first K group: the dots read them from shared memory too.
    for (int x = lane; x < G * kp; x += 32) met_copy16(qs + x * 8, q + x * 8, true);
    copy_k(lo);
    copy_v(lo);
  }
  for (int64_t c0 = lo; c0 < hi; c0 += 32) {
    const int64_t j = c0 + lane;
    const int n = static_cast<int>(min(static_cast<int64_t>(32), hi - c0));
    const bool next = c0 + 32 < hi;
    float p[G];
    met_copy_wait<1>();  // this chunk's K (its V may still be in flight)
    __syncwarp();
    {
      float dot[G];
#pragma unroll
      for (int g = 0; g < G; ++g) dot[g] = 0.f;
      if (j < hi) dot_key<G, 4>(qs, ks + lane * MET_ATTN_KSTRIDE, hd, dot);
      __syncwarp();  // every lane has read its K row: the stage is free for the next chunk's
      if (next) copy_k(c0 + 32);
      fold_scores<DPL, G>(dot, j < hi, scale, softcap, st, p);
    }
    if (next) {
      met_copy_wait<1>();  // this chunk's V (the next chunk's K may still be in flight)
    } else {
      met_copy_wait<0>();
    }
    __syncwarp();
    const u16* v0 = vs + lane * DPL;
#pragma unroll 8
    for (int u = 0; u < n; ++u) {
      float v[DPL];
      load_seg<DPL>(v0 + u * vhd, v);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float pj = __shfl_sync(0xffffffffu, p[g], u);
#pragma unroll
        for (int i = 0; i < DPL; ++i) st[g].o[i] += pj * v[i];
      }
    }
    __syncwarp();  // every lane has read the V rows
    if (next) copy_v(c0 + 32);
  }
}

template <int DPL>
__device__ void attend_staged_dpl(const u16* q, const u16* kc, const u16* vc, int64_t base, int64_t lo, int64_t hi, int kv_head,
                                  int kv_heads, int hd, int group, float scale, float softcap, WarpAttn* st, u16* ks, u16* vs,
                                  u16* qs) {
  switch (group) {
    case 1: attend_staged_t<DPL, 1>(q, kc, vc, base, lo, hi, kv_head, kv_heads, hd, scale, softcap, st, ks, vs, qs); break;
    case 2: attend_staged_t<DPL, 2>(q, kc, vc, base, lo, hi, kv_head, kv_heads, hd, scale, softcap, st, ks, vs, qs); break;
    default: attend_staged_t<DPL, 4>(q, kc, vc, base, lo, hi, kv_head, kv_heads, hd, scale, softcap, st, ks, vs, qs); break;
  }
}
#endif  // MET_HAS_CP_ASYNC

#if MET_HAS_CP_ASYNC && MET_HAS_MMA_SYNC
// d += a * b for the top 8 rows of an m16n8k16 tile whose rows 8-15 are zero (a1 = a3 = 0): the
// accumulators of rows 8-15 are fed zero and dropped, which saves a register pair per tile.
__device__ __forceinline__ void mma_top8(float (&d)[2], uint32_t a0, uint32_t a2, const uint32_t (&b)[2]) {
  float x2 = 0.f, x3 = 0.f;  // rows 8-15, fed zero each time
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(x2), "+f"(x3)
      : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b[0]), "r"(b[1]));
}

// Row stride (bf16) of the tensor-core fold's K and V stages: MET_ATTN_KSTRIDE up to its 128 dims,
// 256-dim rows padded by 8 the same way (528 bytes: the 8 rows of an ldmatrix hit different banks).
template <int HD>
constexpr int kMmaStride = HD <= MET_ATTN_MAX_HD ? MET_ATTN_KSTRIDE : HD + 8;

// The widest V a tensor-core fold's lanes hold the O of (64 fp32 accumulators a lane); wider V
// heads fold in parts of it, each on its own warps (fold_parts).
constexpr int kMaxMmaVDims = 256;

// The shape of a stage's rows for attend_mma_t's copies: 16-byte pieces a row, the row stride (bf16).
template <int P, int RS>
struct StageRows {
  static constexpr int kPieces = P, kStride = RS;
};

// The fold of keys [lo, hi) on the tensor cores, for k heads of HD (64, 128, 256 or 512) dims and
// VD of the V heads' vfull dims (vc and po start at the fold's first V dim; VD = HD = vfull but for
// 512-dim heads, whose 512 output dims per head would not fit a lane's registers: two warps each
// take 256 over the same keys), in chunks of KEYS keys (32; 16 for 256 and 512 dims, whose K and V
// rows of 32 keys would not fit the warp's stage), writing the warp's split state itself. The query
// heads are the rows of one 16-row mma tile (rows past the group are zero), so S = Q K^T of a chunk
// is KEYS / 8 tiles of 8 keys, and each lane holds the scores of head lane / 4 for keys
// 2 * (lane % 4) + {0, 1} of every tile: the chunk's softmax is a reduction over the lane's scores
// and its quad. Those accumulators are already P's A fragments for O += P V: P goes in rounded to bf16 and
// l sums the unrounded weights in fp32, as the cpu's attend_range rounds
// (kernels/cpu/attention.hpp). K and V rows sit in the warp's stage padded to kMmaStride, so the 8
// rows of an ldmatrix hit different banks (the query rows come from global memory into registers,
// which frees the query stage for the padding). Keys past hi are zero-filled, so their zero weights
// meet finite values. The copy pipeline is attend_staged_t's: a chunk's K and V as two copy groups,
// the next chunk's K once the scores are taken, its V once P V is done. Where a chunk's K and V
// rows do not fit the stage together (512 dims: kSerial), they take turns in it: V is copied once
// the scores are taken, the next K once P V is done.
template <int HD, int KEYS = 32, int VD = HD>
__device__ void attend_mma_t(const u16* q, const u16* kc, const u16* vc, int64_t base, int64_t lo, int64_t hi, int kv_head,
                             int kv_heads, int group, float scale, float softcap, u16* ks, u16* vs, float* po, float* pml,
                             int64_t head_step, int vfull = VD) {
  constexpr int kPieces = HD / 8;  // 16-byte pieces per key row
  constexpr int kVPieces = VD / 8;  // per V row of the fold, and 8-dim output tiles
  constexpr int KS = kMmaStride<HD>, VS = kMmaStride<VD>;  // the stage's row strides (bf16)
  constexpr int kTiles = KEYS / 8;    // 8-key score tiles of a chunk
  constexpr bool kSerial = (KEYS * KS + KEYS * VS) * 2 > MET_ATTN_WARP_SMEM;
  static_assert(KEYS == 16 || KEYS == 32, "a chunk is one or two 16-key P V steps");
  static_assert(VD <= HD && VD <= kMaxMmaVDims, "a lane holds the O of at most kMaxMmaVDims dims");
  static_assert(KEYS * KS * 2 <= MET_ATTN_WARP_SMEM, "a chunk's K rows fit the warp's stage");
  const int lane = threadIdx.x % 32;
  const int h = lane / 4, qd = lane % 4;  // the head row this lane holds, its place in the quad
  const bool real = h < group;
  const int64_t w = static_cast<int64_t>(kv_heads) * HD, wv = static_cast<int64_t>(kv_heads) * vfull;
  const u16* kh = kc + static_cast<int64_t>(kv_head) * HD;
  const u16* vh = vc + static_cast<int64_t>(kv_head) * vfull;
  // The rows of keys [c0, c0 + KEYS) of P pieces each (row stride RS in the stage, W in the cache)
  // to a stage; keys at or past hi are zero-filled. Lane l copies piece l % P of keys l / P,
  // l / P + kStep, ... (a 256-dim row is 32 pieces: lane l copies piece l of every key; a 512-dim
  // one 64: pieces l and l + 32).
  auto copy_rows = [&](auto rows, u16* dst, const u16* src, int64_t row_w, int64_t c0) {
    constexpr int P = decltype(rows)::kPieces, RS = decltype(rows)::kStride;
    constexpr int kLane = P > 32 ? P / 32 : 1, kStep = P >= 32 ? 1 : 32 / P;
    const int key0 = P >= 32 ? 0 : lane / P, piece = P >= 32 ? lane : lane % P;
    const int n = static_cast<int>(min(static_cast<int64_t>(KEYS), hi - c0));
    const u16* first = src + (base + c0) * row_w + piece * 8;
#pragma unroll 4
    for (int key = key0; key < KEYS; key += kStep) {
      const bool live = key < n;
#pragma unroll
      for (int j = 0; j < kLane; ++j)
        met_copy16(dst + key * RS + (piece + 32 * j) * 8, (live ? first + key * row_w : first) + 32 * j * 8, live);
    }
    met_copy_commit();
  };
  using KP = StageRows<kPieces, KS>;
  using VP = StageRows<kVPieces, VS>;
  const u16* qh = q + h * HD + 2 * qd;  // the lane's query row (rows past the group are zero)
  float o[kVPieces][2];  // O of row h: dims 8 t + 2 qd + {0, 1}
#pragma unroll
  for (int t = 0; t < kVPieces; ++t) o[t][0] = o[t][1] = 0.f;
  float m = -INFINITY, l = 0.f;
  if (lo < hi) {
    copy_rows(KP{}, ks, kh, w, lo);
    if constexpr (!kSerial) copy_rows(VP{}, vs, vh, wv, lo);
  }
  for (int64_t c0 = lo; c0 < hi; c0 += KEYS) {
    const int n = static_cast<int>(min(static_cast<int64_t>(KEYS), hi - c0));
    const bool next = c0 + KEYS < hi;
    if constexpr (kSerial)
      met_copy_wait<0>();  // this chunk's K, the only copy in flight
    else
      met_copy_wait<1>();  // this chunk's K
    __syncwarp();
    float s[kTiles][2];  // scores of head h, keys 8 t + 2 qd + {0, 1}
#pragma unroll
    for (int t = 0; t < kTiles; ++t) s[t][0] = s[t][1] = 0.f;
    // Not unrolled, like the P V loop over kk below: unrolled, the loads of every step were hoisted
    // and run_body (which inlines this) spilled.
#pragma unroll 1
    for (int kq = 0; kq < HD / 32; ++kq) {  // 32 dims a step
      uint32_t qa[4] = {0u, 0u, 0u, 0u};    // A fragments of dims 32 kq + 2 qd, + 8, + 16, + 24
      if (real) {
#pragma unroll
        for (int x = 0; x < 4; ++x) qa[x] = *reinterpret_cast<const uint32_t*>(qh + kq * 32 + x * 8);
      }
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        uint32_t r[4];
        met_ldmatrix_x4(r, ks + (t * 8 + lane % 8) * KS + kq * 32 + (lane / 8) * 8);
        const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
        mma_top8(s[t], qa[0], qa[1], b0);
        mma_top8(s[t], qa[2], qa[3], b1);
      }
    }
    __syncwarp();  // every lane has read the K stage
    if constexpr (kSerial)
      copy_rows(VP{}, vs, vh, wv, c0);  // this chunk's V, where its K was
    else if (next)
      copy_rows(KP{}, ks, kh, w, c0 + KEYS);
    float cmax = -INFINITY;
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float score = s[t][e] * scale;
        if (softcap > 0.f) score = softcap * tanhf(score / softcap);
        s[t][e] = t * 8 + 2 * qd + e < n ? score : -INFINITY;
        cmax = fmaxf(cmax, s[t][e]);
      }
    cmax = fmaxf(cmax, __shfl_xor_sync(0xffffffffu, cmax, 1));
    cmax = fmaxf(cmax, __shfl_xor_sync(0xffffffffu, cmax, 2));
    const float m_new = fmaxf(m, cmax);  // finite: a chunk's first key is live
    const float carry = m == -INFINITY ? 0.f : expf(m - m_new);
    uint32_t pa[kTiles / 2][2];  // P's A fragments (rows 0-7) of keys 16 kk + 2 qd (+8)
    float psum = 0.f;
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      const float p0 = s[t][0] == -INFINITY ? 0.f : expf(s[t][0] - m_new);
      const float p1 = s[t][1] == -INFINITY ? 0.f : expf(s[t][1] - m_new);
      psum += p0 + p1;
      pa[t / 2][t % 2] = met_pack_bf16x2(p0, p1);
    }
    psum += __shfl_xor_sync(0xffffffffu, psum, 1);
    psum += __shfl_xor_sync(0xffffffffu, psum, 2);
    l = l * carry + psum;
    m = m_new;
#pragma unroll
    for (int t = 0; t < kVPieces; ++t) {
      o[t][0] *= carry;
      o[t][1] *= carry;
    }
    if (next && !kSerial) {
      met_copy_wait<1>();  // this chunk's V (the next K may still be in flight)
    } else {
      met_copy_wait<0>();
    }
    __syncwarp();
#pragma unroll 1
    for (int kk = 0; kk < KEYS / 16; ++kk) {  // 16 keys a step
      const uint32_t p0 = kk ? pa[kTiles / 2 - 1][0] : pa[0][0], p1 = kk ? pa[kTiles / 2 - 1][1] : pa[0][1];
#pragma unroll
      for (int dp = 0; dp < VD / 16; ++dp) {
        const int mat = lane / 8;
        uint32_t r[4];
        met_ldmatrix_x4_trans(r, vs + (kk * 16 + (mat % 2) * 8 + lane % 8) * VS + dp * 16 + (mat / 2) * 8);
        const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
        mma_top8(o[2 * dp], p0, p1, b0);
        mma_top8(o[2 * dp + 1], p0, p1, b1);
      }
    }
    __syncwarp();  // every lane has read the V stage
    if (next) {
      if constexpr (kSerial)
        copy_rows(KP{}, ks, kh, w, c0 + KEYS);
      else
        copy_rows(VP{}, vs, vh, wv, c0 + KEYS);
    }
  }
  if (real) {
    float* out = po + h * head_step * vfull;
#pragma unroll
    for (int t = 0; t < kVPieces; ++t) *reinterpret_cast<float2*>(out + t * 8 + 2 * qd) = make_float2(o[t][0], o[t][1]);
    if (qd == 0) {
      pml[2 * h * head_step] = m;
      pml[2 * h * head_step + 1] = l;
    }
  }
}
#endif

// One warp's fold of keys [lo, hi) over vhd V dims of heads of vfull (vc past the dims before
// them): staged through the warp's shared memory where the class has cp.async, the caller lets it
// (`stage`), the K head fits the stage and the fold takes whole V heads (smem is the block's; the
// warp takes its own part), straight from global memory otherwise.
__device__ void attend_warp(const u16* q, const u16* kc, const u16* vc, int64_t base, int64_t lo, int64_t hi, int kv_head,
                            int kv_heads, int hd, int vhd, int vfull, int group, float scale, float softcap, WarpAttn* st,
                            unsigned char* smem, bool stage) {
#if MET_HAS_CP_ASYNC
  if (MET_ATTN_STAGED && stage && hd <= MET_ATTN_MAX_HD && vhd == vfull) {
    u16* ks = reinterpret_cast<u16*>(smem + (threadIdx.x / 32) * MET_ATTN_WARP_SMEM);
    u16* vs = ks + 32 * MET_ATTN_KSTRIDE;
    u16* qs = vs + 32 * 128;
    switch (vhd / 32) {
      case 1: attend_staged_dpl<1>(q, kc, vc, base, lo, hi, kv_head, kv_heads, hd, group, scale, softcap, st, ks, vs, qs); return;
      case 2: attend_staged_dpl<2>(q, kc, vc, base, lo, hi, kv_head, kv_heads, hd, group, scale, softcap, st, ks, vs, qs); return;
      default: attend_staged_dpl<4>(q, kc, vc, base, lo, hi, kv_head, kv_heads, hd, group, scale, softcap, st, ks, vs, qs); return;
    }
  }
#else
  (void)smem;
  (void)stage;
#endif
  attend_group(q, kc, vc, base, lo, hi, kv_head, kv_heads, hd, vhd, vfull, group, scale, softcap, st);
}

// A warp's states of its `group` query heads over vhd of their vfull V dims, from dim v0 on: head
// g's output dims to po + g * head_step * vfull + v0 (the lane's dims lane * DPL + k) and its
// (m, l) to pml + 2 * g * head_step.
__device__ __forceinline__ void store_states(const WarpAttn* st, int group, int vhd, int vfull, int v0, float* po, float* pml,
                                             int64_t head_step) {
  const int lane = threadIdx.x % 32, dpl = vhd / 32;
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (g >= group) break;
#pragma unroll
    for (int k = 0; k < kMaxVDims; ++k)
      if (k < dpl) po[g * head_step * vfull + v0 + lane * dpl + k] = st[g].o[k];
    if (lane == 0) {
      pml[2 * g * head_step] = st[g].m;
      pml[2 * g * head_step + 1] = st[g].l;
    }
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
  const int warp = threadIdx.x / 32;
  const int64_t* base = a.seq_base;
  const int* seq_len = a.seq_len;
  float* part_o = a.part_o;
  float* part_ml = a.part_ml;
  const int64_t n_split = sp.end - sp.begin;
  for (int64_t row = rr.begin; row < rr.end; ++row) {
    const int64_t len = seq_len[row];
    const int64_t lo = window_start(len - 1, window);
    const int64_t chunk = (len - lo + splits - 1) / splits;
    // One warp per (KV head, split): its query heads share every K and V load.
    for (int64_t it = warp; it < kvh * n_split; it += MET_INTERP_WARPS) {
      const int kv = static_cast<int>(it % kvh);
      const int64_t i = sp.begin + it / kvh;
      const int64_t k0 = min(len, lo + i * chunk), k1 = min(len, k0 + chunk);
#if MET_HAS_CP_ASYNC && MET_HAS_MMA_SYNC
      if (MET_ATTN_MMA && hd == vhd && (hd == 64 || hd == 128) && group <= 8) {
        // Head g of the group has split state idx0 + g * splits.
        const int64_t idx0 = (row * heads + kv * group) * splits + i;
        u16* ks = reinterpret_cast<u16*>(smem + warp * MET_ATTN_WARP_SMEM);
        u16* vs = ks + 32 * MET_ATTN_KSTRIDE;
        const u16* q = a.q + row * q_stride + kv * group * hd;
        if (hd == 128)
          attend_mma_t<128>(q, a.k_cache, a.v_cache, base[row], k0, k1, kv, kvh, group, a.scale, a.softcap, ks, vs,
                            part_o + idx0 * vhd, part_ml + 2 * idx0, splits);
        else
          attend_mma_t<64>(q, a.k_cache, a.v_cache, base[row], k0, k1, kv, kvh, group, a.scale, a.softcap, ks, vs,
                           part_o + idx0 * vhd, part_ml + 2 * idx0, splits);
        continue;
      }
#endif
      WarpAttn st[kMaxGroup];
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) attn_init(st[g]);
      attend_warp(a.q + row * q_stride + kv * group * hd, a.k_cache, a.v_cache, base[row], k0, k1, kv, kvh, hd, vhd, vhd,
                  group, a.scale, a.softcap, st, smem, /*stage=*/true);
      const int64_t idx0 = (row * heads + kv * group) * splits + i;  // head g's state is idx0 + g * splits
      store_states(st, group, vhd, vhd, 0, part_o + idx0 * vhd, part_ml + 2 * idx0, splits);
    }
  }
}

// Normalised bf16 output of one (row, head)'s split states and an optional sink logit (the cpu's
// merge_states), by the whole block: a thread per split for the max and the weights (w_s), then
// groups of threads over splits, each thread 4 output dims, summed across groups in a fixed order.
// Each thread loads its split's (m, l) once and its first kEarly partial rows before the first
// barrier, so the loads of the state overlap the reductions (8B C=1: 7.6 -> 6.1 us a layer).
__device__ void merge_block(const float* po, const float* pml, int64_t splits, int vhd, const u16* sink, u16* out,
                            float* w_s, float* acc_s, float* red) {
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int cols = vhd / 4, groups = MET_INTERP_THREADS / cols;
  const int col = tid % cols, grp = tid / cols;
  // The thread's split state (splits <= MET_MERGE_MAX_SPLITS == threads) and its first P V rows,
  // all loaded before the first barrier.
  float ml_m = -INFINITY, ml_l = 0.f;
  if (tid < splits) {
    ml_m = pml[2 * tid];
    ml_l = pml[2 * tid + 1];
  }
  static_assert(MET_MERGE_MAX_SPLITS <= MET_INTERP_THREADS, "one split state per thread");
  constexpr int kEarly = 4;
  float4 early[kEarly];
#pragma unroll
  for (int u = 0; u < kEarly; ++u) {
    const int64_t i = grp + u * groups;
    early[u] = i < splits ? *reinterpret_cast<const float4*>(po + i * vhd + col * 4) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float m = met_warp_reduce_max(ml_m);
  if (lane == 0) red[warp] = m;
  __syncthreads();
  m = sink ? bf(*sink) : -INFINITY;
  for (int w = 0; w < MET_INTERP_WARPS; ++w) m = fmaxf(m, red[w]);
  const float wt = ml_l == 0.f ? 0.f : expf(ml_m - m);
  if (tid < splits) w_s[tid] = wt;
  float l = met_warp_reduce(ml_l * wt);
  if (lane == 0) red[32 + warp] = l;
  __syncthreads();
  l = 0.f;
  for (int w = 0; w < MET_INTERP_WARPS; ++w) l += red[32 + w];
  if (sink) l += expf(bf(*sink) - m);
  const float inv = l > 0.f ? 1.f / l : 0.f;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int u = 0; u < kEarly; ++u) {
    const int64_t i = grp + u * groups;
    const float w = i < splits ? w_s[i] : 0.f;
    acc[0] += early[u].x * w;
    acc[1] += early[u].y * w;
    acc[2] += early[u].z * w;
    acc[3] += early[u].w * w;
  }
#pragma unroll 8
  for (int64_t i = grp + kEarly * groups; i < splits; i += groups) {
    const float4 v = *reinterpret_cast<const float4*>(po + i * vhd + col * 4);
    const float w = w_s[i];
    acc[0] += v.x * w;
    acc[1] += v.y * w;
    acc[2] += v.z * w;
    acc[3] += v.w * w;
  }
  *reinterpret_cast<float4*>(acc_s + (grp * cols + col) * 4) = make_float4(acc[0], acc[1], acc[2], acc[3]);
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

#if MET_HAS_CP_ASYNC && MET_HAS_MMA_SYNC
// Arrival counters of attn_decode_split_merge, one per (row, head block): the splits whose states
// are written. The last to arrive merges them and puts the counter back to 0, so programs with other
// split counts find it at 0 too (the next instruction to use it is ordered after by its data).
__device__ unsigned long long met_attn_arrivals[MET_ATTN_MAX_COUNTERS];

// Where warp w leaves its state in its own stage once its fold is done: o [group][vhd], then
// (m, l) [group][2]. The flag word of the arrival sits past every warp's state.
__device__ __forceinline__ float* warp_state(unsigned char* smem, int w) {
  return reinterpret_cast<float*>(smem + w * MET_ATTN_WARP_SMEM);
}
constexpr int kMaxMmaGroup = 8;  // query heads of one tensor-core fold: the top rows of its mma tile
constexpr int kMaxStateGroup = 8;  // query heads of one warp's state (the CUDA-core fold: two passes of kMaxGroup)
constexpr int kMaxStateVDims = 512;  // the widest V head of a warp's state (the CUDA-core fold: parts of 128)
static_assert(kMaxMmaGroup <= kMaxStateGroup && MET_ATTN_MAX_HD <= kMaxStateVDims, "the tensor-core fold's state fits");
// Past the largest state: o and (m, l) of kMaxStateGroup heads of kMaxStateVDims dims, in bytes
// (16.1 KB: a warp's stage holds it, so 512-dim heads need no more shared memory than 128).
constexpr int kStateFlagOffset = kMaxStateGroup * (kMaxStateVDims + 2) * 4;
static_assert(kStateFlagOffset + 16 <= MET_ATTN_WARP_SMEM, "a warp's state and the flag fit its stage");
// The last split's merge works past the flag: (m, l) of kMaxStateGroup heads x MET_ATTN_MAX_SPLITS, their inverses.
static_assert(kStateFlagOffset + 16 + (2 * kMaxStateGroup * MET_ATTN_MAX_SPLITS + kMaxStateGroup) * 4 <= MET_ATTN_SMEM,
              "the merge's scratch fits");

// Merges the states of `splits` splits of query heads [h0, h0 + group) of one row (part_o and
// part_ml of that row; other blocks wrote them, so they are read from L2) and a sink logit per head
// into out, by the whole block: the (m, l) pairs to shared memory (`scratch`), a warp per head for
// the max, the weights and the denominator, then a thread per output value.
__device__ void merge_group(const float* po, const float* pml, int64_t splits, int group, int vhd, int64_t h0, const u16* sinks,
                            u16* out, unsigned char* scratch) {
  float* wm = reinterpret_cast<float*>(scratch);  // [group][splits] max, then weight
  float* wl = wm + group * splits;             // [group][splits] sum
  float* inv = wl + group * splits;            // [group] 1 / denominator
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  for (int64_t x = tid; x < group * splits; x += MET_INTERP_THREADS) {
    const int64_t g = x / splits, s = x % splits;
    const float2 ml = __ldcg(reinterpret_cast<const float2*>(pml + 2 * ((h0 + g) * splits + s)));
    wm[x] = ml.x;
    wl[x] = ml.y;
  }
  __syncthreads();
  for (int g = warp; g < group; g += MET_INTERP_WARPS) {
    const float sink = sinks ? bf(sinks[h0 + g]) : -INFINITY;
    float m = sink;
    for (int64_t s = lane; s < splits; s += 32) m = fmaxf(m, wm[g * splits + s]);
    m = met_warp_reduce_max(m);
    float l = 0.f;
    for (int64_t s = lane; s < splits; s += 32) {
      const float w = wl[g * splits + s] == 0.f ? 0.f : expf(wm[g * splits + s] - m);
      wm[g * splits + s] = w;
      l += wl[g * splits + s] * w;
    }
    l = met_warp_reduce(l);
    if (sinks) l += expf(sink - m);
    if (lane == 0) inv[g] = l > 0.f ? 1.f / l : 0.f;
  }
  __syncthreads();
  // A thread per 4 output values (vhd is a multiple of 32): one 16-byte load a split for the 4.
  const int q4 = vhd / 4;
  for (int x = tid; x < group * q4; x += MET_INTERP_THREADS) {
    const int g = x / q4, d = (x % q4) * 4;
    const float* o = po + (h0 + g) * splits * vhd + d;
    const float* w = wm + g * splits;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 8
    for (int64_t s = 0; s < splits; ++s) {
      const float4 v = __ldcg(reinterpret_cast<const float4*>(o + s * vhd));
      const float ws = w[s];
      acc[0] += v.x * ws;
      acc[1] += v.y * ws;
      acc[2] += v.z * ws;
      acc[3] += v.w * ws;
    }
    u16* dst = out + (h0 + g) * vhd + d;
#pragma unroll
    for (int e = 0; e < 4; ++e) dst[e] = to_bf(acc[e] * inv[g]);
  }
  __syncthreads();
}

// A/B switch: 0 leaves 256- and 512-dim heads to the CUDA-core fold in parts of 128.
#ifndef MET_ATTN_MMA_256
#define MET_ATTN_MMA_256 1
#endif

// One warp's fold of keys [lo, hi) for the query heads of KV head `kv` on the CUDA cores
// (attend_warp), its state left in the warp's stage (warp_state). A V head wider than a warp's
// state (256 and 512 dims where the wide tensor-core folds are switched off, or where K and V heads
// differ) is folded in parts of kMaxVDims * 32 dims, and a group of 8 query heads in two passes of
// kMaxGroup heads, each part and pass scoring the keys again: the same sums in the same order, so
// every part's (m, l) is the same and every head's state is the one a single fold would leave.
// Parts and passes are loops around the 4-head, 128-dim fold, so they add no registers. A fold of
// several parts or passes never stages (the states of the earlier ones sit in the stage). Out of
// line: its many template variants, inlined beside the tensor-core folds, spilled
// split_merge_slice's registers.
__device__ __noinline__ void fold_to_state_cuda(const u16* q, const u16* kc, const u16* vc, int64_t base, int64_t lo, int64_t hi,
                                                int kv, int kvh, int hd, int vhd, int group, float scale, float softcap,
                                                unsigned char* smem) {
  const int warp = threadIdx.x / 32;
  float* st = warp_state(smem, warp);
  float* sml = st + group * vhd;
  for (int g0 = 0; g0 < group; g0 += kMaxGroup) {
    const int heads = min(group - g0, kMaxGroup);
    for (int v0 = 0; v0 < vhd; v0 += kMaxVDims * 32) {
      const int part = min(vhd - v0, kMaxVDims * 32);
      WarpAttn ws[kMaxGroup];
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) attn_init(ws[g]);
      attend_warp(q + g0 * hd, kc, vc + v0, base, lo, hi, kv, kvh, hd, part, vhd, heads, scale, softcap, ws, smem,
                  /*stage=*/group <= kMaxGroup);
      __syncwarp();  // every lane is done with the stage
      store_states(ws, heads, part, vhd, v0, st + g0 * vhd, sml + 2 * g0, 1);
    }
  }
}

// Whether a split-merge instruction's heads take the wide tensor-core folds: k and v heads of 256
// dims (attend_mma_t<256, 16>: Gemma-3's heads, Gemma-4's sliding layers) or of 512 (Gemma-4's
// global layers: attend_mma_t<512, 16, 256>, two V parts), up to 8 query heads a block.
__device__ __forceinline__ bool mma_wide_heads(int hd, int vhd, int group) {
  return MET_ATTN_MMA && MET_ATTN_MMA_256 && (hd == 256 || hd == 512) && vhd == hd && group <= kMaxMmaGroup;
}

// The V parts of a split-merge fold: 1, or in the wide instance one per kMaxMmaVDims of the V head.
// Warps [p * n, (p + 1) * n) of the block, n = MET_INTERP_WARPS / parts, fold the same keys for V dims
// [p * kMaxMmaVDims, (p + 1) * kMaxMmaVDims).
template <bool kMmaWide>
__device__ __forceinline__ int fold_parts(int vhd) {
  return kMmaWide && vhd > kMaxMmaVDims ? vhd / kMaxMmaVDims : 1;
}

// The same on the tensor cores (attend_mma_t), inline, for k and v head dims of 64 or 128, or, in
// the wide instance of split_merge_slice (kMmaWide), 256 and 512 (V part `part`).
template <bool kMmaWide>
__device__ __forceinline__ void fold_to_state(const u16* q, const u16* kc, const u16* vc, int64_t base, int64_t lo, int64_t hi, int kv,
                                              int kvh, int hd, int vhd, int group, float scale, float softcap,
                                              unsigned char* smem, int part) {
  const int warp = threadIdx.x / 32;
  float* st = warp_state(smem, warp);
  u16* ks = reinterpret_cast<u16*>(smem + warp * MET_ATTN_WARP_SMEM);
  // The state goes to the stage the fold used: it writes it after its last read of the stage.
  if constexpr (kMmaWide) {
    if (hd == 512)  // K and V take turns in the stage; the state: this part's dims of [group][512]
      attend_mma_t<512, 16, kMaxMmaVDims>(q, kc, vc + part * kMaxMmaVDims, base, lo, hi, kv, kvh, group, scale, softcap, ks, ks,
                                          st + part * kMaxMmaVDims, st + group * 512, 1, 512);
    else
      attend_mma_t<256, 16>(q, kc, vc, base, lo, hi, kv, kvh, group, scale, softcap, ks, ks + 16 * kMmaStride<256>, st,
                            st + group * 256, 1);
  } else {
    u16* vs = ks + 32 * MET_ATTN_KSTRIDE;
    if (!(MET_ATTN_MMA && hd == vhd && (hd == 64 || hd == 128) && group <= kMaxMmaGroup))
      fold_to_state_cuda(q, kc, vc, base, lo, hi, kv, kvh, hd, vhd, group, scale, softcap, smem);
    else if (hd == 128)
      attend_mma_t<128>(q, kc, vc, base, lo, hi, kv, kvh, group, scale, softcap, ks, vs, st, st + group * vhd, 1);
    else
      attend_mma_t<64>(q, kc, vc, base, lo, hi, kv, kvh, group, scale, softcap, ks, vs, st, st + group * vhd, 1);
  }
}

// The instruction's arguments, for split_merge_slice: out of line, it reads them from shared
// memory. Inlined into run_body beside the split's copy of the same folds, the interpreter's
// registers spilled around them; as arguments of the call, they did too (a struct lives in local
// memory, and 21 scalars took more registers than the call may save).
__shared__ MetArgs_attn_decode_split_merge met_split_merge_args;

// kMmaWide: the instance for 256- and 512-dim heads (mma_wide_heads), which folds them on the tensor
// cores inline and calls nothing. A second out-of-line call for that fold, beside fold_to_state_cuda's,
// spilled here (68 to 80 bytes) and grew the kernel's frame from 32 to 112 bytes or more.
template <bool kMmaWide>
__device__ __noinline__ void split_merge_slice(uint32_t slice, unsigned char* smem) {
  // Every field is read where it is used: the call of the CUDA-core fold leaves nothing of them to
  // keep in registers.
  __syncthreads();  // thread 0 has written the arguments
  const MetArgs_attn_decode_split_merge& a = met_split_merge_args;
  const SliceRange rr = slice_rows(a, slice);
  // Units are (head block, split) pairs: blocks of MET_ATTN_UNIT_HEADS query heads of one KV head.
  const SliceRange us = slice_cols(a, slice, MET_ATTN_UNIT_BLOCKS(a.heads, a.kv_heads) * a.splits);
  int* flag = reinterpret_cast<int*>(smem + kStateFlagOffset);
  for (int64_t row = rr.begin; row < rr.end; ++row)
    for (int64_t u = us.begin; u < us.end; ++u) {
      {
        const int64_t splits = a.splits, len = a.seq_len[row];
        const int64_t lo = window_start(len - 1, a.window);
        const int64_t chunk = (len - lo + splits - 1) / splits;
        int64_t k0 = min(len, lo + (u % splits) * chunk), k1 = min(len, k0 + chunk);
        // A ring's keys (position p at row ring_base + p % R) are a linear run from k0 up to the
        // next multiple of R, and one more after it (k1 - k0 <= window <= R): each warp folds
        // within one run, the warps dealt to the two in proportion to their keys, and the fold
        // reads run keys t at row base + t like a linear cache's.
        int64_t base = a.seq_base[row];
        // A wide fold's V parts each take the split's keys over their own warps (fold_parts).
        const int per_part = MET_INTERP_WARPS / fold_parts<kMmaWide>(static_cast<int>(a.v_head_dim));
        const int part = static_cast<int>(threadIdx.x / 32) / per_part;
        int warps = per_part, wi = static_cast<int>(threadIdx.x / 32) % per_part;
        if (const int64_t ring = a.ring; ring > 0) {
          const int64_t wrap = (k0 / ring + 1) * ring;
          base -= wrap - ring;
          if (wrap < k1) {
            const int first = static_cast<int>(
                min(static_cast<int64_t>(per_part - 1),
                    max(static_cast<int64_t>(1), ((wrap - k0) * per_part + (k1 - k0) / 2) / (k1 - k0))));
            if (wi < first) {
              k1 = wrap;
              warps = first;
            } else {
              k0 = wrap;
              base -= ring;
              warps = per_part - first;
              wi -= first;
            }
          }
        }
        // The warp's keys: the run's chunks (the staged and tensor-core folds' steps: 32 keys, 16 in
        // the wide folds) dealt evenly over its warps. The unstaged CUDA-core fold (head dims past
        // MET_ATTN_MAX_HD, or V heads folded in parts) steps one key at a time, so its warps take
        // equal shares of any size: in 32-key chunks a split of 63 keys kept 2 of the 8 warps busy.
        const int hd = static_cast<int>(a.head_dim);
        const int64_t gran = kMmaWide ? 16 : hd > MET_ATTN_MAX_HD || a.v_head_dim > kMaxVDims * 32 ? 1 : 32;
        const int64_t per = ((k1 - k0 + warps - 1) / warps + gran - 1) / gran * gran;
        const int64_t w0 = min(k1, k0 + wi * per), w1 = min(k1, w0 + per);
        const int kvh = static_cast<int>(a.kv_heads), group = static_cast<int>(a.heads) / kvh, uh = MET_ATTN_UNIT_HEADS(group);
        const int h0 = static_cast<int>(u / splits) * uh, kv = h0 / group;  // the block's first query head, its KV head
        fold_to_state<kMmaWide>(a.q + row * a.q_stride + static_cast<int64_t>(h0) * hd, a.k_cache, a.v_cache, base, w0, w1, kv,
                                kvh, hd, static_cast<int>(a.v_head_dim), uh, a.scale, a.softcap, smem, part);
      }
      __syncthreads();
      const int heads = static_cast<int>(a.heads), group = MET_ATTN_UNIT_HEADS(heads / static_cast<int>(a.kv_heads));
      const int vhd = static_cast<int>(a.v_head_dim);
      const int64_t splits = a.splits, i = u % splits, h0 = (u / splits) * group;  // group: the unit's query heads
      // The block's state of each (query head, output dim): the states of the warps that folded the
      // dim merged (all of them, or its V part's).
      const int parts = fold_parts<kMmaWide>(vhd), per_part = MET_INTERP_WARPS / parts;
      for (int x = threadIdx.x; x < group * vhd; x += MET_INTERP_THREADS) {
        const int g = x / vhd, d = x % vhd;
        const int w0 = d / (vhd / parts) * per_part, w1 = w0 + per_part;
        float m = -INFINITY;
        for (int w = w0; w < w1; ++w) m = fmaxf(m, warp_state(smem, w)[group * vhd + 2 * g]);
        float l = 0.f, o = 0.f;
        for (int w = w0; w < w1; ++w) {
          const float* ws = warp_state(smem, w);
          const float lw = ws[group * vhd + 2 * g + 1];
          const float wt = lw == 0.f ? 0.f : expf(ws[group * vhd + 2 * g] - m);
          l += lw * wt;
          o += ws[g * vhd + d] * wt;
        }
        if (splits == 1) {  // the cpu's merge of one state with the sink
          const float sink = a.sinks ? bf(a.sinks[h0 + g]) : -INFINITY;
          const float mm = fmaxf(m, sink);
          const float wt = l == 0.f ? 0.f : expf(m - mm);
          const float den = l * wt + (a.sinks ? expf(sink - mm) : 0.f);
          a.out[(row * heads + h0 + g) * vhd + d] = to_bf(den > 0.f ? o * wt / den : 0.f);
        } else {
          const int64_t idx = (row * heads + h0 + g) * splits + i;
          a.part_o[idx * vhd + d] = o;
          if (d == 0) {
            a.part_ml[2 * idx] = m;
            a.part_ml[2 * idx + 1] = l;
          }
        }
      }
      __syncthreads();
      if (splits == 1) continue;
      if (threadIdx.x == 0) {
        unsigned long long* c = met_attn_arrivals + row * (heads / group) + u / splits;  // the host bounds rows x blocks
        const bool last = atom_add_acq_rel(c, 1ull) == static_cast<unsigned long long>(splits - 1);
        if (last) atomicExch(c, 0ull);
        *flag = last ? 1 : 0;
      }
      __syncthreads();
      if (*flag)
        merge_group(a.part_o + row * heads * splits * vhd, a.part_ml + row * heads * splits * 2, splits, group, vhd, h0, a.sinks,
                    a.out + row * heads * vhd, smem + kStateFlagOffset + 16);
      __syncthreads();
    }
}

MET_ENTRY(attn_decode_split_merge) {
  if (threadIdx.x == 0) met_split_merge_args = a;
  const int unit_heads = MET_ATTN_UNIT_HEADS(static_cast<int>(a.heads / a.kv_heads));
  if (mma_wide_heads(static_cast<int>(a.head_dim), static_cast<int>(a.v_head_dim), unit_heads))
    split_merge_slice<true>(slice, smem);
  else
    split_merge_slice<false>(slice, smem);
}
#endif

}  // namespace met_interp
