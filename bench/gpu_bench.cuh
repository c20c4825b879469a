// What the GPU microbenchmarks (bench/*.cu, built with nvcc on the device machine) share: the CUDA
// error check, a bulk copy, a ring's barriers and CUDA-event timing.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "hopper/sm90.cuh"

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

namespace met_bench {

// `bytes` from global memory at `src` to shared memory at `dst`, completing on barrier `bar`.
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst), "l"(src),
               "r"(bytes), "r"(bar)
               : "memory");
}

// Thread 0 sets up a ring of S stages: full barrier s at full + 8 s (one arrival, the producer's
// expect), empty barrier s at empty + 8 s (`consumers` arrivals). The caller's barrier follows.
__device__ __forceinline__ void ring_init(uint32_t full, uint32_t empty, int S, int consumers) {
  if (threadIdx.x != 0) return;
  for (int s = 0; s < S; ++s) {
    met_sm90::mbar_init(full + 8 * s, 1);
    met_sm90::mbar_init(empty + 8 * s, consumers);
  }
  met_sm90::mbar_init_fence();
}

// The median CUDA-event time in ms of `reps` calls of launch() after `warm` untimed ones.
template <class F>
float median_ms(int warm, int reps, F&& launch) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < warm + reps; ++i) {
    CK(cudaEventRecord(a));
    launch();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    CK(cudaGetLastError());
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (i >= warm) t.push_back(ms);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace met_bench
