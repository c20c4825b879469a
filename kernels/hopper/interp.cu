// The persistent packet interpreter for the hopper class (built by nvcc for sm_90a; loaded by met
// through the CUDA driver API). One cooperative launch runs one program: grid = the program's
// streams (the SM count), one block per SM. Each block walks its stream: wait on the counters its
// entry names (acquire, by one thread), run the op body for the entry's slice with the whole
// block, then signal the instruction's counter (release). No host round trip between packets.
//
// While it waits, the block asks L2 to prefetch the weight bytes its next entry will stream, so
// the memory system keeps working across the dependency gaps.
#define MET_HAS_MMA_SYNC 1
#define MET_HAS_CP_ASYNC 1
#include "common/interp/attention.cuh"
#include "common/interp/gemm.cuh"
#include "common/interp/gemv.cuh"

namespace met_interp {

__device__ __forceinline__ unsigned int load_acquire(const unsigned int* p) {
  unsigned int v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void signal_release(unsigned int* p) {
  asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(p) : "memory");
}
__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Hint L2 to fetch up to `bytes` from p (one bulk prefetch per 64 KiB, issued by one thread).
__device__ __forceinline__ void prefetch_l2(const void* p, uint64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (uint64_t off = 0; off < bytes; off += 65536) {
    const uint64_t n = (bytes - off < 65536 ? bytes - off : 65536) & ~15ull;
    if (n == 0) break;
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(c + off), "r"(static_cast<unsigned>(n)) : "memory");
  }
}

// The weight rows a gemv-family slice streams (the whole weight for other bodies: no prefetch).
__device__ __forceinline__ void prefetch_entry(const MetDevInstr& in, uint32_t s) {
  int wk = -1;
  int64_t n = in.w_rows;
  switch (in.body) {
    case MET_BODY_GEMV:
    case MET_BODY_GEMV_O_RESIDUAL:
    case MET_BODY_GEMV_DOWN_RESIDUAL: wk = 1; break;
    case MET_BODY_LM_HEAD_ARGMAX:
    case MET_BODY_LM_HEAD_SOFTCAP_ARGMAX: wk = 2; break;
    case MET_BODY_GATE_UP_SILU:
    case MET_BODY_GATE_UP_GELU: wk = 2; n = in.w_rows / 2; break;
    default: return;
  }
  const SliceRange c = slice_cols(in, s, n);
  const uint64_t row_bytes = static_cast<uint64_t>(in.w_cols) * 2;
  const char* w = reinterpret_cast<const char*>(in.ops[wk]);
  prefetch_l2(w + c.begin * row_bytes, (c.end - c.begin) * row_bytes);
  if (in.body == MET_BODY_GATE_UP_SILU || in.body == MET_BODY_GATE_UP_GELU)
    prefetch_l2(w + (n + c.begin) * row_bytes, (c.end - c.begin) * row_bytes);
}

__device__ void run_body(const MetDevInstr& in, uint32_t s, unsigned char* smem) {
  switch (in.body) {
    case MET_BODY_EMBED: body_embed(in, s); break;
    case MET_BODY_QKV_ROPE:
    case MET_BODY_QKV_QKNORM_ROPE: body_qkv(in, s, smem); break;
    case MET_BODY_ATTN_DECODE_SPLIT: body_attn_decode_split(in, s); break;
    case MET_BODY_ATTN_DECODE_MERGE: body_attn_decode_merge(in, s, reinterpret_cast<float*>(smem)); break;
    case MET_BODY_ATTN_PREFILL: body_attn_prefill(in, s, smem); break;
    case MET_BODY_GEMV_O_RESIDUAL:
    case MET_BODY_GATE_UP_SILU:
    case MET_BODY_GATE_UP_GELU:
    case MET_BODY_GEMV_DOWN_RESIDUAL:
    case MET_BODY_LM_HEAD_ARGMAX:
    case MET_BODY_LM_HEAD_SOFTCAP_ARGMAX:
    case MET_BODY_GEMV: body_gemv_family(in, s, smem); break;
    case MET_BODY_GEMM: body_gemm(in, s, smem); break;
    case MET_BODY_RMSNORM: body_rmsnorm(in, s); break;
    case MET_BODY_ROPE: body_rope(in, s); break;
    case MET_BODY_KV_APPEND: body_kv_append(in, s); break;
    case MET_BODY_RESIDUAL_ADD:
    case MET_BODY_SILU_MUL:
    case MET_BODY_GELU_MUL:
    case MET_BODY_SCALE:
    case MET_BODY_SOFTCAP: body_elementwise(in, s); break;
    case MET_BODY_ARGMAX: body_argmax(in, s, reinterpret_cast<float*>(smem)); break;
    case MET_BODY_SAMPLE: body_sample(in, s, smem); break;
    default: break;  // the host refuses instructions without a body before launching
  }
}

}  // namespace met_interp

extern "C" __global__ void __launch_bounds__(MET_INTERP_THREADS, 1) metinterp_hopper(MetInterpParams p) {
  using namespace met_interp;
  extern __shared__ __align__(128) unsigned char smem[];
  // The loop keeps almost nothing in registers across entries (the bodies need them all): its
  // state lives in shared memory and is re-read after each body's closing barrier.
  __shared__ MetInterpParams sp;
  __shared__ uint32_t s_entry, s_end;
  if (threadIdx.x == 0) {
    sp = p;
    s_entry = p.streams[blockIdx.x].first_entry;
    s_end = s_entry + p.streams[blockIdx.x].n_entries;
  }
  __syncthreads();
#pragma unroll 1
  for (;;) {
    const uint32_t idx = s_entry;
    if (idx >= s_end) break;
    const MetDevEntry en = sp.entries[idx];
    const MetDevInstr& in = sp.instrs[en.instr];
    if (threadIdx.x == 0) {
      prefetch_entry(in, en.slice);
      for (uint32_t w = 0; w < en.n_waits; ++w) {
        const MetDevWait wt = sp.waits[en.first_wait + w];
        while (load_acquire(sp.counters + wt.counter) < wt.value) __nanosleep(20);
      }
      __threadfence();  // acquire for the whole block: the bar.sync below extends it to every thread
      if (sp.stamps) sp.stamps[2 * idx] = globaltimer();
    }
    __syncthreads();
    run_body(in, en.slice, smem);
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      signal_release(sp.counters + en.instr);
      if (sp.stamps) sp.stamps[2 * idx + 1] = globaltimer();
      s_entry = idx + 1;
    }
    __syncthreads();
  }
}
