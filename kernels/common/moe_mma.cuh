// Grouped (expert-major) tensor-core bodies of the routed experts at prefill row counts. A slice
// holds a range of rows and of output columns (emit: src/emit/slice.cpp). It groups its slots by
// expert in chunks of whole rows (a counting sort in shared memory that keeps each expert's slots
// ascending), then walks the experts of a chunk in ascending order, running blocks of
// MET_MOE_MMA_BM of an expert's slots against the expert's weight rows of its columns on mma.sync
// m16n8k16, A rows gathered by slot through cp.async. An expert's weights of the slice's columns are
// read once per block of its slots. Values round as kernels/cpu/moe.hpp rounds them; the dot
// products sum in another order. moe_down keeps each row's fp32 sum of its weighted copies in `acc`
// (the slice's rows and columns), adding them in the cpu's (expert, slot) order, and stores y once.
#pragma once
#include "common/interp/prims.cuh"
#include "common/mma_sync.cuh"

namespace met_interp {

#if MET_HAS_MMA_SYNC && MET_HAS_CP_ASYNC

// Tile geometry: kernels/common/interp/smem.h (the host sizes shared memory from the same macros).
constexpr int kMoeBM = MET_MOE_MMA_BM, kMoeBN = MET_MOE_MMA_BN, kMoeBK = MET_MOE_MMA_BK, kMoeLD = MET_MOE_MMA_BK + MET_MOE_MMA_PAD,
              kMoeStages = MET_MOE_MMA_STAGES, kMoeChunk = MET_MOE_MMA_CHUNK;
constexpr u16 kMoeNoExpert = 0xffffu;  // a slot routed to no expert (the host bounds experts below it)
static_assert(MET_INTERP_WARPS == 8 && kMoeBM == 2 * 32 && kMoeBN == 4 * 16, "the warp grid of moe_mma_block covers the block");

struct MoeMmaSmem {
  u16* a;            // [stages][BM][LD] gathered activation rows
  u16* b;            // [stages][BN][LD] weight rows
  float* c;          // [BM][BN] the block's products
  const u16** rows;  // [BM + BN] the block's A rows, then its B rows (null: no slot or column there)
  int* slot;         // [BM] the block's slots
  int* row;          // [BM] their rows (slot / top_k)
  int* off;          // [max experts] where each expert's slots start in list
  int* cnt;          // [max experts] how many slots of the chunk each expert has
  u16* wpos;         // [warps][experts] a warp's slots of each expert, then where the next of them goes in list
  u16* eid;          // [chunk] the chunk's expert ids (kMoeNoExpert: none)
  u16* list;         // [chunk] the chunk's slots (from its first) grouped by expert, ascending within each
  int* part;         // [warps] the scan's warp totals
};
__device__ __forceinline__ MoeMmaSmem moe_mma_smem(unsigned char* smem) {
  MoeMmaSmem m;
  m.a = reinterpret_cast<u16*>(smem);
  m.b = m.a + kMoeStages * kMoeBM * kMoeLD;
  m.c = reinterpret_cast<float*>(m.b + kMoeStages * kMoeBN * kMoeLD);
  m.rows = reinterpret_cast<const u16**>(m.c + kMoeBM * kMoeBN);
  m.slot = reinterpret_cast<int*>(m.rows + kMoeBM + kMoeBN);
  m.row = m.slot + kMoeBM;
  m.off = m.row + kMoeBM;
  m.cnt = m.off + MET_MOE_MAX_EXPERTS;
  m.wpos = reinterpret_cast<u16*>(m.cnt + MET_MOE_MAX_EXPERTS);
  m.eid = m.wpos + MET_INTERP_WARPS * MET_MOE_MAX_EXPERTS;
  m.list = m.eid + kMoeChunk;
  m.part = reinterpret_cast<int*>(m.list + kMoeChunk);
  return m;
}

// One block's operands. Activation row of slot t: act + (t / act_div) * K (gate_up: x row t /
// top_k; down: h row t). Weight rows of column j0 + n: down, w + (wrow0 + j0 + n) * K for n < BN;
// gate_up, the gate rows for n < BN / 2 and the up rows (inter further) for the rest.
struct MoeMmaBlock {
  const u16* act;
  const u16* w;
  int64_t K, act_div, wrow0, inter, c1;  // c1: the slice's column end (columns past it are zero)
  bool gated;
};

// The block's table: its nb slots (c0 + list[p0]...) and their rows, and the start of every A and B
// row it reads (null past nb slots or the slice's columns), so the loads of each K step only add k.
// Starts after a barrier (the previous block's epilogue read the table) and ends with one.
__device__ __forceinline__ void moe_mma_table(const MoeMmaSmem& m, const MoeMmaBlock& p, int64_t c0, int p0, int nb, int64_t j0,
                                              int64_t top_k) {
  const int t = threadIdx.x;
  if (t < kMoeBM) {
    const int slot = t < nb ? static_cast<int>(c0 + m.list[p0 + t]) : 0;
    m.slot[t] = slot;
    m.row[t] = static_cast<int>(static_cast<unsigned>(slot) / static_cast<unsigned>(top_k));
    const int64_t act_row = static_cast<unsigned>(slot) / static_cast<unsigned>(p.act_div);
    m.rows[t] = t < nb ? p.act + act_row * p.K : nullptr;
  } else if (t < kMoeBM + kMoeBN) {
    const int n = t - kMoeBM, half = kMoeBN / 2;
    const int64_t j = p.gated ? j0 + (n < half ? n : n - half) : j0 + n;
    const int64_t row = p.wrow0 + (p.gated && n >= half ? p.inter : 0) + j;
    m.rows[t] = j < p.c1 ? p.w + row * p.K : nullptr;
  }
  __syncthreads();
}

// Stage `stage` of the block's A and B rows at K offset k0 (16-byte chunks; zeros past K and for the
// table's null rows).
__device__ __forceinline__ void moe_mma_load(const MoeMmaSmem& m, const MoeMmaBlock& p, int stage, int64_t k0) {
  constexpr int kChunks = kMoeBK / 8;  // 16-byte chunks per row
  static_assert((kMoeBM + kMoeBN) * kChunks % MET_INTERP_THREADS == 0, "every thread copies the same number of chunks");
  u16* as = m.a + stage * kMoeBM * kMoeLD;
  u16* bs = m.b + stage * kMoeBN * kMoeLD;
  const int kc = (threadIdx.x % kChunks) * 8;
  const bool k_ok = k0 + kc < p.K;
#pragma unroll
  for (int i = 0; i < (kMoeBM + kMoeBN) * kChunks / MET_INTERP_THREADS; ++i) {
    const int r = threadIdx.x / kChunks + i * (MET_INTERP_THREADS / kChunks);
    const u16* base = m.rows[r];
    const bool valid = base != nullptr && k_ok;
    u16* dst = r < kMoeBM ? as + r * kMoeLD + kc : bs + (r - kMoeBM) * kMoeLD + kc;
    met_copy16(dst, valid ? base + k0 + kc : p.w, valid);
  }
}

// m.c[BM][BN] = the table's A rows . its B rows; rows past its slots are zero. Starts after the table
// and ends with a barrier.
__device__ __forceinline__ void moe_mma_block(const MoeMmaSmem& m, const MoeMmaBlock& p) {
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  const int wm = warp / 4, wn = warp % 4;  // 2 x 4 warps of 32 rows x 16 columns
  float acc[2][2][4] = {};
  const int64_t kt_count = (p.K + kMoeBK - 1) / kMoeBK;
  for (int st = 0; st < kMoeStages - 1; ++st) {
    if (st < kt_count) moe_mma_load(m, p, st, st * kMoeBK);
    met_copy_commit();
  }
#pragma unroll 1
  for (int64_t kt = 0; kt < kt_count; ++kt) {
    met_copy_wait<kMoeStages - 2>();
    __syncthreads();
    const int cur = static_cast<int>(kt % kMoeStages);
    const int64_t next = kt + kMoeStages - 1;
    if (next < kt_count) moe_mma_load(m, p, static_cast<int>(next % kMoeStages), next * kMoeBK);
    met_copy_commit();
    const u16* as = m.a + cur * kMoeBM * kMoeLD;
    const u16* bs = m.b + cur * kMoeBN * kMoeLD;
#pragma unroll
    for (int kk = 0; kk < kMoeBK; kk += 16) {
      uint32_t a[2][4], r[4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) met_ldmatrix_x4(a[mi], as + (wm * 32 + mi * 16 + lane % 16) * kMoeLD + kk + (lane / 16) * 8);
      const int mat = lane / 8;
      met_ldmatrix_x4(r, bs + (wn * 16 + (mat / 2) * 8 + lane % 8) * kMoeLD + kk + (mat % 2) * 8);
      const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        met_mma_bf16_16816(acc[mi][0], a[mi], b0);
        met_mma_bf16_16816(acc[mi][1], a[mi], b1);
      }
    }
  }
  met_copy_wait<0>();
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 2; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float* c = m.c + (wm * 32 + mi * 16 + g + h * 8) * kMoeBN + wn * 16 + ni * 8 + 2 * t;
        c[0] = acc[mi][ni][2 * h];
        c[1] = acc[mi][ni][2 * h + 1];
      }
  __syncthreads();  // the products for every thread; the stages free
}

// Groups the slots [c0, c1) (at most kMoeChunk) by expert: m.cnt[e] of them from m.list[m.off[e]]
// for each expert e < experts, each expert's ascending, the experts in order (a counting sort).
// Warp w takes the w-th eighth of the slots 32 at a time, counts each expert's (lanes of one expert
// found with __match_any_sync), and after the offsets places them in the same order. Starts after a
// barrier (list, off and cnt are free) and ends with one.
__device__ __forceinline__ void moe_mma_group(const int* ids, int64_t c0, int64_t c1, int experts, const MoeMmaSmem& m) {
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP, n = static_cast<int>(c1 - c0);
  for (int i = threadIdx.x; i < MET_INTERP_WARPS * experts; i += MET_INTERP_THREADS) m.wpos[i] = 0;
#pragma unroll 8
  for (int i = threadIdx.x; i < n; i += MET_INTERP_THREADS) {
    const int e = ids[c0 + i];
    m.eid[i] = e >= 0 && e < experts ? static_cast<u16>(e) : kMoeNoExpert;
  }
  __syncthreads();
  const int w0 = warp * n / MET_INTERP_WARPS, w1 = (warp + 1) * n / MET_INTERP_WARPS;
  u16* const mine = m.wpos + warp * experts;
  const unsigned below = (1u << lane) - 1u;
  for (int i = w0; i < w1; i += MET_WARP) {
    const u16 e = i + lane < w1 ? m.eid[i + lane] : kMoeNoExpert;
    const unsigned same = __match_any_sync(0xffffffffu, e);
    if (e != kMoeNoExpert && (same & below) == 0) mine[e] += __popc(same);
    __syncwarp();
  }
  __syncthreads();
  // Thread t takes experts [e0, e1): their slots of every warp, a prefix over the threads, then each
  // warp's first position of each expert (the experts before it, then the warps before it).
  const int per = (experts + MET_INTERP_THREADS - 1) / MET_INTERP_THREADS;
  const int e0 = min(static_cast<int>(threadIdx.x) * per, experts), e1 = min(e0 + per, experts);
  int sum = 0;
  for (int e = e0; e < e1; ++e)
    for (int w = 0; w < MET_INTERP_WARPS; ++w) sum += m.wpos[w * experts + e];
  int total = 0;
  int pos = block_scan_excl(sum, m.part, total);
  for (int e = e0; e < e1; ++e) {
    m.off[e] = pos;
    for (int w = 0; w < MET_INTERP_WARPS; ++w) {
      const int c = m.wpos[w * experts + e];
      m.wpos[w * experts + e] = static_cast<u16>(pos);
      pos += c;
    }
    m.cnt[e] = pos - m.off[e];
  }
  __syncthreads();
  for (int i = w0; i < w1; i += MET_WARP) {
    const u16 e = i + lane < w1 ? m.eid[i + lane] : kMoeNoExpert;
    const unsigned same = __match_any_sync(0xffffffffu, e);
    if (e != kMoeNoExpert) m.list[mine[e] + __popc(same & below)] = static_cast<u16>(i + lane);
    __syncwarp();
    if (e != kMoeNoExpert && (same & below) == 0) mine[e] += __popc(same);
    __syncwarp();
  }
  __syncthreads();
}

// Walks the slots [t0, t1) in chunks of whole rows (top_k slots a row), and in each the experts in
// ascending order: the blocks of an expert's slots (c0 + list[p0], nb of them) against its weight
// rows (block_of(e)) of columns c, `step` at a time; after each block's products, epi(nb, j0) (the
// table holds the block's slots and rows), then a barrier (the products and the table are read, and
// what epi wrote is visible, before the next block).
template <class BlockOf, class Epi>
__device__ __forceinline__ void moe_mma_walk(const int* ids, int64_t t0, int64_t t1, int64_t top_k, int64_t experts, SliceRange c,
                                             int step, const MoeMmaSmem& m, BlockOf&& block_of, Epi&& epi) {
  const int64_t chunk = kMoeChunk / top_k * top_k;  // the host bounds top_k by kMoeChunk
  for (int64_t c0 = t0; c0 < t1; c0 += chunk) {
    moe_mma_group(ids, c0, min(c0 + chunk, t1), static_cast<int>(experts), m);
    for (int e = 0; e < experts; ++e) {
      const int n = m.cnt[e], first = m.off[e];
      if (n == 0) continue;
      const MoeMmaBlock p = block_of(e);
      for (int p0 = first; p0 < first + n; p0 += kMoeBM) {
        const int nb = first + n - p0 < kMoeBM ? first + n - p0 : kMoeBM;
        for (int64_t j0 = c.begin; j0 < c.end; j0 += step) {
          moe_mma_table(m, p, c0, p0, nb, j0, top_k);
          moe_mma_block(m, p);
          epi(nb, j0);
          __syncthreads();
        }
      }
    }
  }
}

// x: [rows, hidden]; w_gate_up: [experts * 2 inter, hidden]; h: [rows, top_k, inter]. The slice's
// rows r and columns c of inter: h[slot][j] = bf16(bf16(silu(bf16(gate))) * bf16(up)) for each
// routed slot, 0 for a slot whose id is no expert (the cpu's zeroed gate_up rows).
MET_OUTLINE void moe_gate_up_mma_slice(const u16* x, const u16* w_gate_up, const int* ids, u16* h, SliceRange r, SliceRange c,
                                       int64_t top_k, int64_t inter, int64_t hidden, int64_t experts, unsigned char* smem) {
  if (c.end <= c.begin || r.end <= r.begin || top_k <= 0) return;
  const MoeMmaSmem m = moe_mma_smem(smem);
  const int64_t t0 = r.begin * top_k, t1 = r.end * top_k;
  for (int64_t t = t0 + threadIdx.x; t < t1; t += MET_INTERP_THREADS) {
    const int e = ids[t];
    if (e < 0 || e >= experts)
      for (int64_t j = c.begin; j < c.end; ++j) h[t * inter + j] = 0;
  }
  constexpr int kHalf = kMoeBN / 2;
  moe_mma_walk(
      ids, t0, t1, top_k, experts, c, kHalf, m,
      [&](int e) { return MoeMmaBlock{x, w_gate_up, hidden, top_k, e * 2 * inter, inter, c.end, true}; },
      [&](int nb, int64_t j0) {
        for (int i = threadIdx.x; i < nb * kHalf; i += MET_INTERP_THREADS) {
          const int mi = i / kHalf, jj = i % kHalf;
          if (j0 + jj >= c.end) continue;
          const float* row = m.c + mi * kMoeBN;
          const float v = gated_act(bf_round(row[jj]), bf_round(row[kHalf + jj]), false);
          h[static_cast<int64_t>(m.slot[mi]) * inter + j0 + jj] = to_bf(v);
        }
      });
}

MET_ENTRY(moe_gate_up_silu_mma) {
  const int64_t width = 2 * a.inter;
  moe_gate_up_mma_slice(a.x, a.w_gate_up, a.ids, a.h, slice_rows(a, slice), slice_cols(a, slice, a.inter), a.top_k, a.inter,
                        a.geom.w_cols, width > 0 ? a.geom.w_rows / width : 0, smem);
}

// h: [rows, top_k, inter]; w_down: [experts * hidden, inter]; acc: [rows, hidden] fp32; y: [rows,
// hidden]. The slice's rows r and columns c of hidden: acc starts at 0 and, expert by expert, each
// routed slot adds its copy bf16(weight * bf16(h . row)); a row's slots in one block add in slot
// order, one thread per (row, column), so every row sums in (expert, slot) order as the cpu does.
// With y null (moe_down_mma_f32, a rank's share under tensor parallelism): each copy
// weight * (h . row), unrounded, and acc is the output.
MET_OUTLINE void moe_down_mma_slice(const u16* hin, const u16* w_down, const int* ids, const float* weights, float* acc, u16* y,
                                    SliceRange r, SliceRange c, int64_t top_k, int64_t hidden, int64_t inter, int64_t experts,
                                    unsigned char* smem) {
  if (c.end <= c.begin || r.end <= r.begin || top_k <= 0) return;
  const MoeMmaSmem m = moe_mma_smem(smem);
  const int64_t nc = c.end - c.begin, t0 = r.begin * top_k, t1 = r.end * top_k;
  for (int64_t i = threadIdx.x; i < (r.end - r.begin) * nc; i += MET_INTERP_THREADS)
    acc[(r.begin + i / nc) * hidden + c.begin + i % nc] = 0.f;
  __syncthreads();
  moe_mma_walk(
      ids, t0, t1, top_k, experts, c, kMoeBN, m,
      [&](int e) { return MoeMmaBlock{hin, w_down, inter, 1, e * hidden, inter, c.end, false}; },
      [&](int nb, int64_t o0) {
        for (int i = threadIdx.x; i < nb * kMoeBN; i += MET_INTERP_THREADS) {
          const int mi = i / kMoeBN, n = i % kMoeBN;
          const int row = m.row[mi];
          if (o0 + n >= c.end || (mi > 0 && m.row[mi - 1] == row)) continue;  // the row's first slot here sums
          float* dst = acc + static_cast<int64_t>(row) * hidden + o0 + n;
          float v = *dst;
          for (int mm = mi; mm < nb && m.row[mm] == row; ++mm) {
            const float w = weights[m.slot[mm]];
            v += y ? bf_round(w * bf_round(m.c[mm * kMoeBN + n])) : w * m.c[mm * kMoeBN + n];
          }
          *dst = v;
        }
      });
  if (!y) return;
  for (int64_t i = threadIdx.x; i < (r.end - r.begin) * nc; i += MET_INTERP_THREADS) {
    const int64_t off = (r.begin + i / nc) * hidden + c.begin + i % nc;
    y[off] = to_bf(acc[off]);
  }
}

MET_ENTRY(moe_down_mma) {
  moe_down_mma_slice(a.h, a.w_down, a.ids, a.weights, a.acc, a.y, slice_rows(a, slice), slice_cols(a, slice, a.hidden), a.top_k,
                     a.hidden, a.geom.w_cols, a.hidden > 0 ? a.geom.w_rows / a.hidden : 0, smem);
}

MET_ENTRY(moe_down_mma_f32) {
  moe_down_mma_slice(a.h, a.w_down, a.ids, a.weights, a.y, nullptr, slice_rows(a, slice), slice_cols(a, slice, a.hidden), a.top_k,
                     a.hidden, a.geom.w_cols, a.hidden > 0 ? a.geom.w_rows / a.hidden : 0, smem);
}

#endif  // MET_HAS_MMA_SYNC && MET_HAS_CP_ASYNC

#if MET_HAS_WGMMA && MET_HAS_TMA
// The grouped wgmma experts' sort and sum (ops.def moe_group, moe_combine; their GEMMs are
// kernels/hopper/gemm_wgmma.cuh's).

// moe_group over token rows [r0, r1): every thread counts a share of all the slots per expert in
// shared memory (cnt) and of those before the slice's (next), the block scans the counts into each
// expert's first place (slice 0 cuts the runs into tiles), then places the slice's slots a round of
// one per thread at a time, in slot order: a warp's equal ids rank by lane (__match_any_sync), the
// warps of a round by warp, and the rounds follow one another. A round's activation rows are then
// copied, a warp a row, 16 bytes a lane.
MET_OUTLINE void moe_group_slice(const u16* x, const int* ids, u16* xs, int* pos, int* tiles, int64_t rows, int64_t r0, int64_t r1,
                                 int top_k, int experts, int hidden, unsigned char* smem) {
  constexpr int kPer = MET_MOE_MAX_EXPERTS / MET_INTERP_THREADS;  // experts a thread scans
  static_assert(MET_MOE_MAX_EXPERTS % MET_INTERP_THREADS == 0, "the scan gives each thread whole experts");
  int* cnt = reinterpret_cast<int*>(smem);                   // [max experts] slots of each expert
  int* next = cnt + MET_MOE_MAX_EXPERTS;                     // [max experts] the place of the expert's next slot here
  int* wcnt = next + MET_MOE_MAX_EXPERTS;                    // [warps][max experts] a round's slots of each expert per warp
  int* place = wcnt + MET_INTERP_WARPS * MET_MOE_MAX_EXPERTS;  // [threads] a round's places
  int* from = place + MET_INTERP_THREADS;                    // [threads] their activation rows
  int* part = from + MET_INTERP_THREADS;                     // [warps] the scans' warp totals
  uint4* stage = reinterpret_cast<uint4*>(part + 4 * ((MET_INTERP_WARPS + 3) / 4));  // [copies][threads] of a round
  const int64_t slots = rows * top_k, s0 = r0 * top_k, s1 = r1 * top_k;
  for (int i = threadIdx.x; i < (2 + MET_INTERP_WARPS) * MET_MOE_MAX_EXPERTS; i += MET_INTERP_THREADS) cnt[i] = 0;
  __syncthreads();
  for (int64_t t = threadIdx.x; t < slots; t += MET_INTERP_THREADS) {
    const int e = __ldcg(ids + t);
    if (e < 0 || e >= experts) continue;
    atomicAdd(cnt + e, 1);
    if (t < s0) atomicAdd(next + e, 1);
  }
  __syncthreads();
  int mine[kPer], sum = 0, total = 0;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    mine[k] = cnt[threadIdx.x * kPer + k];  // zero past the experts
    sum += mine[k];
  }
  int first = block_scan_excl(sum, part, total);
  if (r0 == 0) {  // the tiles: each expert's run in MET_MOE_WGMMA_BM places, in expert order
    int nt = 0;
#pragma unroll
    for (int k = 0; k < kPer; ++k) nt += (mine[k] + MET_MOE_WGMMA_BM - 1) / MET_MOE_WGMMA_BM;
    int n_tiles = 0, tile = block_scan_excl(nt, part, n_tiles), at = first;
#pragma unroll 1
    for (int k = 0; k < kPer; ++k) {
      for (int j = 0; j < mine[k]; j += MET_MOE_WGMMA_BM, ++tile)
        reinterpret_cast<int4*>(tiles)[1 + tile] = make_int4(threadIdx.x * kPer + k, at + j, min(MET_MOE_WGMMA_BM, mine[k] - j), 0);
      at += mine[k];
    }
    if (threadIdx.x == 0) reinterpret_cast<int4*>(tiles)[0] = make_int4(n_tiles, 0, 0, 0);
  }
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    next[threadIdx.x * kPer + k] += first;
    first += mine[k];
  }
  __syncthreads();
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
#pragma unroll 1
  for (int64_t c0 = s0; c0 < s1; c0 += MET_INTERP_THREADS) {
    const int64_t t = c0 + threadIdx.x;
    const int e = t < s1 ? __ldcg(ids + t) : -1;
    const bool valid = e >= 0 && e < experts;
    const unsigned peers = __match_any_sync(0xffffffffu, valid ? e : -1);
    const int rank = __popc(peers & ((1u << lane) - 1u));
    if (valid && rank == 0) wcnt[warp * MET_MOE_MAX_EXPERTS + e] = __popc(peers);
    __syncthreads();
    int p = -1;
    if (valid) {
      p = next[e] + rank;
      for (int w = 0; w < warp; ++w) p += wcnt[w * MET_MOE_MAX_EXPERTS + e];
    }
    __syncthreads();  // every place is read: the counts move on
    if (valid && rank == 0) {
      atomicAdd(next + e, __popc(peers));
      wcnt[warp * MET_MOE_MAX_EXPERTS + e] = 0;
    }
    if (t < s1) pos[t] = p;
    place[threadIdx.x] = p;
    from[threadIdx.x] = static_cast<int>(t / top_k);
    __syncthreads();
    // The round's rows, 16 bytes a thread at a time over all of them: MET_MOE_GROUP_COPY of each
    // thread's copies in flight through shared memory (cp.async), then stored (a warp a row with one
    // load per lane in flight was latency-bound; loads held in registers made the loop kernel spill).
    const int n = static_cast<int>(min(static_cast<int64_t>(MET_INTERP_THREADS), s1 - c0)), vpr = hidden / 8, vecs = n * vpr;
#pragma unroll 1
    for (int v0 = threadIdx.x; v0 < vecs; v0 += MET_MOE_GROUP_COPY * MET_INTERP_THREADS) {
      for (int i = 0; i < MET_MOE_GROUP_COPY; ++i) {
        const int v = v0 + i * MET_INTERP_THREADS, j = v / vpr;
        if (v < vecs && place[j] >= 0)
          met_copy16(stage + i * MET_INTERP_THREADS + threadIdx.x, x + static_cast<int64_t>(from[j]) * hidden + 8 * (v % vpr), true);
      }
      met_copy_commit();
      met_copy_wait<0>();  // this thread's own copies: no barrier
      for (int i = 0; i < MET_MOE_GROUP_COPY; ++i) {
        const int v = v0 + i * MET_INTERP_THREADS, j = v / vpr;
        if (v < vecs && place[j] >= 0)
          reinterpret_cast<uint4*>(xs + static_cast<int64_t>(place[j]) * hidden)[v % vpr] = stage[i * MET_INTERP_THREADS + threadIdx.x];
      }
    }
    __syncthreads();  // the round's places are copied
  }
}

MET_ENTRY(moe_group) {
  const SliceRange r = slice_rows(a, slice);
  if (r.end <= r.begin) return;
  moe_group_slice(a.x, a.ids, a.xs, a.pos, a.tiles, a.rows, r.begin, r.end, static_cast<int>(a.top_k), static_cast<int>(a.experts),
                  static_cast<int>(a.hidden), smem);
}

// moe_combine over rows [r.begin, r.end) and columns [c.begin, c.end): per row, the first top_k
// threads rank their slots by (expert, slot) into shared memory (place and weight), then each thread
// sums 8 columns over them in that order (bf16-rounded copies unless f32), its 16 bytes of up to
// MET_MOE_COMBINE_STAGE slots copied to shared memory by cp.async at once before the sums (loaded
// one at a time, a row's 8 slots took 8 load latencies; held in registers, the loads made the
// loop kernel spill).
MET_OUTLINE void moe_combine_slice(const u16* ys, const int* pos, const int* ids, const float* weights, void* y, SliceRange r, SliceRange c,
                                   int top_k, int64_t hidden, int64_t slots, bool f32, unsigned char* smem) {
  int* op = reinterpret_cast<int*>(smem);                    // [top_k] places by rank
  float* ow = reinterpret_cast<float*>(op + MET_INTERP_THREADS);  // [top_k] their weights
  uint4* stage = reinterpret_cast<uint4*>(ow + MET_INTERP_THREADS);  // [stage slots][threads] 16 bytes each
#pragma unroll 1
  for (int64_t row = r.begin; row < r.end; ++row) {
    if (threadIdx.x < top_k) {
      const int64_t t0 = row * top_k;
      const int me = __ldcg(ids + t0 + threadIdx.x);
      int rank = 0;
      for (int j = 0; j < top_k; ++j) {
        const int other = __ldcg(ids + t0 + j);
        rank += other < me || (other == me && j < static_cast<int>(threadIdx.x));
      }
      const int p = __ldcg(pos + t0 + threadIdx.x);
      op[rank] = p >= 0 && p < slots ? p : -1;
      ow[rank] = __ldcg(weights + t0 + threadIdx.x);
    }
    __syncthreads();
#pragma unroll 1
    for (int64_t c8 = c.begin + 8 * static_cast<int64_t>(threadIdx.x); c8 < c.end; c8 += 8 * MET_INTERP_THREADS) {
      const int n = static_cast<int>(min(static_cast<int64_t>(8), c.end - c8));
      float acc[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] = 0.f;
#pragma unroll 1
      for (int k0 = 0; k0 < top_k; k0 += MET_MOE_COMBINE_STAGE) {
        const int kn = min(MET_MOE_COMBINE_STAGE, top_k - k0);
        for (int k = 0; k < kn; ++k) {
          const int p = op[k0 + k];
          const u16* src = ys + static_cast<int64_t>(p) * hidden + c8;
          if (p >= 0 && n == 8 && aligned16(src)) met_copy16(stage + k * MET_INTERP_THREADS + threadIdx.x, src, true);
        }
        met_copy_commit();
        met_copy_wait<0>();  // this thread's own copies: no barrier
        for (int k = 0; k < kn; ++k) {
          const int p = op[k0 + k];
          if (p < 0) continue;
          const float w = ow[k0 + k];
          const u16* src = ys + static_cast<int64_t>(p) * hidden + c8;
          float v[8];
          if (n == 8 && aligned16(src)) {
            unpack8(stage[k * MET_INTERP_THREADS + threadIdx.x], v);
          } else {
#pragma unroll
            for (int i = 0; i < 8; ++i) v[i] = i < n ? bf(src[i]) : 0.f;
          }
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[i] += f32 ? w * v[i] : bf_round(w * v[i]);
        }
      }
      for (int i = 0; i < n; ++i) {
        const int64_t at = row * hidden + c8 + i;
        if (f32)
          static_cast<float*>(y)[at] = acc[i];
        else
          static_cast<u16*>(y)[at] = to_bf(acc[i]);
      }
    }
    __syncthreads();  // the ranks are read
  }
}

MET_ENTRY(moe_combine) {
  moe_combine_slice(a.ys, a.pos, a.ids, a.weights, a.y, slice_rows(a, slice), slice_cols(a, slice, a.hidden), static_cast<int>(a.top_k),
                    a.hidden, a.rows * a.top_k, false, smem);
}
MET_ENTRY(moe_combine_f32) {
  moe_combine_slice(a.ys, a.pos, a.ids, a.weights, a.y, slice_rows(a, slice), slice_cols(a, slice, a.hidden), static_cast<int>(a.top_k),
                    a.hidden, a.rows * a.top_k, true, smem);
}
#endif  // MET_HAS_WGMMA && MET_HAS_TMA

}  // namespace met_interp
