/* Dynamic shared memory each interpreter body needs, for the host to size the launch (plain C:
 * included by nvcc and the host compiler). The bodies lay their buffers out to match. */
#ifndef MET_INTERP_SMEM_H
#define MET_INTERP_SMEM_H
#include "abi.h"

/* gemv family: 64 reduction floats, results [rows][256] floats, k-split partials [warps][256]
 * floats, one bf16 head per warp; then rows x K bf16 normalised activations. */
#define MET_GEMV_FIXED_SMEM (64 * 4 + MET_DEV_MAX_ROWS * 256 * 4 + MET_INTERP_WARPS * 256 * 4 + MET_INTERP_WARPS * 256 * 2)
/* GEMM: 3 stages of two [128][32 + 8] bf16 tiles. */
#define MET_GEMM_SMEM (3 * (128 + 128) * 40 * 2)
/* flash prefill: one [16 keys][64 + 8] bf16 V tile per warp. */
#define MET_FLASH_SMEM (MET_INTERP_WARPS * 16 * (64 + 8) * 2)
/* decode merge: one weight per split, per warp. */
#define MET_MERGE_MAX_SPLITS 256
#define MET_MERGE_SMEM (MET_INTERP_WARPS * MET_MERGE_MAX_SPLITS * 4)
#endif
