// sm_90a primitives of the hopper bodies and the device probe: warpgroup MMA (wgmma) on shared
// memory tiles, the transaction barriers (mbarrier) that TMA completes, and TMA's tiled bulk copy.
// PTX ISA 8.x names; every function is one instruction or a wait loop around one.
//
// Tile layout: K-major, rows of 64 bf16 (128 bytes), the 128-byte swizzle (16-byte chunk c of row
// r lands at chunk c ^ (r mod 8)), 8-row groups 1024 bytes apart, every tile starting on a
// 1024-byte boundary. TMA writes it (CU_TENSOR_MAP_SWIZZLE_128B, a box 64 elements wide) and
// wgmma reads it through tile_desc.
#pragma once
#include <stdint.h>

namespace met_sm90 {

typedef unsigned long long u64;

constexpr uint32_t kSwizzleRepeat = 1024;  // bytes: 8 rows of 128
constexpr uint32_t kRowBytes = 128;        // one tile row: 64 bf16

// Matrix descriptor of a K-major tile with the 128-byte swizzle: start address (bits 0-13, >> 4),
// leading-dimension byte offset (bits 16-29; unused for a swizzled K-major tile whose K per wgmma,
// 32 bytes, lies inside one 128-byte row: 1 by convention), stride-dimension byte offset (bits
// 32-45: the 8-row groups are 1024 bytes apart), base offset 0 (bits 49-51: tiles start on the
// swizzle's 1024-byte repeat), swizzle mode 1 = 128 bytes (bits 62-63). One K step of 16 bf16 is
// 32 bytes along the row: add kDescKStep to the descriptor.
__device__ __forceinline__ u64 tile_desc(uint32_t smem_addr) {
  return static_cast<u64>((smem_addr & 0x3FFFFu) >> 4) | (static_cast<u64>(1) << 16) |
         (static_cast<u64>(kSwizzleRepeat >> 4) << 32) | (static_cast<u64>(1) << 62);
}
constexpr u64 kDescKStep = 32 >> 4;

// Byte offset of 16-byte chunk c (elements 8c .. 8c + 7) of row r in such a tile.
__device__ __forceinline__ uint32_t swizzled(int r, int c) {
  return static_cast<uint32_t>(r * kRowBytes + ((c ^ (r & 7)) << 4));
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
// The value, through an instruction the compiler may not move: what is computed from it stays
// where it is written (a loop-invariant address recomputed per step instead of held in registers).
__device__ __forceinline__ uint32_t opaque(uint32_t v) {
  asm volatile("mov.b32 %0, %0;" : "+r"(v));
  return v;
}

// ---- wgmma ---------------------------------------------------------------------------------------
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// The registers of an accumulator the compiler must treat as written here: after a wgmma_wait, so
// that no arithmetic on them is scheduled before the wait (they are the asynchronous result).
template <int N>
__device__ __forceinline__ void fence_operands(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int M, int N>
__device__ __forceinline__ void fence_operands(float (&r)[M][N]) {
#pragma unroll
  for (int i = 0; i < M; ++i) fence_operands(r[i]);
}

// d += A * B^T for one K step of 16: A 64 x 16 and B N x 16 from shared memory (descriptors), fp32
// accumulate, scale-d true, both operands K-major (no transpose), unit scales. Accumulator fragment
// (fp32): register i of thread t of the warpgroup holds row 16 * (t / 32) + (t % 32) / 4 +
// 8 * ((i / 2) % 2), column 8 * (i / 4) + 2 * (t % 4) + i % 2.
#define MET_SM90_ACC8(i) \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])

__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], u64 desc_a, u64 desc_b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : MET_SM90_ACC8(0), MET_SM90_ACC8(8), MET_SM90_ACC8(16), MET_SM90_ACC8(24), MET_SM90_ACC8(32), MET_SM90_ACC8(40),
        MET_SM90_ACC8(48), MET_SM90_ACC8(56)
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], u64 desc_a, u64 desc_b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, 0, 0;\n"
      "}\n"
      : MET_SM90_ACC8(0), MET_SM90_ACC8(8), MET_SM90_ACC8(16), MET_SM90_ACC8(24), MET_SM90_ACC8(32), MET_SM90_ACC8(40),
        MET_SM90_ACC8(48), MET_SM90_ACC8(56), MET_SM90_ACC8(64), MET_SM90_ACC8(72), MET_SM90_ACC8(80), MET_SM90_ACC8(88),
        MET_SM90_ACC8(96), MET_SM90_ACC8(104), MET_SM90_ACC8(112), MET_SM90_ACC8(120)
      : "l"(desc_a), "l"(desc_b), "r"(1));
}
// d = (scale_d ? d : 0) + A * B^T, A 64 x 16 and B 64 x 16 from shared memory, both K-major.
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], u64 desc_a, u64 desc_b, int scale_d) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, 0;\n"
      "}\n"
      : MET_SM90_ACC8(0), MET_SM90_ACC8(8), MET_SM90_ACC8(16), MET_SM90_ACC8(24)
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}
// The same with constant offsets OA and OB added to the two descriptors inside the asm: a run of
// products from two base descriptors keeps two register pairs live, not a pair for each product.
template <u64 OA, u64 OB>
__device__ __forceinline__ void wgmma_m64n64k16_off(float (&d)[32], u64 desc_a, u64 desc_b, int scale_d) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      ".reg .b64 da, db;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "add.s64 da, %32, %35;\n"
      "add.s64 db, %33, %36;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "da, db, p, 1, 1, 0, 0;\n"
      "}\n"
      : MET_SM90_ACC8(0), MET_SM90_ACC8(8), MET_SM90_ACC8(16), MET_SM90_ACC8(24)
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(OA), "n"(OB));
}

// d += A * B, A 64 x 16 from registers (the m16n8k16 A fragment of each warp's 16 rows: a0 row g
// keys 2t, 2t+1; a1 row g + 8; a2, a3 the same rows at keys 8 + 2t, 8 + 2t + 1), B 16 x 64 from
// shared memory MN-major (trans-b: 16 rows of K, each 64 N values in one 128-byte swizzled row;
// the stride-dimension offset steps 8 such rows).
__device__ __forceinline__ void wgmma_m64n64k16_rs_tb(float (&d)[32], const uint32_t (&a)[4], u64 desc_b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n"
      "}\n"
      : MET_SM90_ACC8(0), MET_SM90_ACC8(8), MET_SM90_ACC8(16), MET_SM90_ACC8(24)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}
#undef MET_SM90_ACC8

// ---- transaction barriers (mbarrier, in shared memory) -----------------------------------------
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(arrivals) : "memory");
}
// Makes the initialisations visible to the async proxy (TMA completes transactions on them).
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void mbar_inval(uint32_t bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
// One arrival that also announces `bytes` of transactions (the TMA copies of this phase).
__device__ __forceinline__ void mbar_arrive_expect(uint32_t bar, uint32_t bytes) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(bar) : "memory");
}
// Waits until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// ---- TMA ------------------------------------------------------------------------------------------
// Orders this thread's earlier generic-proxy accesses of global memory (and those it acquired from
// other blocks) before its later async-proxy ones: the TMA reads of activations that other blocks
// of the same launch wrote.
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }
__device__ __forceinline__ void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// The box of a 2-d tensor map at element coordinates (inner, outer) into shared memory at `dst`,
// completing `bar`'s transactions. Elements outside the tensor are written as zeros.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* tmap, int inner, int outer, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(tmap), "r"(inner), "r"(outer), "r"(bar)
      : "memory");
}

// A 3-D box: coordinates innermost first (the gated GEMM's B view, src/interp/cuda_backend.cpp).
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* tmap, int c0, int c1, int c2, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst),
      "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

}  // namespace met_sm90
