// Prefill GEMM body of the hopper interpreter on the warpgroup tensor cores: one slice is one
// output tile of at most 128 rows x 128 columns of y = x W^T (bf16 in, fp32 accumulate, bf16 out),
// the tiles emit cuts for every GEMM (kernels/common/interp/smem.h).
//
// Loads: TMA. The host makes two tensor maps per instruction at load time (A: the activation rows
// [in_row0 + rows, K]; B: the weight [N, K]; boxes of 128 rows x 64 bf16 with the 128-byte
// swizzle, src/interp/cuda_backend.cpp) and passes their address in the instruction
// (MetDevInstr.tmaps). Rows past the tensor arrive as zeros.
//
// Pipeline: MET_WGMMA_STAGES stages of an A and a B tile, each with a full barrier (TMA's bytes
// land) and an empty one (all 8 warps are done reading). The interpreter's block is 256 threads,
// two warpgroups, and both compute (64 rows x 128 columns each, wgmma m64n128k16); the producer is
// one elected thread (thread 0), which refills the stage read two K steps earlier, so it waits on
// a barrier that is already complete unless a warpgroup fell more than a step behind.
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
__device__ __forceinline__ void gemm_wgmma_tile(const void* tmaps, int64_t in_row0, SliceRange rr, SliceRange cc, int64_t N,
                                             int64_t K, u16* Y, unsigned char* smem) {
  using namespace met_sm90;
  constexpr int kStages = MET_WGMMA_STAGES, kBK = MET_WGMMA_BK;
  constexpr uint32_t kTile = MET_WGMMA_TILE_BYTES;  // one A or B stage tile: 128 rows x 128 bytes
  const int64_t M = rr.end - rr.begin, Nt = cc.end - cc.begin;
  const char* tmap_a = static_cast<const char*>(tmaps);
  const char* tmap_b = tmap_a + MET_TMAP_BYTES;

  // Stage s: A at tiles + 2 s kTile, B after it; barriers after the last stage.
  const uint32_t base = smem_addr(smem);
  const uint32_t tiles = (base + kSwizzleRepeat - 1) & ~(kSwizzleRepeat - 1);
  const uint32_t bars = tiles + kStages * 2 * kTile;
  auto full = [&](int s) { return bars + 8u * static_cast<uint32_t>(s); };
  auto empty = [&](int s) { return bars + 8u * static_cast<uint32_t>(kStages + s); };
  const int kt_count = static_cast<int>(K / kBK);
  const int row_a = static_cast<int>(in_row0 + rr.begin), row_b = static_cast<int>(cc.begin);
  auto issue = [&](int kt) {  // thread 0: the copies of K step kt into its stage
    const int s = kt % kStages;
    mbar_arrive_expect(full(s), 2 * kTile);
    tma_load_2d(tiles + 2 * s * kTile, tmap_a, kt * kBK, row_a, full(s));
    tma_load_2d(tiles + (2 * s + 1) * kTile, tmap_b, kt * kBK, row_b, full(s));
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
  float d[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) d[i] = 0.f;
#pragma unroll 1
  for (int kt = 0; kt < kt_count; ++kt) {
    const int s = kt % kStages;
    mbar_wait(full(s), static_cast<uint32_t>((kt / kStages) & 1));
    const u64 da = tile_desc(tiles + 2 * s * kTile + wg * 64 * kRowBytes), db = tile_desc(tiles + (2 * s + 1) * kTile);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < kBK / 16; ++k) wgmma_m64n128k16(d, da + k * kDescKStep, db + k * kDescKStep);
    wgmma_commit();
    wgmma_wait<1>();  // step kt - 1's products are done: its stage may be refilled
    if (kt >= 1 && lane == 0) mbar_arrive(empty((kt - 1) % kStages));
    if (threadIdx.x == 0 && kt >= 2 && kt - 2 + kStages < kt_count) {
      const int old = kt - 2;
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

  // Epilogue: bf16 pairs straight from the accumulator fragment (sm90.cuh).
  const int t = threadIdx.x % 128;
#pragma unroll
  for (int i = 0; i < 64; i += 2) {
    const int64_t row = wg * 64 + 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2);
    const int64_t col = 8 * (i / 4) + 2 * (t % 4);
    if (row >= M || col >= Nt) continue;
    u16* y = Y + (rr.begin + row) * N + cc.begin + col;
    if (col + 1 < Nt && (reinterpret_cast<uintptr_t>(y) & 3) == 0) {
      *reinterpret_cast<uint32_t*>(y) = met_pack_bf16x2(d[i], d[i + 1]);
    } else {
      y[0] = to_bf(d[i]);
      if (col + 1 < Nt) y[1] = to_bf(d[i + 1]);
    }
  }
}

MET_ENTRY(gemm_bf16_wgmma) {
  const SliceRange rr = slice_rows(a, slice);
  const int64_t N = a.geom.w_rows;
  const SliceRange cc = slice_cols(a, slice, N);
  if (rr.end <= rr.begin || cc.end <= cc.begin) return;
  gemm_wgmma_tile(a.geom.tmaps, a.in_row0, rr, cc, N, a.geom.w_cols, a.y, smem);
}
#endif  // MET_HAS_WGMMA && MET_HAS_TMA

}  // namespace met_interp
