// How fast TMA streams global memory into shared memory by the size of each copy: one block per
// SM, thread 0 issuing copies into a ring of stages that the 8 warps only wait on and free (no
// arithmetic). Mode 0: plain bulk copies (cp.async.bulk) of `copy` bytes, 16 per stage; mode 1: 2-D
// tensor copies (a tensor map over the buffer viewed as [rows, 4096] bf16) of 16 rows x 256 values,
// two per stage. Found with it (perf-data/h200-sxm/20261202T0440Z-bulk-gemv/2-copy-rate.txt): the
// copies, not the bytes, are the limit below 4 KB a run.
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Ikernels -o /tmp/bcr bench/bulk_copy_rate.cu && /tmp/bcr
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "gpu_bench.cuh"
#include "hopper/sm90.cuh"
// mode 0: bulk copies of `cb` bytes, 16 per stage (stage = 16*cb) ; mode 1: tensor 2d box 256x16 (8KB) x2 per stage
__global__ void __launch_bounds__(256, 1)
    k(const char* src, long long total, int cb, int S, int mode, const __grid_constant__ CUtensorMap tm, int K) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bars[32];
  const int stage_bytes = 16 * cb;
  long long per = total / gridDim.x / stage_bytes;  // stages per block
  const long long first = (long long)blockIdx.x * per;
  uint32_t full = met_sm90::smem_addr(&bars[0]), empty = met_sm90::smem_addr(&bars[16]), base = met_sm90::smem_addr(smem);
  met_bench::ring_init(full, empty, S, 8);
  __syncthreads();
  const int lane = threadIdx.x % 32;
  long long issued = 0;
  auto issue = [&](long long q) {
    const int slot = q % S;
    if (q >= S) met_sm90::mbar_wait(empty + 8 * slot, ((q / S) - 1) & 1);
    met_sm90::mbar_arrive_expect(full + 8 * slot, stage_bytes);
    const long long st = first + q;
    if (mode == 0) {
      for (int r = 0; r < 16; ++r)
        met_bench::bulk_copy(base + slot * stage_bytes + r * cb, src + st * stage_bytes + r * cb, cb, full + 8 * slot);
    } else {
      // stage st covers rows [16*(st / (K/512)) ...) cols [(st % (K/512))*512 ...)
      const long long kcs = K / 512;
      const int row = (int)((st / kcs) * 16), col = (int)((st % kcs) * 512);
      met_sm90::tma_load_2d(base + slot * stage_bytes, &tm, col, row, full + 8 * slot);
      met_sm90::tma_load_2d(base + slot * stage_bytes + 8192, &tm, col + 256, row, full + 8 * slot);
    }
  };
  if (threadIdx.x == 0)
    for (; issued < S && issued < per; ++issued) issue(issued);
  for (long long q = 0; q < per; ++q) {
    met_sm90::mbar_wait(full + 8 * (q % S), (q / S) & 1);
    __syncwarp();
    if (lane == 0) met_sm90::mbar_arrive(empty + 8 * (q % S));
    if (threadIdx.x == 0)
      for (; issued < per && issued < q + S; ++issued) issue(issued);
  }
}
int main() {
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const long long total = 8LL << 30;
  char* src;
  CK(cudaMalloc(&src, total));
  CK(cudaMemset(src, 1, total));
  const int K = 4096;  // matrix view [total/(2K), K] bf16
  PFN_cuTensorMapEncodeTiled_v12000 enc;
  cudaDriverEntryPointQueryResult qr;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void**)&enc, 12000, cudaEnableDefault, &qr));
  CUtensorMap tm;
  cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)(total / (2 * K))};
  cuuint64_t strides[1] = {(cuuint64_t)K * 2};
  cuuint32_t box[2] = {256, 16}, es[2] = {1, 1};
  CUresult r = enc(&tm, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, src, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                   CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r) {
    printf("encode %d\n", r);
    return 1;
  }
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  struct C {
    int mode, cb, S;
  };
  for (C c : {C{0, 1024, 4}, C{0, 1024, 8}, C{0, 2048, 4}, C{0, 2048, 6}, C{0, 4096, 2}, C{0, 4096, 3}, C{1, 1024, 2},
              C{1, 1024, 4}, C{1, 1024, 8}, C{1, 1024, 12}}) {
    const float ms = met_bench::median_ms(2, 6, [&] { k<<<sms, 256, c.S * 16 * c.cb>>>(src, total, c.cb, c.S, c.mode, tm, K); });
    const double bytes = (double)(total / sms / (16 * c.cb)) * 16 * c.cb * sms;
    printf("mode %d copy %5d B stage %6d B ring %2d: %.3f ms %.1f GB/s\n", c.mode, c.mode ? 8192 : c.cb, 16 * c.cb, c.S, ms,
           bytes / ms / 1e6);
  }
}
