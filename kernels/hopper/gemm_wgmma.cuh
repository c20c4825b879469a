// Prefill GEMM body of the hopper interpreter on the warpgroup tensor cores: one slice is one
// output tile of at most 128 rows x 256 columns of y = x W^T (bf16 in, fp32 accumulate, bf16 out),
// the tiles emit cuts (src/emit/slice.cpp, kernels/common/interp/smem.h), with the plan's fused
// epilogue where it has one (the opcode says which): the residual add (o, down: y += x W^T in
// place) or the gated activation (gate_up + silu_mul / gelu_mul: y = act(gate) * up).
//
// B views are 3-D (host-made, src/interp/cuda_backend.cpp), one box of 128 rows x 64 values per B
// tile: a plain weight [N, K] as [N][1][K], a gated one ([2 x dim, K], gate rows then up rows) as
// [dim][gate, up][K], so a gated box holds 64 output columns with each column's gate row and up
// row next to each other, and a thread's accumulator pair (i, i + 1) is the gate and the up of one
// output column. A 256-wide gated tile is then 128 output columns, its activation needs no value
// of another thread or index, and gate_up never goes to memory. (One load form for both: a branch
// between a 2-D and a 3-D copy in the producer cost the kernel's function local memory.)
//
// Loads: TMA. The host makes two tensor maps per instruction at load time (A: the activation rows
// [in_row0 + rows, K]; B: the weight, as below; boxes of 128 rows x 64 bf16 with the 128-byte
// swizzle, src/interp/cuda_backend.cpp) and passes their address in the instruction
// (MetDevInstr.tmaps). Rows past the tensor arrive as zeros.
//
// Pipeline: a ring of stages (3 of two K steps' A and B tiles for 128 columns, 4 of an A and two B
// tiles for 256; kernels/common/interp/smem.h), each with a full barrier (TMA's bytes land) and an
// empty one (all 8 warps are done reading). The interpreter's block is 256 threads, two warpgroups,
// and both compute (64 rows x all the tile's columns each, wgmma m64n128k16 or m64n256k16); the
// producer is one elected thread (thread 0), which refills the stage read two stages earlier (one
// where the ring has 3), so it waits on a barrier that is already complete unless a warpgroup fell
// behind.
//
// Split K (emit's k_splits, where the tiles alone leave streams idle: a prefill of 128 rows has
// 32 tiles of a 4096-column o or down projection for 132 SMs): slice s runs K part s / tiles of
// tile s % tiles, a contiguous range of the K steps. Each part stores its accumulators as they lie
// in the threads (value i of thread t at i x 256 + t of its own part of the instruction's `part`
// buffer, so the stores and loads are coalesced), and the last part of a tile to arrive (an arrival
// counter per tile) sums every part in K order, 0 first, whichever came last, and runs the epilogue.
// The sums do not depend on the order of arrival, so a run is repeatable.
//
// The body starts and ends with every barrier invalidated and no copy in flight, so the shared
// memory is free for the next body (any op) after the loop's closing barrier.
#pragma once
#include "common/interp/prims.cuh"
#include "common/mma_sync.cuh"
#include "hopper/sm90.cuh"

namespace met_interp {

#if MET_HAS_WGMMA && MET_HAS_TMA
// One tile: rows [rr) of y (A rows in_row0 + rr), columns [cc). Inlined into the kernel's own
// function (kernels/hopper/interp.cu lists this body in MET_INTERP_ENTRY_BODIES).
// kBN = 128 or 256 output columns (the slice's): a 256-wide tile reads each A tile for twice the
// columns, and each warpgroup's wgmma m64n256k16 reads 10 KB of shared memory per 128 clocks of
// tensor work where two m64n128k16 read 12 KB.
enum GemmEpi : int { kEpiPlain, kEpiSilu, kEpiGelu, kEpiResidual };

// Arrival counters of the split-K tiles, one per tile of an instruction: the last part to arrive
// puts its counter back to 0. Every split GEMM of a program shares one part buffer, so the
// scheduler orders them and no two use the counters at once (src/emit/slice.cpp, split_gemms).
__device__ unsigned long long met_gemm_arrivals[MET_GEMM_SPLIT_TILES];

// A slice's K part: K steps [kt0, kt0 + steps) of its tile; `parts` parts of MET_GEMM_PART_FLOATS
// floats, part p at part + p * stride; `tile` indexes the counters.
struct GemmKPart {
  int kt0, steps, parts, index;
  float* part;
  int64_t stride;
  uint32_t tile;
};

// Leaves this part's accumulators and counts its arrival; the last part to arrive gets the sum of
// every part in K order in d and returns true, the others return false. `flag`: a shared word.
template <int kBN>
__device__ __forceinline__ bool gemm_k_sum(float (&d)[kBN / 2], const GemmKPart& k, volatile uint32_t* flag) {
  float* const mine = k.part + k.index * k.stride + threadIdx.x;
#pragma unroll
  for (int i = 0; i < kBN / 2; ++i) __stcg(mine + i * MET_INTERP_THREADS, d[i]);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long* c = met_gemm_arrivals + k.tile;  // the host bounds the tiles
    const bool last = atom_add_acq_rel(c, 1ull) == static_cast<unsigned long long>(k.parts - 1);
    if (last) atomicExch(c, 0ull);
    *flag = last ? 1u : 0u;
  }
  __syncthreads();
  if (!*flag) return false;
#pragma unroll 1
  for (int p = 0; p < k.parts; ++p) {
    const float* src = k.part + p * k.stride + threadIdx.x;
#pragma unroll
    for (int i = 0; i < kBN / 2; ++i) d[i] = (p == 0 ? 0.f : d[i]) + __ldcg(src + i * MET_INTERP_THREADS);
  }
  return true;
}

// The gated epilogue's second half: y[r][c] = act(gate) * up for rows [0, M) x columns [0, Nt) of
// the tile (y rows `ys` apart), from the staged (gate, up) bf16 pairs (`stride` words a row).
__device__ __forceinline__ void gated_rows(const uint32_t* stage, int stride, int M, int Nt, u16* y, int64_t ys, bool silu) {
#pragma unroll 1
  for (int item = threadIdx.x; item < M * 32; item += MET_INTERP_THREADS) {
    const int row = item / 32, col = 4 * (item % 32);
    if (col >= Nt) continue;
    const uint4 p = *reinterpret_cast<const uint4*>(stage + row * stride + col);
    const uint32_t w[4] = {p.x, p.y, p.z, p.w};
    u16 o[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float g = bf(static_cast<u16>(w[e] & 0xffffu)), u = bf(static_cast<u16>(w[e] >> 16));
      o[e] = to_bf(gated_act(g, u, !silu));
    }
    u16* yr = y + row * ys + col;
    if (col + 4 <= Nt && (reinterpret_cast<uintptr_t>(yr) & 7) == 0) {
      *reinterpret_cast<uint2*>(yr) = make_uint2(o[0] | (static_cast<uint32_t>(o[1]) << 16), o[2] | (static_cast<uint32_t>(o[3]) << 16));
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (col + e < Nt) yr[e] = o[e];
    }
  }
}

// A stage of a 128-column tile holds two K steps of 64 (two A and two B boxes, 64 KB: 3 stages),
// one of 256 columns one (an A and two B boxes, 48 KB: 4 stages). TMA streamed a weight through
// stages of one 16 KB B box at 0.7-0.8 of its rate with two (bench/tma_box_rate.cu: 2.1-2.6 against
// 3.1-3.2 TB/s on one H100, at any ring depth). With 3 stages the producer refills the stage read
// one stage earlier, with 4 or more two.
template <int kBN>
__device__ __forceinline__ void gemm_wgmma_tile(const void* tmaps, int64_t in_row0, SliceRange rr, SliceRange cc, int64_t N,
                                             int b_row0, int k_past, const GemmKPart& kp, int epi, u16* Y, unsigned char* smem) {
  using namespace met_sm90;
  constexpr int kBK = MET_WGMMA_BK;
  constexpr uint32_t kTile = MET_WGMMA_TILE_BYTES;  // one 128-row tile of A or B: 128 rows x 128 bytes
  constexpr int kBTiles = kBN / 128;                  // B tiles per K step
  constexpr int kKB = kBN == 128 ? MET_WGMMA_K_STEPS_128 : 1;  // K steps per stage
  constexpr uint32_t kStageBytes = kKB * (1 + kBTiles) * kTile;
  constexpr int kStages = MET_WGMMA_RING / kStageBytes;
  constexpr int kLag = kStages >= 4 ? 2 : 1;
  static_assert(kStages >= 3, "the refill needs a stage in use, one landing and one free");
  const int64_t M = rr.end - rr.begin, Nt = cc.end - cc.begin;
  const char* tmap_a = static_cast<const char*>(tmaps);
  const char* tmap_b = tmap_a + MET_TMAP_BYTES;

  // Stage s: A at tiles + s kStageBytes, its B tiles after it; barriers after the ring.
  const uint32_t base = smem_addr(smem);
  const uint32_t tiles = (base + kSwizzleRepeat - 1) & ~(kSwizzleRepeat - 1);
  const uint32_t bars = tiles + MET_WGMMA_RING;
  auto full = [&](int s) { return bars + 8u * static_cast<uint32_t>(s); };
  auto empty = [&](int s) { return bars + 8u * static_cast<uint32_t>(kStages + s); };
  // A last K step past K reads zeros from both views (the tensor maps fill past the matrix), so K
  // need only be a multiple of 8 (a TMA row stride of 16 bytes). kt counts this part's stages; a
  // stage's K step past the part's last reads its boxes at k_past, wholly past the matrix: zeros.
  const int kt_count = (kp.steps + kKB - 1) / kKB;
  const int row_a = static_cast<int>(in_row0 + rr.begin), row_b = b_row0 + static_cast<int>(cc.begin);
  const int b_step = epi == kEpiSilu || epi == kEpiGelu ? 64 : 128;  // output columns of one B box
  auto issue = [&](int kt) {  // thread 0: the copies of stage kt (A boxes, then each K step's B boxes)
    const int s = kt % kStages;
    mbar_arrive_expect(full(s), kStageBytes);
#pragma unroll
    for (int h = 0; h < kKB; ++h) {
      const int step = kKB * kt + h, k0 = step < kp.steps ? (kp.kt0 + step) * kBK : k_past;
      tma_load_2d(tiles + s * kStageBytes + h * kTile, tmap_a, k0, row_a, full(s));
#pragma unroll
      for (int b = 0; b < kBTiles; ++b)
        tma_load_3d(tiles + s * kStageBytes + (kKB + h * kBTiles + b) * kTile, tmap_b, k0, 0, row_b + b_step * b, full(s));
    }
  };

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), MET_INTERP_WARPS);
    }
    mbar_init_fence();
    // Earlier bodies wrote this shared memory through the generic proxy, and other blocks wrote
    // the activations (acquired by the loop's waits): order both before the copies.
    fence_proxy_async_shared();
    fence_proxy_async_global();
    for (int kt = 0; kt < kStages && kt < kt_count; ++kt) issue(kt);
  }
  __syncthreads();

  const int wg = threadIdx.x / 128, lane = threadIdx.x % 32;
  float d[kBN / 2];
#pragma unroll
  for (int i = 0; i < kBN / 2; ++i) d[i] = 0.f;
#pragma unroll 1
  for (int kt = 0; kt < kt_count; ++kt) {
    const int s = kt % kStages;
    mbar_wait(full(s), static_cast<uint32_t>((kt / kStages) & 1));
    wgmma_fence();
#pragma unroll
    for (int h = 0; h < kKB; ++h) {
      const u64 da = tile_desc(tiles + s * kStageBytes + h * kTile + wg * 64 * kRowBytes),
                db = tile_desc(tiles + s * kStageBytes + (kKB + h * kBTiles) * kTile);
#pragma unroll
      for (int k = 0; k < kBK / 16; ++k) {
        // B's 256 rows are two 128-row tiles back to back: 16 groups of 8 rows 1024 bytes apart, as
        // the descriptor's stride says, so one descriptor covers both.
        if constexpr (kBN == 256)
          wgmma_m64n256k16(d, da + k * kDescKStep, db + k * kDescKStep);
        else
          wgmma_m64n128k16(d, da + k * kDescKStep, db + k * kDescKStep);
      }
    }
    wgmma_commit();
    wgmma_wait<1>();  // stage kt - 1's products are done: it may be refilled
    if (kt >= 1 && lane == 0) mbar_arrive(empty((kt - 1) % kStages));
    if (threadIdx.x == 0 && kt >= kLag && kt - kLag + kStages < kt_count) {
      const int old = kt - kLag;
      mbar_wait(empty(old % kStages), static_cast<uint32_t>((old / kStages) & 1));
      issue(old + kStages);
    }
  }
  wgmma_wait<0>();
  __syncthreads();  // every warp is past its last wait: the barriers may go
  if (threadIdx.x == 0)
    for (int s = 0; s < kStages; ++s) {
      mbar_inval(full(s));
      mbar_inval(empty(s));
    }
  // A split K: only the last part to arrive goes on, with the sum (its flag where the barriers were).
  if (kp.parts > 1 && !gemm_k_sum<kBN>(d, kp, reinterpret_cast<volatile uint32_t*>(smem + (bars - base)))) return;

  // Epilogue: bf16 pairs straight from the accumulator fragment (sm90.cuh): fragment index i of a
  // thread is row 16 (t / 32) + (t % 32) / 4 + 8 ((i / 2) % 2) of its warpgroup's 64 and column
  // 8 (i / 4) + 2 (t % 4) + i % 2. Every epilogue rounds where the unfused ops round: the products
  // to bf16 first.
  const int t = threadIdx.x % 128;
  // Gated: the (gate, up) pairs go to shared memory as bf16 (the ring is free: every copy landed
  // and was read) through the same store loop, then the block takes 4 columns of a row per thread
  // for the activations and one 8-byte store.
  const bool gated = epi == kEpiSilu || epi == kEpiGelu;
  constexpr int kStride = 2 * (128 + 4);  // bf16 per staged row: 8 rows x 4 pairs hit 32 banks
  u16* const stage = reinterpret_cast<u16*>(smem + (tiles - base));
  u16* const yb = gated ? stage : Y + rr.begin * N + cc.begin;
  const int64_t ys = gated ? kStride : N, m_lim = gated ? 128 : M, n_lim = gated ? kBN : Nt;
#pragma unroll
  for (int i = 0; i < kBN / 2; i += 2) {
    const int64_t row = wg * 64 + 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2);
    const int64_t col = 8 * (i / 4) + 2 * (t % 4);
    if (row >= m_lim || col >= n_lim) continue;
    u16* y = yb + row * ys + col;
    float v0 = d[i], v1 = d[i + 1];
    if (col + 1 < n_lim && (reinterpret_cast<uintptr_t>(y) & 3) == 0) {
      if (epi == kEpiResidual) {
        const uint32_t old = *reinterpret_cast<const uint32_t*>(y);
        v0 = bf(static_cast<u16>(old & 0xffffu)) + bf(to_bf(v0));
        v1 = bf(static_cast<u16>(old >> 16)) + bf(to_bf(v1));
      }
      *reinterpret_cast<uint32_t*>(y) = met_pack_bf16x2(v0, v1);
    } else {
      y[0] = to_bf(epi == kEpiResidual ? bf(y[0]) + bf(to_bf(v0)) : v0);
      if (col + 1 < n_lim) y[1] = to_bf(epi == kEpiResidual ? bf(y[1]) + bf(to_bf(v1)) : v1);
    }
  }
  if (!gated) return;
  __syncthreads();
  gated_rows(reinterpret_cast<const uint32_t*>(stage), kStride / 2, static_cast<int>(M), static_cast<int>(Nt), Y + rr.begin * N + cc.begin,
             N, epi == kEpiSilu);
}

// Every shape the host accepts runs here (common/interp/loop.cuh).
__device__ __forceinline__ uint32_t met_entry_route_gemm_bf16_wgmma(const MetDevInstr&) { return 0; }

// The tile of slice s, in groups of G row parts: slices s, s + 1, ... walk down G row parts, then
// the next column part, so the slices that run at once (the streams take them round-robin, one
// wave of gridDim.x) cover about G row parts x gridDim.x / G column parts, and each A and B tile
// comes from L2 for the whole wave instead of every B tile from memory once per row part (row
// part-major order read Llama-3.1-8B's gate_up weight 32 times per prefill of 4096). The union of
// the tiles is emit's (slice_rows x slice_cols), and every instruction that waits on this one
// waits for all of its slices (src/emit/schedule.cpp), so the order is the body's own business.
__device__ __forceinline__ void gemm_tile_of(uint32_t s, uint32_t slices, uint32_t cols, int64_t& row_part, int64_t& col_part) {
  const int64_t C = cols > 0 ? cols : 1, R = max(static_cast<int64_t>(slices) / C, static_cast<int64_t>(1));
  const int64_t G = min(R, max(static_cast<int64_t>(1), static_cast<int64_t>(sqrtf(static_cast<float>(gridDim.x)))));
  const int64_t per_group = G * C, group = s / per_group, first = group * G, size = min(R - first, G);
  const int64_t local = s % per_group;
  row_part = first + local % size;
  col_part = local / size;
}

// One slice of any of the GEMMs (their operands are the same: x, w, y, rows, in_row0, col_slices);
// the opcode picks the epilogue. A gated GEMM's output has half the weight's rows, and its tiles
// are 128 columns wide (256 B rows).
//
// The grouped experts (moe_gate_up_silu_wgmma, moe_down_wgmma: the same operands, then moe_group's
// tiles, top_k, cols and experts; ops.def) run tile s / col_slices of the table, then every
// slices / col_slices-th after it, in column part s % col_slices of the `cols` output columns of the
// tile's expert: A rows are the tile's places of x (the sorted slots), B rows start at the expert's
// (e x 2 cols for gate_up's gate-then-up expert, e x cols for down). One call site per tile width
// keeps one copy of the tile loop in the kernel's function.
template <class A>
__device__ __forceinline__ void gemm_wgmma_slice(const A& a, uint32_t slice, unsigned char* smem) {
  const uint32_t op = a.geom.opcode;
  const int epi = op == MET_OP_gemm_silu_bf16_wgmma || op == MET_OP_moe_gate_up_silu_wgmma ? kEpiSilu
                  : op == MET_OP_gemm_gelu_bf16_wgmma                                    ? kEpiGelu
                  : op == MET_OP_gemm_residual_bf16_wgmma                                ? kEpiResidual
                                                                                         : kEpiPlain;
  const bool gated = epi == kEpiSilu || epi == kEpiGelu;
  const bool grouped = op == MET_OP_moe_gate_up_silu_wgmma || op == MET_OP_moe_down_wgmma;
  const int64_t steps = (a.geom.w_cols + MET_WGMMA_BK - 1) / MET_WGMMA_BK;
  const int k_past = static_cast<int>(steps * MET_WGMMA_BK);  // a K coordinate past the matrix (the host bounds K)
  const int64_t C = a.geom.col_parts;
  // Grouped: the table, its tile count and this slice's first tile and stride (a dense GEMM: once).
  const int* table = grouped ? reinterpret_cast<const int*>(a.geom.instr->ops[4]) : nullptr;
  const int64_t top_k = grouped ? a.geom.instr->ints[4] : 0, cols = grouped ? a.geom.instr->ints[5] : 0;
  const int64_t experts = grouped ? a.geom.instr->ints[6] : 0, slots = a.rows * top_k;
  const int64_t count = grouped ? min(static_cast<int64_t>(__ldcg(table)), static_cast<int64_t>(MET_MOE_WGMMA_MAX_TILES(slots, experts))) : 1;
  const int64_t stride = max(static_cast<int64_t>(a.geom.slices) / C, static_cast<int64_t>(1));
#pragma unroll 1
  for (int64_t i = grouped ? slice / C : 0; i < count; i += stride) {
    SliceRange rr, cc;
    int64_t N, in_row0 = 0;
    int b_row0 = 0;
    GemmKPart kp = {0, static_cast<int>(steps), 1, 0, nullptr, 0, 0};
    if (grouped) {
      const int4 t = __ldcg(reinterpret_cast<const int4*>(table) + 1 + i);  // expert, first place, places
      if (t.x < 0 || t.x >= experts || t.y < 0 || t.z <= 0 || t.y + static_cast<int64_t>(t.z) > slots) continue;
      const int64_t cp = slice % C;
      rr = {t.y, t.y + static_cast<int64_t>(t.z)};
      cc = {cp * cols / C, (cp + 1) * cols / C};
      N = cols;
      b_row0 = static_cast<int>(t.x * (gated ? 2 * cols : cols));
    } else {
      // Slice = K part x tiles + tile (K part-major, kernels/common/ops.def).
      const int64_t S = max(a.k_splits, static_cast<int64_t>(1));
      const uint32_t tiles = max(a.geom.slices / static_cast<uint32_t>(S), 1u), t = slice % tiles;
      int64_t rp = 0, cp = 0;
      gemm_tile_of(t, tiles, a.geom.col_parts, rp, cp);
      const int64_t rows = a.rows, R = max(static_cast<int64_t>(tiles) / C, static_cast<int64_t>(1));
      N = gated ? a.geom.w_rows / 2 : a.geom.w_rows;
      in_row0 = a.in_row0;
      rr = {min(rp * rows / R, rows), min((rp + 1) * rows / R, rows)};
      cc = {cp * N / C, (cp + 1) * N / C};
      const int64_t p = slice / tiles;
      const int kt0 = static_cast<int>(p * steps / S);
      kp = {kt0, static_cast<int>((p + 1) * steps / S) - kt0, static_cast<int>(S), static_cast<int>(p),
            S > 1 ? a.part + static_cast<int64_t>(t) * MET_GEMM_PART_FLOATS : nullptr, static_cast<int64_t>(tiles) * MET_GEMM_PART_FLOATS, t};
    }
    if (rr.end <= rr.begin || cc.end <= cc.begin) continue;  // a dense tile's every K part returns here
    if (gated || cc.end - cc.begin > 128)
      gemm_wgmma_tile<256>(a.geom.tmaps, in_row0, rr, cc, N, b_row0, k_past, kp, epi, a.y, smem);
    else
      gemm_wgmma_tile<128>(a.geom.tmaps, in_row0, rr, cc, N, b_row0, k_past, kp, epi, a.y, smem);
  }
}

MET_ENTRY(gemm_bf16_wgmma) { gemm_wgmma_slice(a, slice, smem); }

// The fused-epilogue GEMMs run gemm_bf16_wgmma's code in the loop (kernels/hopper/interp.cu names
// them in MET_INTERP_ENTRY_ALIASES), so the kernel's function keeps one copy of the tile loop.
MET_ENTRY(gemm_silu_bf16_wgmma) { gemm_wgmma_slice(a, slice, smem); }
MET_ENTRY(gemm_gelu_bf16_wgmma) { gemm_wgmma_slice(a, slice, smem); }
MET_ENTRY(gemm_residual_bf16_wgmma) { gemm_wgmma_slice(a, slice, smem); }
MET_ENTRY(moe_gate_up_silu_wgmma) { gemm_wgmma_slice(a, slice, smem); }
MET_ENTRY(moe_down_wgmma) { gemm_wgmma_slice(a, slice, smem); }
#endif  // MET_HAS_WGMMA && MET_HAS_TMA

}  // namespace met_interp
