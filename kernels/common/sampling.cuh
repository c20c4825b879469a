// Greedy argmax over a logits row, and temperature / top-k / top-p sampling by the rule of
// kernels/cpu/sample.hpp, step for step (integer weights, so the block's order cannot change a sum).
#pragma once
#include "common/interp/prims.cuh"

namespace met_interp {

MET_ENTRY(argmax) {
  const SliceRange r = slice_rows(a, slice);
  float* red = reinterpret_cast<float*>(smem);
  const int64_t vocab = a.vocab;
  for (int64_t row = r.begin; row < r.end; ++row) {
    const int t = argmax_block(a.logits + (a.in_row0 + row) * vocab, vocab, red, reinterpret_cast<int*>(red + 32));
    if (threadIdx.x == 0) a.tokens[row] = t;
    __syncthreads();
  }
}

// The rule of kernels/cpu/sample.hpp, step for step: integer weights floor(exp((l - max) / T) *
// 2^24), so every sum is an integer sum and the block's order cannot change it.
__device__ __forceinline__ uint32_t sample_weight(u16 logit, float max, float inv_t) {
  const float l = bf(logit);
  if (!(l > -INFINITY)) return 0;
  return static_cast<uint32_t>(floorf(expf((l - max) * inv_t) * 16777216.0f));
}

__device__ unsigned long long block_sum_u64(unsigned long long v, unsigned long long* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  unsigned long long s = 0;
  for (int w = 0; w < MET_INTERP_WARPS; ++w) s += red[w];
  return s;
}

// Sum of the weights of logits[0, n) that are >= lo and >= t (count instead of weight when count).
__device__ unsigned long long sample_mass(const u16* l, int64_t n, float max, float inv_t, uint32_t lo, uint32_t t, bool count,
                                          unsigned long long* red) {
  unsigned long long acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += MET_INTERP_THREADS) {
    const uint32_t w = sample_weight(l[i], max, inv_t);
    if (w >= lo && w >= t) acc += count ? 1ull : w;
  }
  return block_sum_u64(acc, red);
}

// The largest t in [0, 2^24] whose mass (or count) above it is still >= need.
__device__ uint32_t sample_search(const u16* l, int64_t n, float max, float inv_t, uint32_t lo, unsigned long long need,
                                  bool count, unsigned long long* red) {
  uint32_t a = 0, b = 1u << 24;
  while (a < b) {
    const uint32_t mid = a + (b - a + 1) / 2;
    if (sample_mass(l, n, max, inv_t, lo, mid, count, red) >= need) a = mid;
    else b = mid - 1;
  }
  return a;
}

// params: temperature, top_p, top_k, u per row.
MET_ENTRY(sample) {
  const SliceRange r = slice_rows(a, slice);
  const int64_t vocab = a.vocab;
  float* red_f = reinterpret_cast<float*>(smem);
  unsigned long long* red = reinterpret_cast<unsigned long long*>(smem + 256);
  unsigned long long* scan = red + 64;  // one chunk sum per thread
  for (int64_t row = r.begin; row < r.end; ++row) {
    const float* p = a.params + 4 * row;
    const float temperature = p[0], top_p = p[1], top_k = p[2], u = p[3];
    if (temperature <= 0.f) continue;  // greedy rows read the argmax
    const u16* l = a.logits + (a.in_row0 + row) * vocab;
    const int best = argmax_block(l, vocab, red_f, reinterpret_cast<int*>(red_f + 32));
    const float max = bf(l[best]);
    int token = best;
    if (max > -INFINITY) {
      const float inv_t = 1.0f / temperature;
      uint32_t floor_w = 0;
      const int64_t k = static_cast<int64_t>(top_k);
      if (k >= 1 && k < vocab) floor_w = sample_search(l, vocab, max, inv_t, 0, static_cast<unsigned long long>(k), true, red);
      if (top_p < 1.0f) {
        const unsigned long long total = sample_mass(l, vocab, max, inv_t, floor_w, 0, false, red);
        const auto need = static_cast<unsigned long long>(ceil(static_cast<double>(top_p) * static_cast<double>(total)));
        const uint32_t p_w = sample_search(l, vocab, max, inv_t, floor_w, need, false, red);
        floor_w = floor_w > p_w ? floor_w : p_w;
      }
      // Contiguous chunks per thread, scanned in thread order: index order overall.
      const int64_t chunk = (vocab + MET_INTERP_THREADS - 1) / MET_INTERP_THREADS;
      const int64_t c0 = min(vocab, threadIdx.x * chunk), c1 = min(vocab, c0 + chunk);
      unsigned long long mine = 0;
      for (int64_t i = c0; i < c1; ++i) {
        const uint32_t w = sample_weight(l[i], max, inv_t);
        if (w >= floor_w) mine += w;
      }
      __syncthreads();
      scan[threadIdx.x] = mine;
      __syncthreads();
      if (threadIdx.x == 0) {
        unsigned long long run = 0;
        for (int t = 0; t < MET_INTERP_THREADS; ++t) {
          const unsigned long long v = scan[t];
          scan[t] = run;
          run += v;
        }
        red[0] = run;
      }
      __syncthreads();
      const unsigned long long kept = red[0];
      const auto target = static_cast<unsigned long long>(floor(static_cast<double>(u) * static_cast<double>(kept)));
      const unsigned long long before = scan[threadIdx.x];
      if (mine > 0 && before <= target && target < before + mine) {
        unsigned long long run = before;
        for (int64_t i = c0; i < c1; ++i) {
          const uint32_t w = sample_weight(l[i], max, inv_t);
          if (w < floor_w || w == 0) continue;
          run += w;
          if (run > target) {
            red[1] = static_cast<unsigned long long>(i);
            break;
          }
        }
      }
      __syncthreads();
      if (kept > 0) token = static_cast<int>(red[1]);
    }
    if (threadIdx.x == 0) a.tokens[row] = token;
    __syncthreads();
  }
}

}  // namespace met_interp
