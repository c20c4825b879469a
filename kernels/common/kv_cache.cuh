// KV append: the k and v columns of each qkv row copied to the cache at that row's slot.
#pragma once
#include "common/interp/prims.cuh"

namespace met_interp {

MET_ENTRY(kv_append) {
  const SliceRange r = slice_rows(a, slice);
  const int64_t kw = a.kv_heads * a.head_dim, vw = a.kv_heads * a.v_head_dim;
  const int64_t stride = a.stride, k0 = a.k_col0, v0 = a.v_col0;
  // Every thread takes (row, 16-byte chunk) pairs across all rows, so a prefill's thousands of
  // rows move at the SM's bandwidth; odd widths or offsets fall back to 2-byte copies.
  const bool vec = kw % 8 == 0 && vw % 8 == 0 && stride % 8 == 0 && k0 % 8 == 0 && v0 % 8 == 0;
  const int64_t kc_n = vec ? kw / 8 : kw, vc_n = vec ? vw / 8 : vw, per_row = kc_n + vc_n;
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
