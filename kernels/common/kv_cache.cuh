// KV append: copies the step's K [rows, kv_heads, head_dim] and V [rows, kv_heads, v_head_dim]
// into the per-sequence cache at each row's position (slot = sequence's cache slot). Memory family.
#pragma once
#include "common/device.cuh"

extern "C" __global__ void met_kv_append(const met_bf16* k, const met_bf16* v, MetKvCache cache,
                                         const int* positions, const int* slots, int rows) {
  const int kd = cache.head_dim, vd = cache.v_head_dim;
  for (long t = blockIdx.x; t < static_cast<long>(rows) * cache.kv_heads; t += gridDim.x) {
    const int r = static_cast<int>(t / cache.kv_heads), h = static_cast<int>(t % cache.kv_heads);
    met_bf16* kdst = cache.k + met_kv_offset(cache, slots[r], h, positions[r], kd);
    met_bf16* vdst = cache.v + met_kv_offset(cache, slots[r], h, positions[r], vd);
    for (int d = threadIdx.x; d < kd; d += blockDim.x) kdst[d] = k[t * kd + d];
    for (int d = threadIdx.x; d < vd; d += blockDim.x) vdst[d] = v[t * vd + d];
  }
}
