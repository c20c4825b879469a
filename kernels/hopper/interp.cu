// The hopper class's persistent interpreter (nvcc, sm_90a; loaded by met through the CUDA driver
// API): the class chain's op bodies, then the shared loop (common/interp/loop.cuh). The sources
// and defines are the chain's (`met circuit kernels --hardware h200-sxm --build`); a ctest holds
// the entry points of this image equal to the ones avail reports for the class.
#define MET_HAS_MMA_SYNC 1
#define MET_HAS_CP_ASYNC 1
#define MET_HAS_WGMMA 1
#define MET_HAS_TMA 1
#define MET_HAS_FP8_MMA 1
#define MET_HAS_NCCL_DEVICE 1
#include "common/attention_decode.cuh"
#include "common/collective.cuh"
#include "common/device.cuh"
#include "common/elementwise.cuh"
#include "common/embed.cuh"
#include "common/flash_prefill_mma.cuh"
#include "common/gemm_mma.cuh"
#include "common/gemv.cuh"
#include "common/kv_cache.cuh"
#include "common/mma_sync.cuh"
#include "common/moe.cuh"
#include "common/moe_mma.cuh"
#include "common/sampling.cuh"
#include "hopper/flash_prefill_wgmma.cuh"
#include "hopper/gemm_wgmma.cuh"
#include "hopper/sm90.cuh"
// wgmma bodies run in the kernel's own function (common/interp/loop.cuh says why).
#define MET_INTERP_ENTRY_BODIES(X) X(gemm_bf16_wgmma) X(flash_prefill_wgmma)
#define MET_INTERP_ENTRY_ALIASES(X) \
  X(gemm_silu_bf16_wgmma, gemm_bf16_wgmma) X(gemm_gelu_bf16_wgmma, gemm_bf16_wgmma) X(gemm_residual_bf16_wgmma, gemm_bf16_wgmma) \
  X(moe_gate_up_silu_wgmma, gemm_bf16_wgmma) X(moe_down_wgmma, gemm_bf16_wgmma)
#include "common/interp/loop.cuh"

MET_INTERP_KERNEL(metinterp_hopper)
