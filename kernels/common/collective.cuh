// Tensor-parallel collectives of the NVIDIA interpreter (emit --tp N; kernels/common/ops.def): the
// all-reduce of a row-parallel projection's fp32 partial sums into the residual stream, and the
// gather of the vocabulary-parallel logits. Numerics are the cpu bodies' (kernels/cpu/collective.hpp)
// bit for bit: the sum runs in fp32 over the ranks in rank order, so every rank computes the same.
//
// The `peers` operand's device address is a MetDevPeers record (kernels/common/interp/abi.h): every
// rank's copy of the buffer lies at the same offset of one NCCL symmetric window, reached through
// the NCCL device API (header-only). Slice s of an instruction pairs with slice s of the same
// instruction on every other rank through LSA barrier barrier0 + s: the block syncs once before it
// reads the peers' copies (each rank's copy of the slice's range is written: its stream order and
// counters ordered the producer before this slice) and once after, so that no rank overwrites its
// buffer while a peer still reads it. A slice is a row range x a column range of the operand
// (slice_rows, slice_cols); emit cuts the columns on 8-value boundaries, so the loads are 16 bytes.
//
// Out of line (__noinline__): the barrier session and the rank loop stay out of run_body's frame.
// LSA rank p is taken as world rank p: every rank of the program is in the one LSA team (one node).
#pragma once
#include "common/interp/prims.cuh"

#if MET_HAS_NCCL_DEVICE
#include <nccl_device.h>

namespace met_interp {

// The ranks' copies of a peers operand and the slice's barrier.
struct PeerView {
  ncclWindow_t window;
  uint64_t offset;
  const ncclDevComm* comm;
  uint32_t barrier;
};

__device__ __forceinline__ PeerView peer_view(const MetDevPeers* p, uint32_t slice) {
  return {reinterpret_cast<ncclWindow_t>(p->window), p->offset, reinterpret_cast<const ncclDevComm*>(p->comm),
          p->barrier0 + slice};
}

// Rank k's copy of the operand.
template <class T>
__device__ __forceinline__ const T* peer_copy(const PeerView& v, int k) {
  return static_cast<const T*>(ncclGetLsaPointer(v.window, v.offset, k));
}

// The whole block waits for the same slice of every rank. Acquire and release at system scope: the
// peers' writes before their arrival are visible after the wait, and this rank's reads are done
// before its arrival.
__device__ __forceinline__ void peers_sync(ncclLsaBarrierSession<ncclCoopCta>& bar) {
  bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

// This rank's own copy was written by other blocks (the producer's slices), acquired at gpu scope by
// the loop's wait: one system-scope fence makes those writes part of what the arrival releases.
__device__ __forceinline__ void release_to_peers() {
  if (threadIdx.x == 0) asm volatile("fence.acq_rel.sys;" ::: "memory");
}

// Whether columns [c0, c1) of rows `width` values apart go by 8-value (16-byte bf16) vectors: the
// range on vector boundaries, and this rank's output and every rank's copy (one offset into
// windows whose ranks' bases are equally aligned) on 16-byte addresses.
__device__ __forceinline__ bool by_vectors(int64_t c0, int64_t c1, int64_t width, const void* out, const PeerView& v) {
  return c0 % 8 == 0 && c1 % 8 == 0 && width % 8 == 0 && aligned16(out) && aligned16(ncclGetLsaPointer(v.window, v.offset, 0));
}

// x[r, c] = bf16(x[r, c] + bf16(sum over ranks of part_k[r, c])) over the slice's rows and columns;
// accumulate 0: x[r, c] = bf16(sum), x not read.
__device__ __noinline__ void allreduce_residual_slice(const MetDevInstr* in, uint32_t slice) {
  const MetArgs_allreduce_residual a = met_load_allreduce_residual(*in);
  const SliceRange rr = slice_rows(a, slice), cc = slice_cols(a, slice, a.width);
  const PeerView v = peer_view(a.part, slice);
  const int ranks = static_cast<int>(a.ranks);
  const bool add = a.accumulate != 0;
  const int64_t W = a.width, R = rr.end - rr.begin;
  ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), *v.comm, ncclTeamTagLsa(), v.barrier);
  release_to_peers();
  peers_sync(bar);
  if (R > 0 && cc.end > cc.begin) {
    if (by_vectors(cc.begin, cc.end, W, a.x, v)) {
      const int64_t nv = (cc.end - cc.begin) / 8;
      for (int64_t i = threadIdx.x; i < R * nv; i += MET_INTERP_THREADS) {
        const int64_t e = (rr.begin + i / nv) * W + cc.begin + (i % nv) * 8;
        float s[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) s[j] = 0.f;
#pragma unroll 1
        for (int k = 0; k < ranks; ++k) {
          const float4* p = reinterpret_cast<const float4*>(peer_copy<float>(v, k) + e);
          const float4 lo = p[0], hi = p[1];
          s[0] += lo.x, s[1] += lo.y, s[2] += lo.z, s[3] += lo.w;
          s[4] += hi.x, s[5] += hi.y, s[6] += hi.z, s[7] += hi.w;
        }
        uint4* xp = reinterpret_cast<uint4*>(a.x + e);
        float f[8];
        if (add) {
          unpack8(*xp, f);
#pragma unroll
          for (int j = 0; j < 8; ++j) f[j] += bf_round(s[j]);
        } else {  // the rounded sum itself (a -0 stays -0, as the cpu body keeps it)
#pragma unroll
          for (int j = 0; j < 8; ++j) f[j] = bf_round(s[j]);
        }
        *xp = pack8(f);
      }
    } else {
      const int64_t n = cc.end - cc.begin;
      for (int64_t i = threadIdx.x; i < R * n; i += MET_INTERP_THREADS) {
        const int64_t e = (rr.begin + i / n) * W + cc.begin + i % n;
        float s = 0.f;
#pragma unroll 1
        for (int k = 0; k < ranks; ++k) s += peer_copy<float>(v, k)[e];
        a.x[e] = add ? to_bf(bf(a.x[e]) + bf_round(s)) : to_bf(bf_round(s));
      }
    }
  }
  peers_sync(bar);  // every rank has read this slice's range of every copy
}

// out[r, k * width + i] = part_k[r, i]: the slice's columns of the gathered [rows, ranks x width].
__device__ __noinline__ void allgather_cols_slice(const MetDevInstr* in, uint32_t slice) {
  const MetArgs_allgather_cols a = met_load_allgather_cols(*in);
  const int64_t W = a.width, stride = W * a.ranks;
  const SliceRange rr = slice_rows(a, slice), cc = slice_cols(a, slice, stride);
  const PeerView v = peer_view(a.part, slice);
  const int64_t R = rr.end - rr.begin;
  ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), *v.comm, ncclTeamTagLsa(), v.barrier);
  release_to_peers();
  peers_sync(bar);
  if (R > 0 && cc.end > cc.begin) {
    if (by_vectors(cc.begin, cc.end, W, a.out, v)) {  // a vector never straddles two ranks' parts
      const int64_t nv = (cc.end - cc.begin) / 8;
      for (int64_t i = threadIdx.x; i < R * nv; i += MET_INTERP_THREADS) {
        const int64_t r = rr.begin + i / nv, c = cc.begin + (i % nv) * 8, k = c / W;
        const uint4 val = *reinterpret_cast<const uint4*>(peer_copy<u16>(v, static_cast<int>(k)) + r * W + (c - k * W));
        *reinterpret_cast<uint4*>(a.out + r * stride + c) = val;
      }
    } else {
      const int64_t n = cc.end - cc.begin;
      for (int64_t i = threadIdx.x; i < R * n; i += MET_INTERP_THREADS) {
        const int64_t r = rr.begin + i / n, c = cc.begin + i % n, k = c / W;
        a.out[r * stride + c] = peer_copy<u16>(v, static_cast<int>(k))[r * W + (c - k * W)];
      }
    }
  }
  peers_sync(bar);
}

MET_ENTRY(allreduce_residual) { allreduce_residual_slice(a.geom.instr, slice); }

MET_ENTRY(allgather_cols) { allgather_cols_slice(a.geom.instr, slice); }

}  // namespace met_interp
#endif  // MET_HAS_NCCL_DEVICE
