// The self-test's entry whose wgmma ptxas must serialize: the accumulator is read and written
// while the wgmma that defines it is still in flight, so ptxas waits on it (C7517).
#include <stdint.h>

__device__ __forceinline__ void wgmma_m64n16k16(float (&d)[8], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

extern "C" __global__ void metinterp_selftest(float* out, uint64_t desc_a, uint64_t desc_b, int iters) {
  float d[8] = {};
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  for (int i = 0; i < iters; ++i) {
    wgmma_m64n16k16(d, desc_a, desc_b);
    d[0] += 1.0f;
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  for (int i = 0; i < 8; ++i) out[threadIdx.x * 8 + i] = d[i];
}
