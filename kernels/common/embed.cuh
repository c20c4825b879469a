// Token embedding: rows of the bf16 table gathered into the activations, 16 bytes per thread.
#pragma once
#include "common/interp/prims.cuh"

namespace met_interp {

MET_ENTRY(embed) {
  const SliceRange r = slice_rows(a, slice);
  const int* tokens = a.tokens + a.in_row0;
  const int64_t dim = a.geom.w_cols, chunks = dim / 8;
  for (int64_t row = r.begin; row < r.end; ++row) {
    const int64_t tok = tokens[row];
    const uint4* src = reinterpret_cast<const uint4*>(a.table + tok * dim);
    uint4* dst = reinterpret_cast<uint4*>(a.out + row * dim);
    for (int64_t c = threadIdx.x; c < chunks; c += MET_INTERP_THREADS) dst[c] = load_weight16(src + c);
  }
}

}  // namespace met_interp
