/* The device view of a loaded packet program: what the host (src/interp/cuda_backend.cpp) builds
 * from model.pkt and uploads, and what the persistent interpreter kernel (kernels/<class>/interp.cu)
 * walks. Plain C, shared by the host compiler and nvcc; every record is 8-byte aligned.
 *
 * An instruction carries its opcode (MET_OP_*, kernels/common/ops.h: the packet's own number), its
 * slice geometry, the packet's ints and imms, and every operand already resolved to a device
 * address (checkpoint tensors to their weight bytes, scratch to the arena, KV, IO, generated
 * tables). The bodies read ints, imms and operands by name through the registry's argument structs
 * (common/interp/args.cuh). Streams, entries and waits keep the packet's own layout.
 */
#ifndef MET_INTERP_ABI_H
#define MET_INTERP_ABI_H

#include <stdint.h>

#define MET_INTERP_THREADS 256 /* threads per block: 8 warps, up to 255 registers each */
#define MET_INTERP_WARPS (MET_INTERP_THREADS / 32)
#define MET_DEV_OPERANDS 12
#define MET_DEV_INTS 16
#define MET_DEV_IMMS 4
#define MET_DEV_MAX_ROWS 16 /* rows a gemv-family slice carries (decode rungs) */
/* Formats of the matrix weight operand (MetDevInstr.w_format; the values of kernels/cpu/quant.hpp
 * MetWeightFormat, which the host holds them to). */
#define MET_DEV_WEIGHT_BF16 0u
#define MET_DEV_WEIGHT_FP8_E4M3 1u /* e4m3 codes [w_rows, w_cols]; value = code x its block's f32 scale */
/* e2m1 codes [w_rows, w_cols / 2] bytes (two a byte, the lower column in the low nibble) and at
 * w_scales one e8m0 byte per 32 columns, [w_rows, w_cols / 32]; value = code x 2^(scale - 127) */
#define MET_DEV_WEIGHT_MXFP4 2u
/* w_kb_shift of a weight whose scale blocks span every column (a per-tensor scale, stored as one per
 * row): every 64-wide K block reads scale column 0. */
#define MET_DEV_KB_WHOLE_ROW 62u

typedef struct MetDevInstr {
  uint32_t opcode;    /* MET_OP_* */
  uint32_t slices;    /* as the packet */
  uint32_t col_parts; /* the instruction's column parts (1 when it has none) */
  uint32_t w_format;  /* MET_DEV_WEIGHT_* of the matrix weight operand (bf16 when none) */
  int64_t ints[MET_DEV_INTS];
  float imms[MET_DEV_IMMS];
  uint64_t ops[MET_DEV_OPERANDS]; /* device addresses; 0 = absent */
  int64_t w_rows, w_cols;         /* shape of the matrix weight operand (0 when none) */
  uint64_t tmaps;                 /* device address of the body's TMA descriptors (64-byte aligned CUtensorMaps, made
                                     by the host at load time), or 0: the wgmma GEMM's A then B */
  /* mxfp4 weights: w_scales only (MET_DEV_WEIGHT_MXFP4). fp8 weights: f32 scales
   * [ceil(w_rows / w_block_rows), ceil(w_cols / w_block_cols)], row major
   * (a per-tensor scale comes as one per row: block 1 x w_cols); scale column of the 64-wide K block
   * b is b >> w_kb_shift (w_block_cols = 64 << w_kb_shift, or MET_DEV_KB_WHOLE_ROW). 0 for bf16. */
  uint64_t w_scales;
  int32_t w_block_rows, w_block_cols;
  uint32_t w_kb_shift, w_scale_cols; /* w_scale_cols = ceil(w_cols / w_block_cols) */
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

/* Tensor parallelism (emit --tp N; docs/arch/interpreter.md, Tensor parallelism): the device view
 * of a collective's `peers` operand. The operand's device address points at one of these records,
 * which the host (cuda_backend.cpp) builds per collective instruction and rank. Every rank's copy
 * of the operand's buffer lies at the same `offset` of the symmetric NCCL window `window` (each
 * rank's activation arena, registered with ncclCommWindowRegister); a body reaches rank p's copy
 * through the NCCL device API, ncclGetLsaPointer(window, offset, p). Slice s of the instruction
 * synchronises with the same slice of every other rank through LSA barrier `barrier0 + s` of the
 * device communicator at `comm` (an ncclDevComm in device memory): no barrier index is used twice
 * in one launch. */
#define MET_DEV_MAX_RANKS 8
typedef struct MetDevPeers {
  uint64_t window; /* ncclWindow_t of the ranks' arenas (device handle) */
  uint64_t offset; /* bytes from the window's start to this operand's buffer, equal on every rank */
  uint64_t comm;   /* device address of this rank's ncclDevComm */
  uint32_t ranks, rank;
  uint32_t barrier0; /* LSA barrier of slice 0; slice s uses barrier0 + s */
  uint32_t pad;
} MetDevPeers;

#endif
