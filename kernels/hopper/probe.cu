// The device probe's kernels (`met circuit probe`, src/interp/probe.cpp): what this GPU's memory
// and tensor cores deliver to met's own code. Every kernel leaves a result the host checks against
// a value it computes without the GPU (a sum of every word read, every element of a product), so a
// wrong kernel is reported as an error instead of a figure. nvcc -cubin for sm_90a; the build
// refuses spills, local memory and serialized wgmma (cmake/build_interp.cmake).
#include "hopper/probe.h"

namespace {

typedef unsigned long long u64;

// Read-only path, no L1 allocation: the buffer is read once per launch and never written by it.
template <bool kL2Prefetch>
__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 v;
  if (kL2Prefetch) {
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  } else {
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  }
  return v;
}

__device__ __forceinline__ u64 word_sum(const uint4& v) {
  return static_cast<u64>(v.x) + static_cast<u64>(v.y) + static_cast<u64>(v.z) + static_cast<u64>(v.w);
}

// Adds the block's sums into *total with one atomic.
__device__ __forceinline__ void block_add(u64 acc, u64* total) {
  __shared__ u64 warp_sums[MET_PROBE_STREAM_THREADS / 32];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    u64 s = 0;
    for (int w = 0; w < MET_PROBE_STREAM_THREADS / 32; ++w) s += warp_sums[w];
    atomicAdd(total, s);
  }
}

// Sums every 32-bit word of src[0, n16) into *total (mod 2^64). A block takes kUnroll * blockDim
// consecutive 16-byte words per step, thread t the words t, t + blockDim, ...: kUnroll independent
// loads in flight per thread, each warp's loads contiguous.
template <int kUnroll, bool kL2Prefetch>
__device__ __forceinline__ void read_sum(const uint4* __restrict__ src, u64 n16, u64* __restrict__ total) {
  const u64 bd = blockDim.x;
  const u64 chunk = bd * kUnroll;
  const u64 step = chunk * gridDim.x;
  u64 i = blockIdx.x * chunk + threadIdx.x;
  u64 acc = 0;
  for (; i + (kUnroll - 1) * bd < n16; i += step) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = load_stream<kL2Prefetch>(src + i + u * bd);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc += word_sum(v[u]);
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u)  // the one partial chunk at the end, if any
    if (i + u * bd < n16) acc += word_sum(load_stream<kL2Prefetch>(src + i + u * bd));
  block_add(acc, total);
}

// ---- wgmma (PTX ISA: warpgroup-level matrix multiply-accumulate) --------------------------------

// Matrix descriptor of a K-major tile with the 128-byte swizzle: start address (bits 0-13, >> 4),
// leading-dimension byte offset (bits 16-29; unused for a swizzled K-major tile whose K per wgmma,
// 32 bytes, lies inside one 128-byte row: 1 by convention), stride-dimension byte offset (bits
// 32-45: the 8-row groups are 1024 bytes apart), base offset 0 (bits 49-51: tiles start on the
// swizzle's 1024-byte repeat), swizzle mode 1 = 128 bytes (bits 62-63).
__device__ __forceinline__ u64 tile_desc(uint32_t smem_addr) {
  return static_cast<u64>((smem_addr & 0x3FFFFu) >> 4) | (static_cast<u64>(1) << 16) |
         (static_cast<u64>(MET_PROBE_SWIZZLE_BYTES >> 4) << 32) | (static_cast<u64>(1) << 62);
}

// Byte offset of 16-byte chunk c (elements k = 8c .. 8c + 7) of row r in a K-major tile of 64-wide
// rows (128 bytes) with the 128-byte swizzle: chunk c of row r lands in chunk c ^ (r mod 8).
__device__ __forceinline__ uint32_t swizzled(int r, int c) {
  return static_cast<uint32_t>(r * 128 + ((c ^ (r & 7)) << 4));
}

__device__ __forceinline__ uint32_t bf16_pair(int lo, int hi) {  // small integers are exact in bf16
  return (__float_as_uint(static_cast<float>(lo)) >> 16) | (__float_as_uint(static_cast<float>(hi)) & 0xffff0000u);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// d += A * B^T for one K step: A 64 x 16 and B 256 x 16 from shared memory (descriptors), fp32
// accumulate, scale-d true (d is added to), both operands K-major (no transpose), unit scales.
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
#define MET_PROBE_ACC8(i)                                                                                        \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
      : MET_PROBE_ACC8(0), MET_PROBE_ACC8(8), MET_PROBE_ACC8(16), MET_PROBE_ACC8(24), MET_PROBE_ACC8(32),
        MET_PROBE_ACC8(40), MET_PROBE_ACC8(48), MET_PROBE_ACC8(56), MET_PROBE_ACC8(64), MET_PROBE_ACC8(72),
        MET_PROBE_ACC8(80), MET_PROBE_ACC8(88), MET_PROBE_ACC8(96), MET_PROBE_ACC8(104), MET_PROBE_ACC8(112),
        MET_PROBE_ACC8(120)
#undef MET_PROBE_ACC8
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

}  // namespace

// Writes word w = 4j + e of dst[j] as the 32-bit value w (mod 2^32): the host knows the sum of
// any range of words without reading them.
extern "C" __global__ void __launch_bounds__(MET_PROBE_STREAM_THREADS) metprobe_fill(uint4* __restrict__ dst, u64 n16) {
  for (u64 j = blockIdx.x * static_cast<u64>(blockDim.x) + threadIdx.x; j < n16; j += static_cast<u64>(gridDim.x) * blockDim.x) {
    const uint32_t w = static_cast<uint32_t>(4 * j);
    dst[j] = make_uint4(w, w + 1, w + 2, w + 3);
  }
}

// Streaming read: every word of src summed into *total. Variants by loads in flight per thread and
// by the L2 256-byte prefetch hint; the host times each and keeps the best.
extern "C" __global__ void __launch_bounds__(MET_PROBE_STREAM_THREADS)
    metprobe_read_u4(const uint4* __restrict__ src, u64 n16, u64* __restrict__ total) {
  read_sum<4, false>(src, n16, total);
}
extern "C" __global__ void __launch_bounds__(MET_PROBE_STREAM_THREADS)
    metprobe_read_u8(const uint4* __restrict__ src, u64 n16, u64* __restrict__ total) {
  read_sum<8, false>(src, n16, total);
}
extern "C" __global__ void __launch_bounds__(MET_PROBE_STREAM_THREADS)
    metprobe_read_u8_l2(const uint4* __restrict__ src, u64 n16, u64* __restrict__ total) {
  read_sum<8, true>(src, n16, total);
}

// Copy dst[i] = src[i] with the read kernels' chunking (4 loads in flight per thread).
extern "C" __global__ void __launch_bounds__(MET_PROBE_STREAM_THREADS)
    metprobe_copy(const uint4* __restrict__ src, uint4* __restrict__ dst, u64 n16) {
  constexpr int kUnroll = 4;
  const u64 bd = blockDim.x;
  const u64 chunk = bd * kUnroll;
  const u64 step = chunk * gridDim.x;
  u64 i = blockIdx.x * chunk + threadIdx.x;
  for (; i + (kUnroll - 1) * bd < n16; i += step) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = load_stream<false>(src + i + u * bd);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) dst[i + u * bd] = v[u];
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u)
    if (i + u * bd < n16) dst[i + u * bd] = load_stream<false>(src + i + u * bd);
}

// The bf16 tensor-core peak: blockDim.x / 128 warpgroups per block, one block per SM. Each
// warpgroup runs `iters` loop iterations of four wgmma m64n256k16 (A, B from shared memory) into
// its own accumulator, keeping one commit group in flight while the next is issued, then writes
// its 64 x 256 result to out[(block * warpgroups + warpgroup) * 64 * 256 + row * 256 + col]:
// iters * A * B^T, which the host checks element by element.
extern "C" __global__ void __launch_bounds__(MET_PROBE_MMA_MAX_WARPGROUPS * MET_PROBE_WARPGROUP, 1)
    metprobe_wgmma(float* __restrict__ out, int iters) {
  extern __shared__ __align__(16) unsigned char smem[];
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t a_at = (base + MET_PROBE_SWIZZLE_BYTES - 1) & ~static_cast<uint32_t>(MET_PROBE_SWIZZLE_BYTES - 1);
  const uint32_t b_at = a_at + MET_PROBE_MMA_A_BYTES;
  unsigned char* a_tile = smem + (a_at - base);
  unsigned char* b_tile = smem + (b_at - base);
  constexpr int kChunks = MET_PROBE_MMA_K / 8;  // 16-byte chunks per row
  for (int q = threadIdx.x; q < (MET_PROBE_MMA_M + MET_PROBE_MMA_N) * kChunks; q += blockDim.x) {
    const bool is_a = q < MET_PROBE_MMA_M * kChunks;
    const int r = (is_a ? q : q - MET_PROBE_MMA_M * kChunks) / kChunks, c = q % kChunks;
    uint32_t w[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int k = 8 * c + 2 * e;
      w[e] = is_a ? bf16_pair(met_probe_a(r, k), met_probe_a(r, k + 1)) : bf16_pair(met_probe_b(r, k), met_probe_b(r, k + 1));
    }
    *reinterpret_cast<uint4*>((is_a ? a_tile : b_tile) + swizzled(r, c)) = make_uint4(w[0], w[1], w[2], w[3]);
  }
  // The tiles were written through the generic proxy; wgmma reads them through the async proxy.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();

  const u64 da = tile_desc(a_at), db = tile_desc(b_at);
  constexpr u64 kStepDesc = (MET_PROBE_MMA_KSTEP * 2) >> 4;  // one K step = 32 bytes along the row
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.0f;
  for (int it = 0; it < iters; ++it) {
    wgmma_fence();  // orders the accumulator's registers before this iteration's wgmma (PTX ISA)
#pragma unroll
    for (int s = 0; s < MET_PROBE_MMA_K / MET_PROBE_MMA_KSTEP; ++s) wgmma_m64n256k16(d, da + s * kStepDesc, db + s * kStepDesc);
    wgmma_commit();
    wgmma_wait<1>();
  }
  wgmma_wait<0>();

  // Accumulator fragment of m64nNk16 (fp32): register i of thread t holds row 16 * (t / 32) +
  // (t % 32) / 4 + 8 * ((i / 2) % 2), column 8 * (i / 4) + 2 * (t % 4) + i % 2.
  const int t = threadIdx.x % MET_PROBE_WARPGROUP, wg = threadIdx.x / MET_PROBE_WARPGROUP;
  const int warpgroups = blockDim.x / MET_PROBE_WARPGROUP;
  float* o = out + (static_cast<u64>(blockIdx.x) * warpgroups + wg) * MET_PROBE_MMA_M * MET_PROBE_MMA_N;
#pragma unroll
  for (int i = 0; i < 128; i += 2) {
    const int row = 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2);
    const int col = 8 * (i / 4) + 2 * (t % 4);
    *reinterpret_cast<float2*>(o + row * MET_PROBE_MMA_N + col) = make_float2(d[i], d[i + 1]);
  }
}
