// Token embedding gather: out[r] = table[ids[r]] (bf16 [vocab, dim]); one block per row, 16-byte
// copies when dim allows. Memory family; ids outside the vocabulary produce a zero row.
#pragma once
#include "common/device.cuh"

extern "C" __global__ void met_embed(const int* ids, const met_bf16* table, met_bf16* out, int rows, int vocab,
                                     int dim) {
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    const int id = ids[r];
    met_bf16* dst = out + static_cast<long>(r) * dim;
    if (id < 0 || id >= vocab) {
      for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = met_from_float(0.f);
      continue;
    }
    const met_bf16* src = table + static_cast<long>(id) * dim;
    if (dim % MET_GEMV_VEC == 0) {
      for (int i = threadIdx.x; i < dim / MET_GEMV_VEC; i += blockDim.x)
        reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
    } else {
      for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = src[i];
    }
  }
}
