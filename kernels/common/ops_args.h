/* Named arguments of every op, generated from the registry (ops.def): struct MetArgs_<op> holds
 * MET_ARGS_HEAD, then the op's tensors (as the includer's T_<kind> types), ints (int64_t) and imms
 * (float) by name, in registry order. The host (src/interp/cpu_bodies.cpp) and the device
 * (common/interp/args.cuh) each define the T_<kind> types and MET_ARGS_HEAD, then include this. */
#define MET_OP(name, family, cpu) \
  struct MetArgs_##name {         \
    MET_ARGS_HEAD
#define MET_T(n, kind, dir, span) T_##kind n;
#define MET_I(n) int64_t n;
#define MET_F(n) float n;
#define MET_END(name) \
  }                   \
  ;
#include "ops.def"
#undef MET_ARGS_HEAD
