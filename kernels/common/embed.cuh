// Row gathers: the token embedding (rows of the bf16 table into the activations) and the prefill
// head's rows (rows of the activations, gather_rows), 16 bytes per thread where rows allow it.
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

// out[r] = x[index[r]] (an index outside x reads row 0), as kernels/cpu/embed.hpp: a copy, so the
// two agree bit for bit.
MET_ENTRY(gather_rows) {
  const SliceRange r = slice_rows(a, slice);
  const int64_t width = a.width;
  for (int64_t row = r.begin; row < r.end; ++row) {
    const int64_t i = a.index[row];
    const int64_t from = i >= 0 && i < a.src_rows ? i : 0;
    const u16* src = a.x + from * width;
    u16* dst = a.out + row * width;
    if (width % 8 == 0) {
      for (int64_t c = threadIdx.x; c < width / 8; c += MET_INTERP_THREADS)
        reinterpret_cast<uint4*>(dst)[c] = reinterpret_cast<const uint4*>(src)[c];
    } else {
      for (int64_t c = threadIdx.x; c < width; c += MET_INTERP_THREADS) dst[c] = src[c];
    }
  }
}

}  // namespace met_interp
