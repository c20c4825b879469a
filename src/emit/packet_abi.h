/* The packet file's ABI (model.pkt) as C structs, generated from packet_fields.def by macros; the
 * host reads and writes it. The device never sees these records: the cuda backend turns each
 * instruction into the device view of kernels/common/interp/abi.h (MetDevInstr: the same opcode,
 * ints, imms and slice geometry, operands resolved to addresses), which host and device both
 * include. The ABI hash covers this field list and the op registry (kernels/common/ops.def), so
 * assets whose records or opcode meanings differ are refused at load. */
#ifndef MET_PACKET_ABI_H
#define MET_PACKET_ABI_H

#include <stdint.h>

#define MET_PACKET_VERSION 27u
#define MET_PACKET_MAGIC 0x3130544B5054454DULL /* "METPKT01" read as a little-endian u64 */
#define MET_NO_TENSOR 0xFFFFFFFFu

enum { MET_SOURCE_CHECKPOINT = 0, MET_SOURCE_GENERATED = 1, MET_SOURCE_SCRATCH = 2, MET_SOURCE_KV = 3, MET_SOURCE_IO = 4 };
enum { MET_PROGRAM_PREFILL = 0, MET_PROGRAM_DECODE = 1 };
enum {
  MET_DTYPE_BF16 = 0,
  MET_DTYPE_F16 = 1,
  MET_DTYPE_F32 = 2,
  MET_DTYPE_FP8_E4M3 = 3,
  MET_DTYPE_I32 = 4,
  MET_DTYPE_I64 = 5,
  MET_DTYPE_U8 = 6
};

typedef uint8_t met_abi_u8;
typedef uint16_t met_abi_u16;
typedef uint32_t met_abi_u32;
typedef uint64_t met_abi_u64;
typedef int64_t met_abi_i64;
typedef float met_abi_f32;

#define MET_STRUCT(S, doc) typedef struct MetPkt##S {
#define MET_FIELD(S, type, name, doc) met_abi_##type name;
#define MET_ARRAY(S, type, name, count, doc) met_abi_##type name[count];
#define MET_END(S) } MetPkt##S;
#include "emit/packet_fields.def"
#undef MET_STRUCT
#undef MET_FIELD
#undef MET_ARRAY
#undef MET_END

#endif /* MET_PACKET_ABI_H */
