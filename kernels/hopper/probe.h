// Shapes and input values of the device probe (kernels/hopper/probe.cu), shared by the kernels
// and by the host that launches them and checks their results (src/interp/probe.cpp). Plain C++
// that both nvcc and the host compiler read.
#pragma once
#include <stdint.h>

#if defined(__CUDACC__)
#define MET_PROBE_HD __host__ __device__
#else
#define MET_PROBE_HD
#endif

// Streaming kernels (fill, read, copy): threads per block; a block reads kUnroll * this many
// 16-byte words per step, as one contiguous chunk.
#define MET_PROBE_STREAM_THREADS 512

// The tensor-core kernel: each warpgroup (128 threads) keeps a 64 x 256 fp32 accumulator in
// registers and adds A (64 x 64 bf16) times B^T (256 x 64 bf16) to it per loop iteration, as four
// wgmma m64n256k16 over K = 16 each. A and B sit in shared memory once per block, K-major with
// the 128-byte swizzle; every warpgroup of the block reads the same tiles.
#define MET_PROBE_MMA_M 64
#define MET_PROBE_MMA_N 256
#define MET_PROBE_MMA_K 64                 // K per loop iteration
#define MET_PROBE_MMA_KSTEP 16             // K of one wgmma
#define MET_PROBE_WARPGROUP 128            // threads of one warpgroup
#define MET_PROBE_MMA_MAX_WARPGROUPS 3     // the kernel's launch bound: 384 threads, one block per SM
#define MET_PROBE_SWIZZLE_BYTES 1024       // the 128-byte swizzle repeats every 8 rows of 128 bytes
#define MET_PROBE_MMA_A_BYTES (MET_PROBE_MMA_M * MET_PROBE_MMA_K * 2)
#define MET_PROBE_MMA_B_BYTES (MET_PROBE_MMA_N * MET_PROBE_MMA_K * 2)
// Dynamic shared memory: both tiles plus room to align them to the swizzle's repeat.
#define MET_PROBE_MMA_SMEM (MET_PROBE_MMA_A_BYTES + MET_PROBE_MMA_B_BYTES + MET_PROBE_SWIZZLE_BYTES)
// Multiply-adds of one wgmma m64n256k16, counted as two flops each.
#define MET_PROBE_WGMMA_FLOPS (2.0 * MET_PROBE_MMA_M * MET_PROBE_MMA_N * MET_PROBE_MMA_KSTEP)

// The operands' values: small integers in [-2, 2] from a hash of the element's position, so a
// wrong layout, descriptor or fragment mapping changes the product, and every sum the tensor
// cores form stays an integer far below 2^24 (exact in fp32, in any order).
MET_PROBE_HD inline int met_probe_value(uint32_t i) {
  i *= 0x9E3779B1u;
  i ^= i >> 15;
  i *= 0x85EBCA77u;
  i ^= i >> 13;
  return static_cast<int>(i % 5u) - 2;
}
MET_PROBE_HD inline int met_probe_a(int m, int k) { return met_probe_value(static_cast<uint32_t>(m * MET_PROBE_MMA_K + k)); }
MET_PROBE_HD inline int met_probe_b(int n, int k) {
  return met_probe_value(0x10000u + static_cast<uint32_t>(n * MET_PROBE_MMA_K + k));
}
