/* Dynamic shared memory each interpreter body needs, for the host to size the launch (plain C:
 * included by nvcc and the host compiler). The bodies lay their buffers out to match. */
#ifndef MET_INTERP_SMEM_H
#define MET_INTERP_SMEM_H
#include "abi.h"

/* gemv family: 64 reduction floats, results [rows][256] floats, k-split partials [warps][256]
 * floats, one bf16 head of up to MET_GEMV_HEAD_DIMS per warp (the fused qkv ops' heads: their rules
 * require head_dim <= 256); then rows x K bf16 normalised activations. */
#define MET_GEMV_HEAD_DIMS 256
#define MET_GEMV_FIXED_SMEM \
  (64 * 4 + MET_DEV_MAX_ROWS * 256 * 4 + MET_INTERP_WARPS * 256 * 4 + MET_INTERP_WARPS * MET_GEMV_HEAD_DIMS * 2)
/* fp8 weights (W8A16): the gemv bodies stage a slice's activations as scaled fp16 for the fp16
 * tensor cores, in place of the normalised ones (normed ops) or, for the others, in the same place
 * when the instruction's rows per slice x K x 2 bytes fit MET_GEMV_FP8_STAGE_MAX
 * (kernels/common/gemv.cuh gemv_stage_f16). */
#define MET_GEMV_FP8_STAGE_MAX (64 * 1024)
/* ... and only for slices of at most this many rows: staging costs about R x K / 256 conversions a
 * thread, so at 8 and 16 rows the fp16 path lost (Qwen3-8B fp8-block128 on the H200, decode C=8
 * 8.33 ms against 8.22 with the limit at 4, C=16 11.31 against 11.15;
 * perf-data/h200-sxm/20261203T2045Z-fp8-gemv-f16). An A/B switch of the bodies. */
#ifndef MET_GEMV_FP8_F16_MAX_ROWS
#define MET_GEMV_FP8_F16_MAX_ROWS 4
#endif
/* fused qkv: a GPU slice covers a range of units of the qkv output of unit_rows rows each, a
 * multiple of MET_QKV_UNIT_ROWS (one mma tile) that divides head_dim (src/emit/slice.cpp); a head
 * split over slices is finished by the last of them (kernels/common/gemv.cuh), which counts
 * arrivals in one of MET_QKV_MAX_COUNTERS (row part, head) counters. */
#define MET_QKV_UNIT_ROWS 16
#define MET_QKV_MAX_COUNTERS 65536
/* GEMM: MET_GEMM_STAGES stages of an A and a B tile of [128][32 + 8] bf16. */
#define MET_GEMM_TILE 128
#define MET_GEMM_BK 64
#define MET_GEMM_PAD 8
#define MET_GEMM_STAGES 3
#define MET_GEMM_SMEM (MET_GEMM_STAGES * 2 * MET_GEMM_TILE * (MET_GEMM_BK + MET_GEMM_PAD) * 2)
/* the same over fp8 weights: then a staging ring of MET_GEMM_STAGES [128][BK] e4m3 code tiles */
#define MET_GEMM_FP8_SMEM (MET_GEMM_SMEM + MET_GEMM_STAGES * MET_GEMM_TILE * MET_GEMM_BK)
/* wgmma GEMM (kernels/hopper/gemm_wgmma.cuh): output tiles of 128 rows x 128 or 256 columns
 * (emit: 256 when the instruction still has a tile per SM), a ring of MET_WGMMA_RING bytes of
 * stages, each an A tile and one or two B tiles of [128][64] bf16 (128-byte rows, swizzled,
 * 1024-byte aligned: one more KiB to align the first) per K step of the stage: 3 stages of two K
 * steps at 128 columns (MET_WGMMA_K_STEPS_128), 4 of one at 256; then a
 * full and an empty transaction barrier per stage. The TMA descriptors of A and B (2 x 128 bytes,
 * host-made) sit at MetDevInstr.tmaps. */
#define MET_WGMMA_BK 64
/* K steps a stage of a 128-column tile holds (kernels/hopper/gemm_wgmma.cuh); an A/B switch */
#ifndef MET_WGMMA_K_STEPS_128
#define MET_WGMMA_K_STEPS_128 2
#endif
#define MET_WGMMA_TILE_BYTES (MET_GEMM_TILE * MET_WGMMA_BK * 2)
#define MET_WGMMA_RING (12 * MET_WGMMA_TILE_BYTES)
#define MET_WGMMA_MAX_COLS 256
#define MET_WGMMA_SMEM (MET_WGMMA_RING + 1024 + 12 * 8)
#define MET_TMAP_BYTES 128 /* one CUtensorMap */
/* Split K of the wgmma GEMM (emit: where its tiles leave streams idle, by the class's gemm_k_split,
 * kernels/hopper/HARDWARE.toml): a tile's K steps are cut into k_splits parts, at most
 * MET_GEMM_MAX_KSPLITS of them (the host's bound). Each part leaves its fp32 accumulators in its
 * own MET_GEMM_PART_FLOATS floats of the instruction's part buffer (a thread's values of the
 * widest tile, side by side); the last part of a tile to arrive, counted in one of
 * MET_GEMM_SPLIT_TILES counters, sums the parts in order and runs the epilogue. */
#define MET_GEMM_MAX_KSPLITS 8
#define MET_GEMM_PART_FLOATS (MET_WGMMA_MAX_COLS / 2 * 256)
#define MET_GEMM_SPLIT_TILES 1024
/* wgmma flash prefill (kernels/hopper/flash_prefill_wgmma.cuh), head dims 64, 128 and 256: Q
 * [2 warpgroups][max(2, head_dim / 64) halves], then MET_FLASH_WGMMA_KV_TILES tiles for the stages
 * of K and V, each a 64 x 64 bf16 tile of 8 KB, one KiB to align, the barriers and the pass's
 * scalars. Its three TMA descriptors (Q, K cache, V cache) sit at MetDevInstr.tmaps. */
/* Which instructions the wgmma body takes: head dims 64 and 128, and 256 where a slice's two heads
 * always read one KV head (an even number of query heads a KV head: its stage holds one set). */
#define MET_FLASH_WGMMA_ROUTE(hd, heads, kv_heads) \
  ((hd) == 64 || (hd) == 128 || ((hd) == 256 && (kv_heads) > 0 && ((heads) / (kv_heads)) % 2 == 0))
#define MET_FLASH_WGMMA_KV_TILES 16
#define MET_FLASH_WGMMA_TILES(hd) (2 * ((hd) / 64 < 2 ? 2 : (hd) / 64) + MET_FLASH_WGMMA_KV_TILES)
#define MET_FLASH_WGMMA_SMEM(hd) (MET_FLASH_WGMMA_TILES(hd) * 8192 + 1024 + 256)
/* flash prefill: one [MET_FLASH_KEYS][MET_FLASH_MAX_DV + MET_FLASH_PAD] bf16 V tile per warp. A
 * slice (emit) is MET_FLASH_SLICE_ROWS rows x MET_FLASH_SLICE_HEADS heads: one 16-row block x one
 * head per warp, and enough slices that causal rows of every length spread over all streams. */
#define MET_FLASH_KEYS 16
#define MET_FLASH_MAX_DV 128
#define MET_FLASH_SLICE_ROWS 64
#define MET_FLASH_SLICE_HEADS 2
#define MET_FLASH_PAD 8
#define MET_FLASH_WARP_SMEM (MET_FLASH_KEYS * (MET_FLASH_MAX_DV + MET_FLASH_PAD) * 2)
#define MET_FLASH_SMEM (MET_INTERP_WARPS * MET_FLASH_WARP_SMEM)
/* split-KV decode: per warp one 32-key chunk of K rows (head dims up to MET_ATTN_MAX_HD, rows
 * padded to MET_ATTN_KSTRIDE bf16) and of V rows (up to 128 dims), and its (up to 4) query heads,
 * staged by cp.async. */
#define MET_ATTN_MAX_HD 128
#define MET_ATTN_KSTRIDE (MET_ATTN_MAX_HD + 8)
#define MET_ATTN_WARP_SMEM ((32 * (MET_ATTN_KSTRIDE + 128) + 4 * MET_ATTN_MAX_HD) * 2)
#define MET_ATTN_SMEM (MET_INTERP_WARPS * MET_ATTN_WARP_SMEM)
/* split-KV decode with the merge folded in (attn_decode_split_merge): the split stages above, each
 * warp's state in its own stage once its fold is done; the last split of a (row, head block) to arrive
 * (one of MET_ATTN_MAX_COUNTERS counters) merges at most MET_ATTN_MAX_SPLITS states per query head. */
#define MET_ATTN_MAX_COUNTERS 65536
/* Query heads per unit of attn_decode_split_merge: a KV head's whole group up to 8 (the widest warp
 * state and tensor-core fold), else blocks of 8 (Gemma-4 12B's global layers: 16 heads over one KV
 * head are two units of each split). A group above 8 must be a multiple of 8 (the host checks). */
#define MET_ATTN_UNIT_HEADS(group) ((group) <= 8 ? (group) : 8)
/* Head blocks of a row: heads query heads over kv_heads KV heads, MET_ATTN_UNIT_HEADS a block. */
#define MET_ATTN_UNIT_BLOCKS(heads, kv_heads) ((heads) / MET_ATTN_UNIT_HEADS((heads) / (kv_heads)))
#define MET_ATTN_MAX_SPLITS 256
/* decode merge: one weight per split, a float4 of partial sums per thread, 64 reduction floats. */
#define MET_MERGE_MAX_SPLITS 256
#define MET_MERGE_SMEM (MET_MERGE_MAX_SPLITS * 4 + MET_INTERP_THREADS * 4 * 4 + 64 * 4)
/* mixture of experts (kernels/common/moe.cuh): the expert ops route MET_MOE_CHUNK slots (one per
 * thread; whole rows, so top_k <= MET_MOE_CHUNK) at a time: sorted (expert, slot) keys, expert run
 * starts (+ 1 and a count), each slot's rank and each row's slots in summing order, 4 ints, then
 * down's weighted copies [MET_MOE_CHUNK][MET_MOE_OUT_TILE] floats. A warp takes up to MET_MOE_PASS
 * slots of one expert per read of a weight row. The router keeps a row's probabilities and its
 * top-k ids and values: at most MET_MOE_MAX_EXPERTS experts; Gemma-4's (moe_router_scaled) then its
 * row's normalised activations, hidden bf16 after MET_MOE_ROUTER_SMEM (the host adds them). */
#define MET_MOE_CHUNK MET_INTERP_THREADS
#define MET_MOE_OUT_TILE 16
#define MET_MOE_PASS 8
#define MET_MOE_MAX_EXPERTS 1024
#define MET_MOE_EXPERT_SMEM ((5 * MET_MOE_CHUNK + 8) * 4 + MET_MOE_CHUNK * MET_MOE_OUT_TILE * 4)
/* grouped expert GEMMs at prefill row counts (kernels/common/moe_mma.cuh): blocks of
 * MET_MOE_MMA_BM routed slots x MET_MOE_MMA_BN weight rows (gate_up: half gate, half up), a
 * MET_MOE_MMA_STAGES-stage cp.async ring of [BM + BN][BK + PAD] bf16 tiles, the block's [BM][BN]
 * fp32 products, the block's table (the start of each A and B row it reads, its slots and their
 * rows), then the grouping of up to MET_MOE_MMA_CHUNK slots (whole rows) by expert: each
 * expert's start and count (ints), each warp's count or position per expert, the chunk's expert ids
 * and its grouped slots (u16), and the scan's warp totals. emit cuts their output columns into parts
 * of MET_MOE_MMA_BN (gate_up: MET_MOE_MMA_BN / 2) columns. */
#define MET_MOE_MMA_BM 64
#define MET_MOE_MMA_BN 64
#define MET_MOE_MMA_BK 128
#define MET_MOE_MMA_PAD 8
#define MET_MOE_MMA_STAGES 4
#define MET_MOE_MMA_CHUNK 8192
#define MET_MOE_MMA_SMEM                                                                              \
  (MET_MOE_MMA_STAGES * (MET_MOE_MMA_BM + MET_MOE_MMA_BN) * (MET_MOE_MMA_BK + MET_MOE_MMA_PAD) * 2 +   \
   MET_MOE_MMA_BM * MET_MOE_MMA_BN * 4 + (MET_MOE_MMA_BM + MET_MOE_MMA_BN) * 8 + 2 * MET_MOE_MMA_BM * 4 +               \
   2 * MET_MOE_MAX_EXPERTS * 4 + MET_INTERP_WARPS * MET_MOE_MAX_EXPERTS * 2 + 2 * MET_MOE_MMA_CHUNK * 2 + MET_INTERP_WARPS * 4)
/* The grouped wgmma experts (ops.def moe_group, moe_*_wgmma): tiles of MET_MOE_WGMMA_BM places of
 * one expert (the wgmma GEMM's rows), at most MET_MOE_WGMMA_MAX_TILES of `slots` routed slots over
 * `experts` (each expert's last tile may be partial); moe_group's shared memory: the experts'
 * counts, the counts before its run and each warp's counts of a round (ints), a round's places and
 * rows, the scan's warp totals, and MET_MOE_GROUP_COPY 16-byte copies per thread in flight. */
#define MET_MOE_WGMMA_BM 128
#define MET_MOE_WGMMA_MAX_TILES(slots, experts) ((slots) / MET_MOE_WGMMA_BM + ((experts) < (slots) ? (experts) : (slots)))
#define MET_MOE_GROUP_COPY 8
#define MET_MOE_GROUP_SMEM                                                                                              \
  ((2 + MET_INTERP_WARPS) * MET_MOE_MAX_EXPERTS * 4 + 2 * MET_INTERP_THREADS * 4 + 16 * ((MET_INTERP_WARPS + 3) / 4) + \
   MET_MOE_GROUP_COPY * MET_INTERP_THREADS * 16)
/* moe_combine: each slot's place and weight by rank (up to a thread a slot), then MET_MOE_COMBINE_STAGE
 * slots' 16 bytes per thread staged by cp.async. */
#define MET_MOE_COMBINE_STAGE 16
#define MET_MOE_COMBINE_SMEM (2 * MET_INTERP_THREADS * 4 + MET_MOE_COMBINE_STAGE * MET_INTERP_THREADS * 16)
#define MET_MOE_ROUTER_SMEM (3 * MET_MOE_MAX_EXPERTS * 4)
/* The most experts one part of a router split by experts scores (a GPU's decode row,
 * src/emit/slice.cpp): two for each warp, one pass of moe_router_logits. */
#define MET_MOE_ROUTER_PART_EXPERTS (2 * MET_INTERP_WARPS)
#define MET_MOE_SMEM (MET_MOE_EXPERT_SMEM > MET_MOE_ROUTER_SMEM ? MET_MOE_EXPERT_SMEM : MET_MOE_ROUTER_SMEM)
#endif
