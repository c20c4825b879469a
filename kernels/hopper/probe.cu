// The device probe's kernels (`met circuit probe`, src/interp/probe.cpp): what this GPU's memory
// and tensor cores deliver to met's own code. Every kernel leaves a result the host checks against
// a value it computes without the GPU (a sum of every word read, every element of a product), so a
// wrong kernel is reported as an error instead of a figure. nvcc -cubin for sm_90a; the build
// refuses spills, local memory and serialized wgmma (cmake/build_interp.cmake).
#include "hopper/probe.h"
#include "hopper/sm90.cuh"

namespace {

using namespace met_sm90;

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

__device__ __forceinline__ uint32_t bf16_pair(int lo, int hi) {  // small integers are exact in bf16
  return (__float_as_uint(static_cast<float>(lo)) >> 16) | (__float_as_uint(static_cast<float>(hi)) & 0xffff0000u);
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
    float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.0f;
  for (int it = 0; it < iters; ++it) {
    wgmma_fence();  // orders the accumulator's registers before this iteration's wgmma (PTX ISA)
#pragma unroll
    for (int s = 0; s < MET_PROBE_MMA_K / MET_PROBE_MMA_KSTEP; ++s) wgmma_m64n256k16(d, da + s * kDescKStep, db + s * kDescKStep);
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
