// Blackwell (sm_100a) prefill/batch GEMMs on 5th-gen tensor cores: C[M, N] = A[M, K] W[N, K]^T.
// A producer thread streams 128-row tiles by TMA into a 4-stage ring, one thread issues
// tcgen05.mma into a 128x128 fp32 accumulator in tensor memory, four warps drain it with tcgen05.ld.
#pragma once
#include "hopper/tma.cuh"

#define MET_TC_BM 128
#define MET_TC_BN 128
#define MET_TC_ROW_BYTES 128  // K bytes per tile row: one 128-byte swizzle atom
#define MET_TC_STAGES 4
#define MET_TC_THREADS 128
#define MET_TC_TMEM_COLS 128          // fp32 accumulator columns (= BN)
#define MET_TC_K_BYTES_PER_MMA 32     // 16 bf16 / 32 fp8 per tcgen05.mma
#define MET_TC_GROUP_BYTES 1024       // 8 rows x 128 B between core-matrix groups
#define MET_TC_DEQUANT_THREADS 64     // warps 2-3 expand nvfp4 weights in the emulated path

// Instruction-descriptor fields (PTX ISA, tcgen05 instruction descriptor for kind::f16 / f8f6f4).
#define MET_IDESC_D_F32 (1u << 4)
#define MET_IDESC_A_SHIFT 7
#define MET_IDESC_B_SHIFT 10
#define MET_IDESC_N_SHIFT 17  // N >> 3
#define MET_IDESC_M_SHIFT 24  // M >> 4
#define MET_IDESC_FMT_BF16 1u  // kind::f16
#define MET_IDESC_FMT_E4M3 0u  // kind::f8f6f4
// Shared-memory descriptor: fixed version bits 46-48 = 0b001, swizzle field bits 61-63 (2 = 128 B).
#define MET_TC_DESC_VERSION (1ull << 46)
#define MET_TC_DESC_SWIZZLE_128B (2ull << 61)

#define MET_TC_KIND_BF16 0
#define MET_TC_KIND_FP8 1
#define MET_TC_KIND_NVFP4_EMU 2  // nvfp4 weights expanded exactly to bf16 in shared memory

__host__ __device__ constexpr int met_gemm_tcgen05_smem_bytes() {
  return MET_TC_STAGES * (MET_TC_BM + MET_TC_BN) * MET_TC_ROW_BYTES + 2 * MET_TC_STAGES * 8 + 16 + MET_TC_GROUP_BYTES;
}

#if MET_HAS_TCGEN05
__device__ __forceinline__ uint64_t met_tc_desc(const void* smem) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<uint64_t>((addr & 0x3ffff) >> 4) | (static_cast<uint64_t>(16 >> 4) << 16) |
         (static_cast<uint64_t>(MET_TC_GROUP_BYTES >> 4) << 32) | MET_TC_DESC_VERSION | MET_TC_DESC_SWIZZLE_128B;
}

__device__ __forceinline__ uint32_t met_tc_idesc(uint32_t fmt) {
  return MET_IDESC_D_F32 | (fmt << MET_IDESC_A_SHIFT) | (fmt << MET_IDESC_B_SHIFT) |
         (static_cast<uint32_t>(MET_TC_BN >> 3) << MET_IDESC_N_SHIFT) |
         (static_cast<uint32_t>(MET_TC_BM >> 4) << MET_IDESC_M_SHIFT);
}

template <int KIND>
__device__ __forceinline__ void met_tc_mma(uint32_t tmem_d, uint64_t da, uint64_t db, uint32_t idesc, int accumulate) {
  if constexpr (KIND == MET_TC_KIND_FP8) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
        "tcgen05.mma.cta_group::1.kind::f8f6f4 [%0], %1, %2, %3, p;\n}\n" ::"r"(tmem_d),
        "l"(da), "l"(db), "r"(idesc), "r"(accumulate));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
        "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n}\n" ::"r"(tmem_d),
        "l"(da), "l"(db), "r"(idesc), "r"(accumulate));
  }
}

// Arrive on `bar` once every tcgen05.mma issued so far by this thread has completed.
__device__ __forceinline__ void met_tc_commit(uint64_t* bar) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];\n" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(bar)))
               : "memory");
}

__device__ __forceinline__ void met_mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(bar)))
               : "memory");
}

// Expand a 128 x 64 nvfp4 weight tile (rows n0.., columns k0..) to bf16 in the 128-byte-swizzled
// K-major layout TMA would have produced: 16-byte chunk c of row r lives at chunk c ^ (r % 8).
__device__ __forceinline__ void met_tc_dequant_nvfp4(unsigned char* dst, const MetWeight& w, int n0, int k0, int N,
                                                     int K, int tid) {
  constexpr int kChunks = MET_TC_ROW_BYTES / 16;  // 8 bf16 per chunk
  for (int c = tid; c < MET_TC_BN * kChunks; c += MET_TC_DEQUANT_THREADS) {
    const int r = c / kChunks, ch = c % kChunks, k = k0 + ch * 8;
    float v[MET_GEMV_VEC] = {};
    if (n0 + r < N && k < K) met_load_weights(w, n0 + r, K, k, v);
    uint4 packed;
    uint32_t* p = reinterpret_cast<uint32_t*>(&packed);
    for (int i = 0; i < 4; ++i) {
      const __nv_bfloat162 b = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
      p[i] = *reinterpret_cast<const uint32_t*>(&b);
    }
    *reinterpret_cast<uint4*>(dst + r * MET_TC_ROW_BYTES + ((ch ^ (r % 8)) * 16)) = packed;
  }
}

template <int KIND>
__device__ __forceinline__ void met_tc_gemm_body(const MetTensorMap* a_map, const MetTensorMap* w_map,
                                                 const MetWeight* w_q, float scale, met_bf16* C, const met_bf16* resid,
                                                 int M, int N, int K) {
  constexpr int kTile = MET_TC_BM * MET_TC_ROW_BYTES;
  constexpr int kElemBytes = KIND == MET_TC_KIND_FP8 ? 1 : 2;
  constexpr int kBK = MET_TC_ROW_BYTES / kElemBytes;
  extern __shared__ __align__(1024) unsigned char met_tc_smem[];
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(met_tc_smem) + MET_TC_GROUP_BYTES - 1) & ~uintptr_t(MET_TC_GROUP_BYTES - 1));
  unsigned char* a_s = base;
  unsigned char* b_s = a_s + MET_TC_STAGES * kTile;
  uint64_t* full = reinterpret_cast<uint64_t*>(b_s + MET_TC_STAGES * kTile);
  uint64_t* empty = full + MET_TC_STAGES;
  uint64_t* done = empty + MET_TC_STAGES;
  uint32_t* tmem_slot = reinterpret_cast<uint32_t*>(done + 1);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int m0 = blockIdx.y * MET_TC_BM, n0 = blockIdx.x * MET_TC_BN;
  const int kt_count = (K + kBK - 1) / kBK;
  constexpr bool kDequant = KIND == MET_TC_KIND_NVFP4_EMU;

  if (threadIdx.x == 0) {
    for (int s = 0; s < MET_TC_STAGES; ++s) {
      met_mbar_init(&full[s], 1 + (kDequant ? MET_TC_DEQUANT_THREADS : 0));
      met_mbar_init(&empty[s], 1);
    }
    met_mbar_init(done, 1);
    met_fence_barrier_init();
  }
  if (warp == 0) {  // the whole warp allocates the accumulator's tensor-memory columns
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;\n" ::"r"(
                     static_cast<uint32_t>(__cvta_generic_to_shared(tmem_slot))),
                 "r"(MET_TC_TMEM_COLS));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n");
  }
  asm volatile("tcgen05.fence::before_thread_sync;\n");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;\n");
  const uint32_t tmem = *tmem_slot;

  if (warp == 0 && lane == 0) {  // producer
    for (int kt = 0; kt < kt_count; ++kt) {
      const int s = kt % MET_TC_STAGES;
      if (kt >= MET_TC_STAGES) met_mbar_wait(&empty[s], ((kt / MET_TC_STAGES) - 1) & 1);
      met_mbar_expect_tx(&full[s], kDequant ? kTile : 2 * kTile);
      met_tma_load_2d(a_s + s * kTile, a_map, kt * kBK, m0, &full[s]);
      if (!kDequant) met_tma_load_2d(b_s + s * kTile, w_map, kt * kBK, n0, &full[s]);
    }
  } else if (warp == 1 && lane == 0) {  // MMA issuer
    const uint32_t idesc = met_tc_idesc(KIND == MET_TC_KIND_FP8 ? MET_IDESC_FMT_E4M3 : MET_IDESC_FMT_BF16);
    for (int kt = 0; kt < kt_count; ++kt) {
      const int s = kt % MET_TC_STAGES;
      met_mbar_wait(&full[s], (kt / MET_TC_STAGES) & 1);
      asm volatile("tcgen05.fence::after_thread_sync;\n");
#pragma unroll
      for (int kk = 0; kk < MET_TC_ROW_BYTES / MET_TC_K_BYTES_PER_MMA; ++kk)
        met_tc_mma<KIND>(tmem, met_tc_desc(a_s + s * kTile + kk * MET_TC_K_BYTES_PER_MMA),
                         met_tc_desc(b_s + s * kTile + kk * MET_TC_K_BYTES_PER_MMA), idesc, kt > 0 || kk > 0);
      met_tc_commit(&empty[s]);  // stage s may be refilled once these MMAs have read it
    }
    met_tc_commit(done);
  } else if (kDequant && warp >= 2) {  // nvfp4 weights: exact expansion into the B stage
    const int tid = threadIdx.x - 64;
    for (int kt = 0; kt < kt_count; ++kt) {
      const int s = kt % MET_TC_STAGES;
      if (kt >= MET_TC_STAGES) met_mbar_wait(&empty[s], ((kt / MET_TC_STAGES) - 1) & 1);
      met_tc_dequant_nvfp4(b_s + s * kTile, *w_q, n0, kt * kBK, N, K, tid);
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic writes -> tensor-core reads
      met_mbar_arrive(&full[s]);
    }
  }
  __syncwarp();
  met_mbar_wait(done, 0);
  asm volatile("tcgen05.fence::after_thread_sync;\n");

  // Warp w reads TMEM lanes 32w..32w+31 (= rows), 16 fp32 columns per tcgen05.ld.
  const int row = m0 + 32 * warp + lane;
  for (int c0 = 0; c0 < MET_TC_BN; c0 += 16) {
    uint32_t v[16];
    const uint32_t taddr = tmem + (static_cast<uint32_t>(32 * warp) << 16) + c0;
    asm volatile(
        "tcgen05.ld.sync.aligned.32x32b.x16.b32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "
        "%15}, [%16];\n"
        : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]), "=r"(v[4]), "=r"(v[5]), "=r"(v[6]), "=r"(v[7]),
          "=r"(v[8]), "=r"(v[9]), "=r"(v[10]), "=r"(v[11]), "=r"(v[12]), "=r"(v[13]), "=r"(v[14]), "=r"(v[15])
        : "r"(taddr));
    asm volatile("tcgen05.wait::ld.sync.aligned;\n" ::: "memory");
    if (row < M) {
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const int col = n0 + c0 + j;
        if (col >= N) continue;
        const long idx = static_cast<long>(row) * N + col;
        C[idx] = met_from_float(__uint_as_float(v[j]) * scale + (resid ? met_to_float(resid[idx]) : 0.f));
      }
    }
  }
  asm volatile("tcgen05.fence::before_thread_sync;\n");
  __syncthreads();
  if (warp == 0)
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;\n" ::"r"(tmem), "r"(MET_TC_TMEM_COLS));
}
#endif  // MET_HAS_TCGEN05

#if MET_HAS_TCGEN05
// a_map / w_map: A [M, K] and W [N, K] bf16, box {64, 128}, SWIZZLE_128B. grid (ceil(N/128),
// ceil(M/128)), block 128, dynamic smem met_gemm_tcgen05_smem_bytes().
extern "C" __global__ void met_gemm_bf16_tcgen05(const __grid_constant__ MetTensorMap a_map, const __grid_constant__ MetTensorMap w_map, met_bf16* C, const met_bf16* resid, int M, int N, int K) {
  met_tc_gemm_body<MET_TC_KIND_BF16>(&a_map, &w_map, nullptr, 1.f, C, resid, M, N, K);
}
#endif  // MET_HAS_TCGEN05

#if MET_HAS_TCGEN05 && MET_HAS_FP8_MMA
// fp8-e4m3 x fp8-e4m3: A and W e4m3 [*, K] bytes, box {128, 128}; C = acc * a_scale * w_scale.
extern "C" __global__ void met_gemm_fp8_tcgen05(const __grid_constant__ MetTensorMap a_map, const __grid_constant__ MetTensorMap w_map, float a_scale, float w_scale, met_bf16* C, const met_bf16* resid, int M, int N, int K) {
  met_tc_gemm_body<MET_TC_KIND_FP8>(&a_map, &w_map, nullptr, a_scale * w_scale, C, resid, M, N, K);
}
#endif  // MET_HAS_TCGEN05 && MET_HAS_FP8_MMA

#if MET_HAS_TCGEN05 && MET_HAS_FP4_MMA
// nvfp4 weights x bf16 activations (exact emulation, math bf16): A by TMA (bf16, box {64, 128}),
// W read as MetWeight (MET_WFMT_NVFP4) and expanded to bf16 per stage by warps 2-3. K % 16 == 0.
extern "C" __global__ void met_gemm_nvfp4_tcgen05(const __grid_constant__ MetTensorMap a_map, MetWeight w, met_bf16* C, const met_bf16* resid, int M, int N, int K) {
  met_tc_gemm_body<MET_TC_KIND_NVFP4_EMU>(&a_map, nullptr, &w, 1.f, C, resid, M, N, K);
}
#endif  // MET_HAS_TCGEN05 && MET_HAS_FP4_MMA
