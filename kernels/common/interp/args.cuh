// Named arguments of the device bodies, generated from the op registry (kernels/common/ops.def):
// one MetArgs_<op> struct per op (its tensors, ints and imms by name, plus the slice geometry and
// the weight shape), its loader from a MetDevInstr, and the slice ranges (the device twin of
// src/emit/opcodes.cpp slice_rows/slice_cols: slice s covers row part s / C of S / C parts and
// column part s % C of C, C = col_parts).
//
// A body is an entry point of the kernel tree: `MET_ENTRY(op) { ... }` defines met_<op>, which the
// interpreter's dispatch (common/interp/loop.cuh) calls for that opcode, and the marker symbol
// met_entry_<op> in the compiled interpreter, which avail's cross-check and the host's loader read.
#pragma once
#include "common/interp/abi.h"
#include "common/ops.h"

namespace met_interp {

typedef unsigned short u16;

struct MetGeom {
  uint32_t opcode;             // the instruction's (bodies shared by several ops tell them apart)
  uint32_t slices, col_parts;  // as the packet (col_parts >= 1)
  int64_t w_rows, w_cols;      // shape of the matrix weight operand (0 when none)
  const void* tmaps;           // the instruction's TMA descriptors (MetDevInstr.tmaps), or null
  uint32_t w_format;           // MET_DEV_WEIGHT_* of the matrix weight (its scales: instr)
  const MetDevInstr* instr;    // the instruction itself (global memory): out-of-line bodies reload from it
};

// Operand kinds of the registry as device types.
typedef u16* T_act;
typedef const u16* T_weight;  // bf16 [w_rows, w_cols], or e4m3 bytes where geom.w_format says so
typedef const u16* T_vec;     // null when absent
typedef int* T_i32;
typedef int64_t* T_i64;
typedef float* T_f32;
typedef const float* T_table;
typedef const MetDevPeers* T_peers;  // collectives: the host's record of every rank's copy (abi.h)

#define MET_ARGS_HEAD MetGeom geom;
#include "common/ops_args.h"

#define MET_OP(name, family, cpu)                                                    \
  __device__ __forceinline__ MetArgs_##name met_load_##name(const MetDevInstr& in) { \
    MetArgs_##name a;                                                                \
    a.geom.opcode = in.opcode;                                                       \
    a.geom.slices = in.slices;                                                       \
    a.geom.col_parts = in.col_parts > 0 ? in.col_parts : 1;                          \
    a.geom.w_rows = in.w_rows;                                                       \
    a.geom.w_cols = in.w_cols;                                                       \
    a.geom.tmaps = reinterpret_cast<const void*>(in.tmaps);                          \
    a.geom.w_format = in.w_format;                                                   \
    a.geom.instr = &in;                                                              \
    [[maybe_unused]] int t_ = 0;                                                     \
    [[maybe_unused]] int i_ = 0;                                                     \
    [[maybe_unused]] int f_ = 0;
#define MET_T(n, kind, dir, span) a.n = reinterpret_cast<T_##kind>(in.ops[t_++]);
#define MET_I(n) a.n = in.ints[i_++];
#define MET_F(n) a.n = in.imms[f_++];
#define MET_END(name) \
  return a;           \
  }
#include "common/ops.def"

// Every op starts without a body: these templates lose overload resolution to a real met_<op>
// (a non-template of the same signature), so the dispatch can ask whether one was defined.
struct MetNoBody {};
template <class T>
struct MetIsNoBody {
  static constexpr bool value = false;
};
template <>
struct MetIsNoBody<MetNoBody> {
  static constexpr bool value = true;
};
#define MET_OP(name, family, cpu)                                                    \
  template <int N = 0>                                                               \
  __device__ MetNoBody met_##name(const MetArgs_##name&, uint32_t, unsigned char*) { \
    return MetNoBody{};                                                              \
  }
#include "common/ops.def"

// The body of op `name` for one slice, run by the whole block: `a` its arguments, `slice` the
// slice, `smem` the block's dynamic shared memory (sized by common/interp/smem.h).
#if defined(__HIP_PLATFORM_AMD__)
// AMD: each body is also a kernel of its own, extern "C" met_<op>(instr), whose block runs slice
// blockIdx.x of one instruction. Its kernel descriptor met_<op>.kd is the entry point the AMD
// cross-check reads (tests/kernels/hip/) and the one the HIP backend will look up by name
// (docs/arch/interpreter.md); it also gives each body its own register, LDS and MFMA counts.
#define MET_ENTRY(name)                                                                                     \
  __device__ __forceinline__ void met_##name(const MetArgs_##name& a, uint32_t slice, unsigned char* smem); \
  extern "C" __global__ void __launch_bounds__(MET_INTERP_THREADS) met_##name(const MetDevInstr* in) {      \
    extern __shared__ __align__(16) unsigned char met_dynamic_smem[];                                       \
    met_##name(met_load_##name(*in), blockIdx.x, met_dynamic_smem);                                         \
  }                                                                                                         \
  __device__ __forceinline__ void met_##name(const MetArgs_##name& a, uint32_t slice, unsigned char* smem)
#elif !defined(MET_ENTRY)  // a standalone bench (bench/gemv_stream.cu) may define it without the marker
#define MET_ENTRY(name)                                                  \
  extern "C" __device__ const unsigned met_entry_##name = MET_OP_##name; \
  __device__ __forceinline__ void met_##name(const MetArgs_##name& a, uint32_t slice, unsigned char* smem)
#endif

struct SliceRange {
  int64_t begin, end;
};

template <class A>
__device__ __forceinline__ SliceRange slice_rows(const A& a, uint32_t s) {
  const int64_t rows = a.rows;
  const int64_t cols = a.geom.col_parts;
  int64_t n = static_cast<int64_t>(a.geom.slices) / cols;
  if (n < 1) n = 1;
  const int64_t part = s / cols;
  const int64_t b = part * rows / n, e = (part + 1) * rows / n;
  return {b < rows ? b : rows, e < rows ? e : rows};
}

template <class A>
__device__ __forceinline__ SliceRange slice_cols(const A& a, uint32_t s, int64_t n) {
  const int64_t cols = a.geom.col_parts;
  const int64_t part = s % cols;
  return {part * n / cols, (part + 1) * n / cols};
}

}  // namespace met_interp
