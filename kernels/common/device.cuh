// Portable device helpers the op bodies share: the bf16 type headers, the warp width, and warp
// shuffles and reductions (the CUDA subset HIP accepts; NVIDIA-only code lives behind guards in the
// bodies that need it). On AMD the CUDA spellings come from common/hip_device.h, where a 64-lane
// wavefront runs two 32-lane warps.
#pragma once

#if defined(__HIP_PLATFORM_AMD__)
#include "common/hip_device.h"
#define MET_WAVE 64  // CDNA wavefront width: what the matrix cores work on
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#define MET_WAVE 32
#endif
#define MET_WARP 32  // lanes of a warp of the shared bodies, on every vendor

__device__ __forceinline__ float met_shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }

// Butterfly reductions over the whole warp: every lane ends with the result.
__device__ __forceinline__ float met_warp_reduce(float v) {
  for (int m = MET_WARP / 2; m > 0; m >>= 1) v += met_shfl_xor(v, m);
  return v;
}
__device__ __forceinline__ float met_warp_reduce_max(float v) {
  for (int m = MET_WARP / 2; m > 0; m >>= 1) v = fmaxf(v, met_shfl_xor(v, m));
  return v;
}
