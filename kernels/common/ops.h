/* The opcode numbers of the op registry (kernels/common/ops.def) as a C enum, for the host and
 * the device alike: MET_OP_<name> = the row's position + 1 (0 is never an opcode). */
#ifndef MET_OPS_H
#define MET_OPS_H

enum MetOp {
  MET_OP_NONE = 0,
#define MET_OP(name, family, cpu) MET_OP_##name,
#include "ops.def"
  MET_OP_COUNT
};

#endif
