// The persistent packet interpreter's loop, shared by every NVIDIA class: include it after the
// class's op bodies (kernels/<class>/interp.cu). One cooperative launch runs one program: grid =
// the program's streams (the SM count), one block per SM. Each block walks its stream: wait on the
// counters its entry names (acquire, by one thread), run the op body for the entry's slice with
// the whole block, then signal the instruction's counter (release). No host round trip between
// packets. (An L2 prefetch of each slice's weight rows, issued by the waiting thread, was removed:
// it lengthened the waits more than it saved; docs/arch/interpreter.md has the measurement.)
//
// The dispatch is generated from the op registry: opcode MET_OP_<op> runs met_<op> when the class
// defines that body (MET_ENTRY), and nothing otherwise; the host refuses such instructions before
// launching (it reads the met_entry_<op> markers of the loaded image).
#pragma once
#include "common/interp/args.cuh"

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

// Bodies that run in the kernel's own function instead of run_body's: ptxas serializes every wgmma
// of a function that is called (C7510, which cmake/build_interp.cmake refuses), so a class lists
// its wgmma bodies as MET_INTERP_ENTRY_BODIES(X) X(op) ... before including this file. Each such
// body's file defines met_entry_route_<op>(instr): 0 to run it here, or the opcode whose body (of
// the same operand layout) run_body runs instead, for the shapes the wgmma body does not take;
// that keeps the other body's registers and calls out of the kernel's function.
//
// MET_INTERP_ENTRY_ALIASES(X) X(op, body) ... names ops of the same operand layout that run an entry
// body's code (one copy of it in the kernel's function): the body tells them apart by
// `a.geom.opcode` (the GEMMs whose epilogue differs).
#ifndef MET_INTERP_ENTRY_BODIES
#define MET_INTERP_ENTRY_BODIES(X)
#endif
#ifndef MET_INTERP_ENTRY_ALIASES
#define MET_INTERP_ENTRY_ALIASES(X)
#endif
__device__ constexpr bool runs_in_entry(uint32_t op) {
#define MET_X(name) \
  if (op == MET_OP_##name) return true;
#define MET_XA(name, body) \
  if (op == MET_OP_##name) return true;
  MET_INTERP_ENTRY_BODIES(MET_X)
  MET_INTERP_ENTRY_ALIASES(MET_XA)
#undef MET_X
#undef MET_XA
  return false;
}
// The entry body an opcode runs: its alias's, or its own.
__device__ __forceinline__ uint32_t entry_body_of(uint32_t op) {
  switch (op) {
#define MET_XA(name, body) \
  case MET_OP_##name:      \
    return MET_OP_##body;
    MET_INTERP_ENTRY_ALIASES(MET_XA)
#undef MET_XA
    default: return op;
  }
}

__device__ void run_body(const MetDevInstr& in, uint32_t opcode, uint32_t s, unsigned char* smem) {
  switch (opcode) {
#define MET_OP(name, family, cpu)                                                                  \
  case MET_OP_##name:                                                                              \
    if constexpr (!MetIsNoBody<decltype(met_##name(met_load_##name(in), s, smem))>::value &&       \
                  !runs_in_entry(MET_OP_##name))                                                   \
      met_##name(met_load_##name(in), s, smem);                                                    \
    break;
#include "common/ops.def"
    default: break;  // the host refuses instructions without a body before launching
  }
}

__device__ __forceinline__ void interp_main(const MetInterpParams& p) {
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
      for (uint32_t w = 0; w < en.n_waits; ++w) {
        const MetDevWait wt = sp.waits[en.first_wait + w];
        while (load_acquire(sp.counters + wt.counter) < wt.value) __nanosleep(20);
      }
      // No fence: the acquire loads above, extended to every thread by the bar.sync below, order
      // the body's reads after the producers' writes (a __threadfence here and before the signal
      // cost 1-2% of a decode step on the H200; docs/arch/interpreter.md).
      if (sp.stamps) sp.stamps[2 * idx] = globaltimer();
    }
    __syncthreads();
    const uint32_t eop = entry_body_of(in.opcode);
    uint32_t body = eop;  // what run_body runs, or 0: an entry body runs here
    switch (eop) {
#define MET_X(name)                       \
  case MET_OP_##name:                     \
    body = met_entry_route_##name(in);    \
    break;
      MET_INTERP_ENTRY_BODIES(MET_X)
#undef MET_X
      default: break;
    }
    if (body) {
      run_body(in, body, en.slice, smem);  // one call site: the kernel's registers around it are saved once
    } else {
      switch (eop) {
#define MET_X(name)                                    \
  case MET_OP_##name:                                  \
    met_##name(met_load_##name(in), en.slice, smem);   \
    break;
        MET_INTERP_ENTRY_BODIES(MET_X)
#undef MET_X
        default: break;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      // The entry again from shared memory, so nothing of it is held across the body: with the
      // wgmma bodies inlined here, registers kept over run_body's call cost local memory.
      const uint32_t done = s_entry;
      signal_release(sp.counters + sp.entries[done].instr);  // releases the block's writes, ordered before it by the bar.sync
      if (sp.stamps) sp.stamps[2 * done + 1] = globaltimer();
      s_entry = done + 1;
    }
    __syncthreads();
  }
}

}  // namespace met_interp

// The interpreter kernel of a class: `MET_INTERP_KERNEL(metinterp_hopper)`.
#define MET_INTERP_KERNEL(name)                                                                  \
  extern "C" __global__ void __launch_bounds__(MET_INTERP_THREADS, 1) name(MetInterpParams p) { \
    met_interp::interp_main(p);                                                                  \
  }
