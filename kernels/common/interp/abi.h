/* The device view of a loaded packet program: what the host (src/interp/cuda_backend.cpp) builds
 * from model.pkt and uploads, and what the persistent interpreter kernel (kernels/<class>/interp.cu)
 * walks. Plain C, shared by the host compiler and nvcc; every record is 8-byte aligned.
 *
 * An instruction carries its body id (MET_BODY_*, chosen by the host from the opcode's name), its
 * slice geometry, the packet's ints and imms, and every operand already resolved to a device
 * address (checkpoint tensors to their weight bytes, scratch to the arena, KV, IO, generated
 * tables). Streams, entries and waits keep the packet's own layout.
 */
#ifndef MET_INTERP_ABI_H
#define MET_INTERP_ABI_H

#include <stdint.h>

#define MET_INTERP_THREADS 256 /* threads per block: 8 warps, up to 255 registers each */
#define MET_INTERP_WARPS (MET_INTERP_THREADS / 32)
#define MET_DEV_OPERANDS 12
#define MET_DEV_INTS 12
#define MET_DEV_IMMS 4
#define MET_DEV_MAX_ROWS 16 /* rows a gemv-family slice carries (decode rungs) */

enum MetBody {
  MET_BODY_NONE = 0,
  MET_BODY_EMBED,
  MET_BODY_QKV_ROPE,
  MET_BODY_QKV_QKNORM_ROPE,
  MET_BODY_ATTN_DECODE_SPLIT,
  MET_BODY_ATTN_DECODE_MERGE,
  MET_BODY_ATTN_PREFILL,
  MET_BODY_GEMV_O_RESIDUAL,
  MET_BODY_GATE_UP_SILU,
  MET_BODY_GATE_UP_GELU,
  MET_BODY_GEMV_DOWN_RESIDUAL,
  MET_BODY_LM_HEAD_ARGMAX,
  MET_BODY_LM_HEAD_SOFTCAP_ARGMAX,
  MET_BODY_GEMV,
  MET_BODY_GEMM,
  MET_BODY_RMSNORM,
  MET_BODY_ROPE,
  MET_BODY_KV_APPEND,
  MET_BODY_RESIDUAL_ADD,
  MET_BODY_SILU_MUL,
  MET_BODY_GELU_MUL,
  MET_BODY_SCALE,
  MET_BODY_SOFTCAP,
  MET_BODY_ARGMAX,
  MET_BODY_SAMPLE,
  MET_BODY_COUNT
};

typedef struct MetDevInstr {
  uint32_t body;      /* MET_BODY_* */
  uint32_t slices;    /* as the packet */
  uint32_t col_parts; /* the instruction's column parts (1 when it has none) */
  uint32_t reserved;
  int64_t ints[MET_DEV_INTS];
  float imms[MET_DEV_IMMS];
  uint64_t ops[MET_DEV_OPERANDS]; /* device addresses; 0 = absent */
  int64_t w_rows, w_cols;         /* shape of the matrix weight operand (0 when none) */
} MetDevInstr;

typedef struct MetDevStream {
  uint32_t first_entry, n_entries;
} MetDevStream;

typedef struct MetDevEntry {
  uint32_t instr, slice, first_wait, n_waits;
} MetDevEntry;

typedef struct MetDevWait {
  uint32_t counter, value;
} MetDevWait;

/* One launch of one program: grid = the program's streams, one block each. */
typedef struct MetInterpParams {
  const MetDevInstr* instrs;
  const MetDevStream* streams;
  const MetDevEntry* entries; /* the program's entries; stream first_entry indexes this table */
  const MetDevWait* waits;
  unsigned int* counters;      /* one per instruction, zeroed before the launch */
  unsigned long long* stamps;  /* null, or 2 per entry: %globaltimer after the waits and after the signal */
} MetInterpParams;

#endif
