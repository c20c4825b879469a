// KV append: the k and v columns of each qkv row copied to the cache at that row's slot.
#pragma once
#include "common/interp/prims.cuh"
#include "common/mma_sync.cuh"

namespace met_interp {

MET_ENTRY(kv_append) {
  const SliceRange r = slice_rows(a, slice);
  const int64_t kw = a.kv_heads * a.head_dim, vw = a.kv_heads * a.v_head_dim;
  const int64_t stride = a.stride, k0 = a.k_col0, v0 = a.v_col0;
  // Every thread takes (row, 16-byte chunk) pairs across all rows, so a prefill's thousands of
  // rows move at the SM's bandwidth; odd widths or offsets fall back to 2-byte copies.
  const bool vec = kw % 8 == 0 && vw % 8 == 0 && stride % 8 == 0 && k0 % 8 == 0 && v0 % 8 == 0;
  const int64_t kc_n = vec ? kw / 8 : kw, vc_n = vec ? vw / 8 : vw, per_row = kc_n + vc_n;
#if MET_HAS_CP_ASYNC
  // Where the class has cp.async, a thread's 16-byte words go through slots of its own in shared
  // memory, that many copies in flight, each stored to the cache once it has landed and its slot
  // refilled; the rows' cache slots are read once into shared memory beside them. The loop below,
  // one word per thread at a time from global memory to global memory, is a chain of memory
  // latencies: about 31 for a slice of 31 rows (0.66 ms of a Qwen3-0.6B prefill of 4096 on the
  // H200, for 0.5 GB moved); with each word's slot read from global memory after its copy landed,
  // the staged copy was still a latency a word. Staged, a slice of 1 to 4 words a thread (prefill
  // of 128 and 512 rows) took longer than the loop; from 15 words a thread (4096 rows) it took
  // 0.6 to 0.7 of the loop's time (one H100, perf-data/h100-sxm/20261207T0900Z-prefill-elementwise).
  // So the staging takes slices that fill every slot at least once, of at most kRowsMax rows and of
  // fewer words than 32-bit indices hold (their divisions take a few instructions); others the loop.
  constexpr int64_t kRowsMax = 512;
  constexpr uint32_t slots = (MET_GEMV_FIXED_SMEM - kRowsMax * 8) / (MET_INTERP_THREADS * 16);
  static_assert(slots >= 2, "kv_append's slots must fit the shared memory every program launches with");
  const int64_t rows = r.end - r.begin, total = rows * per_row;
  if (vec && total >= static_cast<int64_t>(slots) * MET_INTERP_THREADS && rows <= kRowsMax &&
      total + 16 * MET_INTERP_THREADS <= static_cast<int64_t>(0xffffffffu)) {
    uint4* mine = reinterpret_cast<uint4*>(smem) + threadIdx.x;  // slot j at mine[j * MET_INTERP_THREADS]
    int64_t* row_slot = reinterpret_cast<int64_t*>(smem + slots * MET_INTERP_THREADS * 16);
    const uint32_t n = static_cast<uint32_t>(total), per = static_cast<uint32_t>(per_row), kc = static_cast<uint32_t>(kc_n);
    auto src = [&](uint32_t w) {
      const uint32_t row = w / per, c = w - row * per;
      const u16* base = a.qkv + (r.begin + row) * stride;
      return c < kc ? reinterpret_cast<const uint4*>(base + k0) + c : reinterpret_cast<const uint4*>(base + v0) + (c - kc);
    };
    uint32_t issued = threadIdx.x, at = 0;  // the next word to copy; the slot of the oldest copy
    for (uint32_t j = 0; j < slots; ++j, issued += MET_INTERP_THREADS) {  // every slot filling
      if (issued < n) met_copy16(mine + j * MET_INTERP_THREADS, src(issued), true);
      met_copy_commit();
    }
    for (int64_t i = threadIdx.x; i < rows; i += MET_INTERP_THREADS) row_slot[i] = a.slots[r.begin + i];
    __syncthreads();
    for (uint32_t w = threadIdx.x; w < n; w += MET_INTERP_THREADS, issued += MET_INTERP_THREADS) {
      const uint32_t row = w / per, c = w - row * per;
      const int64_t slot = row_slot[row];
      met_copy_wait<slots - 1>();  // word w's copy (the oldest) has landed
      const uint4 val = mine[at * MET_INTERP_THREADS];
      asm volatile("" ::: "memory");  // the slot is read before the next copy may refill it
      if (c < kc)
        reinterpret_cast<uint4*>(a.k_cache + slot * kw)[c] = val;
      else
        reinterpret_cast<uint4*>(a.v_cache + slot * vw)[c - kc] = val;
      if (issued < n) met_copy16(mine + at * MET_INTERP_THREADS, src(issued), true);
      met_copy_commit();
      at = at + 1 == slots ? 0 : at + 1;
    }
    met_copy_wait<0>();
    return;
  }
#endif
  for (int64_t i = threadIdx.x; i < (r.end - r.begin) * per_row; i += MET_INTERP_THREADS) {
    const int64_t row = r.begin + i / per_row, c = i % per_row;
    const u16* base = a.qkv + row * stride;
    const int64_t slot = a.slots[row];
    const bool is_k = c < kc_n;
    const int64_t e = is_k ? c : c - kc_n;
    const u16* src = base + (is_k ? k0 : v0);
    u16* dst = is_k ? a.k_cache + slot * kw : a.v_cache + slot * vw;
    if (vec)
      reinterpret_cast<uint4*>(dst)[e] = reinterpret_cast<const uint4*>(src)[e];
    else
      dst[e] = src[e];
  }
}

}  // namespace met_interp
