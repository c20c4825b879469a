// Portable device helpers the op bodies share: the bf16 type headers, the warp width, and warp
// shuffles and reductions (the CUDA subset HIP accepts; NVIDIA-only code lives behind guards in the
// bodies that need it).
#pragma once

#if defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_bf16.h>
#include <hip/hip_runtime.h>
#define MET_WARP 64  // CDNA wavefront width
#else
#include <cuda_bf16.h>
#include <stdint.h>
#define MET_WARP 32
#endif

__device__ __forceinline__ float met_shfl_xor(float v, int mask) {
#if defined(__HIP_PLATFORM_AMD__)
  return __shfl_xor(v, mask);
#else
  return __shfl_xor_sync(0xffffffffu, v, mask);
#endif
}

// Butterfly reductions over the whole warp: every lane ends with the result.
__device__ __forceinline__ float met_warp_reduce(float v) {
  for (int m = MET_WARP / 2; m > 0; m >>= 1) v += met_shfl_xor(v, m);
  return v;
}
__device__ __forceinline__ float met_warp_reduce_max(float v) {
  for (int m = MET_WARP / 2; m > 0; m >>= 1) v = fmaxf(v, met_shfl_xor(v, m));
  return v;
}
