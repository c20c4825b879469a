// Greedy sampling: argmax over each row's logits (bf16 [rows, vocab]), one block per row, ties to
// the lowest token id so the result is deterministic. Memory family.
#pragma once
#include "common/device.cuh"

extern "C" __global__ void met_argmax(const met_bf16* logits, int rows, int vocab, int* out_ids) {
  __shared__ float best_v[MET_BLOCK / 32];
  __shared__ int best_i[MET_BLOCK / 32];
  const int warp = threadIdx.x / MET_WARP, lane = threadIdx.x % MET_WARP;
  const int nwarps = (blockDim.x + MET_WARP - 1) / MET_WARP;
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    const met_bf16* l = logits + static_cast<long>(r) * vocab;
    float v = -INFINITY;
    int idx = 0x7fffffff;  // sentinel id: loses every tie
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
      const float x = met_to_float(l[i]);
      if (x > v) { v = x; idx = i; }
    }
    met_warp_argmax(v, idx);
    __syncthreads();
    if (lane == 0) { best_v[warp] = v; best_i[warp] = idx; }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < nwarps; ++w)
        if (best_v[w] > v || (best_v[w] == v && best_i[w] < idx)) { v = best_v[w]; idx = best_i[w]; }
      out_ids[r] = idx;
    }
  }
}
