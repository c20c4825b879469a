// Warp-level tensor-core helpers for NVIDIA classes: ldmatrix fragment loads, mma.sync m16n8k16
// (bf16 in, fp32 accumulate) and cp.async 16-byte copies. Inline PTX, so everything here sits
// behind MET_HAS_MMA_SYNC / MET_HAS_CP_ASYNC; AMD classes compile it out.
#pragma once
#include "common/device.cuh"

#if MET_HAS_MMA_SYNC
__device__ __forceinline__ uint32_t met_smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 b16 matrices; lane l supplies the row address of matrix l/8, row l%8.
__device__ __forceinline__ void met_ldmatrix_x4(uint32_t r[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(met_smem_addr(smem_row)));
}
__device__ __forceinline__ void met_ldmatrix_x4_trans(uint32_t r[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(met_smem_addr(smem_row)));
}

// d += a (16x16 row-major) * b (16x8 column-major); fp32 accumulators.
__device__ __forceinline__ void met_mma_bf16_16816(float d[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// The same with fp16 operands (the fp8 gemv: e4m3 codes convert exactly to fp16, one instruction
// per two on sm_89 and later).
__device__ __forceinline__ void met_mma_f16_16816(float d[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ uint32_t met_pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (lower column) in the low half
  return *reinterpret_cast<const uint32_t*>(&v);
}

// 16-byte global -> shared copy; `valid` false zero-fills the destination (out-of-bounds tiles).
__device__ __forceinline__ void met_copy16(void* smem, const void* gmem, bool valid) {
#if MET_HAS_CP_ASYNC
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(met_smem_addr(smem)), "l"(gmem),
               "r"(src_bytes));
#else
  *reinterpret_cast<uint4*>(smem) = valid ? *reinterpret_cast<const uint4*>(gmem) : make_uint4(0, 0, 0, 0);
#endif
}
__device__ __forceinline__ void met_copy_commit() {
#if MET_HAS_CP_ASYNC
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
// Wait until at most N committed copy groups are still in flight.
template <int N>
__device__ __forceinline__ void met_copy_wait() {
#if MET_HAS_CP_ASYNC
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}
#else
// Declarations only: shared helpers outside the guards (gemv.cuh's fragment loops) still parse for
// a class without mma.sync; nothing it compiles calls them, so no definition is needed.
__device__ void met_mma_bf16_16816(float d[4], const uint32_t a[4], const uint32_t b[2]);
__device__ void met_mma_f16_16816(float d[4], const uint32_t a[4], const uint32_t b[2]);
__device__ void met_ldmatrix_x4_trans(uint32_t r[4], const void* smem_row);
__device__ uint32_t met_pack_bf16x2(float lo, float hi);
__device__ void met_copy16(void* smem, const void* gmem, bool valid);
__device__ void met_copy_commit();
template <int N>
__device__ void met_copy_wait();
#endif  // MET_HAS_MMA_SYNC
