// Causal prefill attention of the hopper interpreter on the warpgroup tensor cores (flash attention
// with wgmma and TMA). A slice is up to 64 query rows x up to 2 heads (emit's attention_prefill
// slicing, kernels/common/interp/smem.h): warpgroup w takes head w of the slice over all 64 rows,
// so one wgmma M of 64 covers its rows.
//
// Per step of 64 keys, for each warpgroup: S = Q K^T (wgmma m64n64k16, Q and K tiles from shared
// memory, K-major), the scale, soft cap, causal and window masks and the online softmax in
// registers, then O += P V with P straight from the S accumulator as the A operand in registers
// and V from shared memory read transposed (trans-b, MN-major), 64 output dims per wgmma. Q, K and
// V arrive by TMA, 64 x 64 bf16 tiles with the 128-byte swizzle (head dims of 128 are two such
// tiles side by side), into stages of K and V: thread 0 refills a stage once every warp is done
// with it. Where three or more stages fit, the steps overlap: step j's Q K^T is issued together
// with step j - 1's P V, and step j's softmax runs while that P V is still on the tensor cores.
//
// A block's 64 rows may belong to several sequences (packed prompts): one pass per sequence the
// rows belong to, over that sequence's keys (its cache rows from seq_base), rows of other
// sequences masked. The KV cache is zeroed at load and only ever holds finite values, so keys a
// step reads past the last one (masked, P = 0) never turn the sum into NaN. A sliding-window
// layer's cache may be a ring (`ring` rows a sequence, position p at row seq_base + p % ring):
// each 64-key step then starts at row seq_base + its first position % ring (flash_issue).
//
// Head dims 64, 128 and 256 (v_head_dim equal); others run the mma.sync body
// (common/flash_prefill_mma.cuh) through met_entry_route_flash_prefill_wgmma below. A 256-dim head
// computes its output in two parts of 128 dims, each a whole walk over the keys that scores them
// over all 256 dims again: the whole row's 128 accumulators a thread, inlined into the loop kernel
// beside the other bodies, spilled it (96 bytes of frame; out of line, ptxas serializes wgmma
// across the call). Its Q tiles take twice the room, so its stages are two and its steps run one
// after another. Only an even number of query heads a KV head comes here (the route below): a
// slice's two heads then read one KV head, one set of stages.
// The host makes the three tensor maps (Q, K cache, V cache) at load time (MetDevInstr.tmaps).
#pragma once
#include "common/flash_prefill_mma.cuh"
#include "common/interp/prims.cuh"
#include "common/mma_sync.cuh"
#include "hopper/sm90.cuh"

namespace met_interp {

#if MET_HAS_WGMMA && MET_HAS_TMA
static_assert(MET_FLASH_SLICE_ROWS == 64 && MET_FLASH_SLICE_HEADS == 2, "one warpgroup per head, one wgmma M per slice");

// Shared memory (from the first 1024-byte boundary): Q [warpgroup][half] (two half slots a
// warpgroup at head dims up to 128, four at 256), then 16 tiles for the K and V stages, each a
// 64 x 64 bf16 tile of 8 KB; then the barriers (Q, full[4], empty[4]) and the pass's shared
// scalars. MET_FLASH_WGMMA_SMEM(head_dim) (smem.h) is the total. A stage holds K [set][half]
// and V [set][half], one set per distinct KV head of the slice: when both heads read the same KV
// head (grouped-query attention), one set serves both warpgroups, which halves the stage and the
// L2 traffic per query row and doubles the stages in flight. (With a set per warpgroup the 8B's
// 64-key steps took 4.6 us each, bound by K/V reads from L2.)
constexpr uint32_t kFwTile = 64 * 128;
// Timing switches for A/B runs of this body (bench/interp_variants.sh), wrong results on purpose:
// bit 0 skips the softmax arithmetic, bit 1 the P V products, bit 2 the Q K^T products, bit 3 the
// producer's wait for a stage to empty. 0 (the default) is the body.
#ifndef MET_FW_DIAG
#define MET_FW_DIAG 0
#endif
// 0 runs the steps one after another (the body before the overlap, for A/B runs).
#ifndef MET_FW_OVERLAP
#define MET_FW_OVERLAP 1
#endif
// 0 rescales O at every step (for A/B runs); 1 skips the steps where no row of the warp has a new
// max.
#ifndef MET_FW_RESCALE_SKIP
#define MET_FW_RESCALE_SKIP 1
#endif
constexpr int kFwKvTiles = MET_FLASH_WGMMA_KV_TILES;
constexpr int kFwMaxStages = 4;
// Q tiles a warpgroup's slot holds: its head's halves, at least two.
template <int kHalves>
__host__ __device__ constexpr int fw_q_slot() {
  return kHalves < 2 ? 2 : kHalves;
}
// The stages of K and V that fit: one K and V set per distinct KV head of the slice, kHalves K
// tiles and kDv V tiles (the output part's) each, at most kFwMaxStages.
template <int kHalves, int kSets, int kDv>
__host__ __device__ constexpr int fw_stages() {
  return kFwKvTiles / (kSets * (kHalves + kDv)) < kFwMaxStages ? kFwKvTiles / (kSets * (kHalves + kDv)) : kFwMaxStages;
}

constexpr float kLog2e = 1.4426950408889634f;

// f(Int<k>) for k in [K, N), each k a compile-time constant (for asm immediates).
template <int K>
struct FwInt {
  static constexpr int value = K;
};
template <int K, int N, class F>
__device__ __forceinline__ void fw_static_for(F&& f) {
  if constexpr (K < N) {
    f(FwInt<K>{});
    fw_static_for<K + 1, N>(f);
  }
}

// 2^x by the SFU (ex2.approx: about 2 ulp, 2^-inf = 0), for the softmax's exponentials.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// tanh(x) = (1 - e^-2|x|) / (1 + e^-2|x|) with the sign of x: within 1e-6 relative of tanhf for
// the scores a soft cap sees, and without tanhf's registers (the accurate one made this body spill
// at head dim 128).
__device__ __forceinline__ float tanh_by_exp(float x) {
  const float e = __expf(-2.f * fabsf(x));
  return copysignf((1.f - e) / (1.f + e), x);
}

// In shared memory: the sequence of this pass and its rows' position range, and what the producer
// (thread 0) needs to issue a step, read from here when it issues, so that none of it is held in
// every thread's registers through the loop (the head-dim-128 body is at the register limit).
struct FlashPass {
  long long seg;
  int min_pos, max_pos, more;
  int key0, kv0, kv1;  // the sequence's first cache row; the KV heads of the sets
  int kpos, ring;      // the first step's key position; the cache's ring (0: linear)
  int dv0;             // the output part's first head dim (V's columns the stages hold)
  // The softmax's constants, read at each step (volatile) rather than held in registers through
  // the loop: the scale and the soft cap in base 2, the scale over the cap, the window (0: none).
  float scale2, cap2, cap_in;
  int win;
  const char* tm_k;
  const char* tm_v;
};

// Thread 0: the copies of step j (K and V of every KV head of the slice) into its stage; the
// barriers are at `bars` (Q, full[4], empty[4]).
template <int kHalves, int kSets, int kDv>
__device__ __forceinline__ void flash_issue(const FlashPass* P, uint32_t kv_tiles, uint32_t bars, int j) {
  using namespace met_sm90;
  constexpr int kStages = fw_stages<kHalves, kSets, kDv>();
  // A step's 64 keys start at a multiple of 64 in position, and a ring's rows are a multiple of
  // 64 (model/kv_ring.hpp), so they lie in consecutive rows of a ring too.
  int kp = P->kpos + 64 * j;
  if (P->ring > 0) kp %= P->ring;
  const int s = j % kStages, key = P->key0 + kp;
  const uint32_t full = bars + 8u + 8u * s;
  mbar_arrive_expect(full, static_cast<uint32_t>(kSets * (kHalves + kDv)) * kFwTile);
#pragma unroll
  for (int set = 0; set < kSets; ++set) {
    const int kh = set == 0 ? P->kv0 : P->kv1;
    const uint32_t kt = kv_tiles + static_cast<uint32_t>((s * kSets + set) * (kHalves + kDv)) * kFwTile;
#pragma unroll
    for (int half = 0; half < kHalves; ++half)
      tma_load_2d(kt + half * kFwTile, P->tm_k, kh * 64 * kHalves + half * 64, key, full);
#pragma unroll
    for (int half = 0; half < kDv; ++half)
      tma_load_2d(kt + (kHalves + half) * kFwTile, P->tm_v, kh * 64 * kHalves + (kDv < kHalves ? P->dv0 : 0) + half * 64, key,
                  full);
  }
}

// kHalves: head dim / 64; kSets: distinct KV heads of the slice's heads; kDv: the 64-dim output
// tiles a part computes (kHalves / kDv parts, each a walk over the keys).
template <int kHalves, int kSets, int kDv = kHalves>
__device__ __forceinline__ void flash_wgmma_slice(const MetArgs_flash_prefill_wgmma& a, uint32_t slice, unsigned char* smem) {
  using namespace met_sm90;
  const SliceRange rr = slice_rows(a, slice);
  const int heads = static_cast<int>(a.heads), kvh = static_cast<int>(a.kv_heads);
  const SliceRange hs = slice_cols(a, slice, heads);
  if (rr.end <= rr.begin || hs.end <= hs.begin) return;
  constexpr int halves = kHalves, hd = 64 * kHalves;
  const int nwg = static_cast<int>(min(static_cast<int64_t>(2), hs.end - hs.begin));
  // The warpgroup index through a shuffle, so the compiler knows it is warp-uniform (a wgmma under
  // a condition it cannot prove uniform is serialized).
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const bool active = wg < nwg;
  const int h = static_cast<int>(hs.begin) + (active ? wg : 0);
  const int* pos = a.positions;
  const int64_t* base_of = a.seq_base;
  const char* tm_q = static_cast<const char*>(a.geom.tmaps);

  const uint32_t sbase = smem_addr(smem);
  const uint32_t tiles = (sbase + kSwizzleRepeat - 1) & ~(kSwizzleRepeat - 1);
  constexpr uint32_t q_slot = fw_q_slot<kHalves>();
  static_assert(2 * q_slot + kFwKvTiles == MET_FLASH_WGMMA_TILES(64 * kHalves), "smem.h sizes the same tiles");
  auto q_at = [&](int w, int half) { return tiles + (q_slot * w + half) * kFwTile; };
  const uint32_t kv_tiles = tiles + 2u * q_slot * kFwTile;
  const uint32_t bars = tiles + static_cast<uint32_t>(2 * q_slot + kFwKvTiles) * kFwTile;
  const uint32_t qbar = bars;
  auto full = [&](int s) { return bars + 8u + 8u * s; };
  auto empty = [&](int s) { return bars + 8u + 8u * (kFwMaxStages + s); };
  FlashPass* pass = reinterpret_cast<FlashPass*>(smem + (bars - sbase) + 8u * (1 + 2 * kFwMaxStages));
  if (threadIdx.x == 0) {
    const int kv0 = static_cast<int>(hs.begin) / (heads / kvh), kv1 = (static_cast<int>(hs.begin) + nwg - 1) / (heads / kvh);
    pass->kv0 = kv0;
    pass->kv1 = kv1;
    pass->tm_k = tm_q + MET_TMAP_BYTES;
    pass->tm_v = tm_q + 2 * MET_TMAP_BYTES;
  }

  // This thread's two rows of the accumulator fragments (sm90.cuh): r and r + 8 of its warp's 16.
  const int row_off = 16 * (warp % 4) + g;  // this thread's rows: rr.begin + row_off and + 8
  // Warp 0 walks the rows' sequences; lane l owns rows l and l + 32 of the slice.
  bool done0 = rr.begin + lane >= rr.end, done1 = rr.begin + lane + 32 >= rr.end;
  const float sink = a.sinks && active ? bf(a.sinks[h]) : -INFINITY;
  // A pass is one sequence's rows and one output part (kParts of them, 64 x kDv dims each): the
  // parts of a sequence follow one another, the part's first dim in pass->dv0 (shared memory, not
  // a register held through the loop).
  constexpr int kParts = kHalves / kDv;
  static_assert(kParts * kDv == kHalves, "whole output parts");
  if (kParts > 1 && threadIdx.x == 0) pass->dv0 = 64 * kHalves;  // no sequence yet

#pragma unroll 1
  for (;;) {
    // Warp 0: the next part of this sequence, else the next sequence (lane 0 alone reads dv0; it
    // wrote it).
    const bool next_part = kParts > 1 && warp == 0 && __shfl_sync(0xffffffffu, pass->dv0 + 64 * kDv < 64 * kHalves, 0);
    if (next_part) {
      if (lane == 0) pass->dv0 += 64 * kDv;
    } else if (warp == 0) {
      if (kParts > 1 && lane == 0) pass->dv0 = 0;
      const int64_t r0 = rr.begin + lane, r1 = r0 + 32;
      const int64_t b0 = done0 ? 0 : base_of[r0], b1 = done1 ? 0 : base_of[r1];
      const unsigned p0 = __ballot_sync(0xffffffffu, !done0), p1 = __ballot_sync(0xffffffffu, !done1);
      if (p0 | p1) {
        const int64_t seg = p0 ? __shfl_sync(0xffffffffu, b0, __ffs(p0) - 1) : __shfl_sync(0xffffffffu, b1, __ffs(p1) - 1);
        const bool in0 = !done0 && b0 == seg, in1 = !done1 && b1 == seg;
        int lo = 0x7fffffff, hi = -1;
        if (in0) lo = min(lo, pos[r0]), hi = max(hi, pos[r0]);
        if (in1) lo = min(lo, pos[r1]), hi = max(hi, pos[r1]);
        for (int o = 16; o > 0; o >>= 1) {
          lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, o));
          hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, o));
        }
        done0 = done0 || in0;
        done1 = done1 || in1;
        if (lane == 0) {
          pass->seg = static_cast<long long>(seg);
          pass->min_pos = lo;
          pass->max_pos = hi;
          pass->more = 1;
        }
      } else if (lane == 0) {
        pass->more = 0;
      }
    }
    __syncthreads();
    if (!pass->more) break;
    const int64_t seg = pass->seg;
    const int max_pos = pass->max_pos;
    const int64_t first_key = a.window > 0 ? max(static_cast<int64_t>(0), static_cast<int64_t>(pass->min_pos) - a.window + 1) : 0;
    const int k_begin = static_cast<int>(first_key / 64 * 64);
    const int steps = (max_pos - k_begin) / 64 + 1;
    constexpr int stages = fw_stages<kHalves, kSets, kDv>();
    // This warpgroup's K tile of stage 0, and the distance between stages.
    const uint32_t my_kv = kv_tiles + static_cast<uint32_t>((kSets == 1 ? 0 : wg) * (halves + kDv)) * kFwTile;
    constexpr uint32_t stage_bytes = static_cast<uint32_t>(kSets * (kHalves + kDv)) * kFwTile;
    // Steps overlap (below) where a third stage keeps a copy in flight while two are in use.
    constexpr bool kOverlap = MET_FW_OVERLAP && stages >= 3;
    if (threadIdx.x == 0) {
      pass->key0 = static_cast<int>(seg);
      pass->kpos = k_begin;
      pass->ring = static_cast<int>(a.ring);
      pass->scale2 = a.scale * kLog2e;
      pass->cap2 = a.softcap * kLog2e;
      pass->cap_in = a.softcap > 0.f ? a.scale / a.softcap : 0.f;
      pass->win = static_cast<int>(a.window);
      mbar_init(qbar, 1);
      for (int s = 0; s < stages; ++s) {
        mbar_init(full(s), 1);
        mbar_init(empty(s), 4 * nwg);
      }
      mbar_init_fence();
      fence_proxy_async_shared();
      fence_proxy_async_global();  // the rows' q and the cache rows kv_append wrote in other blocks
      mbar_arrive_expect(qbar, static_cast<uint32_t>(nwg * halves) * kFwTile);
      for (int w = 0; w < nwg; ++w)
        for (int half = 0; half < halves; ++half)
          tma_load_2d(q_at(w, half), tm_q, (static_cast<int>(hs.begin) + w) * hd + half * 64, static_cast<int>(rr.begin), qbar);
      for (int j = 0; j < stages && j < steps; ++j) flash_issue<kHalves, kSets, kDv>(pass, kv_tiles, bars, j);
    }
    __syncthreads();

    const int64_t row_a = rr.begin + row_off, row_b = row_a + 8;
    const int pa = row_a < rr.end && base_of[row_a] == seg ? pos[row_a] : -1;
    const int pb = row_b < rr.end && base_of[row_b] == seg ? pos[row_b] : -1;
    float o[kDv][32];
#pragma unroll
    for (int hf = 0; hf < kDv; ++hf)
#pragma unroll
      for (int i = 0; i < 32; ++i) o[hf][i] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // m in base 2 (times log2 e)
    // The softmax of step j's scores in sc (in place: scores, then their exponentials), this
    // thread's rows' running max and sum updated; corr gets each row's rescale of O.
    auto softmax = [&](float (&sc)[32], int j, float (&corr)[2]) {
      // Online softmax per row (a row's values sit in one quad), in base 2: the running max m
      // carries the factor scale x log2(e), so each exponential is one FFMA and one ex2. The soft
      // cap (uniform over the block) and the causal and window masks (uniform over the warp: only
      // steps that reach past one of its rows' positions, or below its window) are branches around
      // whole loops, so a plain step runs neither: per element, as predicated code, they were a
      // third of the step's instructions (ncu, perf-data/h200-sxm/20261204T1920Z-flash-place). (A
      // row's max and sum as trees of depth 4 instead of chains measured the same: call 3 there.)
      const volatile FlashPass* vp = pass;
      const int k0 = vp->kpos + 64 * j;  // key positions (int: positions are)
      const float cap2 = vp->cap2;
      const int win = vp->win;
      if (MET_FW_DIAG & 1) return;
      float mul = vp->scale2;  // what turns sc into base-2 logits inside the exponent
      if (cap2 > 0.f) {
        const float cap_in = vp->cap_in;
#pragma unroll
        for (int i = 0; i < 32; ++i) sc[i] = cap2 * tanh_by_exp(sc[i] * cap_in);
        mul = 1.f;
      }
      const bool edge = k0 + 63 > min(pa, pb) || (win > 0 && k0 <= max(pa, pb) - win);
      if (__any_sync(0xffffffffu, edge)) {
#pragma unroll
        for (int i = 0; i < 32; ++i) {
          const int p = (i / 2) % 2 ? pb : pa;
          const int key = k0 + 8 * (i / 4) + 2 * t + (i % 2);
          if (key > p || (win > 0 && key <= p - win)) sc[i] = -INFINITY;
        }
      }
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        float mx = -INFINITY;
#pragma unroll
        for (int i = 0; i < 32; ++i)
          if (((i / 2) % 2) == hr) mx = fmaxf(mx, sc[i]);
        mx = fmaxf(mx, met_shfl_xor(mx, 1));
        mx = fmaxf(mx, met_shfl_xor(mx, 2));
        const float m_new = fmaxf(m[hr], mx * mul);             // mul > 0: the max of the logits
        const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a row with every key masked so far
        corr[hr] = exp2_approx(m[hr] - m_use);                  // m = -inf: 0
        float sum = 0.f;
#pragma unroll
        for (int i = 0; i < 32; ++i) {
          if (((i / 2) % 2) != hr) continue;
          const float e = exp2_approx(fmaf(sc[i], mul, -m_use));  // masked: 0
          sc[i] = e;
          sum += e;
        }
        l[hr] = l[hr] * corr[hr] + sum;
        m[hr] = m_new;
      }
    };
    // S = Q K^T of the keys in stage s into sc (issued, not waited for). Descriptors from
    // addresses the compiler cannot hoist out of the loop: held across it, they cost the
    // registers that made this body spill.
    constexpr u64 kHalfDesc = kFwTile >> 4;  // the next 64 head dims: the next tile
    // Past two halves (256-dim heads), each product adds its constant offsets to the two base
    // descriptors inside its own asm, so the 16 products hold no descriptor pair each.
    auto issue_s = [&](float (&sc)[32], int s) {
      if constexpr (kHalves > 2) {
        const u64 dq = tile_desc(opaque(q_at(wg, 0))), dk = tile_desc(opaque(my_kv + s * stage_bytes));
        fw_static_for<0, 4 * kHalves>([&](auto kc) {
          constexpr int k = decltype(kc)::value;
          constexpr u64 off = (k / 4) * kHalfDesc + (k % 4) * kDescKStep;
          if (!(MET_FW_DIAG & 4) || k == 0) wgmma_m64n64k16_off<off, off>(sc, dq, dk, k > 0);
        });
      } else {
        const u64 dq = tile_desc(opaque(q_at(wg, 0))), dk = tile_desc(opaque(my_kv + s * stage_bytes));
#pragma unroll
        for (int k = 0; k < 4 * kHalves; ++k)
          if (!(MET_FW_DIAG & 4) || k == 0)
            wgmma_m64n64k16(sc, dq + (k / 4) * kHalfDesc + (k % 4) * kDescKStep, dk + (k / 4) * kHalfDesc + (k % 4) * kDescKStep,
                            k > 0);
      }
      wgmma_commit();
    };
    // O += P V with P (bf16 A fragments of the four 16-key chunks) and V of stage s (issued).
    auto issue_pv = [&](const uint32_t (&pf)[4][4], int s) {
      const u64 dv = tile_desc(opaque(my_kv + s * stage_bytes + halves * kFwTile));
#pragma unroll
      for (int hf = 0; hf < kDv; ++hf)
#pragma unroll
        for (int c = 0; c < 4; ++c)
          if (!(MET_FW_DIAG & 2) || c == 0)
            wgmma_m64n64k16_rs_tb(o[hf], pf[c], dv + hf * kHalfDesc + c * ((2 * kSwizzleRepeat) >> 4));
      wgmma_commit();
    };
    auto pack_p = [&](const float (&sc)[32], uint32_t (&pf)[4][4]) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        pf[c][0] = met_pack_bf16x2(sc[8 * c], sc[8 * c + 1]);
        pf[c][1] = met_pack_bf16x2(sc[8 * c + 2], sc[8 * c + 3]);
        pf[c][2] = met_pack_bf16x2(sc[8 * c + 4], sc[8 * c + 5]);
        pf[c][3] = met_pack_bf16x2(sc[8 * c + 6], sc[8 * c + 7]);
      }
    };
    auto rescale_o = [&](const float (&corr)[2]) {
      // Not where no row of the warp has a new max (every factor is 1), as in most steps of a
      // long row once its largest scores are behind it.
      if (MET_FW_RESCALE_SKIP && !__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) return;
#pragma unroll
      for (int hf = 0; hf < kDv; ++hf)
#pragma unroll
        for (int i = 0; i < 32; ++i) o[hf][i] *= corr[(i / 2) % 2];
    };
    // Thread 0, once every warp is done with step j's stage: its refill with step j + stages.
    auto refill = [&](int j) {
      if (threadIdx.x == 0 && j + stages < steps) {
        if (!(MET_FW_DIAG & 8)) mbar_wait(empty(j % stages), static_cast<uint32_t>((j / stages) & 1));
        flash_issue<kHalves, kSets, kDv>(pass, kv_tiles, bars, j + stages);
      }
    };
    if (active && kOverlap) {
      // Step j's Q K^T runs on the tensor cores while nothing waits for it, beside step j - 1's
      // P V: the softmax of step j then overlaps that P V, and the next step's products wait
      // only for their stage. P of step j - 1 stays in registers (pf) until its P V is done.
      uint32_t pf[4][4];
      float corr[2];
      mbar_wait(qbar, 0);
      mbar_wait(full(0), 0);
      {
        float sc[32];
        wgmma_fence();
        issue_s(sc, 0);
        wgmma_wait<0>();
        fence_operands(sc);
        softmax(sc, 0, corr);  // O is zero: nothing to rescale
        pack_p(sc, pf);
      }
#pragma unroll 1
      for (int j = 1; j < steps; ++j) {
        const int s = j % stages, sp = (j - 1) % stages;
        mbar_wait(full(s), static_cast<uint32_t>((j / stages) & 1));
        float sc[32];
        wgmma_fence();
        issue_s(sc, s);
        issue_pv(pf, sp);
        wgmma_wait<1>();  // S of step j; the P V of step j - 1 may still run
        fence_operands(sc);
        softmax(sc, j, corr);
        wgmma_wait<0>();
        fence_operands(o);
        if (lane == 0) mbar_arrive(empty(sp));
        rescale_o(corr);
        pack_p(sc, pf);
        refill(j - 1);
      }
      wgmma_fence();
      issue_pv(pf, (steps - 1) % stages);
      wgmma_wait<0>();
      fence_operands(o);
      if (lane == 0) mbar_arrive(empty((steps - 1) % stages));
    } else if (active) {
      // Two stages (no room for the overlap's extra stage in use): each step in turn.
      mbar_wait(qbar, 0);
#pragma unroll 1
      for (int j = 0; j < steps; ++j) {
        const int s = j % stages;
        mbar_wait(full(s), static_cast<uint32_t>((j / stages) & 1));
        float sc[32], corr[2] = {1.f, 1.f};
        uint32_t pf[4][4];
        wgmma_fence();
        issue_s(sc, s);
        wgmma_wait<0>();
        fence_operands(sc);
        softmax(sc, j, corr);
        rescale_o(corr);
        pack_p(sc, pf);
        wgmma_fence();
        issue_pv(pf, s);
        wgmma_wait<0>();
        fence_operands(o);
        if (lane == 0) mbar_arrive(empty(s));
        refill(j);
      }
    }
    if (active) {
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        // the sink's logit in base 2, like m
        const float inv =
            flash_row_scale(l[hr], m[hr], a.sinks != nullptr, sink * kLog2e, [](float x) { return exp2_approx(x); });
        if ((hr ? pb : pa) < 0) continue;
        const int64_t row = rr.begin + row_off + 8 * hr;
        u16* dst = a.out + (row * heads + h) * hd + (kParts > 1 ? static_cast<const volatile FlashPass*>(pass)->dv0 : 0);
#pragma unroll
        for (int hf = 0; hf < kDv; ++hf)
#pragma unroll
          for (int i = 0; i < 32; i += 4) {
            const int col = hf * 64 + 8 * (i / 4) + 2 * t;
            const int e = i + 2 * hr;
            *reinterpret_cast<uint32_t*>(dst + col) = met_pack_bf16x2(o[hf][e] * inv, o[hf][e + 1] * inv);
          }
      }
    }
    __syncthreads();  // every warp is past its waits: the barriers may go before the next pass
    if (threadIdx.x == 0) {
      mbar_inval(qbar);
      for (int s = 0; s < stages; ++s) {
        mbar_inval(full(s));
        mbar_inval(empty(s));
      }
    }
  }
}

// Head dims other than 64, 128 and 256 run the mma.sync body (same operands), through run_body
// (common/interp/loop.cuh), so its registers stay out of the kernel's function.
__device__ __forceinline__ uint32_t met_entry_route_flash_prefill_wgmma(const MetDevInstr& in) {
  const auto a = met_load_flash_prefill_wgmma(in);
  return MET_FLASH_WGMMA_ROUTE(a.head_dim, a.heads, a.kv_heads) ? 0u : static_cast<uint32_t>(MET_OP_flash_prefill_mma);
}

// Whether the slice's (up to two) heads read one KV head.
__device__ __forceinline__ bool flash_one_kv(const MetArgs_flash_prefill_wgmma& a, uint32_t slice) {
  const int heads = static_cast<int>(a.heads), group = heads / static_cast<int>(a.kv_heads);
  const SliceRange hs = slice_cols(a, slice, heads);
  return hs.end - hs.begin < 2 || hs.begin / group == (hs.end - 1) / group;
}

MET_ENTRY(flash_prefill_wgmma) {
  const bool one = flash_one_kv(a, slice);
  if (a.head_dim == 128) {
    if (one)
      flash_wgmma_slice<2, 1>(a, slice, smem);
    else
      flash_wgmma_slice<2, 2>(a, slice, smem);
  } else if (a.head_dim == 256) {  // an even group (the route): both heads read one KV head
    flash_wgmma_slice<4, 1, 2>(a, slice, smem);
  } else if (a.head_dim == 64) {  // other head dims never come here (the route above)
    if (one)
      flash_wgmma_slice<1, 1>(a, slice, smem);
    else
      flash_wgmma_slice<1, 2>(a, slice, smem);
  }
}
#endif  // MET_HAS_WGMMA && MET_HAS_TMA

}  // namespace met_interp
