// Tensor Memory Accelerator and mbarrier helpers (sm_90+): 2-D/3-D bulk tensor loads into shared
// memory that complete on an mbarrier transaction count. Used by the hopper wgmma kernels and the
// blackwell tcgen05 kernels; guarded by MET_HAS_TMA.
#pragma once
#include "common/device.cuh"

// Byte image of a CUtensorMap (built on the host by cuTensorMapEncodeTiled and passed by value as
// a __grid_constant__ parameter); declared here so device code does not need the driver header.
struct alignas(64) MetTensorMap {
  unsigned long long opaque[16];
};

#if MET_HAS_TMA
__device__ __forceinline__ uint32_t met_smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void met_mbar_init(uint64_t* bar, int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(met_smem_u32(bar)), "r"(arrivals));
}
// Make mbarrier initialisation visible to the async (TMA / tensor-core) proxy.
__device__ __forceinline__ void met_fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival that also announces `bytes` of incoming TMA traffic for the current phase.
__device__ __forceinline__ void met_mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(met_smem_u32(bar)), "r"(bytes)
               : "memory");
}
// Spin until the phase with parity `phase` has completed.
__device__ __forceinline__ void met_mbar_wait(uint64_t* bar, int phase) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "MET_WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra MET_WAIT_%=;\n"
      "}\n" ::"r"(met_smem_u32(bar)),
      "r"(phase)
      : "memory");
}

// Tile at coordinates (x = innermost, y) of the tensor map into smem; completes on `bar`.
__device__ __forceinline__ void met_tma_load_2d(void* smem, const MetTensorMap* map, int x, int y, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          met_smem_u32(smem)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(met_smem_u32(bar))
      : "memory");
}
__device__ __forceinline__ void met_tma_load_3d(void* smem, const MetTensorMap* map, int x, int y, int z,
                                                uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(met_smem_u32(smem)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(met_smem_u32(bar))
      : "memory");
}
#endif  // MET_HAS_TMA
