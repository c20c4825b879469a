// How fast TMA streams a weight through the wgmma GEMM's B boxes (kernels/hopper/gemm_wgmma.cuh: 128
// rows x 64 bf16, the 128-byte swizzle), by the weight's layout in memory: one block per SM, thread 0
// issuing a ring of stages that the 8 warps only wait on and free (no arithmetic), as a 128-row
// prefill's GEMM streams its weight (each block walks K for its own 128 or 256 rows, then the next).
//   row-major  the weight as it is: [N][K], a box is 128 rows of 128 bytes, 8 KB apart (K = 4096)
//   tiled      the same bytes laid out box by box ([N/128][K/64][128][64]): a box is 16 KB in one run
//   bulk       plain bulk copies of 16 KB (cp.async.bulk, no tensor map): the reference
// A stage holds `boxes` boxes: K-adjacent (the same 128 rows, the next 64 values), or row-adjacent
// (`rows256`: the next 128 rows, the same K: a 256-column tile's two B boxes).
//   gemm       a 128-row prefill GEMM's stage: one A box (128 activation rows x 64 values of a 1 MB
//              matrix that stays in L2) and `boxes` row-adjacent B boxes of the row-major weight
//   gemm-k2    two K steps a stage: A's and B's boxes of values k and k + 64 (`boxes` 2: kBN 128)
// The rate printed counts the weight's bytes only (B), as a weight-bound GEMM's time does.
// `pairs` 2: thread 0 refills stages two at a time (once two are free), so the copies of consecutive
// stages go out together.
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Ikernels -o /tmp/tbr bench/tma_box_rate.cu && /tmp/tbr
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "gpu_bench.cuh"
#include "hopper/sm90.cuh"

enum Mode : int { kRowMajor, kRows256, kTiled, kBulk, kGemm, kGemmK2 };
constexpr int kBox = 128 * 64 * 2;  // bytes of one box


__global__ void __launch_bounds__(256, 1) k(const char* src, long long total, int mode, int boxes, int S, int K, int pairs,
                                            const __grid_constant__ CUtensorMap rm, const __grid_constant__ CUtensorMap tl,
                                            const __grid_constant__ CUtensorMap am) {
  extern __shared__ unsigned char smem[];
  __shared__ __align__(8) unsigned long long bars[64];
  const int a_boxes = mode == kGemm ? 1 : mode == kGemmK2 ? boxes : 0;  // A boxes a stage, beside `boxes` B
  const int stage_bytes = (boxes + a_boxes) * kBox, b_bytes = boxes * kBox;
  const long long per = total / gridDim.x / b_bytes / 2 * 2;  // stages per block (even: `pairs`)
  const long long first = static_cast<long long>(blockIdx.x) * per;
  const uint32_t full = met_sm90::smem_addr(&bars[0]), empty = met_sm90::smem_addr(&bars[32]);
  const uint32_t base = (met_sm90::smem_addr(smem) + 1023u) & ~1023u;  // the swizzle's 1 KB alignment
  met_bench::ring_init(full, empty, S, 8);
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const long long ksteps = K / 64;  // 64-value steps of a row
  auto issue = [&](long long q) {
    const int slot = static_cast<int>(q % S);
    if (q >= S) met_sm90::mbar_wait(empty + 8 * slot, static_cast<uint32_t>(((q / S) - 1) & 1));
    met_sm90::mbar_arrive_expect(full + 8 * slot, stage_bytes);
    const long long st = first + q;
    const uint32_t dst = base + slot * stage_bytes;
    if (mode == kGemm || mode == kGemmK2) {
      const long long per_tile = mode == kGemm ? ksteps : ksteps / boxes, tile = st / per_tile, kk = st % per_tile;
      for (int j = 0; j < a_boxes; ++j)
        met_sm90::tma_load_2d(dst + (boxes + j) * kBox, &am, static_cast<int>((kk * a_boxes + j) * 64), 0, full + 8 * slot);
      for (int b = 0; b < boxes; ++b) {
        if (mode == kGemm)  // row-adjacent B boxes, one K step
          met_sm90::tma_load_2d(dst + b * kBox, &rm, static_cast<int>(kk * 64), static_cast<int>((tile * boxes + b) * 128),
                                full + 8 * slot);
        else  // K-adjacent B boxes of one 128-row tile
          met_sm90::tma_load_2d(dst + b * kBox, &rm, static_cast<int>((kk * boxes + b) * 64), static_cast<int>(tile * 128),
                                full + 8 * slot);
      }
      return;
    }
    for (int b = 0; b < boxes; ++b) {
      if (mode == kRowMajor) {  // stage st: rows 128 (st / (ksteps / boxes)), values 64 boxes (st % ...)
        const long long per_tile = ksteps / boxes, tile = st / per_tile, kk = (st % per_tile) * boxes + b;
        met_sm90::tma_load_2d(dst + b * kBox, &rm, static_cast<int>(kk * 64), static_cast<int>(tile * 128), full + 8 * slot);
      } else if (mode == kRows256) {  // stage st: rows 128 boxes (st / ksteps) + 128 b, values 64 (st % ksteps)
        const long long tile = st / ksteps, kk = st % ksteps;
        met_sm90::tma_load_2d(dst + b * kBox, &rm, static_cast<int>(kk * 64), static_cast<int>((tile * boxes + b) * 128),
                              full + 8 * slot);
      } else if (mode == kTiled) {  // box j is 128 rows of the [*, 64] view: 16 KB from j x 16 KB
        met_sm90::tma_load_2d(dst + b * kBox, &tl, 0, static_cast<int>((st * boxes + b) * 128), full + 8 * slot);
      } else {
        met_bench::bulk_copy(dst + b * kBox, src + (st * boxes + b) * kBox, kBox, full + 8 * slot);
      }
    }
  };
  long long issued = 0;
  if (threadIdx.x == 0)
    for (; issued < S && issued < per; ++issued) issue(issued);
  for (long long q = 0; q < per; ++q) {
    met_sm90::mbar_wait(full + 8 * (q % S), static_cast<uint32_t>((q / S) & 1));
    __syncwarp();
    if (lane == 0) met_sm90::mbar_arrive(empty + 8 * (q % S));
    if (threadIdx.x == 0)
      for (; issued + pairs - 1 < per && issued + pairs - 1 < q + S; issued += pairs)
        for (int j = 0; j < pairs; ++j) issue(issued + j);
  }
}

int main() {
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const long long total = 8LL << 30;
  const int K = 4096;
  char *src, *act;
  CK(cudaMalloc(&src, total));
  CK(cudaMemset(src, 1, total));
  CK(cudaMalloc(&act, 128LL * K * 2));
  CK(cudaMemset(act, 1, 128LL * K * 2));
  PFN_cuTensorMapEncodeTiled_v12000 enc;
  cudaDriverEntryPointQueryResult qr;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&enc), 12000, cudaEnableDefault, &qr));
  auto map = [&](cuuint64_t cols, cuuint64_t rows, char* at) {
    CUtensorMap tm;
    cuuint64_t dims[2] = {cols, rows}, strides[1] = {cols * 2};
    cuuint32_t box[2] = {64, 128}, es[2] = {1, 1};
    const CUresult r = enc(&tm, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, at, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                           CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r) {
      printf("encode %d\n", static_cast<int>(r));
      exit(1);
    }
    return tm;
  };
  const CUtensorMap rm = map(K, total / (2 * K), src), tl = map(64, total / 128, src), am = map(K, 128, act);
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  struct C {
    int mode, boxes, S, pairs = 1;
  };
  const char* names[] = {"row-major", "rows256", "tiled", "bulk", "gemm", "gemm-k2"};
  for (C c : {C{kRowMajor, 1, 4}, C{kRowMajor, 1, 8}, C{kRowMajor, 1, 12}, C{kRowMajor, 2, 3}, C{kRowMajor, 2, 6},
              C{kRowMajor, 4, 3}, C{kRows256, 2, 4}, C{kTiled, 1, 4}, C{kTiled, 1, 8}, C{kTiled, 1, 12}, C{kTiled, 2, 6},
              C{kBulk, 1, 8}, C{kBulk, 2, 6}, C{kGemm, 1, 4}, C{kGemm, 1, 6}, C{kGemm, 2, 3}, C{kGemm, 2, 4}, C{kGemmK2, 2, 3},
              C{kGemmK2, 1, 6}, C{kRowMajor, 1, 8, 2}, C{kRowMajor, 1, 12, 2}, C{kGemm, 1, 6, 2}, C{kGemm, 1, 4, 2}}) {
    const int stage = (c.boxes + (c.mode == kGemm ? 1 : c.mode == kGemmK2 ? c.boxes : 0)) * kBox;
    const float ms = met_bench::median_ms(2, 6, [&] {
      k<<<sms, 256, c.S * stage + 1024>>>(src, total, c.mode, c.boxes, c.S, K, c.pairs, rm, tl, am);
    });
    const double bytes = static_cast<double>(total / sms / (c.boxes * kBox) / 2 * 2) * c.boxes * kBox * sms;
    printf("%-9s boxes %d stage %6d B ring %2d (%3d KB) issued by %d: %.3f ms %7.1f GB/s\n", names[c.mode], c.boxes, stage, c.S,
           c.S * stage / 1024, c.pairs, ms, bytes / ms / 1e6);
  }
}
